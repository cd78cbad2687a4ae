"""Drawing one token per row from [B, V] logits: top-k / top-p truncation, the draw, and
the sampled token's log-prob.

The draw is Gumbel-max over elementwise Threefry noise (`gumbel_noise`) in one variadic
reduction on GPU / TPU, and inverse-CDF sampling with one Threefry uniform per row
(`uniform_bits`) in plain, vectorised reductions on CPU (`_inverse_cdf`): XLA's CPU runs a
variadic reduction one element at a time. Both draw from softmax(logits / T); for the same
key they draw different tokens. `sampling.sample_token` is the sampler's entry point.
"""
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import numerics


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


def uniform_bits(rng: jax.Array, shape: Tuple[int, int], rows: Optional[jax.Array] = None
                 ) -> jax.Array:
    """[B, K] float32 uniform draws in [0, 1) with 23 random mantissa bits: Threefry-2x32
    (20 rounds) of the counter (row, column) under the key, written out elementwise. `rows`
    ([B] int32, default 0 … B - 1) are the rows' counters: a row keeps its draws when the
    batch around it is compacted (`sampling.generate` passes the original row ids).

    `jax.random.uniform` computes the same kind of bits, but its CPU lowering runs the rounds
    as a loop over [B, K] buffers (~15 bytes moved per element). Written elementwise, XLA
    fuses the bits into their consumer on every backend, and they shard like the logits.
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
    return jax.lax.bitcast_convert_type((x0 >> jnp.uint32(9)) | jnp.uint32(0x3F800000),
                                        jnp.float32) - 1.0


def gumbel_noise(rng: jax.Array, shape: Tuple[int, int], rows: Optional[jax.Array] = None
                 ) -> jax.Array:
    """[B, K] float32 standard Gumbel noise -log(-log(u)) of `uniform_bits(rng, shape,
    rows)`, u clamped away from 0 so the noise is finite."""
    u = jnp.maximum(uniform_bits(rng, shape, rows), jnp.finfo(jnp.float32).tiny)
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

    Without truncation (and greedy) no sort: on GPU / TPU ONE pass over V, Gumbel-max
    (`gumbel_noise`) with the log-prob from the same reduction (`_argmax_and_logprob`); on
    CPU, where XLA runs that variadic reduction one element at a time (with the noise:
    0.69 s a step at 256 × 151,936), two vectorised passes: inverse-CDF sampling with one
    uniform per row (`_inverse_cdf`; greedy: `_first_max`). Same distribution, other
    draws for the same key. With top-k it samples among the k largest only (Gumbel-max);
    top-p alone needs a sort over V.

    Args:
      logits: [B, V] (any float dtype; statistics are taken in float32).
      rng: a PRNG key.
      temperature: > 0; the log-prob is log softmax(logits / temperature).
      top_k, top_p: as in `truncated_support` (ignored when greedy).
      greedy: argmax instead of sampling.
      rows: [B] int32 counters of the rows' noise (`uniform_bits`); default 0 … B - 1.

    Returns:
      (tokens [B] int32, logprobs [B] float32).
    """
    scaled = logits.astype(jnp.float32) / temperature
    if greedy or (top_k <= 0 and top_p >= 1.0):
        return _untruncated(scaled, rng, rows, greedy,
                            vectorised=jax.default_backend() == "cpu")
    values, ids = truncated_support(scaled, top_k=top_k, top_p=top_p)
    choice = _categorical(rng, values, rows)
    tokens = jnp.take_along_axis(ids, choice[:, None], axis=-1)[:, 0]
    # The chosen logit as a masked sum (one fused pass; a gather would re-read [B, V]).
    column = jax.lax.broadcasted_iota(jnp.int32, scaled.shape, 1)
    chosen = jnp.sum(jnp.where(column == tokens[:, None], scaled, 0.0), axis=-1)
    return tokens, chosen - jax.nn.logsumexp(scaled, axis=-1)


def _untruncated(scaled, rng, rows, greedy: bool, vectorised: bool):
    """(tokens [B], log-probs [B]) of a greedy or untruncated draw from scaled [B, V]: in
    plain vectorised reductions (`_first_max`, `_inverse_cdf`: the CPU's choice) or in one
    variadic reduction over V (`_argmax_and_logprob`, Gumbel-max: GPU / TPU)."""
    if vectorised:
        if greedy:
            return _first_max(scaled)
        return _inverse_cdf(scaled, uniform_bits(rng, (scaled.shape[0], 1), rows)[:, 0])
    if greedy:
        return _argmax_and_logprob(scaled, scaled)
    return _argmax_and_logprob(scaled, scaled + gumbel_noise(rng, scaled.shape, rows))


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


_CHUNK = 128  # Logits per chunk of the inverse-CDF search (`_inverse_cdf`).


def _chunked(scaled):
    """scaled [B, V] as [B, V / C, C] chunks (C = `_CHUNK`, or V when smaller), padded with
    -inf logits (probability 0) when C does not divide V."""
    b, v = scaled.shape
    c = min(_CHUNK, v)
    if v % c:
        scaled = jnp.pad(scaled, ((0, 0), (0, c - v % c)), constant_values=-jnp.inf)
    return scaled.reshape(b, -1, c)


def _rows_at(chunks, j):
    """chunks [B, N, C] at chunk j [B] int32 -> [B, C]: on one CPU device copied
    (`numerics.copy_rows` of the [B·N, C] chunks: the CPU cost model charges a fused gather as
    a read of every chunk), else a gather along N (a local lookup and an all-reduce of [B, C]
    when the vocabulary is split over devices)."""
    b, n, c = chunks.shape
    if n == 1:
        return chunks[:, 0]
    if numerics.copies_rows():
        return numerics.copy_rows(chunks.reshape(b * n, c),
                                  jnp.arange(b, dtype=jnp.int32) * n + j)
    return jnp.take_along_axis(chunks, j[:, None, None], axis=1)[:, 0]


def _first(hits):
    """Index of the first True along the last axis of hits [..., N] (N where none)."""
    n = hits.shape[-1]
    idx = jax.lax.broadcasted_iota(jnp.float32, hits.shape, hits.ndim - 1)  # Exact: N < 2**24.
    return jnp.min(jnp.where(hits, idx, float(n)), axis=-1).astype(jnp.int32)


def _last_positive(mass):
    """Index of the last entry > 0 along the last axis of mass [..., N] (0 if none)."""
    idx = jax.lax.broadcasted_iota(jnp.float32, mass.shape, mass.ndim - 1)
    return jnp.max(jnp.where(mass > 0, idx, 0.0), axis=-1).astype(jnp.int32)


def _first_past(running, target, mass):
    """The first position whose running mass [B, N] exceeds target [B], never past the
    last position with positive mass [B, N] (where float32 rounding would run off the end)."""
    return jnp.minimum(_first(running > target[:, None]), _last_positive(mass))


def _chunk_sums(scaled):
    """(chunks [B, N, C] (`_chunked`), chunk maxima [B, N], max m [B], chunk masses
    Σ exp(scaled − m) [B, N]): two plain reductions over V, vectorised on CPU (a full-row
    sum of exps is not, nor are the variadic reductions argmax and `_argmax_and_logprob`)."""
    chunks = _chunked(scaled)
    # Barriers: XLA would merge max(max) and sum(sum) into full-row reductions (one more
    # pass over V, and a full-row sum of exps runs unvectorised).
    peaks = jax.lax.optimization_barrier(jnp.max(chunks, axis=-1))
    m = jnp.max(peaks, axis=-1)
    return chunks, peaks, m, jax.lax.optimization_barrier(
        jnp.sum(jnp.exp(chunks - m[:, None, None]), axis=-1))


def _inverse_cdf(scaled, u):
    """(tokens [B] int32, log softmax(scaled) there [B]): token = the first id whose running
    probability mass exceeds u [B] (uniform in [0, 1)) — a draw from softmax(scaled [B, V]).

    Two passes over V (`_chunk_sums`); the chunk holding u·Σ is found from the chunk masses'
    running sums ([B, V / C]), its C logits copied out (`_rows_at`) and searched the same
    way. Float32 sums place the boundaries within γ_V·Σ of their exact values; a token of
    probability 0 (a -inf or float32-min logit) is never returned.
    """
    chunks, _, m, mass = _chunk_sums(scaled)
    running = jnp.cumsum(mass, axis=-1)
    total = running[:, -1]
    target = u * total
    j = _first_past(running, target, mass)
    chunk = _rows_at(chunks, j)                                            # [B, C]
    before = jnp.where(j > 0, jnp.take_along_axis(running, jnp.maximum(j - 1, 0)[:, None],
                                                  axis=-1)[:, 0], 0.0)
    inside = jnp.exp(chunk - m[:, None])
    i = _first_past(before[:, None] + jnp.cumsum(inside, axis=-1), target, inside)
    chosen = jnp.take_along_axis(chunk, i[:, None], axis=-1)[:, 0]
    return j * chunks.shape[2] + i, chosen - (m + jnp.log(total))


def _first_max(scaled):
    """(argmax [B] int32, the lowest id on ties as `jnp.argmax`; log softmax(scaled) there
    [B] = −log Σ exp(scaled − max)) from `_chunk_sums`: the first chunk holding the max, then
    the first id in it."""
    chunks, peaks, m, mass = _chunk_sums(scaled)
    j = _first(peaks == m[:, None])
    i = _first(_rows_at(chunks, j) == m[:, None])
    return j * chunks.shape[2] + i, -jnp.log(jnp.sum(mass, axis=-1))
