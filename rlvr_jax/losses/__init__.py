"""Pure, jittable RL loss components: policy losses, KL, entropy, aggregation, value loss.

Per-token losses are `[B, T]` float32, exactly 0 at masked positions; reduce them with
`aggregate(values, mask, mode, ...)`. Functions returning statistics return `(value, metrics)`.
"""
from rlvr_jax.losses.aggregation import MODES, aggregate, global_counts
from rlvr_jax.losses.entropy import (entropy, entropy_bonus, high_entropy_mask,
                                     low_entropy_complement)
from rlvr_jax.losses.kl import KINDS, adaptive_kl_coef, kl, kl_loss, kl_penalty
from rlvr_jax.losses.policy import (LOG_RATIO_CLAMP, cispo, gspo, ppo_clip, reinforce,
                                    truncated_importance_weights)
from rlvr_jax.losses.value import value_loss

__all__ = [
    "MODES", "aggregate", "global_counts",
    "entropy", "entropy_bonus", "high_entropy_mask", "low_entropy_complement",
    "KINDS", "adaptive_kl_coef", "kl", "kl_loss", "kl_penalty",
    "LOG_RATIO_CLAMP", "cispo", "gspo", "ppo_clip", "reinforce", "truncated_importance_weights",
    "value_loss",
]
