"""Online difficulty filtering: the quickstart's GRPO on a fixed set of 200 training prompts,
skipping the prompts the policy always or never solves (docs/data.md).

A prompt whose newest visit had all G samples right (pass rate 1) or all wrong (0) sits
out the next epoch, then is tried again. The same run without the filter:
`--config.data.filter.enabled=False`.

    python scripts/train.py --config configs/filter_arithmetic.py --workdir runs/filter
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0            # As the quickstart: no reference model.
    config.data.size = 200             # A finite prompt set (16 per step: 24 epochs in 300).
    config.data.filter.enabled = True
    config.data.filter.low = 0.0       # Never solved...
    config.data.filter.high = 1.0      # ...or always solved: skipped...
    config.data.filter.readmit_epochs = 1  # ...for one epoch after its last visit.
    config.eval.every = 50
    return config
