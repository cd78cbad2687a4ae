"""Quickstart: supervised warm-up then GRPO on 1-2 digit addition, a tiny model, 2 CPU cores.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart

Prints the held-out greedy pass@1 (500 test prompts, 95% bootstrap interval) after the
warm-up and after RL; metrics go to runs/quickstart/metrics.jsonl, checkpoints (every 100
RL steps and the last) to runs/quickstart/checkpoints, which `scripts/evaluate.py --run-dir
runs/quickstart` reads.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # No reference model: faster on CPU.
    config.eval.every = 50
    config.checkpoint.every = 100    # Resumable, and `scripts/evaluate.py --run-dir` can read it.
    config.checkpoint.keep = 1
    return config
