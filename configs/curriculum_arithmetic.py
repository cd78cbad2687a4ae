"""A difficulty curriculum: GRPO on 1-3 digit addition, starting RL on 1-digit problems
and moving to 1-2, then 1-3 digits as the running training pass rate reaches 0.6 over 8
steps (docs/data.md). Warm-up and held-out evaluation use the last level (1-3 digits), so
the same run without the curriculum — `--config.data.curriculum.knob=""` (the task's own
max_digits=3) — shares the warm-up and the test set.

    python scripts/train.py --config configs/curriculum_arithmetic.py --workdir runs/curriculum
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0
    config.data.task_kwargs.max_digits = 3  # Without the curriculum: trained on all of it.
    config.data.max_prompt_len = 9          # "999+999=" plus BOS.
    config.sampling.max_new_tokens = 24     # "18 19 19 1 #### 1998" plus EOS fits.
    config.data.curriculum.knob = "max_digits"
    config.data.curriculum.levels = (1, 2, 3)
    config.data.curriculum.promote_at = 0.6
    config.data.curriculum.window = 8
    config.eval.every = 50
    return config
