"""rlvr_jax.evaluation against exact / loop-based references."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import evaluation
from tests import numerics
from tests.reference import evaluation_ref as ref


def _pass_at_k_atol(n, c, k):
    """pass@k = −expm1(S), S = Σ log1p(−k/i) over the factors n−c < i ≤ n with i > k, reduced
    over n slots: each term errs by its log1p and by k/i's rounding amplified by 1/(1 − k/i),
    the sum by γ_n; 1 − p = e^S carries S's error, and expm1 adds its own."""
    if n - c < k:
        return 0.0                                   # exactly 1
    x = k / np.arange(max(n - c, k) + 1, n + 1)
    s = -np.sum(np.log1p(-x))
    q = np.exp(-s)
    return (q * (numerics.ref_atol(n, s, 1) + numerics.U32 * np.sum(x / (1 - x)))
            + numerics.ref_atol(0, 1 - q, 1))


def test_pass_at_k_matches_exact_binomials_up_to_n_1024():
    rng = np.random.default_rng(0)
    for n in (1, 5, 64, 1024):
        c = rng.integers(0, n + 1, size=12)
        c[:2] = (0, n)
        k = rng.integers(1, n + 1, size=12)
        got = np.asarray(evaluation.pass_at_k(n, c, k))
        expected = [ref.pass_at_k(n, int(ci), int(ki)) for ci, ki in zip(c, k)]
        assert np.all(np.isfinite(got))
        atol = np.array([_pass_at_k_atol(n, int(ci), int(ki)) for ci, ki in zip(c, k)])
        assert np.all(np.abs(got - expected) <= atol), (n, got - expected, atol)
    # Tiny probabilities keep relative precision (expm1 form): 1 correct of 1024, k = 1
    # (1/1024 exact, a log1p and an expm1: γ_16 = 1e-6 relative).
    np.testing.assert_allclose(evaluation.pass_at_k(1024, 1, 1), 1 / 1024, rtol=1e-5)


def test_pass_at_k_jit_and_input_checks():
    c = jnp.array([0, 3, 8])
    eager = evaluation.pass_at_k(8, c, 2)
    np.testing.assert_allclose(jax.jit(lambda x: evaluation.pass_at_k(8, x, 2, max_n=8))(c), eager,
                               rtol=0, atol=2 * max(_pass_at_k_atol(8, int(ci), 2) for ci in c))
    with pytest.raises(ValueError, match="max_n"):
        jax.jit(lambda n: evaluation.pass_at_k(n, 1, 1))(8)
    with pytest.raises(ValueError):
        evaluation.pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        evaluation.pass_at_k(4, 1, 5)


def test_sample_metrics():
    rng = np.random.default_rng(1)
    answer = rng.random((6, 16)) < 0.4
    reasoning = rng.random((6, 16)) < 0.7
    got = evaluation.cot_pass_at_k(answer, reasoning, k=4)
    both = (answer & reasoning).sum(axis=1)
    # _pass_at_k_atol(16, c, 4) ≤ 2e-6·pass@k for every c.
    np.testing.assert_allclose(got, [ref.pass_at_k(16, int(c), 4) for c in both], rtol=1e-5)
    assert np.all(np.asarray(got) <= np.asarray(evaluation.pass_at_k_from_samples(answer, k=4)))
    # A count of 0/1 over 8: exact. The maximum: its float32 rounding, u.
    np.testing.assert_allclose(evaluation.mean_at_k(answer, k=8), answer[:, :8].mean(axis=1))
    rewards = rng.normal(size=(6, 16))
    np.testing.assert_allclose(evaluation.best_at_k(rewards, k=3), rewards[:, :3].max(axis=1),
                               rtol=1e-6)


def test_maj_at_k_matches_reference():
    rng = np.random.default_rng(2)
    ids = rng.integers(-1, 4, size=(40, 7))
    ids[0] = -1
    truth = rng.integers(0, 4, size=(40, 1))
    correct = ids == truth
    for k in (1, 4, 7):
        got = evaluation.maj_at_k(ids, correct, k=k)
        expected = [ref.maj_at_k(list(ids[i, :k]), list(correct[i, :k])) for i in range(40)]
        np.testing.assert_array_equal(got, expected)


def test_iqm_and_bootstrap():
    rng = np.random.default_rng(3)
    for n in (4, 9, 30):
        x = rng.normal(size=(n,))
        # The middle m values rounded to float32, summed and divided: γ_{m+2}·mean|mid| (they
        # cancel, so not relative to the result).
        mid = np.sort(x)[n // 4:n - n // 4]
        np.testing.assert_allclose(evaluation.iqm(x), ref.iqm(x), rtol=0,
                                   atol=numerics.ref_atol(mid.size + 2, np.abs(mid).mean()))
    scores = rng.normal(loc=1.0, size=(10, 3)).astype(np.float32)
    point, low, high = evaluation.bootstrap_ci(jax.random.PRNGKey(0), scores, statistic="mean",
                                               num_resamples=1000)
    np.testing.assert_allclose(point, scores.mean(dtype=np.float64), rtol=0,
                               atol=numerics.ref_atol(scores.size + 1, np.abs(scores).mean()))
    assert float(low) < float(point) < float(high)
    # The percentile interval of the mean has about the normal-theory width 2·1.96·σ/√n.
    half = 1.96 * scores.std(ddof=1) / np.sqrt(scores.size)
    np.testing.assert_allclose(float(high - low), 2 * half, rtol=0.3)  # statistical, not float
    p2, l2, h2 = evaluation.bootstrap_ci(jax.random.PRNGKey(1), np.full((5, 2), 0.5))
    assert float(p2) == float(l2) == float(h2) == 0.5  # means of 0.5s: exact
    with pytest.raises(ValueError):
        evaluation.bootstrap_ci(jax.random.PRNGKey(0), scores, statistic="median")
