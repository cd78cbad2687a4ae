"""Tree rollouts with prefix-tree credit (TEMPO) on 1-2 digit addition, tiny model, 2 CPU cores.

The quickstart's set-up (supervised warm-up on worked column sums, then GRPO's PPO clip,
no KL), but each prompt's 8 leaves come from a tree: 2 roots, every live row forks at
completion positions 1 and 3 (2 branches, 6 forks), so two leaves share the first column
sum's first token and four share the first 3 tokens; their shared prefixes are decoded once.
Each token's advantage is TEMPO's: GRPO's (r - mean) / std plus the temporal difference of
the prefix values at branch tokens (`rl.tree_advantage`; docs/tree_rollouts.md). 20 prompts
per step decode about as many tokens as the quickstart's 16 independent groups.

    python scripts/train.py --config configs/tree_arithmetic.py --workdir runs/tree_arithmetic
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0               # No reference model: faster on CPU.
    config.rl.num_prompts = 20            # Equal decoded tokens (docs/tree_rollouts.md).
    config.rl.tree_advantage = "tempo"    # "treerl" | "tempo" | "lambda_grpo" | "none".
    config.sampling.tree.mode = "depth"
    config.sampling.tree.depths = (1, 3)
    config.sampling.tree.branches = 2
    config.sampling.tree.max_forks = 6    # R = 8 - 6 = 2 roots per prompt.
    config.eval.every = 50
    return config
