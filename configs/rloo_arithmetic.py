"""RLOO: leave-one-out baseline r_i - mean of the other G-1 rewards, PPO-clipped update.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/rloo_arithmetic.py --workdir runs/rloo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="rloo")
    return config
