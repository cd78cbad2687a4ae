"""Label-free RL with a self-certainty reward, GRPO on the quickstart's set-up.

The reward reads no reference answer: exp(mean log-prob of the final answer's tokens) under
the sampling policy (`reward/self_certainty`; 0 without an answer). The task verifier still
measures: `reward/correct` every step and the held-out evaluation give the true accuracy.
Scored on the host (split path).

    python scripts/train.py --config configs/self_certainty_arithmetic.py --workdir runs/self_certainty
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0
    config.reward.components = "self_certainty"
    config.rl.steps = 150
    config.eval.every = 50
    return config
