"""GRPO on Countdown (reach a target from 3 numbers with + - *), tiny model, 2 CPU cores.

Knobs chosen so the supervised warm-up lands at a held-out greedy pass@1 of ~0.4 (the
default knobs, numbers <= 20 and targets <= 100 with all four operations, stay near
0.02-0.04): numbers <= 9, targets <= 30, operations + - *. Scored on the host by
`Countdown.verify` (the expression after `####` is parsed exactly), through a `RewardPool`
when reward.num_workers > 0.

    python scripts/train.py --config configs/countdown_grpo.py --workdir runs/countdown_grpo
"""
from rlvr_jax.train.config import countdown_config


def get_config():
    return countdown_config(algorithm="grpo")
