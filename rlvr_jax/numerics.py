"""Numerical helpers shared by the models, the losses and the trainer.

The bottom of the package: it imports only JAX, so `models`, `losses` and `advantages` can
all use it without importing each other.
"""
import jax
import jax.numpy as jnp


@jax.jit
def entropy(logits):
    """Entropy of the categorical distribution given by `logits`, over the last axis.

    Formula: `H = -Σ_v p_v log p_v = logsumexp(z) - Σ_v softmax(z)_v · z_v`, computed in float32
    after subtracting the row maximum (numerically stable; logits of `-inf` contribute 0).
    Meant for one chunk of logits at a time: the model computes log-probs and entropies in chunks
    over the sequence so that `[B, T, V]` never exists in float32 at once.

    Args:
      logits: `[..., V]`, any float dtype (bf16 is upcast to float32).

    Returns:
      `[...]` float32 entropies in nats (jitted: one compiled program per input shape).
    """
    z = jnp.asarray(logits).astype(jnp.float32)
    z_max = jax.lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))
    z_max = jnp.where(jnp.isfinite(z_max), z_max, 0.0)
    shifted = z - z_max
    lse = jax.nn.logsumexp(shifted, axis=-1)
    p = jax.nn.softmax(shifted, axis=-1)
    # p * shifted is 0 * -inf = nan for masked vocabulary entries; they carry no mass.
    finite = jnp.isfinite(shifted)
    weighted = jnp.where(finite, p * jnp.where(finite, shifted, 0.0), 0.0)
    return lse - jnp.sum(weighted, axis=-1)


def masked_mean(x, mask):
    """Mean of `x` over the entries where `mask` is true (0 when there are none).

    Args:
      x: float array. mask: bool/0-1 array of the same shape (or broadcastable to it).

    Returns:
      float32 scalar (no gradient flows through it).
    """
    x = jax.lax.stop_gradient(jnp.asarray(x))
    m = jnp.asarray(mask).astype(bool)
    n = jnp.sum(m.astype(jnp.float32))
    return jnp.sum(jnp.where(m, x, 0.0)) / jnp.maximum(n, 1.0)


def masked_stats(x, mask, prefix=""):
    """`{prefix+"mean", prefix+"min", prefix+"max"}` of `x` over the masked-in entries.

    All three are 0 when the mask is empty; no gradient flows through them.

    Args:
      x: float array. mask: bool/0-1 array of the same shape.
      prefix: prepended to each key (e.g. "ratio_" gives "ratio_mean", ...).
    """
    x = jax.lax.stop_gradient(jnp.asarray(x))
    m = jnp.asarray(mask).astype(bool)
    any_valid = jnp.sum(m.astype(jnp.float32)) > 0
    return {
        f"{prefix}mean": masked_mean(x, m),
        f"{prefix}min": jnp.where(any_valid, jnp.min(jnp.where(m, x, jnp.inf)), 0.0),
        f"{prefix}max": jnp.where(any_valid, jnp.max(jnp.where(m, x, -jnp.inf)), 0.0),
    }


_ROWS_UNROLL = 8  # Rows copied per loop iteration of `copy_rows` (fewer loop iterations).


def copies_rows() -> bool:
    """Whether a lookup of a few rows should be `copy_rows` rather than a gather: on one CPU
    device. XLA's CPU cost model charges a gather fused into its consumer as a read of the
    whole table (`rlvr_jax.perf.decode_cost`), a loop of slices for the rows it copies.
    Elsewhere, and under a multi-device mesh, a gather: a slice at a data-dependent row of a
    table split over devices would gather the whole table, where XLA partitions a gather."""
    return jax.default_backend() == "cpu" and jax.sharding.get_abstract_mesh().size <= 1


def copy_rows(table, ids):
    """The rows of table [R, D] at ids [B] int32 -> [B, D] (the values of
    `jnp.take(table, ids, axis=0)`), copied by a loop of dynamic slices (see `copies_rows`)."""
    def copy_row(r, out):
        row = jax.lax.dynamic_slice_in_dim(table, ids[r], 1, axis=0)
        return jax.lax.dynamic_update_slice_in_dim(out, row, r, axis=0)

    rows = jnp.zeros((ids.shape[0], table.shape[1]), table.dtype)
    unroll = _ROWS_UNROLL if ids.shape[0] % _ROWS_UNROLL == 0 else 1
    return jax.lax.fori_loop(0, ids.shape[0], copy_row, rows, unroll=unroll)
