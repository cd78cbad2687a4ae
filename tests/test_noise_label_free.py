"""A noisy verifier (flip rates within binomial bounds, seeded, counted; backward correction
unbiased) and the label-free components (TTRL majority votes, self-certainty)."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling, scoring, tasks
from rlvr_jax.train.config import arithmetic_config
from tests import numerics


def _rollout(b, n=4, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, 100, (b, n)).astype(np.int32)
    ones = np.ones((b, n), np.int32)
    return sampling.Rollout(tokens=jnp.asarray(tokens), mask=jnp.asarray(ones),
                            logprobs=jnp.zeros((b, n)), lengths=jnp.full((b,), n),
                            finished=jnp.ones((b,), bool),
                            prompt_tokens=jnp.asarray(tokens[:, :2]),
                            prompt_mask=jnp.asarray(ones[:, :2]))


def _x(b, n=4, seed=0):
    """The term inputs of `_rollout(b, n, seed)`."""
    return scoring.Inputs(_rollout(b, n, seed))


def _within_binomial(count, n, p, z=5.0):
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return abs(count - mean) <= z * sd + 1


@pytest.mark.parametrize("p1,p0", [(0.2, 0.1), (0.5, 0.5), (0.0, 0.3)])
def test_flip_rates_are_within_binomial_bounds(p1, p0):
    b = 20000
    truth = (np.arange(b) % 3 == 0).astype(np.float32)          # a third correct
    out, m = scoring.noisy(jnp.asarray(truth), _x(b), fn_rate=p1, fp_rate=p0, seed=7)
    out = np.asarray(out)
    assert set(np.unique(out)) <= {0.0, 1.0}
    n_pos, n_neg = int(truth.sum()), int(b - truth.sum())
    false_neg = int(np.sum((truth == 1) & (out == 0)))
    false_pos = int(np.sum((truth == 0) & (out == 1)))
    assert _within_binomial(false_neg, n_pos, p1) and _within_binomial(false_pos, n_neg, p0)
    assert m["reward/noise_false_negatives"] == false_neg       # The counts are the flips.
    assert m["reward/noise_false_positives"] == false_pos
    # Exact float32 counts (< 2^24), one division: ≤ u relative.
    assert float(m["reward/noise_flip_fraction"]) == pytest.approx((false_neg + false_pos) / b)


def test_flips_are_seeded_by_the_seed_and_the_rollout():
    r = jnp.asarray((np.arange(512) % 2).astype(np.float32))
    a = np.asarray(scoring.noisy(r, _x(512), fn_rate=0.3, fp_rate=0.3, seed=1)[0])
    again = np.asarray(scoring.noisy(r, _x(512), fn_rate=0.3, fp_rate=0.3, seed=1)[0])
    other_seed = np.asarray(scoring.noisy(r, _x(512), fn_rate=0.3, fp_rate=0.3,
                                          seed=2)[0])
    other_rollout = np.asarray(scoring.noisy(r, _x(512, seed=5), fn_rate=0.3,
                                             fp_rate=0.3, seed=1)[0])
    np.testing.assert_array_equal(a, again)
    assert (a != other_seed).any() and (a != other_rollout).any()


def test_weighted_reward_loses_or_gains_its_correctness_unit():
    r = jnp.asarray([1.5, 0.5, 1.5, 0.5] * 64, jnp.float32)     # task (1) + 0.5 format: ±1 exact
    out = np.asarray(scoring.noisy(r, _x(256), fn_rate=1.0, fp_rate=1.0, seed=0)[0])
    np.testing.assert_allclose(out, np.asarray(r) + np.where(np.asarray(r) >= 1, -1.0, 1.0))


def test_backward_correction_makes_the_noisy_reward_unbiased():
    b, p1, p0 = 40000, 0.2, 0.1
    truth = (np.arange(b) % 4 == 0).astype(np.float32)
    setup = scoring.Setup(None, reward=_reward(p1, p0, p1, p0))
    terms = [scoring.TERMS[name].build(setup, None) for name in ("noise", "correction")]
    rw, x = jnp.asarray(truth), scoring.Inputs(_rollout(b))
    for term in terms:
        rw, _ = term(rw, x)
    observed = np.asarray(scoring.noisy(jnp.asarray(truth), _x(b), fn_rate=p1,
                                        fp_rate=p0, seed=0)[0])
    # (r − p0)·scale: the same two float32 roundings on both sides (r ∈ {0, 1}): ≤ 2γ_2.
    np.testing.assert_allclose(rw, scoring.noise.noise_corrected_reward(observed, fn_rate=p1,
                                                                  fp_rate=p0), rtol=1e-6)
    for cls in (0.0, 1.0):                                       # E[r̃ | r] = r per class
        sel = truth == cls
        se = np.std(np.asarray(rw)[sel]) / math.sqrt(sel.sum())
        assert abs(float(np.mean(np.asarray(rw)[sel])) - cls) < 5 * se
    assert abs(float(np.mean(observed[truth == 1])) - (1 - p1)) < 0.03   # Uncorrected: biased.


def _reward(p1=0.0, p0=0.0, q1=0.0, q0=0.0):
    reward = arithmetic_config().reward
    reward.noise_fn_rate, reward.noise_fp_rate = p1, p0
    reward.correction_fn_rate, reward.correction_fp_rate = q1, q0
    return reward


@pytest.mark.parametrize("fields,message", [
    (dict(p1=1.5), "reward.noise_fn_rate: must be in [0, 1]"),
    (dict(p0=-0.1), "reward.noise_fp_rate: must be in [0, 1]"),
    (dict(q1=0.6, q0=0.5), "reward.correction_fn_rate: with reward.correction_fp_rate"),
])
def test_bad_noise_config_names_the_field(fields, message):
    with pytest.raises(ValueError) as err:
        scoring.check_reward_config(_reward(**fields))
    assert str(err.value).startswith(message)


def test_noise_wraps_the_on_device_verifier(tok):
    config = arithmetic_config()
    config.reward.noise_fn_rate = 0.2
    scorer = _scorer(config, tasks.get("arithmetic"), tok)
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token", "noise"]
    assert scorer.terms[1].fn.func is scoring.noisy


# ----------------------------------------------------------------------------- label-free

def test_majority_votes_on_the_verifiers_normalised_answers():
    task = tasks.get("arithmetic")
    texts = ["1 #### 12", "2 ####  12 ", "#### 13", "no answer",    # group 1: 12 wins 2-1
             "#### 7", "#### 8", "x", "y"]                            # group 2: tie, first
    scores, metrics = scoring.majority(texts, task.answer_key, 4)
    np.testing.assert_array_equal(scores, [1, 1, 0, 0, 1, 0, 0, 0])
    assert metrics["reward/majority_share"] == pytest.approx((2 / 4 + 1 / 4) / 2)  # exact


def test_self_certainty_over_the_answer_span(tok):
    texts = ["13 #### 71", "no marker", "13 #### "]
    n = 12
    tokens = np.full((3, n), tok.pad_id, np.int32)
    mask = np.zeros((3, n), np.int32)
    for b, t in enumerate(texts):
        ids = tok.encode(t) + [tok.eos_id]
        tokens[b, :len(ids)], mask[b, :len(ids)] = ids, 1
    span = scoring.answer_span_mask(texts, tokens, mask, tok)
    # "13 #### 71": tokens 1 3 ' ' #### ' ' 7 1 -> the answer "71" is tokens 5, 6.
    np.testing.assert_array_equal(np.flatnonzero(span[0]), [5, 6])    # "71", not the space
    np.testing.assert_array_equal(np.flatnonzero(span[1]), np.arange(9))  # whole completion
    assert not span[2].any()                                              # blank answer
    span, logp = span[:2], np.log(np.full((2, n), 0.5, np.float32))
    logp[0, 5] = np.log(0.125)
    got = np.asarray(scoring.self_certainty(logp, span))
    # exp of the mean over n slots of float32 logs (NumPy's, a transcendental each): the mean
    # errs by γ_{n+1+8}·|mean| (|mean| ≤ log 4), which exp makes relative, plus its own γ_8.
    np.testing.assert_allclose(got, [np.exp((np.log(0.5) + np.log(0.125)) / 2), 0.5], rtol=(
        numerics.ref_atol(n + 1, np.log(4.0), 1) + numerics.ref_atol(0, 1.0, 1)))
    assert float(scoring.self_certainty(logp, np.zeros_like(span))[0]) == 0.0


def test_label_free_config_scores_on_the_host_and_still_measures(tok):
    config = arithmetic_config()
    config.reward.components = "majority"
    task = tasks.get("arithmetic")
    scorer = _scorer(config, task, tok)
    assert not scorer.traceable and [t.name for t in scorer.terms] == ["verifier", "majority"]
    ex = task.example(0, seed=0)
    fn, _ = scorer._pool_fn()
    out = fn(ex.solution, ex)      # No labelled reward, but the verdict.
    assert out["reward"] == 0.0 and out["correct"] == 1.0


def _scorer(config, task, tok):
    from rlvr_jax.train.rl_config import from_config
    return scoring.scorer_from_config(config, task, tok, rl=from_config(config))
