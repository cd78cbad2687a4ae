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
    # PPO with a value model (initialised from the policy) and GAE (γ = λ = 1), advantages
    # whitened over the batch's valid tokens, clipped value loss with its own optimizer,
    # two minibatches per batch (so the ratio and the value clipping act).
    "ppo": dict(advantage="gae", gamma=1.0, lam=1.0, whiten_advantages=True,
                value_clip=0.5, policy_loss="ppo_clip", eps_low=0.2, eps_high=0.2,
                aggregation="token-mean", kl_coef=0.0, minibatches=2),
    # REINFORCE++: per-token reward = outcome at the last token − β·KL_t (k1, in the reward),
    # γ = 1 returns, whitened over the batch's valid tokens; PPO clip.
    "reinforce_pp": dict(advantage="reinforce_pp", gamma=1.0, policy_loss="ppo_clip",
                         eps_low=0.2, eps_high=0.2, aggregation="token-mean", kl_coef=0.01,
                         kl_kind="k1", kl_in_reward=True),
    # REINFORCE++-baseline: group-mean baseline, then batch whitening; KL in the loss (k3).
    "reinforce_pp_baseline": dict(advantage="reinforce_pp_baseline", policy_loss="ppo_clip",
                                  eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                                  kl_coef=0.01, kl_kind="k3", kl_in_reward=False),
    # GPG: A = α(r − mean_g) with the paper's α, plain −A·logπ, token mean, no KL.
    "gpg": dict(advantage="gpg", gpg_alpha="paper", policy_loss="reinforce",
                aggregation="token-mean", kl_coef=0.0),
    # Negative-sample reinforcement: −1 for wrong samples, 0 for right ones, −A·logπ.
    "nsr": dict(advantage="w_reinforce", positive_weight=0.0, policy_loss="reinforce",
                aggregation="token-mean", kl_coef=0.0),
    # W-REINFORCE: +λ (0.1) for right samples, −1 for wrong ones, −A·logπ.
    "w_reinforce": dict(advantage="w_reinforce", positive_weight=0.1, policy_loss="reinforce",
                        aggregation="token-mean", kl_coef=0.0),
    # "Beyond the 80/20 rule": DAPO-style clip-higher, token mean, policy gradient only
    # through the top-20% highest-entropy tokens of each minibatch.
    "entropy_8020": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                         eps_low=0.2, eps_high=0.28, aggregation="token-mean", kl_coef=0.0,
                         entropy_keep_fraction=0.2),
    # KL in the reward with an adaptive coefficient (Ziegler et al. 2019; verl
    # kl_ctrl.type=adaptive): REINFORCE++ returns, β starts at 0.01 and moves towards a
    # per-token KL target of 0.1 over a horizon of 10000 samples.
    "kl_reward_adaptive": dict(advantage="reinforce_pp", gamma=1.0, policy_loss="ppo_clip",
                               eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                               kl_coef=0.01, kl_kind="k1", kl_in_reward=True, kl_target=0.1,
                               kl_horizon=10000),
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
