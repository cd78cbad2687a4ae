""""Beyond the 80/20 rule": GRPO advantages with clip-higher (0.2/0.28) and token mean, but the
policy gradient flows only through the 20% highest-entropy valid tokens of each minibatch.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/entropy_8020_arithmetic.py --workdir runs/entropy_8020_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="entropy_8020")
    return config
