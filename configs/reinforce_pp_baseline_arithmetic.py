"""REINFORCE++-baseline: the group mean of the outcome is subtracted, then the advantages are
whitened over all valid tokens of the batch; k3 KL (0.01) in the loss; PPO clip 0.2; token
mean.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/reinforce_pp_baseline_arithmetic.py --workdir runs/reinforce_pp_baseline_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="reinforce_pp_baseline")
    return config
