"""PPO with a value model and GAE: the value model starts as a copy of the warmed-up policy with
a zero scalar head and trains with its own AdamW (lr 1e-4); per-token reward = outcome on the
last token; GAE with γ = λ = 1, advantages whitened over the batch's valid tokens; clipped
value loss (0.5); PPO clip 0.2; two minibatches per batch.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/ppo_arithmetic.py --workdir runs/ppo_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="ppo")
    config.rl.value_learning_rate = 1e-4  # The head starts at 0: faster than the policy.
    return config
