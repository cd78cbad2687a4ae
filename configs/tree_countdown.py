"""Tree rollouts with prefix-tree credit (TreeRL) on Countdown, tiny model, 2 CPU cores.

configs/countdown_grpo.py's task and warm-up (3 numbers <= 9, targets <= 30, + - *, worked
steps such as "9-2=7 7-6=1 #### (9-2)-6"), but each prompt's 8 leaves come from a tree: 2
roots, every live row forks at completion positions 1 (after the first number: the copies
choose their own operation) and 6 (after a first step such as "9-2=7 ": the copies choose
their own second step), 2 branches, 6 forks. Each token's advantage is TreeRL's: the global
plus the local advantage of its segment's node, divided by √(leaves below) (`rl.tree_advantage`,
docs/tree_rollouts.md). Shared prefixes are decoded once: 2 x 1 + 4 x 6 = 26 of a group's
~8 x 16.6 = 133 tokens, so 20 prompts per step decode about as many tokens as 16 independent
groups. Scored on the host by `Countdown.verify`.

    python scripts/train.py --config configs/tree_countdown.py --workdir runs/tree_countdown
"""
from rlvr_jax.train.config import countdown_config


def get_config():
    config = countdown_config(algorithm="grpo")
    config.rl.num_prompts = 20        # Equal decoded tokens (see above).
    config.rl.tree_advantage = "treerl"
    config.rl.advantage_scale = "none"  # TreeRL's advantages are in reward units.
    config.sampling.tree.mode = "depth"
    config.sampling.tree.depths = (1, 6)
    config.sampling.tree.branches = 2
    config.sampling.tree.max_forks = 6
    return config
