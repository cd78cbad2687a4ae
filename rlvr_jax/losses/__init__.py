"""Pure, jittable RL loss components: policy losses, KL, entropy, aggregation, value loss.

Per-token losses are `[B, T]` float32, exactly 0 at masked positions; reduce them with
`aggregate(values, mask, mode, ...)`. Functions returning statistics return `(value, metrics)`.
"""
from rlvr_jax.losses.aggregation import MODES, aggregate, global_counts
from rlvr_jax.losses.decoupled import decoupled_ppo, mismatch_kl
from rlvr_jax.losses.divergence import DIVERGENCES, mass_covering
from rlvr_jax.losses.entropy import (entropy, entropy_bonus, high_entropy_mask,
                                     low_entropy_complement)
from rlvr_jax.losses.kl import KINDS, adaptive_kl_coef, kl, kl_loss, kl_penalty
from rlvr_jax.losses.nft import PROMPT_WEIGHTS, nft, nft_from_advantages
from rlvr_jax.losses.policy import (LOG_RATIO_CLAMP, cispo, gspo, luspo, ppo_clip, reinforce,
                                    truncated_importance_weights)
from rlvr_jax.losses.trust import DPPO_DIVERGENCES, dcpo, dcpo_clip_bounds, dppo, sapo
from rlvr_jax.losses.value import value_loss

__all__ = [
    "MODES", "aggregate", "global_counts",
    "decoupled_ppo", "mismatch_kl",
    "DIVERGENCES", "mass_covering",
    "entropy", "entropy_bonus", "high_entropy_mask", "low_entropy_complement",
    "KINDS", "adaptive_kl_coef", "kl", "kl_loss", "kl_penalty",
    "PROMPT_WEIGHTS", "nft", "nft_from_advantages",
    "LOG_RATIO_CLAMP", "cispo", "gspo", "luspo", "ppo_clip", "reinforce",
    "truncated_importance_weights",
    "DPPO_DIVERGENCES", "dcpo", "dcpo_clip_bounds", "dppo", "sapo",
    "value_loss",
]
