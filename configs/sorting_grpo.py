"""GRPO on list sorting (3-5 numbers 0-9, default knobs), tiny model, 2 CPU cores.

The supervised warm-up on comparison chains (`3<=3<5<9 #### 3 3 5 9`) lands at a held-out
greedy pass@1 of ~0.2-0.3; GRPO against `Sorting.verify` (host) raises it.

    python scripts/train.py --config configs/sorting_grpo.py --workdir runs/sorting_grpo
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.data.task = "sorting"
    config.data.task_kwargs = dict(min_len=3, max_len=5, max_value=9, style="steps",
                                   answer_format="marker")
    config.data.max_prompt_len = 16   # "sort 5 3 9 3 1:" plus BOS: at most 13 tokens.
    config.sampling.max_new_tokens = 24  # Chain + "#### 1 3 3 5 9" + EOS: <= 22.
    config.sft.steps = 400
    config.sft.batch_size = 64
    config.rl.steps = 300
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 50
    config.mesh.num_devices = 1
    return config
