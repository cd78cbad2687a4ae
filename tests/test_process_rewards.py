"""Process (step) rewards: the estimators against loop-based NumPy references, properties,
and a hand-made rollout whose step rewards must land on the right tokens."""
import numpy as np
import pytest

from rlvr_jax import advantages
from tests.reference import advantages_ref
from tests.reference import process_ref as ref

# Against float64 references: a suffix sum of ≤ T float32 step rewards errs by γ_T·Σ|r|, a
# min is exact, a difference of mins rounds once, the softmin (T = 0.5) takes a shift, an exp,
# a T-term sum, a division and a product (γ_{T+11} relative, plus u·|r/T| for the shifted
# exponent): all ≤ 0.08 of ATOL + RTOL·|x| for these rewards.
RTOL, ATOL = 1e-5, 1e-5


def _steps(seed, b=6, t=9):
    rng = np.random.default_rng(seed)
    mask = np.ones((b, t), bool)
    for i, n in enumerate(rng.integers(3, t + 1, b)):
        mask[i, n:] = False
    mask[1] = False                                   # an empty row
    ends = (rng.random((b, t)) < 0.4) & mask
    ends[0] = False                                   # a row without steps
    rewards = np.where(ends, rng.integers(0, 2, (b, t)) + 0.25 * rng.normal(size=(b, t)), 0.0)
    garbage = np.where(ends, rewards, 7.0)            # values off the step ends are ignored
    return garbage.astype(np.float32), ends, mask


@pytest.mark.parametrize("form", ["sum", "min"])
def test_process_returns_match_reference(form):
    r, e, m = _steps(0)
    got = advantages.process_returns(r, e, m, form=form)
    np.testing.assert_allclose(got, ref.process_returns(r, e, m, form), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("temperature", [0.0, 0.5])
def test_min_form_rewards_match_reference(temperature):
    r, e, m = _steps(1)
    got = advantages.min_form_rewards(r, e, m, temperature=temperature)
    np.testing.assert_allclose(got, ref.min_form_rewards(r, e, m, temperature),
                               rtol=RTOL, atol=ATOL)


def test_exact_min_form_summed_returns_are_the_future_minimum():
    """REINFORCE++'s summed returns of the rewritten rewards = PURE's min-form value."""
    r, e, m = _steps(2)
    rewritten = advantages.min_form_rewards(r, e, m)
    summed = advantages.discounted_returns(rewritten, m, gamma=1.0)
    # The rewritten rewards round once each, their suffix sums add γ_T·Σ|r*|: ≤ 0.15 of atol.
    np.testing.assert_allclose(summed, ref.process_returns(r, e, m, "min"), atol=1e-5)
    # Softmin with a small temperature approaches the minimum of the whole sequence: it exceeds
    # it by T·H(softmax) ≤ T·log K in exact arithmetic, ~e^(−gap/T) ≈ 0 for these gaps (≥ 0.8).
    soft = np.asarray(advantages.min_form_rewards(r, e, m, temperature=1e-3)).sum(1)
    first = np.asarray(advantages.process_returns(r, e, m, form="min"))[:, 0]
    np.testing.assert_allclose(soft, first, atol=1e-3)


@pytest.mark.parametrize("form,scale", [("sum", True), ("min", True), ("sum", False)])
def test_group_process_advantages_match_reference(form, scale):
    r, e, m = _steps(3, b=8)
    gm = np.array([True, False, True, True])
    for mask in (None, gm):
        got = advantages.group_process_advantages(r, e, m, num_samples=2, group_mask=mask,
                                                  form=form, scale=scale)
        want = ref.group_process_advantages(r, e, m, 2, form, 1e-6, mask, scale)
        # Standardised over the group's n ≤ 18 steps (see test_advantages' RTOL), then summed
        # over ≤ T steps (sum form): ≤ 0.4 of this tolerance.
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_group_with_equal_step_rewards_gets_exact_zero():
    e = np.zeros((4, 6), bool)
    e[:, [1, 4]] = True
    r = np.where(e, 0.7, 0.0).astype(np.float32)
    got = advantages.group_process_advantages(r, e, np.ones_like(e), num_samples=4)
    assert np.all(np.asarray(got) == 0.0)


def test_process_token_rewards_through_reinforce_pp_match_reference():
    """Outcome at the last token + α·step rewards → REINFORCE++ = the NumPy REINFORCE++ on
    the same per-token rewards."""
    r, e, m = _steps(4)
    outcome = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], np.float32)
    per_token = advantages.token_rewards(outcome, m) + advantages.process_token_rewards(
        r, e, m, weight=0.5, form="min")
    got = advantages.reinforce_plus_plus(per_token, m, gamma=1.0)
    want_tokens = np.zeros(m.shape)
    for i in range(m.shape[0]):
        valid = np.flatnonzero(m[i])
        if len(valid):
            want_tokens[i, valid[-1]] = outcome[i]
    want_tokens += 0.5 * ref.min_form_rewards(r, e, m)
    want = advantages_ref.reinforce_plus_plus(want_tokens, m, 1.0)
    # Suffix sums (2T) then whitening over the n tokens: the standardised bound with n + 2T,
    # ≤ 0.2 of this tolerance.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
