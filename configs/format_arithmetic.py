"""Two reward components: the task verifier plus a format reward the policy can earn.

1-2 digit addition in the tags answer format (`<think>6 4</think><answer>46</answer>`, the
worked solutions of the warm-up included); reward = 1.0 · task + 0.5 · format, scored on the
host (in a process pool, reward.num_workers); `reward/task` and `reward/format` are logged
every step. A shorter warm-up than the quickstart's leaves ~8% of the sampled completions
malformed, and GRPO lowers that while it raises pass@1 (numbers in docs/tasks.md).

    python scripts/train.py --config configs/format_arithmetic.py --workdir runs/format_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.data.task_kwargs.answer_format = "tags"
    config.reward.components = "task,format"
    config.reward.weights = "1.0,0.5"
    config.sampling.max_new_tokens = 48  # Tagged solutions + EOS: at most 41 tokens.
    config.sft.steps = 300            # Shorter than the quickstart's 400: format not yet reliable.
    config.rl.steps = 200
    config.rl.kl_coef = 0.0
    config.eval.every = 50
    return config
