"""Quickstart: supervised warm-up then GRPO on 2-3 digit addition, a tiny model, 2 CPU cores.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart

Expect the held-out greedy pass@1 (500 test prompts) to rise clearly between the end of
the warm-up and the end of RL; both are printed with bootstrap intervals.
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.seed = 0
    config.model.preset = "tiny"
    config.data.task = "arithmetic"
    config.data.task_kwargs.ops = ("add",)
    config.data.task_kwargs.min_digits = 2
    config.data.task_kwargs.max_digits = 3
    config.data.max_prompt_len = 10
    config.sampling.max_new_tokens = 16
    config.sft.steps = 150
    config.sft.batch_size = 64
    config.sft.learning_rate = 3e-3
    config.rl.kl_coef = 0.0          # No reference model: faster on CPU.
    config.rl.steps = 100
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.rl.learning_rate = 1e-3
    config.eval.every = 25
    config.eval.num_prompts = 500
    config.eval.batch_size = 250
    config.mesh.num_devices = 1
    return config
