"""Turn-level credit (#45): per-turn advantages against the NumPy references
(tests/reference/turn_ref.py)."""
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax.advantages import turn
from tests import numerics
from tests.reference import turn_ref

K, G, P, T = 4, 4, 3, 24


def _episodes(seed):
    """Random episodes: 1..K model turns of 1..3 tokens, each (but the last) followed by 1..3
    observation tokens (mask 0, same turn id); −1 and mask 0 after the end."""
    rng = np.random.default_rng(seed)
    ids, mask = np.full((P * G, T), -1, np.int32), np.zeros((P * G, T), np.float32)
    for i in range(P * G):
        t = 0
        for k in range(int(rng.integers(1, K + 1))):
            n_model = int(rng.integers(1, 4))
            ids[i, t:t + n_model], mask[i, t:t + n_model] = k, 1
            t += n_model
            n_obs = int(rng.integers(1, 4))
            ids[i, t:t + n_obs] = k
            t += n_obs
    values = rng.normal(size=(P * G, T)).astype(np.float32)
    outcome = rng.integers(0, 2, size=(P * G,)).astype(np.float32)
    return ids, mask, values, outcome


def _tables(ids, mask, values, outcome):
    r, present = turn.turn_table(values, ids, mask, K)
    return turn.with_outcome(r, present, outcome), present


def _atol(want, rets, std):
    """JAX float32 vs the float64 reference of (G_k − mean) / (std + eps): the return sums
    ≤ K terms, then the mean and variance reductions over G and one sqrt: the difference
    G_k − mean carries γ_chain · (|G_k| + |mean|) ≤ γ_chain · 2 max|G|, divided by the smallest
    non-zero std; the std's relative error moves A by the same γ_chain · |A|."""
    chain = K + 3 * G + 4
    mag = 2 * np.max(np.abs(rets)) / std + np.max(np.abs(want))
    return numerics.ref_atol(chain, mag, transcendentals=1)


def _min_std(rets, present):
    """The smallest non-zero per-turn group std (float64)."""
    rets, present = rets.reshape(P, G, K), present.reshape(P, G, K)
    stds = [np.std(rets[p, present[p, :, k], k], ddof=1) for p in range(P) for k in range(K)
            if present[p, :, k].sum() >= 2]
    return min(s for s in stds if s > 0)


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_turn_group_advantages_match_reference(gamma):
    for seed in range(3):
        ids, mask, values, outcome = _episodes(seed)
        r, present = _tables(ids, mask, values, outcome)
        a = turn.turn_group_advantages(r, present, num_samples=G, gamma=gamma)
        got = np.asarray(turn.turns_to_tokens(a, ids, mask))
        want = turn_ref.group_advantages(values, ids, mask, outcome, G, gamma=gamma)
        rets = np.asarray(turn.turn_returns(r, present, gamma=gamma))
        std = _min_std(rets, np.asarray(present))
        np.testing.assert_allclose(got, want, rtol=0, atol=_atol(want, rets, std))
        assert np.all(got[mask == 0] == 0)


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.8)])
def test_turn_gae_matches_reference(gamma, lam):
    for seed in range(3):
        ids, mask, values, outcome = _episodes(seed)
        token_values = np.random.default_rng(seed + 10).normal(size=values.shape)
        token_values = token_values.astype(np.float32)
        r, present = _tables(ids, mask, values, outcome)
        v, _ = turn.turn_table(token_values, ids, mask, K, at="start")
        a, ret = turn.turn_gae(r, present, v, gamma=gamma, lam=lam)
        got = np.asarray(turn.turns_to_tokens(a, ids, mask))
        want = turn_ref.gae(values, ids, mask, outcome, token_values, gamma=gamma, lam=lam)
        # A_k sums ≤ 3K terms (δ's, each of 3 values of size ≤ max|x|): float32 rounding.
        mag = 3 * K * (np.max(np.abs(values)) + np.max(np.abs(token_values)) + 1)
        np.testing.assert_allclose(got, want, rtol=0, atol=numerics.ref_atol(3 * K, mag))
        np.testing.assert_allclose(np.asarray(ret), np.asarray(a) + np.where(present, v, 0),
                                   rtol=0, atol=numerics.ref_atol(1, mag))


def test_turn_ends_and_starts():
    ids = jnp.array([[0, 0, 0, 1, 1, 1, 2, -1]])
    mask = jnp.array([[1, 1, 0, 1, 1, 0, 1, 0]])
    assert np.asarray(turn.turn_ends(ids, mask)).astype(int).tolist() == [[0, 1, 0, 0, 1, 0, 1, 0]]
    assert np.asarray(turn.turn_starts(ids, mask)).astype(int).tolist() == [[1, 0, 0, 1, 0, 0, 1, 0]]


def test_flat_turn_gets_zero():
    """Turn k equal across the group (or present in < 2 episodes) gets exactly 0."""
    r = jnp.array([[1.0, 2.0], [1.0, 3.0], [1.0, 0.0]])
    present = jnp.array([[True, True], [True, False], [True, False]])
    a = np.asarray(turn.turn_group_advantages(r, present, num_samples=3, gamma=0.0))
    assert np.all(a == 0)
