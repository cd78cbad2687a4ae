"""Token entropy of the policy, the entropy bonus, and the high-entropy token mask."""
import jax
import jax.numpy as jnp

from rlvr_jax.numerics import entropy  # noqa: F401  (re-exported: losses.entropy)


def entropy_bonus(token_entropy, mask, *, coef):
    """Per-token entropy-bonus loss term `-coef · H_t`, zero at masked positions.

    Adding it to the policy loss (then aggregating) rewards exploration; 1-shot RLVR
    (Wang et al. 2025) finds it important. verl: `actor.entropy_coeff`; TRL has no option.

    Args:
      token_entropy: `[B, T]` float entropies (see `entropy`).
      mask: `[B, T]` bool/0-1 response-token mask.
      coef: non-negative float coefficient `c`.

    Returns:
      `[B, T]` float32 loss values `-c · H_t · m_t`.
    """
    h = jnp.asarray(token_entropy).astype(jnp.float32)
    m = jnp.asarray(mask).astype(bool)
    if h.shape != m.shape:
        raise ValueError(f"token_entropy {h.shape} and mask {m.shape} must have the same shape")
    return jnp.where(m, -coef * jnp.where(m, h, 0.0), 0.0)


def high_entropy_mask(token_entropy, mask, *, keep_fraction=0.2):
    """Mask of the `keep_fraction` highest-entropy valid tokens of the minibatch ("forking tokens").

    Formula: keep token t iff it is valid and its entropy rank among the `N` valid tokens of the
    whole minibatch is below `k = ceil(keep_fraction · N)` (ties broken by position, so exactly
    `k` tokens are kept). Multiply the policy loss mask by it to update only those tokens.
    Paper: Wang et al. 2025, "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive
    Effective RL for LLM Reasoning" (their ρ = keep_fraction = 0.2). verl / TRL: no built-in
    option (TRL `top_entropy_quantile` is the same idea, per batch).

    Args:
      token_entropy: `[B, T]` float entropies (gradient is not propagated through the mask).
      mask: `[B, T]` bool/0-1 valid-token mask.
      keep_fraction: fraction in (0, 1] of valid tokens to keep.

    Returns:
      `[B, T]` bool mask, a subset of `mask`.
    """
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    h = jax.lax.stop_gradient(jnp.asarray(token_entropy).astype(jnp.float32))
    m = jnp.asarray(mask).astype(bool)
    if h.shape != m.shape:
        raise ValueError(f"token_entropy {h.shape} and mask {m.shape} must have the same shape")
    flat_h = jnp.where(m, jnp.nan_to_num(h, nan=-jnp.inf), -jnp.inf).reshape(-1)
    flat_m = m.reshape(-1)
    n_valid = jnp.sum(flat_m.astype(jnp.int32))
    # Small tolerance so that e.g. 0.2 * 10 (2.0000000x in float32) keeps 2, not 3.
    k = jnp.ceil(keep_fraction * n_valid.astype(jnp.float32) - 1e-4).astype(jnp.int32)
    # Sort valid tokens first (descending entropy), invalid ones last.
    order = jnp.lexsort((-flat_h, ~flat_m))
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))
    keep = (rank < k) & flat_m
    return keep.reshape(m.shape)


def low_entropy_complement(mask, high_entropy):
    """The valid tokens outside a `high_entropy_mask`: the policy loss trains on the
    low-entropy majority instead (keep_fraction 0.2: the bottom 80%, the ablation of
    "Beyond the 80/20 Rule" that the paper finds hurts).

    Args:
      mask: `[B, T]` bool/0-1 valid-token mask.
      high_entropy: `[B, T]` bool, `high_entropy_mask(...)` of the same tokens.

    Returns:
      `[B, T]` bool mask `mask & ~high_entropy`.
    """
    m = jnp.asarray(mask).astype(bool)
    h = jnp.asarray(high_entropy).astype(bool)
    if h.shape != m.shape:
        raise ValueError(f"high_entropy {h.shape} and mask {m.shape} must have the same shape")
    return m & ~h
