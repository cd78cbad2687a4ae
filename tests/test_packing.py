"""The packed update (`rl.pack_length` > 0, `rlvr_jax.train.packing`) against the left-padded
one, on the tiny model in float32.

Packing only moves each sequence's real tokens into shared rows (segment ids, positions
restarting per segment); every per-token quantity is the same mathematical value as on the
left-padded rows, computed in another order (other matmul shapes, masked keys in the softmax
sums that contribute exact zeros). So both sides agree within the float32 reordering bounds of
tests/numerics.py, with the attention's reduction over the packed row's L keys.

Shapes: P = 4 prompts, G = 2 samples, B = 8 rows, Tp = 10, N = 8 (T = 18); packed rows of
L = 24 tokens, R = 2 rows per micro-batch, so a row holds one or two sequences and the loop
runs several micro-batches.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import losses, models, sampling, scoring
from rlvr_jax.models.value import value_forward
from rlvr_jax.train import objective, packing
from rlvr_jax.train.experience import Groups, experience_from
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.state import create_train_state, make_optimizer

from tests import numerics

P, G, TP, N = 4, 2, 10, 8
L, R = 24, 2
PROMPT_LENS = np.array([10, 4, 7, 3])               # [P] real prompt tokens
LENGTHS = np.array([8, 3, 5, 1, 8, 6, 2, 7])        # [B] real completion tokens
REWARDS = jnp.asarray([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
LR, ADAM_EPS = 1e-2, 1e-3


def _rollout(vocab, loss_mask=False):
    """B rows with left-padded prompts of PROMPT_LENS and completions of LENGTHS; with
    `loss_mask`, a multi-turn rollout whose completion tokens 2 and 3 are observations."""
    rng = np.random.default_rng(0)
    pmask = (np.arange(TP)[None] >= TP - np.repeat(PROMPT_LENS, G)[:, None]).astype(np.int32)
    mask = (np.arange(N)[None] < LENGTHS[:, None]).astype(np.int32)
    lm = None
    if loss_mask:
        lm = jnp.asarray(mask * ~np.isin(np.arange(N), (2, 3))[None], jnp.int32)
    return sampling.Rollout(
        tokens=jnp.asarray(rng.integers(4, vocab, (P * G, N)) * mask, jnp.int32),
        mask=jnp.asarray(mask), logprobs=jnp.asarray(-2.0 * mask, jnp.float32),
        lengths=jnp.asarray(LENGTHS), finished=jnp.asarray(LENGTHS < N),
        prompt_tokens=jnp.asarray(rng.integers(4, vocab, (P * G, TP)) * pmask, jnp.int32),
        prompt_mask=jnp.asarray(pmask), loss_mask=lm)


def _capture_grads():
    """Passes updates through and keeps the last one (the gradient) in its state."""
    return optax.GradientTransformation(lambda p: jax.tree.map(jnp.zeros_like, p),
                                        lambda u, s, p=None: (u, u))


TX = optax.chain(_capture_grads(), make_optimizer(learning_rate=LR, weight_decay=0.0,
                                                  max_grad_norm=1.0, eps=ADAM_EPS))


@pytest.fixture(scope="module")
def rollout(model_config):
    return _rollout(model_config.vocab_size)


@pytest.fixture(scope="module")
def plan(rollout):
    tokens, attention = rollout.sequences()
    return packing.plan(tokens, attention, pack_length=L, pack_rows=R)


# ----------------------------------------------------------------------------- the plan

def test_plan_puts_every_real_token_once_in_order(rollout, plan):
    tokens, attention = (np.asarray(x) for x in rollout.sequences())
    dest, packed = np.asarray(plan.dest), np.asarray(plan.tokens).reshape(-1)
    real = attention != 0
    assert np.all(dest[~real] == packed.size)
    slots = dest[real]
    assert len(np.unique(slots)) == len(slots)                  # no two tokens share a slot
    np.testing.assert_array_equal(packed[slots], tokens[real])
    for i in range(len(tokens)):                                 # contiguous, in one row
        d = dest[i][real[i]]
        np.testing.assert_array_equal(np.diff(d), 1)
        assert d[0] // L == d[-1] // L == int(plan.row[i])
        np.testing.assert_array_equal(np.asarray(plan.positions).reshape(-1)[d],
                                      np.arange(len(d)))
        assert np.all(np.asarray(plan.segments).reshape(-1)[d] == i + 1)
    # First-fit-decreasing: 8 sequences of 118 tokens fill 6 rows of 24 (a lower bound of 5).
    assert int(plan.rows_used) == len(np.unique(np.asarray(plan.row)))
    assert int(packing.trips(plan, R)) == -(-int(plan.rows_used) // R)


def test_full_rows_never_overflow():
    """Every sequence at full length T: one per row (L < 2T), b rows, b / R trips."""
    full = jnp.ones((P * G, TP + N), jnp.int32)
    p = packing.plan(full, full, pack_length=L, pack_rows=R)
    assert int(p.rows_used) == P * G and int(packing.trips(p, R)) == P * G // R
    assert len(np.unique(np.asarray(p.dest))) == full.size


def test_pack_length_shorter_than_a_row_is_an_error(rollout):
    with pytest.raises(ValueError, match="pack_length"):
        packing.plan(*rollout.sequences(), pack_length=TP + N - 1, pack_rows=R)


# ----------------------------------------------------------------------------- per token

def _micro_batches(plan):
    return [packing.micro(plan, jnp.int32(m), pack_rows=R, num_new=N)
            for m in range(int(packing.trips(plan, R)))]


def test_packed_logprobs_entropies_values_match(rollout, plan, params, model_config):
    """Each micro-batch fills its own sequences' completion tokens (members disjoint); their
    sum is the left-padded log-probs / entropies / values on the real completion tokens."""
    tokens, attention = rollout.sequences()
    logp, ent = objective.completion_logprobs(
        params, tokens, attention, model_config=model_config, temperature=1.0, chunk=4,
        n_new=N, with_entropy=True)
    vparams = models.init_value_params(model_config, jax.random.PRNGKey(2), params)
    vparams["value_head"]["kernel"] = jax.random.normal(jax.random.PRNGKey(3),
                                                        (model_config.d_model,))
    values = objective.completion_values(vparams, tokens, attention, model_config=model_config,
                                         n_new=N)

    @jax.jit
    def packed(mb):  # One compiled program for every micro-batch.
        lp, en = objective.packed_logprobs(params, mb, model_config=model_config,
                                           temperature=1.0, chunk=4, with_entropy=True)
        v = packing.unpack(value_forward(vparams, mb.tokens, None, config=model_config,
                                         segment_ids=mb.segments, positions=mb.positions), mb)
        return jnp.stack([lp, en, v])

    got = np.zeros((3,) + logp.shape)
    members = np.zeros(logp.shape, int)
    for mb in _micro_batches(plan):
        got += np.asarray(packed(mb))
        members += np.asarray(mb.member)
    real = np.asarray(rollout.mask) != 0
    np.testing.assert_array_equal(members, real)  # every real completion token exactly once
    for g, want in zip(got, (logp, ent, values)):
        numerics.assert_forward_close(g[real], np.asarray(want)[real], model_config, L)
        assert np.all(g[~real] == 0)


# ----------------------------------------------------------------------------- the update

def _update(model_config, rl, rollout, state, steps=None, value_tx=None):
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G)
    fn = step_lib.make_update_fn(model_config, sc, rl, TX, value_tx=value_tx)
    return fn(state, rollout, REWARDS, jax.random.PRNGKey(0), steps)


def _state(params, value_params=None, value_tx=None):
    copy = lambda tree: None if tree is None else jax.tree.map(jnp.copy, tree)  # noqa: E731
    return create_train_state(copy(params), TX, jax.random.PRNGKey(1),
                              value_params=copy(value_params), value_tx=value_tx)


def _assert_same_update(packed, padded, model_config, grads_of=lambda s: s.opt_state[0]):
    """Gradients within the reordering bound of the backward pass over B·N tokens (attention
    over L keys), the loss within the forward's bound (terms |A|·r ≤ 2), Adam's step within
    its first-step bound."""
    (s_a, m_a), (s_b, m_b) = packed, padded
    g_a, g_b = grads_of(s_a), grads_of(s_b)
    assert optax.tree.norm(g_b) > 1e-4  # A real update, not 0 == 0.
    numerics.assert_trees_reorder_close(g_a, g_b,
                                        numerics.gradient_chain(model_config, L, P * G * N))
    chain = numerics.forward_chain(model_config, L) + P * G * N
    np.testing.assert_allclose(m_a["train/loss"], m_b["train/loss"], rtol=0,
                               atol=numerics.reorder_atol(chain, 2.0))
    ga, rel = numerics.clip_by_global_norm(g_a, 1.0)
    gb, _ = numerics.clip_by_global_norm(g_b, 1.0)
    numerics.assert_adam_first_step_close(s_a.params, s_b.params, ga, gb, lr=LR, eps=ADAM_EPS,
                                          rel_err=rel)


@pytest.mark.parametrize("aggregation", losses.MODES)
def test_packed_update_equals_padded(params, model_config, rollout, plan, aggregation):
    out = {}
    for pack in (0, L):
        rl = step_lib.RLConfig(num_prompts=P, aggregation=aggregation, pack_length=pack,
                               pack_rows=R)
        out[pack] = _update(model_config, rl, rollout, _state(params))
    _assert_same_update(out[L], out[0], model_config)
    # 1 − real / processed in float32: a division and a subtraction of values ≤ 1 (exact
    # integer counts), so within γ_2 absolutely.
    real = float(jnp.sum(rollout.sequences()[1]))
    trips = int(packing.trips(plan, R))
    np.testing.assert_allclose(out[L][1]["update/padded_fraction"], 1 - real / (trips * R * L),
                               rtol=0, atol=numerics.gamma(2))
    np.testing.assert_allclose(out[0][1]["update/padded_fraction"], 1 - real / (P * G * (TP + N)),
                               rtol=0, atol=numerics.gamma(2))


def test_multiturn_loss_mask_and_process_rewards_follow(params, model_config):
    """Observation tokens (loss mask 0) are attended to but not trained on; per-token process
    rewards enter reinforce++'s returns on the [B, N] grid, unchanged by packing."""
    ro = _rollout(model_config.vocab_size, loss_mask=True)
    ends = np.asarray(ro.loss_mask, bool) & (np.arange(N)[None] % 3 == 1)
    steps = scoring.StepRewards(values=jnp.asarray(np.where(ends, 0.5, 0.0), jnp.float32),
                                ends=jnp.asarray(ends))
    out = {}
    for pack in (0, L):
        rl = step_lib.RLConfig(num_prompts=P, advantage="reinforce_pp", process_weight=0.5,
                               aggregation="token-mean", pack_length=pack, pack_rows=R)
        out[pack] = _update(model_config, rl, ro, _state(params), steps=steps)
    _assert_same_update(out[L], out[0], model_config)


def test_gae_value_model_update_equals_padded(params, model_config, rollout):
    vtx = optax.chain(_capture_grads(), optax.adam(LR, eps=ADAM_EPS))
    vparams = models.init_value_params(model_config, jax.random.PRNGKey(2), params)
    vparams["value_head"]["kernel"] = 0.1 * jax.random.normal(jax.random.PRNGKey(3),
                                                              (model_config.d_model,))
    out = {}
    for pack in (0, L):
        rl = step_lib.RLConfig(num_prompts=P, advantage="gae", aggregation="token-mean",
                               pack_length=pack, pack_rows=R)
        out[pack] = _update(model_config, rl, rollout, _state(params, vparams, vtx),
                            value_tx=vtx)
    _assert_same_update(out[L], out[0], model_config)
    (s_a, m_a), (s_b, m_b) = out[L], out[0]
    numerics.assert_trees_reorder_close(s_a.value_opt_state[0], s_b.value_opt_state[0],
                                        numerics.gradient_chain(model_config, L, P * G * N))
    np.testing.assert_allclose(m_a["value/loss"], m_b["value/loss"], rtol=0,
                               atol=numerics.reorder_atol(
                                   numerics.forward_chain(model_config, L) + P * G * N,
                                   float(m_b["value/loss"]) + 1.0))


def test_scoring_passes_match_padded(params, model_config, rollout):
    """The no-gradient passes (old and reference log-probs, entropies, old values) packed:
    the left-padded values on every trained token (rows of valid groups)."""
    vparams = models.init_value_params(model_config, jax.random.PRNGKey(2), params)
    vparams["value_head"]["kernel"] = jax.random.normal(jax.random.PRNGKey(3),
                                                        (model_config.d_model,))
    state = create_train_state(params, TX, jax.random.PRNGKey(1), ref_params=params,
                               value_params=vparams, value_tx=TX)
    groups = Groups(rollout, REWARDS.reshape(P, G), jnp.array([True, True, False, True]))
    exp = experience_from(groups)
    out = {}
    for pack in (0, L):
        rl = step_lib.RLConfig(num_prompts=P, advantage="gae", minibatches=2, kl_coef=0.1,
                               entropy_keep_fraction=0.5, pack_length=pack, pack_rows=R)
        out[pack] = jax.jit(lambda s, e, rl=rl: step_lib.score_experience(
            s, e, rl=rl, model_config=model_config, temperature=1.0))(state, exp)
    trained = np.asarray(exp.mask) != 0
    assert trained.sum() < np.asarray(rollout.mask).sum()  # group 2 is filler
    for name in ("old_logp", "entropy", "ref_logp", "old_values"):
        got, want = (np.asarray(getattr(out[k][0], name)) for k in (L, 0))
        numerics.assert_forward_close(got[trained], want[trained], model_config, L)


def test_pack_settings_are_checked():
    with pytest.raises(ValueError, match="pack_length"):
        step_lib.RLConfig(num_prompts=P, pack_length=-1)
    with pytest.raises(ValueError, match="pack_rows"):
        step_lib.RLConfig(num_prompts=P, pack_rows=-1)
    # 0: an eighth of one unpacked micro-batch's tokens, in rows of L, rounded up:
    # 64 rows of 18 tokens / 2 micro-batches = 576 tokens → 576 / 24 / 8 = 3 rows.
    rl = step_lib.RLConfig(num_prompts=P, pack_length=L, microbatches=2)
    assert packing.with_rows(rl, 64, TP + N).pack_rows == 3
    assert packing.with_rows(rl, P * G, TP + N).pack_rows == 1  # at least one row


def test_dynamic_sampling_fillers_are_left_out(params, model_config, rollout):
    """Dynamic sampling keeps 3 of 4 groups, only 2 of them informative: the filler group's rows
    are not packed (no tokens, no trips) and the update equals the left-padded one."""
    out = {}
    for pack in (0, L):
        rl = step_lib.RLConfig(num_prompts=P - 1, dynamic_sampling=True, pack_length=pack,
                               pack_rows=R, aggregation="token-mean")
        out[pack] = _update(model_config, rl, rollout, _state(params))
    _assert_same_update(out[L], out[0], model_config)
    assert out[L][1]["update/padded_fraction"] < out[0][1]["update/padded_fraction"]
