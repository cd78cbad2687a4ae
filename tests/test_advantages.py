"""rlvr_jax.advantages against loop-based NumPy references, plus properties."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import advantages
from tests import numerics
from tests.reference import advantages_ref as ref

# Against float64 references. A standardised value A = (r − mean)/std over n rewards of size
# ≤ M errs by ≤ γ_{n+2}·(M/std)·(1 + 2|A|) + γ_{n+5}·|A| (the centred values by γ_{n+2}·M, the
# std by twice that, +eps and the division once): ≤ 0.6·(ATOL + RTOL·|A|) for these rewards
# (n ≤ 20); GAE's 2·T + 4 roundings of terms ≤ Σ (γλ)^k (|r| + |V'| + |V|): ≤ 0.7 of it;
# RLOO's and pass@k's few roundings of values ≤ G: far below.
RTOL, ATOL = 1e-5, 1e-5


def _rewards(seed, p=5, g=4, binary=False):
    rng = np.random.default_rng(seed)
    r = rng.integers(0, 2, (p, g)).astype(np.float32) if binary else rng.normal(size=(p, g))
    r = np.asarray(r, np.float32)
    r[0] = 0.7                                   # an all-equal group
    return r


def _mask(seed, b=6, t=7):
    rng = np.random.default_rng(seed)
    m = rng.random((b, t)) < 0.7
    m[0] = False                                 # an empty row
    return m


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_matches_reference(scale):
    r = _rewards(0, binary=False)
    gm = np.array([True, True, False, True, True])
    for mask in (None, gm):
        got = advantages.grpo(r, scale=scale, group_mask=mask)
        np.testing.assert_allclose(got, ref.grpo(r, scale, 1e-6, mask), rtol=RTOL, atol=ATOL)


def test_equal_rewards_give_exact_zero():
    r = jnp.full((3, 8), 0.7, jnp.float32)       # float32 std of these is ~6e-8, not 0
    for scale in ("group", "batch", "none"):
        assert np.all(np.asarray(advantages.grpo(r, scale=scale)) == 0.0), scale
    for fn in (advantages.rloo, advantages.grpo_passk):
        assert np.all(np.asarray(fn(r)) == 0.0), fn.__name__
    assert np.all(np.asarray(advantages.ngrpo(jnp.ones((3, 8)))) == 0.0)
    np.testing.assert_array_equal(advantages.zero_variance_groups(r), [True] * 3)


def test_group_size_one_is_an_error():
    with pytest.raises(ValueError, match="G >= 2"):
        advantages.grpo(jnp.ones((4, 1)))
    with pytest.raises(ValueError, match="scale"):
        advantages.grpo(jnp.ones((4, 2)), scale="std")


def test_rloo_passk_ngrpo_match_reference():
    r = _rewards(1, binary=True)
    np.testing.assert_allclose(advantages.rloo(r), ref.rloo(r), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(advantages.ngrpo(r), ref.ngrpo(r), rtol=RTOL, atol=ATOL)
    rc = _rewards(2)
    np.testing.assert_allclose(advantages.grpo_passk(rc), ref.grpo_passk(rc), rtol=RTOL, atol=ATOL)
    # NGRPO: an all-wrong group gets a negative signal, an all-right group none.
    out = advantages.ngrpo(jnp.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    assert np.all(np.asarray(out[0]) < 0) and np.all(np.asarray(out[1]) == 0)


def test_weighting_and_w_reinforce():
    a = jnp.array([[-2.0, 0.0, 3.0]])                # exact products; float32(0.1): ≤ u
    np.testing.assert_allclose(advantages.sign_weighted(a, positive_weight=0.5, negative_weight=2.0),
                               [[-4.0, 0.0, 1.5]])
    np.testing.assert_allclose(advantages.w_reinforce(jnp.array([[1.0, 0.0]]), positive_weight=0.1),
                               [[0.1, -1.0]])
    r = _rewards(3, binary=True)
    for pos, neg in ((0.1, 1.0), (0.0, 1.0), (1.0, 0.0), (0.5, 2.0)):  # W-REINFORCE, NSR, PSR
        np.testing.assert_allclose(
            advantages.w_reinforce(r, positive_weight=pos, negative_weight=neg),
            ref.w_reinforce(r, pos, neg), rtol=RTOL, atol=ATOL)


def test_dynamic_sampling_selection():
    r = jnp.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    keep = advantages.dynamic_sampling_mask(r)
    np.testing.assert_array_equal(keep, [False, True, False, True])
    idx, valid = advantages.select_groups(keep, 3)
    np.testing.assert_array_equal(idx, [1, 3, 0])
    np.testing.assert_array_equal(valid, [True, True, False])
    metrics = advantages.group_metrics(r)
    assert float(metrics["zero_variance_fraction"]) == 0.5  # 2 / 4: exact


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.8)])
def test_gae_matches_reference(gamma, lam):
    rng = np.random.default_rng(3)
    m = _mask(3)
    r, v = rng.normal(size=m.shape), rng.normal(size=m.shape)
    adv, ret = advantages.gae(r, v, m, gamma=gamma, lam=lam)
    ref_adv, ref_ret = ref.gae(r, v, m, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ret, ref_ret, rtol=RTOL, atol=ATOL)


def test_gae_ignores_garbage_in_padding():
    rng = np.random.default_rng(4)
    m = _mask(4)
    r, v = rng.normal(size=m.shape), rng.normal(size=m.shape)
    clean = advantages.gae(r, v, m, gamma=0.95, lam=0.9)
    r2, v2 = np.where(m, r, np.nan), np.where(m, v, 1e30)
    dirty = advantages.gae(r2, v2, m, gamma=0.95, lam=0.9)
    for a, b in zip(clean, dirty):
        np.testing.assert_array_equal(a, b)


def test_reinforce_plus_plus_matches_reference():
    rng = np.random.default_rng(5)
    m = _mask(5)
    outcome = rng.normal(size=(m.shape[0],))
    kl = rng.normal(size=m.shape) * 0.1
    tok = advantages.token_rewards(outcome, m, kl=kl, kl_coef=0.05)
    # Casts, the KL product and difference, then B·T terms: γ_{B·T+4}·Σ|terms| = 9.1e-6 here,
    # below rtol·|sum| = 1.15e-5 (the terms cancel down to 0.115).
    np.testing.assert_allclose(tok.sum(), outcome[1:].sum() - 0.05 * (kl * m).sum(), rtol=1e-4)
    got = advantages.reinforce_plus_plus(tok, m, gamma=0.9)
    # Discounted sums (2T) then whitening over the n tokens: the standardised bound above with
    # n + 2T, 0.09 of this tolerance.
    np.testing.assert_allclose(got, ref.reinforce_plus_plus(np.asarray(tok, np.float64), m, 0.9),
                               rtol=1e-4, atol=1e-4)
    w = advantages.whiten(rng.normal(size=m.shape), m)
    # Σ(x − mean) = 0 up to γ_{n+2}·max|x|/std + γ_n per whitened value: 5.4e-6 here.
    assert abs(float(jnp.sum(w)) / m.sum()) < 1e-5


def test_reinforce_plus_plus_baseline_matches_reference():
    r = _rewards(6, p=3, g=2, binary=True)
    m = _mask(6)
    got = advantages.reinforce_plus_plus_baseline(r, m)
    # The standardised bound over the n tokens: 0.09 of this tolerance.
    np.testing.assert_allclose(got, ref.reinforce_plus_plus_baseline(r, m), rtol=1e-4, atol=1e-4)


def test_dropped_groups_do_not_change_batch_statistics():
    r = _rewards(7)
    gm = np.array([True, True, True, False, True])
    base = advantages.grpo(r, scale="batch", group_mask=gm)
    r2 = r.copy()
    r2[3] = [1e6, -1e6, 3.0, 4.0]
    np.testing.assert_array_equal(base, advantages.grpo(r2, scale="batch", group_mask=gm))


def test_jit_equals_eager():
    r = jnp.asarray(_rewards(8))
    m = jnp.asarray(_mask(8, b=r.size))
    cases = [
        (lambda x: advantages.grpo(x, scale="batch"), (r,)),
        (advantages.rloo, (r,)),
        (lambda x: advantages.gae(x, x, m, gamma=0.9, lam=0.95), (jnp.ones(m.shape),)),
        (lambda x: advantages.reinforce_plus_plus_baseline(x, m), (r,)),
    ]
    # Two float32 evaluations; the longest chain is the whitening over the m.size tokens (a
    # mean and a variance) after GAE's 2·T steps; the outputs stand for the terms' size.
    for fn, args in cases:
        numerics.assert_trees_reorder_close(jax.jit(fn)(*args), fn(*args),
                                            2 * m.size + 2 * m.shape[1] + 6)


def test_broadcast_to_tokens():
    m = jnp.array([[True, False], [True, True]])
    np.testing.assert_array_equal(advantages.broadcast_to_tokens(jnp.array([[2.0, -1.0]]), m),
                                  [[2.0, 0.0], [-1.0, -1.0]])
    with pytest.raises(ValueError):
        advantages.broadcast_to_tokens(jnp.ones(3), m)
