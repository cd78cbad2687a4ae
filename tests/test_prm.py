"""Learned process rewards (docs/process_rewards.md): the PRM's step ends on device land where
the oracle's step rewards do; its forms (sum / min / progress) against NumPy; the PRM and
implicit-PRM terms on a hand-made rollout; PRIME's online update; and one RL step with the
implicit PRM's steps in the process path (`rl.process_source = "learned"`)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import models, sampling, scoring, tasks
from rlvr_jax.scoring import implicit_prm, prm
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.state import create_train_state
from tests import numerics
from tests.test_process_step import completion_rows  # [B, N = 16] rows of texts.

N, TP = 16, 6
TEXTS = ["13 11 7 #### 713",   # three steps, right
         "13 12 7 #### 713",   # step 2 wrong, answer right
         "13 11",              # no marker: no steps
         "1 3 #### 713"]       # steps "1", "3"


def _rollout(tok, texts):
    """A hand-made Rollout of `texts` after a left-padded prompt "456+257=" of TP tokens."""
    tokens, mask = completion_rows(tok, texts)
    p = tok.encode("456+257=")[-TP:]
    pt = np.tile(np.asarray(p, np.int32), (len(texts), 1))
    return sampling.Rollout(prompt_tokens=jnp.asarray(pt),
                            prompt_mask=jnp.ones_like(jnp.asarray(pt)),
                            tokens=jnp.asarray(tokens), mask=jnp.asarray(mask),
                            logprobs=jnp.zeros(tokens.shape, jnp.float32),
                            lengths=jnp.asarray(mask.sum(1), jnp.int32),
                            finished=jnp.ones((len(texts),), bool))


def _ends(tok, tokens, mask):
    return np.asarray(prm.device_step_ends(
        jnp.asarray(tokens), jnp.asarray(mask), boundary_ids=(tok.encode(" ")[0],),
        marker_ids=(tok.encode("####")[0],)))


def test_device_step_ends_are_the_oracles_placement(tok):
    """On arithmetic's worked steps the device rule marks exactly the tokens the host
    oracle (`scoring.step_rewards_on_host`) puts its verdicts on; padding changes nothing."""
    task = tasks.get("arithmetic", ops=("add",), min_digits=3, max_digits=3)
    ex = task.make("add", 456, 257)
    tokens, mask = completion_rows(tok, TEXTS)
    texts = scoring.decode_completions(tok, tokens, mask)
    oracle, _ = scoring.step_rewards_on_host(texts, [ex] * len(texts), tokens, mask,
                                             step_scores=task.step_scores, tokenizer=tok)
    ends = _ends(tok, tokens, mask)
    np.testing.assert_array_equal(ends, np.asarray(oracle.ends))
    junk = np.where(mask > 0, tokens, tok.encode(" ")[0])  # Boundaries in the padding.
    np.testing.assert_array_equal(_ends(tok, junk, mask), ends)


def _np_values(p, p0, ends, form):
    """NumPy reference of `prm.step_values`, one row and one step at a time."""
    out = np.zeros_like(p)
    for b in range(p.shape[0]):
        ts = np.flatnonzero(ends[b])
        for i, t in enumerate(ts):
            if form == "sum":
                out[b, t] = p[b, t]
            elif form == "min":  # S_k − S_{k+1}: summed returns are the suffix minimum.
                s_k = p[b, ts[i:]].min()
                s_next = p[b, ts[i + 1:]].min() if i + 1 < len(ts) else 0.0
                out[b, t] = s_k - s_next
            else:
                out[b, t] = p[b, t] - (p[b, ts[i - 1]] if i else p0[b])
    return out


@pytest.mark.parametrize("form", prm.FORMS)
def test_step_values_match_numpy_jit_equals_eager_masked_change_nothing(form):
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(5, 12)).astype(np.float32)
    p0 = rng.uniform(size=(5,)).astype(np.float32)
    mask = np.arange(12)[None, :] < rng.integers(3, 13, size=(5, 1))
    ends = (rng.uniform(size=(5, 12)) < 0.4) & mask
    got = prm.step_values(jnp.asarray(p), jnp.asarray(p0), jnp.asarray(ends),
                          jnp.asarray(mask), form=form)
    # Differences and minima of float32 inputs in float32: one rounding each (2 ulp of 1).
    np.testing.assert_allclose(got, _np_values(p, p0, ends, form), rtol=0,
                               atol=2 * numerics.U32)
    jitted = jax.jit(lambda *a: prm.step_values(*a, form=form))(p, p0, ends, mask)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(got))
    noisy = np.where(ends, p, rng.uniform(size=p.shape).astype(np.float32))  # Not at ends.
    again = prm.step_values(jnp.asarray(noisy), jnp.asarray(p0), jnp.asarray(ends),
                            jnp.asarray(mask), form=form)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(got))
    if form != "progress":  # Only progress reads p_0.
        np.testing.assert_array_equal(np.asarray(prm.step_values(
            p, p0 + 1.0, ends, mask, form=form)), np.asarray(got))
    # Summed over a row: Σ p_k, min_k p_k, p_K − p_0.
    row = np.asarray(got).sum(1)
    for b in range(5):
        ts = np.flatnonzero(ends[b])
        if len(ts):
            want = {"sum": p[b, ts].sum(), "min": p[b, ts].min(),
                    "progress": p[b, ts[-1]] - p0[b]}[form]
            assert row[b] == pytest.approx(want, abs=len(ts) * 2 * numerics.U32)


@pytest.fixture(scope="module")
def small_prm(model_config):
    """A random 1-layer PRM on the policy's vocabulary, scores of order 1."""
    config = model_config.replace(n_layers=1)
    params = models.init_reward_params(config, jax.random.PRNGKey(7))
    params["score"]["kernel"] = params["score"]["kernel"] * 50.0
    return config, params


def test_prm_term_reads_the_prm_at_each_step_end(tok, small_prm):
    """The `prm` term's StepRewards are weight · form(σ(score)) at the device step ends, the
    scores those of `token_scores` on prompt ++ completion outside the term; summed into
    the reward without `with_steps`."""
    config, params = small_prm
    ro = _rollout(tok, TEXTS)
    ids = dict(boundary_ids=(tok.encode(" ")[0],), marker_ids=(tok.encode("####")[0],))
    pm = prm.ProcessRewardModel(config=config, weight=0.5, form="progress", microbatches=2,
                                **ids)
    verifier = scoring.Verifier(verify=None, answer_key=None,
                                token=lambda t, m, a: jnp.ones((t.shape[0],), jnp.float32))
    setup = scoring.Setup(verifier, reward_model=pm, components=("prm",))
    scorer = scoring.assemble(setup, {"prm": 0.5})
    task = tasks.get("arithmetic", ops=("add",), min_digits=3, max_digits=3)
    oracle, _ = scoring.step_rewards_on_host(   # The host stage's steps: the audit's oracle.
        TEXTS, [task.make("add", 456, 257)] * 4, np.asarray(ro.tokens), np.asarray(ro.mask),
        step_scores=task.step_scores, tokenizer=tok)
    x = scoring.Inputs(ro, answers=jnp.zeros((4,), jnp.int32), reward_params=params,
                       host_steps=oracle)
    both_ways = jax.jit(lambda x: (scorer.score_device(x, None, with_steps=True),
                                   scorer.score_device(x, None)[0]))  # One compilation.
    (rewards, metrics, _, steps), summed = both_ways(x)
    seq, att = ro.sequences()
    s = np.asarray(jax.nn.sigmoid(models.reward_model.token_scores(params, seq, att,
                                                                   config=config)[..., 0]))
    ends = _ends(tok, np.asarray(ro.tokens), np.asarray(ro.mask))
    want = 0.5 * _np_values(s[:, TP:], s[:, TP - 1], ends, "progress")
    # The same float32 forward in and outside the program, sliced differently (2 rows per
    # slice vs 4): XLA may reorder the reductions; σ' <= 1/4 and differences of two values.
    np.testing.assert_allclose(np.asarray(steps.values), want, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(steps.ends), ends)
    np.testing.assert_array_equal(np.asarray(rewards), 0.0)  # The verifier measures (w 0).
    np.testing.assert_allclose(np.asarray(summed), want.sum(1), rtol=0, atol=1e-5)
    assert float(metrics["prm/steps_per_completion"]) == pytest.approx(ends.sum() / 4)
    both = ends & np.asarray(oracle.ends)
    agree = ((s[:, TP:] >= 0.5) == (np.asarray(oracle.values) >= 0.5))[both].mean()
    assert float(metrics["prm/oracle_step_agreement"]) == pytest.approx(agree, abs=1e-6)


def test_prime_outcome_loss_is_numpy_bce_of_the_summed_rewards():
    """PRIME's loss: BCE(σ(Σ_t r_t), y) (NumPy, float64) and the sign accuracy."""
    rng = np.random.default_rng(2)
    r = (rng.normal(size=(6, 5)) * 0.3).astype(np.float32)
    y = np.array([1, 0, 1, 1, 0, 0], bool)
    loss, m = implicit_prm.outcome_loss(jnp.asarray(r), jnp.asarray(y))
    z = r.astype(np.float64).sum(1)
    # Five float32 adds and one softplus per row: a few ulp of values of order 1.
    assert float(loss) == pytest.approx(np.mean(np.logaddexp(0, z) - y * z), abs=1e-6)
    assert float(m["prime/accuracy"]) == pytest.approx(np.mean((z > 0) == y))


def test_rl_step_with_implicit_prm_in_the_process_path(tok, model_config, params):
    """One RL program (sample → score → update → PRIME's update): at the start φ = π_ref, so
    every implicit reward is exactly 0 and PRIME's loss exactly log 2; φ moves, π_ref does
    not; the implicit rewards enter the process path."""
    P, G = 2, 2
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    exs = task.generate(P, seed=0, split="train")
    tp = 8  # "12+34=" plus BOS fits.
    pt = np.full((P, tp), tok.pad_id, np.int32)
    pm = np.zeros((P, tp), np.int32)
    for i, ex in enumerate(exs):
        ids = [tok.bos_id] + tok.encode(ex.prompt)
        pt[i, tp - len(ids):], pm[i, tp - len(ids):] = ids, 1
    batch = {"prompt_tokens": pt, "prompt_mask": pm,
             "answers": np.asarray([ex.answer_value for ex in exs], np.int32)}
    sc = sampling.SamplingConfig(max_new_tokens=8, num_samples=G,
                                 stop_token_ids=(tok.eos_id,), pad_id=tok.pad_id)
    ip = implicit_prm.ImplicitPRM(config=model_config, beta=0.5, learning_rate=1e-3)
    rl = step_lib.RLConfig(num_prompts=P, advantage="reinforce_pp", process_weight=0.5,
                           process_source="learned")
    verifier = task.token_verifier(tok)
    setup = scoring.Setup(scoring.Verifier(verify=None, answer_key=None, token=verifier),
                          reward_model=ip, rl=rl, num_samples=G)
    scorer = scoring.assemble(setup, {"implicit_prm": 1.0})
    tx = optax.adam(1e-3)
    own = jax.tree.map(jnp.copy, params)  # The step donates its state.
    rp = implicit_prm.init_params(ip, params)
    state = create_train_state(own, tx, jax.random.PRNGKey(0), reward_params=rp)
    before = jax.tree.map(np.asarray, rp)
    rl_step = step_lib.make_rl_step(model_config, sc, rl, tx, scorer=scorer)
    state, metrics = rl_step(state, batch)
    for k in ("prime/loss", "prime/accuracy", "prime/token_reward", "advantages/mean"):
        assert np.isfinite(float(metrics[k])), k
    assert float(metrics["prime/token_reward"]) == 0.0  # Same params, same log-probs.
    assert float(metrics["prime/loss"]) == pytest.approx(np.log(2.0), abs=1e-6)  # BCE at z = 0.
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: np.abs(np.asarray(a) - b).max(),
                                         state.reward_params["phi"], before["phi"]))
    assert max(moved) > 0
    same = jax.tree.leaves(jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), b),
                                        state.reward_params["ref"], before["ref"]))
    assert all(same)


def test_step_auroc_and_agreement_match_brute_force():
    """AUROC = P(good step's score > bad step's) + 1/2 P(tie), over all pairs."""
    from rlvr_jax.train import prm_training as pt
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 5, size=40) / 4.0  # Many ties.
    labels = rng.uniform(size=40) < 0.4
    pos, neg = scores[labels], scores[~labels]
    want = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    assert pt.step_auroc(scores, labels) == pytest.approx(want, abs=1e-12)
    assert np.isnan(pt.step_auroc(scores, np.ones(40)))
    ends = np.zeros((4, 10), bool)
    ends[:, :10] = True
    a = pt.agreement(scores.reshape(4, 10), labels.reshape(4, 10).astype(float), ends)
    assert a["steps"] == 40 and a["accuracy"] == pytest.approx(np.mean((scores >= 0.5) == labels))


def test_a_learned_scoring_model_is_checkpointed(model_config):
    """The implicit PRM's φ and its optimizer state (in reward_params) are saved with the
    run, so a resumed run continues them; a frozen scoring model is read again instead. (By
    hand, the resumed implicit-PRM run's metrics.jsonl equals the uninterrupted one's; without
    φ in the checkpoint it differs from the first step after the resume: docs/process_rewards.md.)"""
    from types import SimpleNamespace

    from rlvr_jax.train import resume
    learned = SimpleNamespace(reward_model=implicit_prm.ImplicitPRM(config=model_config))
    assert resume.frozen_fields(learned) == ("teacher_params",)
    assert resume.frozen_fields(SimpleNamespace(reward_model=None)) == ("reward_params",
                                                                       "teacher_params")
