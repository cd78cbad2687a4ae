"""Dr.GRPO: advantages without std normalisation, sum over tokens divided by a constant max length, no KL.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/drgrpo_arithmetic.py --workdir runs/drgrpo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="dr_grpo")
    return config
