"""GSPO: sequence-level length-normalised importance ratio with a tiny clip range (3e-4/4e-4); two minibatches so the ratio departs from 1.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/gspo_arithmetic.py --workdir runs/gspo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="gspo")
    config.rl.minibatches = 2         # Off-policy minibatches, so ratios depart from 1.
    return config
