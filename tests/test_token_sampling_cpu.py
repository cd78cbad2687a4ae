"""The CPU draws of `token_sampling.sample_tokens` (`_inverse_cdf`, `_first_max`) against a
float64 NumPy reference, at vocabularies of several chunks, a padded last chunk,
probability-0 ids, and a vocabulary split over devices (the frequency tests of both draws are
`tests/test_sampling.py`'s)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as PS

from rlvr_jax import token_sampling
from tests import numerics
from tests.reference import sampling_ref

_inverse_cdf = jax.jit(token_sampling._inverse_cdf)
_untruncated = jax.jit(token_sampling._untruncated, static_argnums=(3, 4))


def logits_with_holes(rows, vocab, seed):
    """[rows, vocab] float32 logits ~ 3·N(0, 1) with a tenth of the ids at -inf and another
    tenth at float32's min (`sampling.sample_token`'s mask for ids past the vocab limit)."""
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.standard_normal((rows, vocab))).astype(np.float32)
    holes = rng.random((rows, vocab))
    x[holes < 0.1] = -np.inf
    x[(holes >= 0.1) & (holes < 0.2)] = np.finfo(np.float32).min
    return x


def boundary_atol(scaled):
    """Bound on a float32 running probability mass (chunk sums, their running sums, the
    running sums inside a chunk, over the float32 total) against its float64 value, relative
    to the total: chains of at most V additions of terms ≤ 1 (the max term is exp(0) = 1, so
    the total is ≥ 1) plus the division and the exps' own rounding; and each term's shift
    x − m, rounded relative to |x − m| = y, moves the term exp(−y) by at most u·y·exp(−y) ≤
    u/e, for V terms at most V·u."""
    v = scaled.shape[-1]
    return numerics.ref_atol(v + 3, 1.0, transcendentals=2) + v * numerics.U32


def assert_inverse_cdf(tokens, logp, scaled, u):
    """Each token is the reference's unless u lies within the rounding bound of one of the
    token's cdf boundaries (then u must be within it of the token's interval); every token
    has positive probability; log-probs are the float64 log-softmax within its bound."""
    ref, cdf = sampling_ref.inverse_cdf(scaled, u)
    atol = boundary_atol(scaled)
    rows = np.arange(len(u))
    assert np.all(np.isfinite(scaled[rows, tokens])) and np.all(
        scaled[rows, tokens] > np.finfo(np.float32).min), "drew a probability-0 id"
    lower = np.where(tokens > 0, cdf[rows, np.maximum(tokens - 1, 0)], 0.0)
    upper = cdf[rows, tokens]
    assert np.all((u >= lower - 2 * atol) & (u < upper + 2 * atol)), (tokens, ref)
    ref_lower = np.where(ref > 0, cdf[rows, np.maximum(ref - 1, 0)], 0.0)
    near = (np.abs(u - ref_lower) <= 2 * atol) | (np.abs(u - cdf[rows, ref]) <= 2 * atol)
    np.testing.assert_array_equal(tokens[~near], ref[~near])
    assert (~near).mean() > 0.5  # The exact comparison is not vacuous.
    s = scaled.astype(np.float64)
    full = s - (np.log(np.sum(np.exp(s - s.max(-1, keepdims=True)), -1, keepdims=True))
                + s.max(-1, keepdims=True))
    np.testing.assert_allclose(logp, full[rows, tokens], rtol=0,
                               atol=numerics.log_softmax_atol(np.where(np.isfinite(s), s, 0)))


@pytest.mark.parametrize("vocab", [100, 300, 1024])  # One chunk; three, the last padded; 8.
def test_inverse_cdf_draws_the_reference_token(vocab):
    scaled = logits_with_holes(256, vocab, seed=vocab)
    u = np.random.default_rng(1).random(256).astype(np.float32)
    u[:2] = [0.0, np.nextafter(np.float32(1), np.float32(0))]  # The ends of [0, 1).
    tokens, logp = _inverse_cdf(jnp.asarray(scaled), jnp.asarray(u))
    assert_inverse_cdf(np.asarray(tokens), np.asarray(logp), scaled, u.astype(np.float64))


def test_inverse_cdf_with_the_vocabulary_split_over_devices():
    """The chunk is gathered (not sliced) under a mesh: the draws of the unsharded call, and
    the [16, 1024] logits are never all-gathered (each device looks up its own chunks)."""
    scaled = logits_with_holes(16, 1024, seed=5)
    u = np.random.default_rng(2).random(16).astype(np.float32)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(1, 8), ("data", "tensor"))
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.asarray(scaled), NamedSharding(mesh, PS(None, "tensor")))
        draw = jax.jit(token_sampling._inverse_cdf)
        tokens, logp = draw(x, jnp.asarray(u))
        hlo = draw.lower(x, jnp.asarray(u)).compile().as_text()
    assert not re.search(r"all-gather[^\n]*f32\[16,1024\]", hlo)
    assert_inverse_cdf(np.asarray(tokens), np.asarray(logp), scaled, u.astype(np.float64))


@pytest.mark.parametrize("vectorised", [True, False])
def test_greedy_takes_the_lowest_id_of_a_tie_across_chunks(vectorised):
    """The CPU's chunked greedy (`_first_max`) and the GPU / TPU's one-pass argmax."""
    scaled = logits_with_holes(8, 300, seed=3)
    scaled[:, [7, 150, 299]] = 20.0   # Ties in chunks 0, 1 and the padded chunk 2.
    scaled[1, 7] = 0.0                # Row 1: the first maximum is in chunk 1.
    scaled[2, [7, 150]] = 0.0         # Row 2: only the padded chunk holds it.
    tokens, logp = _untruncated(jnp.asarray(scaled), jax.random.PRNGKey(0), None, True,
                                vectorised)
    np.testing.assert_array_equal(tokens, np.argmax(scaled, axis=-1))
    s = np.where(np.isfinite(scaled), scaled, -np.inf).astype(np.float64)
    ref = -np.log(np.sum(np.exp(s - s.max(-1, keepdims=True)), -1))
    np.testing.assert_allclose(logp, ref, rtol=0,
                               atol=numerics.log_softmax_atol(np.where(np.isfinite(s), s, 0)))
