"""Algorithm presets: named bundles of `config.rl` settings built from the functional parts.

Each preset only sets fields of `config.rl`; a config file picks one with
`default_config(algorithm=...)` and may override any field afterwards. The
formulas and the equivalent verl / TRL options are in docs/algorithms.md.
"""
PRESETS = {
    # DeepSeekMath GRPO: group-normalised advantage, PPO clip, per-sequence token mean,
    # k3 KL in the loss (beta 0.04 in the paper; many RLVR recipes use 0).
    "grpo": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                 eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-mean",
                 kl_coef=0.04, kl_kind="k3"),
    # Dr.GRPO: no std normalisation, sum over tokens / constant max length, no KL.
    "dr_grpo": dict(advantage="grpo", advantage_scale="none", policy_loss="ppo_clip",
                    eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-sum-norm",
                    kl_coef=0.0),
    # DAPO: clip-higher, dynamic sampling, token-level mean, soft overlong shaping, no KL.
    "dapo": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                 eps_low=0.2, eps_high=0.28, aggregation="token-mean", kl_coef=0.0,
                 dynamic_sampling=True, oversample=2.0, overlong_buffer=4,
                 overlong_penalty=1.0),
    # GSPO: sequence-level length-normalised ratio with a tiny clip range.
    "gspo": dict(advantage="grpo", advantage_scale="group", policy_loss="gspo",
                 eps_low=3e-4, eps_high=4e-4, aggregation="seq-mean-token-mean", kl_coef=0.0),
    # RLOO: leave-one-out baseline, REINFORCE-style clipped update.
    "rloo": dict(advantage="rloo", policy_loss="ppo_clip", eps_low=0.2, eps_high=0.2,
                 aggregation="seq-mean-token-mean", kl_coef=0.0),
    # Lite PPO ("Tricks or Traps"): group mean, batch std, token-level aggregation.
    "lite_ppo": dict(advantage="grpo", advantage_scale="batch", policy_loss="ppo_clip",
                     eps_low=0.2, eps_high=0.2, aggregation="token-mean", kl_coef=0.0),
    # CISPO (MiniMax-M1): clipped stop-gradient IS weight times -A·logp.
    "cispo": dict(advantage="grpo", advantage_scale="group", policy_loss="cispo",
                  eps_high=4.0, aggregation="token-mean", kl_coef=0.0),
}


def names():
    return sorted(PRESETS)


def apply(rl_config, name: str):
    """Sets the preset's fields on `rl_config` (an ml_collections ConfigDict) in place."""
    if name not in PRESETS:
        raise ValueError(f"unknown algorithm {name!r}; known: {names()}")
    for key, value in PRESETS[name].items():
        setattr(rl_config, key, value)
    rl_config.algorithm = name
    return rl_config
