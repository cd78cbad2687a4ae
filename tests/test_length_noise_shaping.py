"""Length shaping terms (`cosine_length`: Yeo et al. 2025; `length_penalty`: Kimi k1.5), the
forward noise correction, and the length-by-correctness rollout metrics: values against the
NumPy references (tests/reference/shaping_ref.py), jit equals eager, masked tokens change
nothing, configuration and its one-line errors, and the forward correction's expectation
properties."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling, scoring, tasks
from rlvr_jax.scoring import noise, shaping
from rlvr_jax.train.config import arithmetic_config
from rlvr_jax.train.metrics import length_by_correctness
from rlvr_jax.train.rl_config import from_config as rl_from_config
from tests import numerics
from tests.reference import shaping_ref

N = 16  # max_new_tokens of the rollouts below.


def _rollout(lengths, n=N, seed=0):
    """A rollout of completions of the given lengths (tokens random, pad after the end)."""
    lengths = np.asarray(lengths, np.int32)
    b = len(lengths)
    rng = np.random.default_rng(seed)
    mask = (np.arange(n)[None, :] < lengths[:, None]).astype(np.int32)
    tokens = np.where(mask > 0, rng.integers(4, 100, (b, n)), 0).astype(np.int32)
    return sampling.Rollout(tokens=jnp.asarray(tokens), mask=jnp.asarray(mask),
                            logprobs=jnp.zeros((b, n)), lengths=jnp.asarray(lengths),
                            finished=jnp.asarray(lengths < n),
                            prompt_tokens=jnp.asarray(tokens[:, :2]),
                            prompt_mask=jnp.ones((b, 2), jnp.int32))


def _x(lengths, verdicts, group_size=1, seed=0):
    return scoring.Inputs(_rollout(lengths, seed=seed),
                          verdicts=jnp.asarray(verdicts, jnp.float32), group_size=group_size)


def _setup(**reward_fields):
    reward = arithmetic_config().reward
    for k, v in reward_fields.items():
        setattr(reward, k, v)
    return scoring.Setup(None, reward=reward, max_new_tokens=N)


# Every length 0..N, both kinds: [2(N+1)].
LENGTHS = np.concatenate([np.arange(N + 1), np.arange(N + 1)]).astype(np.int32)
VERDICTS = np.concatenate([np.ones(N + 1), np.zeros(N + 1)]).astype(np.float32)


# ----------------------------------------------------------------------------- cosine_length

@pytest.mark.parametrize("max_len", [0, 12])
def test_cosine_length_matches_the_papers_formula(max_len):
    term = shaping.cosine_length_term(_setup(cosine_max_len=max_len), 0.5)
    out, metrics = term(jnp.zeros(len(LENGTHS)), _x(LENGTHS, VERDICTS))
    want = shaping_ref.cosine_length_np(LENGTHS, VERDICTS >= 1, max_len=max_len or N)
    # cos of a float32 argument t·(π/T) (two roundings, |arg| ≤ π: ≤ 2π·u absolute on the
    # cosine) and one transcendental, then ½(1 + ·) and rL + (r0 − rL)·wave: a handful of
    # roundings on terms of size ≤ |r0 − rL| + |rL| ≤ 20 (the paper's values); chain 16 covers
    # both with margin. Then the weight 0.5 (exact).
    atol = numerics.ref_atol(16, 20.0, transcendentals=1)
    np.testing.assert_allclose(np.asarray(out), 0.5 * want, rtol=0, atol=atol)
    t = max_len or N
    assert want[0] == 2.0 and want[N + 1] == -10.0          # Length 0: r0 correct / wrong.
    assert want[t] == want[N + 1 + t] == -10.0              # At L_max: the exceed value.
    assert abs(want[t // 2] - 1.5) < 1e-12 if t % 2 == 0 else True  # Midway: (r0 + rL) / 2.
    assert float(metrics["reward/cosine_length"]) == pytest.approx(np.mean(want), abs=atol)
    exceeded = np.mean(LENGTHS >= t)
    assert float(metrics["reward/cosine_length_exceeded"]) == pytest.approx(exceeded)


def test_cosine_length_custom_values_and_monotone():
    fields = dict(cosine_min_value_correct=0.5, cosine_max_value_correct=1.0,
                  cosine_min_value_wrong=-1.0, cosine_max_value_wrong=-0.5,
                  cosine_exceed_length=-2.0)
    term = shaping.cosine_length_term(_setup(**fields), 1.0)
    out = np.asarray(term(jnp.zeros(len(LENGTHS)), _x(LENGTHS, VERDICTS))[0])
    values = {k[len("cosine_"):]: v for k, v in fields.items()}
    want = shaping_ref.cosine_length_np(LENGTHS, VERDICTS >= 1, max_len=N, **values)
    np.testing.assert_allclose(out, want, rtol=0, atol=numerics.ref_atol(16, 2.0, 1))
    correct, wrong = out[:N], out[N + 1:2 * N + 1]          # Below L_max.
    assert (np.diff(correct) <= 0).all() and (np.diff(wrong) >= 0).all()
    assert correct.min() > wrong.max()                      # Right beats wrong at any length.


# ----------------------------------------------------------------------------- length_penalty

@pytest.mark.parametrize("incorrect", [False, True])
def test_length_penalty_matches_kimi(incorrect):
    rng = np.random.default_rng(0)
    g = 4
    lengths = rng.integers(1, N + 1, 8 * g).astype(np.int32)
    lengths[:g] = 7                                          # One group of one length: 0.
    verdicts = (rng.random(8 * g) < 0.5).astype(np.float32)
    term = shaping.length_penalty_term(_setup(length_penalty_incorrect=incorrect), 0.25)
    out, metrics = term(jnp.ones(8 * g), _x(lengths, verdicts, group_size=g))
    want = shaping_ref.length_penalty_np(lengths, verdicts >= 1, g, incorrect=incorrect)
    # (L − min) and max − min are exact small integers; one division, one subtraction from
    # 0.5, min(0, ·), the weight 0.25 (exact) and + 1: ≤ 4 roundings of values ≤ 1.5.
    atol = numerics.ref_atol(4, 1.5)
    np.testing.assert_allclose(np.asarray(out), 1.0 + 0.25 * want, rtol=0, atol=atol)
    assert (want[:g] == 0).all()
    if not incorrect:
        assert (want[verdicts < 1] == 0).all()               # Correct answers only.
    assert float(metrics["reward/length_penalty"]) == pytest.approx(np.mean(want), abs=atol)


# ----------------------------------------------------------------------------- both terms

def _terms():
    return [shaping.cosine_length_term(_setup(), 1.0),
            shaping.length_penalty_term(_setup(length_penalty_incorrect=True), 1.0)]


def test_terms_jit_equal_eager_and_ignore_masked_tokens():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, N + 1, 16).astype(np.int32)
    verdicts = (rng.random(16) < 0.5).astype(np.float32)
    for term in _terms():
        x, other = _x(lengths, verdicts, 4), _x(lengths, verdicts, 4, seed=9)
        # Change every token the mask hides (and the ones it keeps: only lengths count).
        hidden = jnp.where(x.rollout.mask > 0, x.rollout.tokens, 77)
        masked = x.replace(rollout=x.rollout.replace(tokens=hidden))
        eager, _ = term(jnp.zeros(16), x)
        jitted, _ = jax.jit(term)(jnp.zeros(16), x)
        # The same float32 operations compiled or dispatched one by one: XLA may fuse them
        # differently (a few roundings apart), ≤ 2·ref_atol of the cosine chain.
        atol = 2 * numerics.ref_atol(16, 20.0, transcendentals=1)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=0, atol=atol)
        np.testing.assert_array_equal(np.asarray(term(jnp.zeros(16), masked)[0]),
                                      np.asarray(eager))
        np.testing.assert_array_equal(np.asarray(term(jnp.zeros(16), other)[0]),
                                      np.asarray(eager))


def test_terms_compose_in_the_scorer(tok):
    """`token,cosine_length,length_penalty` from the config: one traceable scorer whose
    reward is w_token·verdict + w_cos·R_cos + w_len·λ (jitted, as in the RL step)."""
    config = arithmetic_config()
    config.sampling.max_new_tokens = N
    config.reward.components = "token,cosine_length,length_penalty"
    config.reward.weights = "1,0.5,0.25"
    scorer = scoring.scorer_from_config(config, tasks.get("arithmetic"), tok,
                                        rl=rl_from_config(config))
    assert scorer.traceable
    assert [t.name for t in scorer.device_terms] == ["token", "cosine_length", "length_penalty"]
    g = config.rl.num_samples
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, N + 1, 2 * g).astype(np.int32)
    verdicts = (rng.random(2 * g) < 0.5).astype(np.float32)
    x = _x(lengths, verdicts, g)

    @jax.jit
    def reward(x):                                          # The device terms in order.
        r = jnp.zeros(2 * g)
        for term in scorer.device_terms:
            r = term.fn(r, x)[0]
        return r
    want = (verdicts + 0.5 * shaping_ref.cosine_length_np(lengths, verdicts >= 1, max_len=N)
            + 0.25 * shaping_ref.length_penalty_np(lengths, verdicts >= 1, g))
    # The cosine chain (≤ 16 roundings and one transcendental, terms ≤ 20), λ's (≤ 4) and
    # the three additions: chain 24 on terms ≤ 20.
    np.testing.assert_allclose(np.asarray(reward(x)), want, rtol=0,
                               atol=numerics.ref_atol(24, 20.0, transcendentals=1))


def test_terms_read_the_host_verdict_on_the_split_path(tok):
    """Beside a host correctness component (`task,cosine_length` weights 0,1) the term runs
    after the seam, on the host stage's verdicts: the reward is R_cos alone."""
    config = arithmetic_config()
    config.sampling.max_new_tokens = N
    config.reward.components, config.reward.weights = "task,cosine_length", "0,1"
    scorer = scoring.scorer_from_config(config, tasks.get("arithmetic"), tok,
                                        rl=rl_from_config(config))
    assert not scorer.traceable and [t.name for t in scorer.device_terms] == ["cosine_length"]
    lengths = np.array([2, 9, 16, 5], np.int32)
    verdicts = jnp.asarray([1.0, 0.0, 1.0, 0.0])
    host = scoring.HostScores(jnp.zeros(4), verdicts)        # task at weight 0.
    rewards, _, correct = jax.jit(scorer.score_device)(scoring.Inputs(_rollout(lengths)), host)
    want = shaping_ref.cosine_length_np(lengths, np.asarray(correct), max_len=N)
    np.testing.assert_allclose(np.asarray(rewards), want, rtol=0,
                               atol=numerics.ref_atol(16, 20.0, transcendentals=1))


@pytest.mark.parametrize("fields,message", [
    (dict(cosine_max_len=-1), "reward.cosine_max_len: must be >= 0"),
    (dict(cosine_min_value_correct=3.0), "reward.cosine_min_value_correct: must be <="),
    (dict(cosine_max_value_wrong=-20.0), "reward.cosine_min_value_wrong: must be <="),
    (dict(components="length_penalty"), "reward.components: 'length_penalty' alone is no "),
    (dict(correction_kind="sideways"), "reward.correction_kind: must be one of"),
])
def test_bad_shaping_config_names_the_field(fields, message):
    reward = arithmetic_config().reward
    for k, v in fields.items():
        setattr(reward, k, v)
    with pytest.raises(ValueError) as err:
        scoring.check_reward_config(reward)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_cosine_max_len_beyond_the_budget_is_an_error():
    with pytest.raises(ValueError, match=r"^reward.cosine_max_len: must be in \[1, "):
        shaping.cosine_length_term(_setup(cosine_max_len=N + 1), 1.0)


# ----------------------------------------------------------------------------- forward correction

@pytest.mark.parametrize("fn_rate,fp_rate,g", [(0.2, 0.1, 4), (0.3, 0.0, 8), (0.1, 0.25, 8)])
def test_forward_correction_matches_reference(fn_rate, fp_rate, g):
    rng = np.random.default_rng(3)
    # Weighted rewards (a correctness unit plus a 0.5 bonus) and whole groups of 0 / 1.
    rewards = ((rng.random(16 * g) < 0.6) + 0.5 * (rng.random(16 * g) < 0.5)).astype(np.float32)
    rewards[:g], rewards[g:2 * g] = 1.0, 0.0
    x = scoring.Inputs(_rollout(np.full(16 * g, 4)), group_size=g)
    out, metrics = noise.forward_corrected(jnp.asarray(rewards), x, fn_rate=fn_rate,
                                           fp_rate=fp_rate)
    want = shaping_ref.forward_corrected_np(rewards, g, fn_rate=fn_rate, fp_rate=fp_rate)
    # The group mean (g exact additions, one division), p̂ (a subtraction, a division, a
    # clip), the weights (four products, a sum, a division) and r − b + w: ≤ 16 roundings
    # of values ≤ 1.5.
    np.testing.assert_allclose(np.asarray(out), want, rtol=0, atol=numerics.ref_atol(16, 1.5))
    post = np.asarray(out) - (rewards - (rewards >= 1))
    assert ((post >= 0) & (post <= 1)).all()                 # Bounded, unlike backward.
    jitted = jax.jit(lambda r: noise.forward_corrected(r, x, fn_rate=fn_rate,
                                                       fp_rate=fp_rate)[0])(jnp.asarray(rewards))
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(out), rtol=0,
                               atol=2 * numerics.ref_atol(16, 1.5))
    assert float(metrics["reward/corrected_mean"]) == pytest.approx(float(np.mean(want)),
                                                                     abs=1e-5)


def test_forward_weights_point_along_the_clean_gradient():
    """Exact expectations on a bandit (K arms, softmax policy, binary clean rewards): the
    forward-corrected policy gradient E[w(r̂) ∇log π] is (1 − ρ0 − ρ1)(w1 − w0) > 0 times
    the clean one, E[w(r̂)] = p (the tower rule), and the backward one equals the clean one."""
    rng = np.random.default_rng(4)
    for fn_rate, fp_rate in [(0.2, 0.1), (0.4, 0.0), (0.05, 0.3)]:
        logits = rng.normal(size=6)
        pi = np.exp(logits) / np.exp(logits).sum()
        clean = np.array([1, 0, 1, 0, 0, 1], np.float64)
        p = float(pi @ clean)
        score = np.eye(6) - pi[None, :]                       # ∇_logits log π(k), row k
        grad = (pi * clean) @ score                           # ∇J
        w0, w1 = noise.forward_weights(np.float64(p), fn_rate=fn_rate, fp_rate=fp_rate)
        # E[w | clean = 1], E[w | clean = 0] under the channel.
        e_w = np.where(clean > 0, (1 - fn_rate) * w1 + fn_rate * w0,
                       fp_rate * w1 + (1 - fp_rate) * w0)
        forward = (pi * e_w) @ score
        scale = (1 - fn_rate - fp_rate) * (w1 - w0)
        assert scale > 0
        np.testing.assert_allclose(forward, scale * grad, rtol=1e-12, atol=1e-15)  # float64
        assert float(pi @ e_w) == pytest.approx(p, rel=1e-12)
        e_backward = np.where(clean > 0, (1 - fn_rate) * 1 + fn_rate * 0, fp_rate)
        e_backward = (e_backward - fp_rate) / (1 - fn_rate - fp_rate)
        np.testing.assert_allclose((pi * e_backward) @ score, grad, rtol=1e-12, atol=1e-15)


def test_forward_group_mean_is_the_unbiased_estimate():
    """Within a group the forward rewards average to p̂ = (mean r̂ − ρ1) / (1 − ρ0 − ρ1),
    the backward correction's group mean (unbiased for the clean rate p): exactly when p̂ is
    not clipped, and so, over injected noise, close to the clean p (binomial bounds)."""
    g, fn_rate, fp_rate = 2000, 0.2, 0.1
    truth_rates = np.array([0.3, 0.5, 0.7, 0.9])
    truth = np.concatenate([(np.arange(g) < p * g) for p in truth_rates]).astype(np.float32)
    x = scoring.Inputs(_rollout(np.full(len(truth), 4)), group_size=g)
    observed, _ = scoring.noisy(jnp.asarray(truth), x, fn_rate=fn_rate, fp_rate=fp_rate,
                                seed=3)
    fwd, _ = noise.forward_corrected(observed, x, fn_rate=fn_rate, fp_rate=fp_rate)
    bwd, _ = noise.backward_corrected(observed, x, fn_rate=fn_rate, fp_rate=fp_rate)
    fwd_means = np.asarray(fwd).reshape(-1, g).mean(axis=1)
    bwd_means = np.asarray(bwd).reshape(-1, g).mean(axis=1)
    # Two float32 group sums of g terms ≤ 1/(1 − ρ0 − ρ1) each (means of size ≤ 1.5).
    np.testing.assert_allclose(fwd_means, bwd_means, rtol=0, atol=2 * numerics.gamma(g + 16) * 1.5)
    # The observed rate has sd ≤ 0.5/√g; p̂ divides it by 1 − ρ0 − ρ1 = 0.7: 5 sd.
    assert np.all(np.abs(fwd_means - truth_rates) < 5 * 0.5 / np.sqrt(g) / 0.7)
    assert np.all(np.abs(np.asarray(observed).reshape(-1, g).mean(axis=1) - truth_rates)[1:]
                  > 0.03)                                     # Uncorrected: biased.


def test_forward_correction_from_config(tok):
    config = arithmetic_config()
    config.reward.noise_fn_rate = 0.2
    config.reward.correction_fn_rate = 0.2
    config.reward.correction_kind = "forward"
    scorer = scoring.scorer_from_config(config, tasks.get("arithmetic"), tok,
                                        rl=rl_from_config(config))
    assert [t.name for t in scorer.device_terms] == ["token", "noise", "correction"]
    assert scorer.device_terms[2].fn.func is noise.forward_corrected
    x = scoring.Inputs(_rollout(np.full(4, 3)), group_size=1)   # G = 1: the identity.
    r = jnp.asarray([1.0, 0.0, 1.5, 0.5])
    np.testing.assert_array_equal(np.asarray(noise.forward_corrected(
        r, x, fn_rate=0.2, fp_rate=0.1)[0]), np.asarray(r))


# ----------------------------------------------------------------------------- metrics

def test_length_by_correctness():
    lengths = np.array([3, 5, 8, 16, 1, 2], np.int32)
    correct = np.array([True, False, True, False, False, False])
    rollout = _rollout(lengths)
    m = jax.jit(length_by_correctness)(rollout, jnp.asarray(correct))
    want = shaping_ref.length_by_correctness_np(np.asarray(rollout.mask), correct)
    # Integer sums (exact in float32) and one division each: one rounding.
    assert float(m["rollout/response_length_correct"]) == pytest.approx(want[0], rel=1e-6)
    assert float(m["rollout/response_length_incorrect"]) == pytest.approx(want[1], rel=1e-6)
    none = length_by_correctness(rollout, jnp.zeros(6, bool))     # No correct completion: 0.
    assert float(none["rollout/response_length_correct"]) == 0.0
    assert float(none["rollout/response_length_incorrect"]) == pytest.approx(lengths.mean())
