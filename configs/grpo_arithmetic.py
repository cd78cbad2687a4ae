"""GRPO (DeepSeekMath): group-normalised advantages, PPO clip, per-sequence token mean, k3 KL to a frozen reference (beta 0.04).

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/grpo_arithmetic.py --workdir runs/grpo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    return config
