"""GRPO on Countdown (reach a target from 3 numbers with + - *), tiny model, 2 CPU cores.

Knobs chosen so the supervised warm-up lands at a held-out greedy pass@1 of ~0.4 (the
default knobs, numbers <= 20 and targets <= 100 with all four operations, stay near
0.02-0.04): numbers <= 9, targets <= 30, operations + - *. Scored on the host by
`Countdown.verify` (the expression after `####` is parsed exactly), through a `RewardPool`
when reward.num_workers > 0.

    python scripts/train.py --config configs/countdown_grpo.py --workdir runs/countdown_grpo
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.data.task = "countdown"
    config.data.task_kwargs = dict(num_numbers=3, max_number=9, max_target=30,
                                   ops=("+", "-", "*"), style="steps",
                                   answer_format="marker")
    config.data.max_prompt_len = 16   # "3 5 7 -> 22:" plus BOS: at most 14 tokens.
    config.sampling.max_new_tokens = 32  # Worked steps + "#### (5*3)+7" + EOS: <= 29.
    config.sft.steps = 500
    config.sft.batch_size = 64
    config.rl.steps = 300
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0           # No reference model: faster on CPU.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 50
    config.mesh.num_devices = 1
    return config
