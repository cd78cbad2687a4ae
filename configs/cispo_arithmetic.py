"""CISPO (MiniMax-M1): −sg(min(ρ, 1 + 4))·A·logπ on every token (no token loses its gradient),
GRPO advantages, token mean, no KL; two minibatches so the importance weight is not always 1.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/cispo_arithmetic.py --workdir runs/cispo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="cispo")
    config.rl.minibatches = 2         # Off-policy second minibatch: the IS weight acts.
    return config
