"""KL in the reward with an adaptive coefficient: REINFORCE++ returns with a per-token −β·k1 KL
penalty; β starts at 0.01 and adapts (Ziegler et al. 2019) towards a per-token KL of 0.01
over a horizon of 10000 samples; β is carried in the train state and logged as kl/coef.

Task: 1-2 digit addition after a supervised warm-up (same set-up as configs/quickstart.py).

    python scripts/train.py --config configs/kl_reward_adaptive_arithmetic.py --workdir runs/kl_reward_adaptive_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="kl_reward_adaptive")
    config.rl.kl_target = 0.01        # The tiny policy drifts little: a small target.
    return config
