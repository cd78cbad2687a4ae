"""Multi-turn rollouts with on-device tools (rlvr_jax.multiturn): the calculator against its
host reference, the turn state machine, decoding with observations against a full forward,
zero gradient / KL on observations, the trainer's one program, sharded = unsharded."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import losses, models, multiturn
from rlvr_jax.multiturn.env import DeviceEnv
from tests import numerics
from tests.multiturn_helpers import doc_example, prompt_arrays, sampling_config


@dataclasses.dataclass(frozen=True)
class Answering(DeviceEnv):
    """Test env: every model token but the stop token ends a turn; the observation is the
    fixed `reply_ids` (a reward of 0.5 per call, error on odd token ids)."""
    reply_ids: tuple = (31, 32)

    def reset(self, prompt_tokens, prompt_mask, answers):
        return {"count": jnp.zeros((prompt_tokens.shape[0],), jnp.int32)}

    def step(self, state, turn, turn_len):
        b = turn.shape[0]
        obs = jnp.zeros((b, self.max_obs_tokens), jnp.int32)
        obs = obs.at[:, :len(self.reply_ids)].set(jnp.asarray(self.reply_ids, jnp.int32))
        last = jnp.take_along_axis(turn, (turn_len - 1)[:, None], axis=1)[:, 0]
        return ({"count": state["count"] + 1},
                self.reply(obs, jnp.full((b,), len(self.reply_ids)),
                           reward=jnp.full((b,), 0.5), error=last % 2 == 1))


def _every_token_env(vocab, stop, max_turns=4):
    return Answering(call_end_ids=tuple(i for i in range(vocab) if i != stop),
                     max_turns=max_turns, max_turn_tokens=4, max_obs_tokens=3)


_prompts = prompt_arrays


def _sc(tok, **kw):
    return sampling_config(tok, **{"max_new_tokens": 16, "num_samples": 2, **kw})


# ----------------------------------------------------------------------------- calculator

CALLS = ["[123*456]", "x[12+7]", "[5-99]", "[1234*9999]", "[12345*1]", "[12*]", "[*3]",
         "[1+2+3]", "abc]", "[0*0]", "[12-12]", "[1[2*3]", "[007*2]", "[2*3", "[9999-0]"]


def test_calculator_matches_its_host_reference(tok):
    env = multiturn.Calculator.for_tokenizer(tok)
    m = env.max_turn_tokens
    turn = np.zeros((len(CALLS), m), np.int32)
    lengths = np.zeros(len(CALLS), np.int32)
    for i, text in enumerate(CALLS):
        ids = tok.encode(text)
        turn[i, :len(ids)], lengths[i] = ids, len(ids)
    _, out = jax.jit(env.step)({}, jnp.asarray(turn), jnp.asarray(lengths))
    for i, text in enumerate(CALLS):
        got = tok.decode(np.asarray(out.obs[i, :out.obs_len[i]]).tolist())
        want = multiturn.evaluate_call(text) if text.endswith("]") else "=?"
        assert got == want, text
        assert bool(out.error[i]) == (want == "=?"), text
    # The host reference itself, against Python's arithmetic.
    assert multiturn.evaluate_call("[123*456]") == f"={123 * 456}"
    assert multiturn.evaluate_call("[12-345]") == f"={12 - 345}"
    assert multiturn.evaluate_call("no call") is None


def test_calculator_needs_single_token_characters():
    class Letters:
        def token_texts(self):
            return ["a", "b"]
    with pytest.raises(ValueError, match="single-token"):
        multiturn.Calculator.for_tokenizer(Letters())
    with pytest.raises(ValueError, match="close tag"):
        Answering(call_end_ids=())


# ----------------------------------------------------------------------------- state machine

def test_replay_marks_observations_and_checks_them(tok):
    env = multiturn.Calculator.for_tokenizer(tok)
    traces = ["[12*34]=408 #### 408", "#### 5", "[12*34]=409 #### 409", "[1*2]=2 [2*3]=6 #### 6"]
    comp = np.full((len(traces), 32), tok.pad_id, np.int32)
    mask = np.zeros_like(comp)
    for i, t in enumerate(traces):
        ids = tok.encode(t, add_eos=True)
        comp[i, :len(ids)], mask[i, :len(ids)] = ids, 1
    prompts, pmask = _prompts(tok, ["12*34="] * len(traces))
    model, agrees = jax.jit(multiturn.replay_model_mask, static_argnums=(0, 1, 2))(
        env, (tok.eos_id,), tok.pad_id, jnp.asarray(comp), jnp.asarray(mask), prompts, pmask,
        jnp.zeros((len(traces),), jnp.int32))
    model, agrees = np.asarray(model), np.asarray(agrees)
    # Row 0: "[12*34]" (7 model tokens), "=408" (4 observation tokens), " #### 408" + EOS.
    assert model[0, :7].all() and not model[0, 7:11].any() and model[0, 11:mask[0].sum()].all()
    assert not model[0, mask[0].sum():].any()
    assert model[1, :mask[1].sum()].all()
    # A wrong observation (row 2) and a second call past max_turns=2 (row 3) disagree.
    assert agrees.tolist() == [True, True, False, False]


@pytest.fixture(scope="module")
def episodes(params, model_config, tok):
    """(env, prompts [8, Tp], mask, rollout, Episodes): 8 prompts × G=2 of the tiny model with
    an env where every model token calls (compiled once for the tests below)."""
    env = _every_token_env(model_config.vocab_size, tok.eos_id)
    prompts, pmask = _prompts(tok, ["12+3=", "7+8=", "1+1=", "40+2="] * 2)
    rollout, eps = multiturn.jit_generate_episodes(
        params, prompts, pmask, jnp.zeros((8,), jnp.int32), jax.random.PRNGKey(3),
        model_config=model_config, sampling_config=_sc(tok), env=env)
    return env, prompts, pmask, rollout, eps


def test_rollout_writes_observations_after_each_call(episodes, tok):
    env, _, _, rollout, eps = episodes
    tokens, mask, loss = (np.asarray(x) for x in (rollout.tokens, rollout.mask,
                                                  rollout.loss_mask))
    assert np.asarray(eps.calls).max() > 0
    for row in range(tokens.shape[0]):
        # Pattern: model token, 2 observation tokens, ... (every token calls; eos stops).
        n_real = mask[row].sum()
        col = 0
        calls = 0
        while col < n_real:
            assert loss[row, col] == 1
            if tokens[row, col] == tok.eos_id or calls + 1 >= env.max_turns:
                col += 1
                break
            calls += 1
            assert loss[row, col + 1:col + 3].sum() == 0
            np.testing.assert_array_equal(tokens[row, col + 1:col + 3][:n_real - col - 1],
                                          [31, 32][:n_real - col - 1])
            col += 3
        assert col >= n_real and (mask[row, n_real:] == 0).all()
        assert int(eps.calls[row]) == calls
        assert float(eps.env_reward[row]) == pytest.approx(0.5 * calls)
    np.testing.assert_array_equal(np.asarray(rollout.logprobs)[loss == 0], 0.0)
    metrics = multiturn.episode_metrics(rollout, eps, jnp.ones((16,)))
    assert 0 < float(metrics["episode/observation_fraction"]) < 1
    assert float(metrics["tool/calls"]) == pytest.approx(float(np.mean(eps.calls)))


def test_cached_decoding_equals_a_full_forward_over_the_conversation(episodes, params,
                                                                     model_config):
    _, prompts, _, rollout, _ = episodes
    tokens, attention = rollout.sequences()
    logp, _ = models.sequence_logprobs(params, tokens, attention, config=model_config)
    tp = prompts.shape[1]
    model = np.asarray(rollout.loss_mask, bool)
    assert (np.asarray(rollout.mask, bool) & ~model).any()  # Observations are in there.
    numerics.assert_forward_close(np.asarray(logp[:, tp:])[model],
                                  np.asarray(rollout.logprobs)[model], model_config,
                                  tokens.shape[1])


def test_observations_get_no_gradient_and_no_kl(episodes):
    """The experience trains on the model's tokens only; d(loss)/d(log-prob) of an
    observation token is 0 for the clipped policy loss + KL loss + entropy of GRPO."""
    from rlvr_jax.train import algorithms, experience
    rollout = episodes[3]
    rewards = jnp.asarray([[1.0, 0.0], [0.0, 1.0]] * 4)
    exp = experience.experience_from(experience.Groups(rollout, rewards, jnp.ones((8,), bool)))
    np.testing.assert_array_equal(exp.mask, rollout.loss_mask)
    obs = np.asarray(rollout.mask - rollout.loss_mask, bool)
    assert obs.any()
    rl = _rl(num_prompts=8, kl_coef=0.1, entropy_coef=0.01)
    algo = algorithms.resolve(rl)
    adv = algo.group_advantages(rewards, jnp.ones((8,), bool)).reshape(-1)
    rng = np.random.default_rng(0)
    old = jnp.asarray(rng.normal(-2, 0.3, exp.mask.shape), jnp.float32)
    ref = jnp.asarray(rng.normal(-2, 0.3, exp.mask.shape), jnp.float32)
    counts = {k: jnp.maximum(v, 1.0) for k, v in losses.global_counts(exp.mask).items()}
    counts["num_rows"] = jnp.asarray(16.0)

    def loss(logp, ref_logp):
        per_token, _ = algo.policy_loss(logp, old, adv, exp.mask)
        kl, _ = algo.kl_loss(logp, ref_logp, exp.mask)
        return algo.aggregate(per_token + kl, exp.mask, counts, exp.num_new)

    logp = old + 0.1
    g = np.asarray(jax.grad(loss)(logp, ref))
    assert np.all(g[obs] == 0.0) and np.abs(g[~obs & np.asarray(exp.mask, bool)]).max() > 0
    # The KL term: changing the reference log-probs of observations changes nothing.
    ref2 = jnp.where(jnp.asarray(obs), ref - 5.0, ref)
    assert float(loss(logp, ref2)) == float(loss(logp, ref))


def _rl(**kw):
    """An RLConfig for these tests (token-mean aggregation)."""
    from rlvr_jax.train import step as step_lib
    base = dict(num_prompts=2, aggregation="token-mean")
    base.update(kw)
    return step_lib.RLConfig(**base)


def _verifier(tokens, mask, answers):
    """Stand-in verifier over the model's tokens: 1 when they hold an even count of odd ids."""
    del answers
    odd = jnp.sum(((tokens % 2) == 1) & (mask != 0), axis=1)
    return (odd % 2 == 0).astype(jnp.float32)


def test_one_program_rl_step_with_a_tool(params, model_config, tok):
    """`make_rl_step(..., env=...)`: sampling with the tool, scoring, advantages and the
    update in one program; rewards = the verifier on the model's tokens + the env's."""
    import optax
    from rlvr_jax.train import step as step_lib
    from rlvr_jax.train.state import create_train_state
    env = _every_token_env(model_config.vocab_size, tok.eos_id)
    prompts, pmask = _prompts(tok, ["12+3=", "7+8=", "1+1=", "40+2="])
    batch = {"prompt_tokens": prompts, "prompt_mask": pmask,
             "answers": jnp.zeros((4,), jnp.int32)}
    tx = optax.sgd(1e-2)
    rl_step = step_lib.make_rl_step(model_config, _sc(tok, max_new_tokens=12), _rl(
        num_prompts=4), tx, _verifier, return_rollout=True, env=env)
    state = create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(4))
    new, m, s = rl_step(state, batch)
    tokens, mask = np.asarray(s["tokens"]), np.asarray(s["mask"])
    # Replay the rows to count their calls and find the model's tokens.
    model, agrees = multiturn.trace_model_mask(env, (tok.eos_id,), tok.pad_id, tokens, mask,
                                               np.repeat(np.asarray(prompts), 2, 0),
                                               np.repeat(np.asarray(pmask), 2, 0))
    assert agrees.all()
    calls = ((mask - model) > 0).sum(axis=1) // len(env.reply_ids)  # 2 obs tokens per call
    want = np.asarray(_verifier(jnp.asarray(tokens), jnp.asarray(model), None)) + 0.5 * calls
    np.testing.assert_allclose(np.asarray(s["rewards"]), want, atol=1e-6)  # 0/1 + 0.5·calls: exact
    assert float(m["tool/calls"]) == pytest.approx(calls.mean())
    assert 0 < float(m["episode/observation_fraction"]) < 1
    assert float(m["tool/error_rate"]) >= 0.0 and "reward/calls_1" in m
    assert float(m["train/grad_norm"]) > 0
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new.params),
                                                       jax.tree.leaves(params)))


def test_reward_model_with_an_on_device_tool_scores_the_model_tokens(params, model_config,
                                                                      tok):
    """The verifier sees the model's tokens only (`rollout.model_mask`) when a reward model is
    scored beside an on-device tool too (it once read `rollout.mask`, observations included:
    the tool's odd id 31 then flipped the parity verdict of rows with an odd call count)."""
    import optax
    from rlvr_jax import scoring
    from rlvr_jax.train import step as step_lib
    from rlvr_jax.train.state import create_train_state
    env = _every_token_env(model_config.vocab_size, tok.eos_id)
    prompts, pmask = _prompts(tok, ["12+3=", "7+8=", "1+1=", "40+2="])
    batch = {"prompt_tokens": prompts, "prompt_mask": pmask,
             "answers": jnp.zeros((4,), jnp.int32)}
    rm_config = model_config.replace(n_layers=1)
    rm = scoring.RewardModel(config=rm_config, weight=0.0)  # Weight 0: exact rewards below.
    scorer = scoring.token_scorer(_verifier, reward_model=rm, env=env, num_samples=2)
    assert [t.name for t in scorer.terms] == ["token", "reward_model", "env"]
    tx = optax.sgd(0.0)
    rl_step = step_lib.make_rl_step(model_config, _sc(tok, max_new_tokens=12), _rl(
        num_prompts=4), tx, scorer=scorer, return_rollout=True, env=env)
    state = create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(4),
                               reward_params=models.init_reward_params(rm_config,
                                                                       jax.random.PRNGKey(5)))
    _, m, s = rl_step(state, batch)
    tokens, mask = np.asarray(s["tokens"]), np.asarray(s["mask"])
    model, _ = multiturn.trace_model_mask(env, (tok.eos_id,), tok.pad_id, tokens, mask,
                                          np.repeat(np.asarray(prompts), 2, 0),
                                          np.repeat(np.asarray(pmask), 2, 0))
    right = np.asarray(_verifier(jnp.asarray(tokens), jnp.asarray(model), None))
    wrong = np.asarray(_verifier(jnp.asarray(tokens), jnp.asarray(mask), None))
    assert (right != wrong).any()  # The observations would change some verdicts.
    np.testing.assert_array_equal(np.asarray(s["correct"]), right >= 1)
    assert float(m["reward/correct"]) == pytest.approx(right.mean())  # 0/1 over 8: exact
    calls = ((mask - model) > 0).sum(axis=1) // len(env.reply_ids)
    np.testing.assert_array_equal(np.asarray(s["rewards"]), right + 0.5 * calls)  # exact
    assert "reward/reward_model_agreement" in m


def test_rollout_sharded_over_8_devices_equals_unsharded(episodes, params, model_config, tok):
    """Prompts sharded over an 8-device data axis, parameters replicated, each prompt's KV
    kept once for its rows (`share_prompt_kv`; the reference copies it)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as PS
    env, prompts, pmask, ref, ref_eps = episodes
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    rows, rep = NamedSharding(mesh, PS("data")), NamedSharding(mesh, PS())
    run = jax.jit(lambda p_, t, m, a, r: multiturn.generate_episodes(
        p_, t, m, a, r, model_config=model_config,
        sampling_config=_sc(tok, share_prompt_kv=True), env=env),
        in_shardings=(rep, rows, rows, rep, rep), out_shardings=rows)
    got, got_eps = run(params, prompts, pmask, jnp.zeros((8,), jnp.int32), jax.random.PRNGKey(3))
    assert got.tokens.sharding.spec == PS("data")
    for name in ("tokens", "mask", "loss_mask", "turn_ids"):
        np.testing.assert_array_equal(np.asarray(getattr(got, name)),
                                      np.asarray(getattr(ref, name)), err_msg=name)
    numerics.assert_forward_close(got.logprobs, ref.logprobs, model_config,
                                  prompts.shape[1] + got.tokens.shape[1])
    np.testing.assert_array_equal(np.asarray(got_eps.calls), np.asarray(ref_eps.calls))


def test_the_docs_environment_example_runs(tok):
    """docs/multiturn.md's ≤20-line environment, executed as written."""
    scope = doc_example("## Writing an environment")
    digits = tuple(tok.encode(str(d))[0] for d in range(10))
    env = scope["Countdown3"](call_end_ids=(tok.encode("]")[0],), max_turns=5,
                              max_obs_tokens=2, digit_ids=digits)
    state = env.reset(jnp.zeros((2, 3), jnp.int32), jnp.ones((2, 3), jnp.int32),
                      jnp.zeros((2,), jnp.int32))
    dones, obs = [], []
    for _ in range(3):
        state, out = env.step(state, jnp.zeros((2, 4), jnp.int32), jnp.ones((2,), jnp.int32))
        dones.append(bool(out.done[0]))
        obs.append(tok.decode([int(out.obs[0, 0])]))
    assert obs == ["2", "1", "0"] and dones == [False, False, True]
