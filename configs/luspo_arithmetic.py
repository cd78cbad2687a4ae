"""LUSPO: GSPO's clipped sequence-ratio surrogate (3e-4 / 4e-4) with each sequence's loss
scaled by its length (no bias towards short answers); two minibatches so the ratio departs
from 1.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/luspo_arithmetic.py --workdir runs/luspo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="luspo")
    config.rl.minibatches = 2         # Off-policy minibatches, so ratios depart from 1.
    return config
