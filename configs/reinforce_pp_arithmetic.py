"""REINFORCE++: per-token reward = outcome on the last token − 0.01·k1 KL to a frozen reference,
γ = 1 returns whitened over all valid tokens of the batch, PPO clip 0.2, token mean.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/reinforce_pp_arithmetic.py --workdir runs/reinforce_pp_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="reinforce_pp")
    return config
