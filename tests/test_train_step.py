"""Tests of the compiled RL update (`rlvr_jax.train.step`) on the tiny model.

Most tests call `step.update` directly on one hand-built rollout, so sampling randomness is
out of the picture, with an optimizer that records the gradient it is given in its state
before the trainer's AdamW (`TX`): two updates are compared through their exact gradients as
well as their parameters (Adam's first step is ≈ lr·sign(g), which alone would hide a wrong
normaliser).

Shapes: P' = 4 prompts, G = 2 samples, B' = 8 rows, Tp = 10 prompt tokens, N = 8 new tokens.
Compile time dominates, so every static configuration is compiled once per module.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import sampling, scoring, tasks
from rlvr_jax.data import datasets
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import objective
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.sft import make_sft_step
from rlvr_jax.train.state import create_train_state, make_optimizer

from tests import numerics

P, G, TP, N = 4, 2, 10, 8
# Completion lengths [B']: different per row and per micro-batch, so that token-mean,
# seq-mean-token-mean and a per-micro-batch normaliser would all give different results.
LENGTHS = np.array([8, 3, 5, 1, 8, 6, 2, 7], np.int32)
# Rewards [P', G]: groups 0, 2 have variance; group 1 is all-correct, group 3 all-wrong.
REWARDS = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]], np.float32)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def prompts(tok):
    """A PromptBatch of P arithmetic prompts and its [P, Tp] left-padding mask."""
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    loader = datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                   max_prompt_len=TP)
    pb = next(loader)
    mask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    return pb, mask


@pytest.fixture(scope="module")
def rollout(tok, prompts):
    """A hand-built Rollout of B' = P'·G rows with the completion lengths LENGTHS."""
    pb, pmask = prompts
    rng = np.random.default_rng(0)
    valid = np.arange(N)[None, :] < LENGTHS[:, None]
    tokens = rng.integers(4, tok.vocab_size, size=(P * G, N)).astype(np.int32)
    finished = LENGTHS < N
    tokens[np.arange(P * G), np.minimum(LENGTHS, N) - 1] = np.where(
        finished, tok.eos_id, tokens[np.arange(P * G), np.minimum(LENGTHS, N) - 1])
    tokens = np.where(valid, tokens, tok.pad_id)
    return sampling.Rollout(
        tokens=jnp.asarray(tokens), mask=jnp.asarray(valid.astype(np.int32)),
        logprobs=jnp.asarray(np.where(valid, -np.log(tok.vocab_size), 0.0).astype(np.float32)),
        lengths=jnp.asarray(LENGTHS), finished=jnp.asarray(finished),
        prompt_tokens=jnp.asarray(np.repeat(pb.tokens, G, axis=0)),
        prompt_mask=jnp.asarray(np.repeat(pmask, G, axis=0)))


def _capture_grads():
    """An optax transformation that passes updates through and stores them in its state."""
    def init(params):
        return jax.tree.map(jnp.zeros_like, params)

    def update(updates, state, params=None):
        del state, params
        return updates, updates

    return optax.GradientTransformation(init, update)


# opt_state[0] = the last gradient; then the trainer's AdamW (weight decay 0, clip at 1).
# Adam's eps is raised from 1e-8 so that a near-zero gradient entry's last-bit difference
# (float summation order) moves its parameter less (see _assert_same_adam_step).
LR, ADAM_EPS, MAX_GRAD_NORM = 1e-2, 1e-3, 1.0
TX = optax.chain(_capture_grads(), make_optimizer(learning_rate=LR, weight_decay=0.0,
                                                  max_grad_norm=MAX_GRAD_NORM, eps=ADAM_EPS))


def _fresh_state(params, tx=TX, seed=1):
    return create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(seed))


def _sampling_config(tok):
    return sampling.SamplingConfig(max_new_tokens=N, num_samples=G,
                                   stop_token_ids=(tok.eos_id,), pad_id=tok.pad_id)


def _update_program(tok, model_config, rl):
    """`make_update_fn`: jitted `(state, rollout, rewards [B']) -> (state, metrics)`."""
    return step_lib.make_update_fn(model_config, _sampling_config(tok), rl, TX)


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _assert_grads_close(a, b, model_config):
    """The same gradient summed in two orders (micro-batches, programs): within the float32
    reordering bound of the model's backward pass over the B'·N completion tokens."""
    numerics.assert_trees_reorder_close(
        a, b, numerics.gradient_chain(model_config, TP + N, P * G * N))


def _assert_same_metrics(got, want, model_config, grads):
    """train/loss and train/grad_norm of two updates that differ only in summation order: the
    loss within the reordering bound of the forward pass and its token sum (its terms are
    |A|·r ≤ 2: |A| ≤ 1 with G = 2 group-normalised, r clipped to ≤ 1 + eps_high), the norm
    within what the gradients' bound allows (`grads`: one side's gradient)."""
    chain = numerics.forward_chain(model_config, TP + N) + P * G * N
    np.testing.assert_allclose(got["train/loss"], want["train/loss"], rtol=0,
                               atol=numerics.reorder_atol(chain, 2.0))
    np.testing.assert_allclose(got["train/grad_norm"], want["train/grad_norm"], rtol=0,
                               atol=numerics.reorder_norm_atol(
                                   grads, numerics.gradient_chain(model_config, TP + N,
                                                                  P * G * N)))


def _assert_same_adam_step(a, b):
    """Parameters of two states after one AdamW step from the same parameters, each with its
    own recorded gradient: within Adam's per-entry first-step bound (tests/numerics.py)."""
    g_a, rel_err = numerics.clip_by_global_norm(_grads(a), MAX_GRAD_NORM)
    g_b, _ = numerics.clip_by_global_norm(_grads(b), MAX_GRAD_NORM)
    numerics.assert_adam_first_step_close(a.params, b.params, g_a, g_b, lr=LR, eps=ADAM_EPS,
                                          rel_err=rel_err)


def _norm(tree):
    return float(optax.global_norm(tree))


def _grads(state):
    return state.opt_state[0]


# ----------------------------------------------------------------------------- micro-batching

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


@pytest.fixture(scope="module")
def update_fns(tok, model_config):
    """{(aggregation, microbatches): update_fn}, epochs = minibatches = 1, P groups."""
    return {(agg, micro): _update_program(
        tok, model_config, step_lib.RLConfig(num_prompts=P, aggregation=agg, microbatches=micro))
        for agg in AGGREGATIONS for micro in (1, 4)}


@pytest.fixture(scope="module")
def micro_results(update_fns, params, rollout):
    """{(aggregation, microbatches): (state, metrics)} after one update on REWARDS."""
    rewards = jnp.asarray(REWARDS.reshape(-1))
    out = {}
    for key, fn in update_fns.items():
        state, metrics = fn(_fresh_state(params), rollout, rewards)
        out[key] = (state, {k: float(v) for k, v in metrics.items()})
    return out


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_microbatches_give_the_same_update(micro_results, params, model_config, aggregation):
    one, m_one = micro_results[aggregation, 1]
    four, m_four = micro_results[aggregation, 4]
    assert _norm(_grads(one)) > 1e-4  # A real update, not 0 == 0.
    _assert_grads_close(_grads(four), _grads(one), model_config)
    _assert_same_adam_step(four, one)  # Parameters after the AdamW step.
    assert max(float(np.max(np.abs(a - b)))
               for a, b in zip(_leaves(one.params), _leaves(params))) > LR / 10
    _assert_same_metrics(m_four, m_one, model_config, _grads(one))
    assert int(four.step) == int(one.step) == 1


def test_aggregations_really_differ(micro_results):
    """The rows have different lengths, so the three normalisers give different gradients
    (otherwise the micro-batch test above could not tell them apart)."""
    grads = [_leaves(_grads(micro_results[agg, 1][0])) for agg in AGGREGATIONS]
    for i in range(len(grads)):
        for j in range(i + 1, len(grads)):
            assert max(float(np.max(np.abs(a - b))) for a, b in zip(grads[i], grads[j])) > 1e-5


# ----------------------------------------------------------------------------- ratios

@pytest.mark.parametrize("micro", (1, 4))
def test_on_policy_ratio_is_exactly_one(micro_results, micro):
    """epochs=1, minibatches=1: old log-prob = stop_gradient(logp), so ρ ≡ 1 and nothing clips."""
    for agg in AGGREGATIONS:
        _, m = micro_results[agg, micro]
        assert m["loss/ratio_mean"] == 1.0
        assert m["loss/ratio_min"] == 1.0 and m["loss/ratio_max"] == 1.0
        assert m["loss/clip_frac_low"] == 0.0 and m["loss/clip_frac_high"] == 0.0


@pytest.fixture(scope="module")
def two_minibatch_update(model_config):
    """epochs=1, minibatches=2, SGD with a traced learning rate (one compile for any lr)."""
    rl = step_lib.RLConfig(num_prompts=P, minibatches=2, aggregation="token-mean")

    @jax.jit
    def fn(state, rollout, rewards, rng, lr):
        return step_lib.update(state, rollout, rewards, rng, num_samples=G,
                               model_config=model_config, rl=rl, tx=optax.sgd(lr),
                               temperature=1.0)
    return fn


def test_second_minibatch_is_off_policy(two_minibatch_update, params, rollout):
    rewards = jnp.asarray(REWARDS.reshape(-1))
    results = {}
    for lr in (0.0, 2.0):
        state = _fresh_state(params, optax.sgd(1.0))
        new_state, m = two_minibatch_update(state, rollout, rewards, jax.random.PRNGKey(3),
                                            jnp.float32(lr))
        results[lr] = {k: float(v) for k, v in m.items()}
        assert int(new_state.step) == 2
    # Without a parameter change both minibatches are on-policy (old log-probs are
    # recomputed by the trainer, possibly in another batch layout: allow float noise).
    frozen = results[0.0]
    assert abs(frozen["loss/ratio_min"] - 1.0) < 1e-5
    assert abs(frozen["loss/ratio_max"] - 1.0) < 1e-5
    # After the first minibatch's update the second one sees ratios != 1 (the metrics are
    # means over the two minibatches, the first of which has ratio ≡ 1).
    moved = results[2.0]
    assert moved["loss/ratio_max"] - moved["loss/ratio_min"] > 1e-3, moved
    assert moved["train/update_norm"] > 0.0


# ----------------------------------------------------------------------------- dynamic sampling

_RECORDED = []


def _recording_policy_loss(original):
    """Wraps `objective.policy_objective` to copy each micro-batch's mask and advantages out."""
    def wrapped(params, mb, counts, **kwargs):
        jax.debug.callback(lambda m, a: _RECORDED.append((np.asarray(m), np.asarray(a))),
                           mb.mask, mb.advantages)
        return original(params, mb, counts, **kwargs)
    return wrapped


DYN_P = 3  # Groups that enter the update, out of P' = 4 sampled.


@pytest.fixture(scope="module")
def dynamic(tok, model_config, params, rollout):
    """The dynamic-sampling update_fn (traced with the recording policy loss) and its first run.

    REWARDS has 2 informative groups (0 and 2) out of 4, fewer than DYN_P = 3.
    """
    rl = step_lib.RLConfig(num_prompts=DYN_P, dynamic_sampling=True, aggregation="token-mean")
    fn = _update_program(tok, model_config, rl)
    _RECORDED.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(objective, "policy_objective",
                   _recording_policy_loss(objective.policy_objective))
        state, metrics = fn(_fresh_state(params), rollout, jnp.asarray(REWARDS.reshape(-1)))
        jax.block_until_ready(state)
        jax.effects_barrier()
    recorded = list(_RECORDED)
    _RECORDED.clear()
    return fn, state, {k: float(v) for k, v in metrics.items()}, recorded


def test_select_groups_puts_informative_groups_first(rollout):
    rl = step_lib.RLConfig(num_prompts=DYN_P, dynamic_sampling=True)
    groups, metrics = step_lib.select_update_groups(rollout, jnp.asarray(REWARDS.reshape(-1)),
                                                    G, rl)
    sel, r, valid = groups.rollout, groups.rewards, groups.valid
    r = np.asarray(r)
    np.testing.assert_array_equal(np.asarray(valid), [True, True, False])
    # Groups 0 and 2 (in order), then a zero-variance filler flagged invalid.
    np.testing.assert_array_equal(r[:2], REWARDS[[0, 2]])
    np.testing.assert_array_equal(np.asarray(valid), np.ptp(r, axis=1) > 0)
    np.testing.assert_array_equal(np.asarray(sel.tokens)[:4],
                                  np.asarray(rollout.tokens)[[0, 1, 4, 5]])
    assert float(metrics["rollout/kept_group_fraction"]) == 0.5


def test_dynamic_sampling_masks_invalid_groups_out_of_the_loss(dynamic):
    _, _, metrics, recorded = dynamic
    assert len(recorded) == 1, "expected one micro-batch of one minibatch"
    mask, adv = recorded[0]
    assert mask.shape == (DYN_P * G, N)
    # Rows 4-5 are the invalid filler group: no token enters the loss, zero advantage.
    assert mask[4:].sum() == 0 and np.all(adv[4:] == 0)
    np.testing.assert_array_equal(mask[:4].sum(axis=1), LENGTHS[[0, 1, 4, 5]])
    assert np.all(adv[:4] != 0)
    assert metrics["rollout/num_valid_groups"] == 2
    assert metrics["rollout/zero_variance_fraction"] == 0.0
    assert all(np.isfinite(v) for v in metrics.values()), metrics


def test_dynamic_sampling_gradient_equals_valid_groups_only(dynamic, update_fns, params,
                                                            rollout, model_config):
    """The same gradient as a plain (non-dynamic) update in which only groups 0 and 2 have
    tokens: the dropped groups' rows are emptied, so they add no token, no sequence and no
    advantage to any normaliser. (This reuses the compiled P = 4 token-mean program instead
    of compiling a P = 2 one.)"""
    _, state, _, _ = dynamic
    keep_rows = np.isin(np.arange(P * G) // G, [0, 2])
    only_valid = rollout.replace(
        mask=rollout.mask * jnp.asarray(keep_rows[:, None].astype(np.int32)),
        lengths=jnp.where(jnp.asarray(keep_rows), rollout.lengths, 0))
    ref_state, ref_metrics = update_fns["token-mean", 1](
        _fresh_state(params), only_valid, jnp.asarray(REWARDS.reshape(-1)))
    assert _norm(_grads(ref_state)) > 1e-4
    _assert_grads_close(_grads(state), _grads(ref_state), model_config)
    _assert_same_adam_step(state, ref_state)


@pytest.mark.parametrize("rewards", [
    [[1.0, 1.0], [0.0, 0.0], [0.0, 1.0], [1.0, 1.0]],   # One informative group < DYN_P.
    [[1.0, 1.0], [0.0, 0.0], [0.7, 0.7], [0.0, 0.0]],   # None: every group is dropped.
], ids=["one-valid", "none-valid"])
def test_dynamic_sampling_with_too_few_valid_groups_stays_finite(dynamic, params, rollout,
                                                                 rewards):
    fn = dynamic[0]
    r = np.asarray(rewards, np.float32)
    state, metrics = fn(_fresh_state(params), rollout, jnp.asarray(r.reshape(-1)))
    metrics = {k: float(v) for k, v in metrics.items()}
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert all(np.all(np.isfinite(x)) for x in _leaves(state.params))
    n_valid = int(np.sum(np.ptp(r, axis=1) > 0))
    assert metrics["rollout/num_valid_groups"] == n_valid
    if n_valid == 0:
        assert metrics["train/loss"] == 0.0 and _norm(_grads(state)) == 0.0
        assert metrics["train/update_norm"] == 0.0
    else:
        assert _norm(_grads(state)) > 0.0


# ----------------------------------------------------------------------------- zero advantages

def test_zero_advantages_give_no_update(update_fns, params, rollout):
    """All groups zero-variance, no dynamic sampling (eight rewards of 0.7: their float32 std
    is not exactly 0, the advantage must still be): the AdamW step (weight decay 0) is 0."""
    state = _fresh_state(params)
    before = _leaves(state.params)
    new_state, metrics = update_fns["token-mean", 1](state, rollout,
                                                     jnp.full((P * G,), 0.7, jnp.float32))
    assert float(metrics["train/update_norm"]) == 0.0
    assert float(metrics["train/grad_norm"]) == 0.0
    assert float(metrics["advantages/abs_mean"]) == 0.0
    assert float(metrics["rollout/zero_variance_fraction"]) == 1.0
    for a, b in zip(_leaves(new_state.params), before):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- split path

def _parity_verifier(tokens, mask, answers):
    """A jittable stand-in verifier: reward 1 when the first completion token is even."""
    del mask, answers
    return (tokens[:, 0] % 2 == 0).astype(jnp.float32)


def _host_parity(tokens):
    """The same verifier on the host, in numpy."""
    return (np.asarray(tokens)[:, 0] % 2 == 0).astype(np.float32)


def test_split_host_path_matches_one_program(tok, model_config, update_fns, params, prompts):
    """make_sample_fn → host rewards → make_update_fn gives make_rl_step's state.

    The two paths draw their keys differently by design: rl_step splits state.rng into
    (next rng, sample key, update key), update_fn splits it into (next rng, update key) and
    its caller supplies the sample key (`loop.run` folds the step number into state.rng). So
    this gives sample_fn rl_step's sample key and uses one minibatch (the update key only
    shuffles minibatches): rollout, rewards and update must then agree; only the rng the
    state carries on differs.
    """
    sc = _sampling_config(tok)
    rl = step_lib.RLConfig(num_prompts=P, aggregation="token-mean")
    rl_step = step_lib.make_rl_step(model_config, sc, rl, TX, _parity_verifier)
    sample_fn = step_lib.make_sample_fn(model_config, sc)
    update_fn = update_fns["token-mean", 1]  # make_update_fn(model_config, sc, rl, TX).
    pb, pmask = prompts
    batch = {"prompt_tokens": jnp.asarray(pb.tokens), "prompt_mask": jnp.asarray(pmask),
             "answers": jnp.asarray(pb.answers)}
    state = _fresh_state(params, seed=7)
    start_rng = np.asarray(state.rng)
    _, sample_key, _ = jax.random.split(state.rng, 3)

    one, m_one = rl_step(_fresh_state(params, seed=7), batch)
    rollout = sample_fn(params, batch, sample_key)
    rewards = _host_parity(rollout.tokens)
    assert 0.0 < rewards.mean() < 1.0  # Some groups carry signal; else the test is vacuous.
    split, m_split = update_fn(state, rollout, jnp.asarray(rewards))

    assert float(m_one["reward/correct"]) == pytest.approx(float(rewards.mean()))
    # Means of ≤ B' = 8 values computed from the same rewards and lengths: ≤ γ_10 apart.
    for key in ("rollout/reward_mean", "rollout/response_length", "rollout/num_valid_groups",
                "advantages/abs_mean"):
        np.testing.assert_allclose(float(m_split[key]), float(m_one[key]),
                                   rtol=2 * numerics.gamma(10), atol=0, err_msg=key)
    _assert_same_metrics({k: float(v) for k, v in m_split.items()},
                         {k: float(v) for k, v in m_one.items()}, model_config, _grads(one))
    assert float(m_one["train/update_norm"]) > 0.0
    assert int(split.step) == int(one.step) == 1
    _assert_grads_close(_grads(split), _grads(one), model_config)
    _assert_same_adam_step(split, one)
    assert not np.array_equal(np.asarray(split.rng), start_rng)
    assert not np.array_equal(np.asarray(one.rng), start_rng)


def test_host_rl_step_draws_the_one_program_keys(tok, model_config, params, prompts):
    """`make_split_step` (sample → host scoring → update) and `make_rl_step` share one rng
    discipline (`step_keys`): same completions, same reward/correct, same carried rng."""
    sc = _sampling_config(tok)
    rl = step_lib.RLConfig(num_prompts=P, aggregation="token-mean")
    pb, pmask = prompts
    batch = {"prompt_tokens": jnp.asarray(pb.tokens), "prompt_mask": jnp.asarray(pmask),
             "answers": jnp.asarray(pb.answers)}
    _, sample_key, _ = step_lib.step_keys(_fresh_state(params, seed=7).rng)
    rollout = step_lib.make_sample_fn(model_config, sc)(params, batch, sample_key)
    texts = scoring.decode_completions(tok, rollout.tokens, rollout.mask)
    parity = {}  # The host twin of _parity_verifier, by completion text.
    for text, reward in zip(texts, _host_parity(rollout.tokens)):
        assert parity.setdefault(text, reward) == reward
    host_step = _split_step(model_config, sc, rl, tok,
                            [scoring.Term("verifier", "sample", lambda text, ex: parity[text])])
    rl_step = step_lib.make_rl_step(model_config, sc, rl, TX, _parity_verifier)

    one, m_one = rl_step(_fresh_state(params, seed=7), batch)
    host, m_host, s_host = host_step(_fresh_state(params, seed=7), batch, pb.examples)
    np.testing.assert_array_equal(np.asarray(s_host["tokens"]), np.asarray(rollout.tokens))
    assert float(m_host["reward/correct"]) == float(m_one["reward/correct"])
    assert 0.0 < float(m_one["reward/correct"]) < 1.0
    np.testing.assert_array_equal(np.asarray(host.rng), np.asarray(one.rng))
    _assert_grads_close(_grads(host), _grads(one), model_config)
    _assert_same_adam_step(host, one)
    # A second split step (other rollouts, other host metrics) reuses the compiled programs:
    # the host stage's metrics must not reach the compiled update as static data.
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, *_, **__: compiles.append(event)
        if event == "/jax/core/compile/backend_compile_duration" else None)
    host_step(host, batch, pb.examples)
    assert compiles == [], "the split step compiled again on its second step"


def _split_step(model_config, sc, rl, tok, terms, verify=None, **pool):
    """The split step of plain sampling and a scorer of the host sample `terms` (its
    verifier: `verify`, else the first term's function)."""
    verifier = scoring.Verifier(verify=verify or terms[0].fn, answer_key=None)
    scorer = scoring.Scorer(verifier, terms, tokenizer=tok, **pool)
    step = step_lib.make_split_step(Sampler(model_config, sc), scorer, rl, TX)
    step.scorer = scorer
    return step


def _text_length_parity(text, example):
    """A picklable host component: 1 when the completion text has an even length."""
    del example
    return float(len(text) % 2 == 0)


def test_host_rl_step_with_weighted_components_in_a_pool(tok, model_config, params, prompts):
    """The split path scoring two weighted components in a process pool (what
    `reward.components` + `reward.num_workers` build): the rewards are the weighted sums,
    each component is logged, reward/correct counts the correctness component, no sample
    failed. Same shapes as the test above, so no new compilation."""
    from rlvr_jax.scoring import host_reward as components
    sc = _sampling_config(tok)
    rl = step_lib.RLConfig(num_prompts=P, aggregation="token-mean")
    pb, pmask = prompts
    batch = {"prompt_tokens": jnp.asarray(pb.tokens), "prompt_mask": jnp.asarray(pmask),
             "answers": jnp.asarray(pb.answers)}
    terms = [scoring.Term(name, "sample", fn, weight) for name, fn, weight in (
        ("parity", _text_length_parity, 1.0), ("format", components.format_component, 0.5))]
    step = _split_step(model_config, sc, rl, tok, terms, verify=_text_length_parity,
                       num_workers=2, timeout_s=30.0)
    try:
        state, metrics, samples = step(_fresh_state(params, seed=7), batch, pb.examples)
    finally:
        step.scorer.close()
    texts = scoring.decode_completions(tok, samples["tokens"], samples["mask"])
    parity = np.array([_text_length_parity(t, None) for t in texts], np.float32)
    np.testing.assert_array_equal(np.asarray(samples["rewards"]), parity)  # format: 0.
    assert float(metrics["reward/parity"]) == pytest.approx(float(parity.mean()))
    assert float(metrics["reward/correct"]) == pytest.approx(float(parity.mean()))
    assert float(metrics["reward/format"]) == 0.0
    assert float(metrics["reward/host_errors"]) == float(metrics["reward/host_timeouts"]) == 0
    assert int(state.step) == 1 and np.isfinite(float(metrics["train/loss"]))


# ----------------------------------------------------------------------------- SFT

def test_sft_step_lowers_the_nll(tok, model_config, params, prompts):
    pb, pmask = prompts
    comp, comp_mask = datasets.completion_arrays([ex.solution for ex in pb.examples], tok,
                                                 max_len=16)
    batch = {"tokens": jnp.asarray(np.concatenate([pb.tokens, comp], 1)),
             "attention": jnp.asarray(np.concatenate([pmask, comp_mask.astype(np.int32)], 1)),
             "loss_mask": jnp.asarray(np.concatenate([np.zeros_like(pmask),
                                                      comp_mask.astype(np.int32)], 1))}
    tx = make_optimizer(learning_rate=3e-3, max_grad_norm=1.0)
    sft_step = make_sft_step(model_config, tx)
    state = _fresh_state(params, tx)
    losses = []
    for _ in range(8):
        state, metrics = sft_step(state, batch)
        losses.append(float(metrics["sft/loss"]))
    assert all(np.isfinite(losses))
    # Random init: NLL ≈ log V; a few Adam steps on one fixed batch bring it down clearly.
    assert losses[0] == pytest.approx(np.log(tok.vocab_size), rel=0.2)
    assert losses[-1] < losses[0] - 0.3, losses
    assert int(state.step) == 8


def test_make_rl_step_refuses_what_cannot_be_one_program(model_config, tok):
    """Without a verifier or scorer, or with a scorer that has host work, the one-program
    builder fails when called, naming what to do, not at trace time."""
    sc = _sampling_config(tok)
    rl = step_lib.RLConfig(num_prompts=P)
    with pytest.raises(ValueError, match="give a token verifier or a scorer"):
        step_lib.make_rl_step(model_config, sc, rl, TX)
    verify = lambda text, example: 1.0  # noqa: E731
    host = scoring.Scorer(scoring.Verifier(verify=verify, answer_key=lambda text: None),
                          (scoring.Term("task", "sample", verify),))
    with pytest.raises(ValueError, match="make_step splits the others"):
        step_lib.make_rl_step(model_config, sc, rl, TX, scorer=host)
