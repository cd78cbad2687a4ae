"""Label-free RL with majority-vote pseudo-labels (TTRL), GRPO on the quickstart's set-up.

The reward reads no reference answer: each completion scores 1 when its final answer (the
task's own extraction, `answer_key`) is the most common answer of its group of G = 8, else
0 (`reward/majority`, `reward/majority_share`). The task verifier still measures: the true
accuracy is logged as `reward/correct` (and `reward/verifier`) every step and by the held-out
evaluation. Scored on the host (split path).

    python scripts/train.py --config configs/ttrl_arithmetic.py --workdir runs/ttrl
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0
    config.reward.components = "majority"
    config.rl.steps = 150
    config.eval.every = 50
    return config
