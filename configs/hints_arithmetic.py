"""GRPO + hints on addition (1-3 digits with the flags below): all-wrong groups are sampled
again with half of the worked solution after the prompt (the hint masked from the loss).

    python scripts/train.py --config configs/hints_arithmetic.py --workdir runs/hints \
        --config.data.task_kwargs.max_digits=3 --config.data.max_prompt_len=10 \
        --config.sampling.max_new_tokens=20

`rl.hint_mode="on_fail"` resamples, inside the same compiled step, every group whose G
samples the verifier all rejects, each prompt followed by the first ⌊rl.hint_fraction·len⌋
tokens of its worked solution; the hinted completion (hint ++ continuation) is scored by the
same verifier and trained on its continuation only (`train/hints.py`). metrics.jsonl logs
`hint/hinted_group_fraction` (the share of groups hinted) and `rollout/all_wrong_fraction`
(the groups still all wrong after the hint pass). `rl.hint_groups=4`
bounds the hint pass to 4 of the 16 groups (the first 4 all-wrong ones), so a step decodes at
most 1.25× GRPO's rows (`hint/decoded_rows`: the pass's rows each step).
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0              # No reference model: as the quickstart.
    config.rl.hint_mode = "on_fail"
    config.rl.hint_fraction = 0.5
    config.rl.hint_groups = 4
    config.eval.every = 50
    return config
