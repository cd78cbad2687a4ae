"""NFT (Negative-aware Fine-Tuning): maximise the likelihood of correct answers and, through
the implicit negative policy (π_old − r̂π)/(1 − r̂), of wrong ones; prompt weight 1 − r̂
(on-policy its gradient is Dr.GRPO's), token sums over a constant length, no KL; two
minibatches so the ratio departs from 1.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/nft_arithmetic.py --workdir runs/nft_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="nft")
    config.rl.minibatches = 2         # Off-policy second minibatch: R departs from 1.
    return config
