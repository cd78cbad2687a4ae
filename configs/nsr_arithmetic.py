"""Negative-sample reinforcement (NSR): wrong samples get A = −1, right ones 0, loss −A·logπ,
token mean (W-REINFORCE is the preset "w_reinforce": right samples get +0.1).

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/nsr_arithmetic.py --workdir runs/nsr_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="nsr")
    return config
