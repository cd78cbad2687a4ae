"""DPPO-Binary-TV: tokens whose probability moved by more than 0.15 (in the direction of
their advantage) are masked instead of ratio-clipped; −A·sg(min(ρ, 20))·logπ on the others,
Dr.GRPO advantages and aggregation, no KL; two minibatches so the mask can act.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/dppo_arithmetic.py --workdir runs/dppo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="dppo")
    config.rl.minibatches = 2         # Off-policy second minibatch: the divergence mask acts.
    return config
