"""GPG: A = α·(r − group mean) with the paper's α = B / (samples in groups with non-zero
advantage), plain policy gradient −A·logπ (no ratio, no clip), token mean, no KL.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/gpg_arithmetic.py --workdir runs/gpg_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="gpg")
    return config
