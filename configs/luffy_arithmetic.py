"""LUFFY on 1-2 digit addition: GRPO with one expert trace (the worked solution) per group.

    python scripts/train.py --config configs/luffy_arithmetic.py --workdir runs/luffy

Of the G = 8 rows of every group, the last (`rl.offpolicy_per_group`) is the prompt's
worked solution, scored by the same verifier, so an all-wrong group still has a correct
sample to learn from; its loss is LUFFY's policy-shaped off-policy objective
−Â·f(π_θ(y_t)), f(x) = x / (x + γ), γ = `rl.offpolicy_gamma` (`train/offpolicy.py`).
`--config.rl.offpolicy_sft_weight=0.5 --config.rl.offpolicy_sft_decay_steps=300` adds
CHORD's decaying SFT weight μ on the expert tokens. metrics.jsonl logs
`offpolicy/reward_on` / `offpolicy/reward_off` and `rollout/all_wrong_fraction` (groups
whose on-policy rows are all wrong).
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0            # No reference model: as the quickstart.
    config.rl.offpolicy_per_group = 1  # One expert row of the G = 8.
    config.rl.offpolicy_gamma = 0.1    # LUFFY's γ.
    config.eval.every = 50
    return config
