"""A task mixture with adaptive weights: 1-2 digit addition with worked column sums and
2-digit x 1-digit multiplication answered directly, drawn 1:1 at first, then in proportion
to each task's expected fraction of informative groups 1 - p^G - (1-p)^G (p: its running
pass rate; docs/data.md). Held-out evaluation uses the fixed 1:1 mixture. The same run with
fixed weights: `--config.data.mixture_adaptive=False`.

    python scripts/train.py --config configs/mixture_arithmetic.py --workdir runs/mixture
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0
    config.data.mixture = "add:1,mul:1"
    config.data.mixture_tasks = {
        "add": {"task": "arithmetic", "ops": ("add",), "max_digits": 2},
        "mul": {"task": "arithmetic", "ops": ("mul",), "max_digits": 2, "mul_max_digits": 1},
    }
    config.data.mixture_adaptive = True
    config.eval.every = 50
    return config
