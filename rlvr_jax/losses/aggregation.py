"""Aggregation of per-token losses into a scalar: the normaliser is part of the algorithm."""
import jax.numpy as jnp

MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def aggregate(values, mask, mode, *, num_tokens=None, num_sequences=None, max_len=None):
    """Reduce per-token values `[B, T]` to a scalar with the normaliser of `mode`.

    Modes (`m` the mask, `v` the values; empty rows contribute 0):
      - "token-mean": `Σ m·v / (num_tokens or Σ m)` (DAPO, Lite PPO; verl `loss_agg_mode=token-mean`,
        TRL `loss_type="dapo"` / "bnpo").
      - "seq-mean-token-mean": `Σ_i (Σ_t m·v / Σ_t m) / (num_sequences or #non-empty rows)`
        (original GRPO, GSPO; verl `seq-mean-token-mean`, TRL `loss_type="grpo"`).
      - "seq-mean-token-sum": `Σ_i Σ_t m·v / (num_sequences or #non-empty rows)` (verl
        `seq-mean-token-sum`).
      - "seq-mean-token-sum-norm": `Σ m·v / ((num_sequences or B) · (max_len or T))`, with
        `max_len` the maximum number of new tokens (Dr.GRPO; verl `seq-mean-token-sum-norm`,
        which leaves out the 1/B; TRL `loss_type="dr_grpo"`).
    Pass the *global* counts of the whole update batch (`num_tokens` = its valid tokens,
    `num_sequences` = its non-empty rows, or its B for "seq-mean-token-sum-norm", `max_len`)
    when aggregating a micro-batch: the micro-batch results then add up to the full-batch value.

    Args:
      values: `[B, T]` float per-token values (garbage at masked positions is ignored).
      mask: `[B, T]` bool/0-1 mask.
      mode: one of `MODES`.
      num_tokens, num_sequences, max_len: optional global normalisers (Python or traced scalars).

    Returns:
      float32 scalar.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    m = jnp.asarray(mask).astype(bool)
    v = jnp.asarray(values)
    if m.ndim != 2 or v.shape != m.shape:
        raise ValueError(f"values {v.shape} and mask {m.shape} must both be [B, T]")
    v = jnp.where(m, v.astype(jnp.float32), 0.0)
    row_count = jnp.sum(m.astype(jnp.float32), axis=1)
    row_sum = jnp.sum(v, axis=1)
    non_empty = jnp.maximum(jnp.sum((row_count > 0).astype(jnp.float32)), 1.0)
    if mode == "token-mean":
        denom = jnp.maximum(jnp.sum(row_count), 1.0) if num_tokens is None else num_tokens
        return jnp.sum(row_sum) / denom
    if mode == "seq-mean-token-mean":
        per_seq = row_sum / jnp.maximum(row_count, 1.0)
        denom = non_empty if num_sequences is None else num_sequences
        return jnp.sum(per_seq) / denom
    if mode == "seq-mean-token-sum":
        denom = non_empty if num_sequences is None else num_sequences
        return jnp.sum(row_sum) / denom
    b = m.shape[0] if num_sequences is None else num_sequences
    length = m.shape[1] if max_len is None else max_len
    return jnp.sum(row_sum) / (b * length)


def global_counts(mask):
    """Normalisers of a whole update batch, to pass to `aggregate` for each of its micro-batches.

    Args:
      mask: `[B, T]` bool/0-1 mask of the full batch.

    Returns:
      dict with float32 scalars `num_tokens` (valid tokens), `num_sequences` (non-empty rows)
      and `num_rows` (B, the `num_sequences` of "seq-mean-token-sum-norm").
    """
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be [B, T], got {m.shape}")
    row_count = jnp.sum(m.astype(jnp.float32), axis=1)
    return {"num_tokens": jnp.sum(row_count),
            "num_sequences": jnp.sum((row_count > 0).astype(jnp.float32)),
            "num_rows": jnp.float32(m.shape[0])}
