"""DAPO: clip-higher (0.2/0.28), dynamic sampling (2x oversampled prompts, zero-variance groups dropped), token-mean loss, soft overlong penalty, no KL.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/dapo_arithmetic.py --workdir runs/dapo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="dapo")
    config.rl.overlong_buffer = 4     # Penalty ramps over the last 4 of the 16 new tokens.
    return config
