"""SAPO: a sigmoid gate (4/τ)·σ(τ(ρ − 1)) on the token ratio instead of PPO's clip (τ+ = 1,
τ− = 1.05), GRPO advantages, sequence mean of token means, no KL; two minibatches so the
ratio departs from 1 and the gate acts.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/sapo_arithmetic.py --workdir runs/sapo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="sapo")
    config.rl.minibatches = 2         # Off-policy second minibatch: the soft gate acts.
    return config
