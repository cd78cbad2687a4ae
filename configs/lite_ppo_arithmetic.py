"""Lite PPO ("Tricks or Traps"): group-mean baseline with the batch std, token-level mean,
vanilla PPO clip 0.2, no KL.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/lite_ppo_arithmetic.py --workdir runs/lite_ppo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="lite_ppo")
    return config
