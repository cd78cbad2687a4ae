"""Advantage estimators for RL with verifiable rewards (pure, jittable functions).

Shape vocabulary: `P` prompts, `G` samples per prompt, `B = P*G` sequences (sequence
`p*G + g` is sample `g` of prompt `p`), `T` tokens. Group estimators (`group.py`) take rewards
`[P, G]` and return sequence advantages `[P, G]`; `broadcast_to_tokens` turns them into
`[B, T]`. Token estimators (`token.py`) return `[B, T]`; process (step) rewards (`process.py`) are `[B, T]` arrays with the reward of each
step on the token that ends it; turn-level credit (`turn.py`) gathers per-turn rewards
of multi-turn episodes into `[B, K]` tables; prefix-tree credit (`tree.py`) reads the lineage of
tree rollouts (`fork_parent`, `fork_at` [B]) and returns `[B, T]`. All outputs are float32. A group whose
rewards are all equal (tested as `max == min`, never through a float std) gets advantage
exactly 0.
"""
from rlvr_jax.advantages.group import (GPG_ALPHAS, dynamic_sampling_mask, gpg, group_metrics,
                                       grpo, grpo_passk, ngrpo, rloo, select_groups,
                                       sign_weighted, w_reinforce, zero_variance_groups)
from rlvr_jax.advantages.process import (group_process_advantages, min_form_rewards,
                                         process_returns, process_token_rewards)
from rlvr_jax.advantages.token import (broadcast_to_tokens, discounted_returns, gae,
                                       reinforce_plus_plus, reinforce_plus_plus_baseline,
                                       token_rewards, whiten)
from rlvr_jax.advantages.tree import TREE_MODES, prefix_owners, prefix_values, tree_advantages
from rlvr_jax.advantages.turn import (turn_ends, turn_gae, turn_group_advantages, turn_returns,
                                      turn_starts, turn_table, turn_token_advantages,
                                      turns_to_tokens, with_outcome)

__all__ = [
    "GPG_ALPHAS", "dynamic_sampling_mask", "gpg", "group_metrics", "grpo", "grpo_passk",
    "ngrpo", "rloo", "select_groups", "sign_weighted", "w_reinforce", "zero_variance_groups",
    "broadcast_to_tokens", "discounted_returns", "gae", "reinforce_plus_plus",
    "reinforce_plus_plus_baseline", "token_rewards", "whiten",
    "group_process_advantages", "min_form_rewards", "process_returns", "process_token_rewards",
    "turn_ends", "turn_gae", "turn_group_advantages", "turn_returns", "turn_starts",
    "turn_table", "turn_token_advantages", "turns_to_tokens", "with_outcome",
    "TREE_MODES", "prefix_owners", "prefix_values", "tree_advantages",
]
