"""Drawing one token per row from [B, V] logits: top-k / top-p truncation, Gumbel-max
sampling with its own elementwise Threefry noise, and the sampled token's log-prob.

`rlvr_jax.sampling` re-exports the public functions (`sample_tokens`, `filter_logits`,
`truncated_support`, `gumbel_noise`).
"""
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np


def truncated_support(
    logits: jax.Array, *, top_k: int = 0, top_p: float = 1.0
) -> Tuple[jax.Array, jax.Array]:
    """The tokens that top-k / top-p keep, most likely first.

    Args:
      logits: [B, V] float (already divided by the temperature).
      top_k: keep the k largest logits (ties broken towards the lower token id);
        0 = all V.
      top_p: then keep the smallest prefix whose probability (renormalised over
        the top-k) reaches top_p; the most likely token is always kept.

    Returns:
      (values [B, K], ids [B, K] int32) sorted by decreasing logit, with K = top_k
      (or V); dropped entries have value -inf. This sorts only K entries when
      top_k is set, and all V when only top_p is.
    """
    v = logits.shape[-1]
    k = v if top_k <= 0 else min(top_k, v)
    values, ids = jax.lax.top_k(logits, k)
    if top_p < 1.0:
        probs = jax.nn.softmax(values.astype(jnp.float32), axis=-1)
        mass_before = jnp.cumsum(probs, axis=-1) - probs
        keep = mass_before < top_p
        keep = keep.at[:, 0].set(True)
        values = jnp.where(keep, values, -jnp.inf)
    return values, ids.astype(jnp.int32)


def filter_logits(logits: jax.Array, *, top_k: int = 0, top_p: float = 1.0) -> jax.Array:
    """[B, V] logits with the tokens that top-k / top-p drop set to -inf."""
    if top_k <= 0 and top_p >= 1.0:
        return logits
    values, ids = truncated_support(logits, top_k=top_k, top_p=top_p)
    rows = jnp.arange(logits.shape[0])[:, None]
    out = jnp.full_like(logits, -jnp.inf)
    return out.at[jnp.broadcast_to(rows, ids.shape), ids].set(values.astype(logits.dtype))


def _key_words(rng):
    """The first two uint32 words of a PRNG key (typed or raw)."""
    if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
        rng = jax.random.key_data(rng)
    words = rng.reshape(-1).astype(jnp.uint32)
    return words[0], words[1]


def gumbel_noise(rng: jax.Array, shape: Tuple[int, int], rows: Optional[jax.Array] = None
                 ) -> jax.Array:
    """[B, K] float32 standard Gumbel noise: Threefry-2x32 (20 rounds) of the counter
    (row, column) under the key, written out elementwise. `rows` ([B] int32, default
    0 … B - 1) are the rows' counters: a row keeps its noise when the batch around it is
    compacted (`sampling.generate` passes the original row ids).

    `jax.random.gumbel` computes the same kind of bits, but its CPU lowering runs the
    rounds as a loop over [B, K] buffers (~15 bytes moved per element). Written
    elementwise, XLA fuses noise, perturbation and the argmax into one pass over the
    logits on every backend, and the noise shards like the logits.
    """
    k0, k1 = _key_words(rng)
    ks = (k0, k1, k0 ^ k1 ^ jnp.uint32(0x1BD11BDA))
    if rows is None:
        x0 = jax.lax.broadcasted_iota(jnp.uint32, shape, 0) + ks[0]
    else:
        x0 = jnp.broadcast_to(rows.astype(jnp.uint32)[:, None], shape) + ks[0]
    x1 = jax.lax.broadcasted_iota(jnp.uint32, shape, 1) + ks[1]
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << jnp.uint32(r)) | (x1 >> jnp.uint32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + jnp.uint32(i + 1)
    # 23 random mantissa bits → u in [0, 1); clamp away from 0 so -log(-log(u)) is finite.
    u = jax.lax.bitcast_convert_type((x0 >> jnp.uint32(9)) | jnp.uint32(0x3F800000),
                                     jnp.float32) - 1.0
    u = jnp.maximum(u, jnp.finfo(jnp.float32).tiny)
    return -jnp.log(-jnp.log(u))


def _categorical(rng, logits, rows=None):
    """[B] int32 draws from softmax(logits [B, K]) by Gumbel-max (no sort)."""
    return jnp.argmax(logits + gumbel_noise(rng, logits.shape, rows),
                      axis=-1).astype(jnp.int32)


def sample_tokens(
    logits: jax.Array,
    rng: jax.Array,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    greedy: bool = False,
    rows: Optional[jax.Array] = None,
) -> Tuple[jax.Array, jax.Array]:
    """Samples one token per row and returns its untruncated log-prob.

    Without truncation (and greedy) this is ONE pass over V: Gumbel-max (`gumbel_noise`,
    no sort) and the log-prob from the same reduction. With top-k it samples among the k
    largest only; top-p alone needs a sort over V.

    Args:
      logits: [B, V] (any float dtype; statistics are taken in float32).
      rng: a PRNG key.
      temperature: > 0; the log-prob is log softmax(logits / temperature).
      top_k, top_p: as in `truncated_support` (ignored when greedy).
      greedy: argmax instead of sampling.
      rows: [B] int32 counters of the rows' noise (`gumbel_noise`); default 0 … B - 1.

    Returns:
      (tokens [B] int32, logprobs [B] float32).
    """
    scaled = logits.astype(jnp.float32) / temperature
    if greedy:
        return _argmax_and_logprob(scaled, scaled)
    if top_k <= 0 and top_p >= 1.0:
        return _argmax_and_logprob(scaled, scaled + gumbel_noise(rng, scaled.shape, rows))
    values, ids = truncated_support(scaled, top_k=top_k, top_p=top_p)
    choice = _categorical(rng, values, rows)
    tokens = jnp.take_along_axis(ids, choice[:, None], axis=-1)[:, 0]
    # The chosen logit as a masked sum (one fused pass; a gather would re-read [B, V]).
    column = jax.lax.broadcasted_iota(jnp.int32, scaled.shape, 1)
    chosen = jnp.sum(jnp.where(column == tokens[:, None], scaled, 0.0), axis=-1)
    return tokens, chosen - jax.nn.logsumexp(scaled, axis=-1)


def _argmax_and_logprob(scaled, perturbed):
    """(argmax of perturbed [B] int32, log softmax(scaled) there [B]) in ONE pass over V.

    A single variadic reduction carries the running max and rescaled exp-sum of `scaled`
    (an online logsumexp) and the best `perturbed` value with its index and its `scaled`
    value, so the [B, V] logits are read once (argmax, logsumexp and the chosen logit as
    separate reductions read them 4 times). Ties go to the lower index, as `jnp.argmax`.
    """
    column = jax.lax.broadcasted_iota(jnp.int32, scaled.shape, 1)
    neg_inf = np.float32(-np.inf)

    def combine(a, b):
        m_a, s_a, p_a, i_a, c_a = a
        m_b, s_b, p_b, i_b, c_b = b
        m = jnp.maximum(m_a, m_b)
        s = (jnp.where(m_a == neg_inf, 0.0, s_a * jnp.exp(m_a - m))
             + jnp.where(m_b == neg_inf, 0.0, s_b * jnp.exp(m_b - m)))
        take_b = (p_b > p_a) | ((p_b == p_a) & (i_b < i_a))
        return (m, s, jnp.where(take_b, p_b, p_a), jnp.where(take_b, i_b, i_a),
                jnp.where(take_b, c_b, c_a))

    init = (neg_inf, np.float32(0.0), neg_inf, np.int32(np.iinfo(np.int32).max), neg_inf)
    m, s, _, tokens, chosen = jax.lax.reduce(
        (scaled, jnp.ones_like(scaled), perturbed, column, scaled), init, combine, (1,))
    return tokens, chosen - (m + jnp.log(s))
