"""A reward model scored on device inside the one RL program (`scoring.RewardModel`,
`TrainState.reward_params`): the rewards are the reward model's scores of the sampled
sequences, sharded over 8 fake devices exactly as unsharded, mixed with the verifier; and on
the split (host-verifier) path, added to the host rewards."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import models, sampling, scoring, sharding, tasks
from rlvr_jax.data import datasets
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.placer import Placer
from rlvr_jax.train.state import create_train_state
from tests import numerics

P, G, TP, N = 8, 2, 10, 8
MESH = {"data": 2, "fsdp": 4, "tensor": 1}


@pytest.fixture(scope="module")
def setup(tok, model_config, params):
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    pb = next(datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                    max_prompt_len=TP))
    pmask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    batch = {"prompt_tokens": pb.tokens, "prompt_mask": pmask, "answers": pb.answers}
    # A reward model of another shape than the policy (3 layers), random, scalar.
    rm_config = model_config.replace(n_layers=3, family="llama", qkv_bias=False)
    rm_params = models.init_reward_params(rm_config, jax.random.PRNGKey(5))
    rm_params["score"]["kernel"] = rm_params["score"]["kernel"] * 50.0  # Scores of order 1.
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(tok.eos_id,),
                                 pad_id=tok.pad_id)
    return batch, rm_config, rm_params, sc, pb.examples


def _reference_scores(rm_params, rm_config, batch, tokens, mask):
    """The reward model's scores of prompt ++ completion, unsharded, outside the program."""
    seq = np.concatenate([np.repeat(batch["prompt_tokens"], G, 0), np.asarray(tokens)], 1)
    att = np.concatenate([np.repeat(batch["prompt_mask"], G, 0), np.asarray(mask)], 1)
    return np.asarray(models.jit_reward_forward(rm_params, seq, att, config=rm_config))[:, 0]


def _verifier(tokens, mask, answers):
    """A stand-in verifier: 1 when the first completion token is even."""
    del mask, answers
    return (tokens[:, 0] % 2 == 0).astype(jnp.float32)


def _scorer(weights, rm):
    """The on-device scorer of `_verifier` with the listed components `weights` and the
    reward model `rm` (the verifier measures; its weight is weights["token"], else 0)."""
    setup = scoring.Setup(scoring.Verifier(verify=None, answer_key=None, token=_verifier),
                          reward_model=rm, num_samples=G, components=tuple(weights))
    return scoring.assemble(setup, weights)


def test_rl_step_scores_with_the_reward_model_sharded_over_8_devices(setup, model_config,
                                                                      params):
    """Reward model alone (the verifier's weight 0, it only measures correctness): the
    rewards of the sharded program are the unsharded reward model's scores; the reward
    model is frozen, the policy trains."""
    batch, rm_config, rm_params, sc, _ = setup
    mesh, rules = sharding.make_mesh(MESH), sharding.get_rules("fsdp")
    placer = Placer(mesh, rules, model_config)
    tx = optax.adam(1e-3)
    placed_rm = jax.device_put(rm_params, placer.shardings(
        rm_params, models.reward_logical_axes(rm_config)))
    assert any(len(leaf.sharding.device_set) == 8 and not leaf.sharding.is_fully_replicated
               for leaf in jax.tree.leaves(placed_rm))  # Really sharded.
    # A copy: device_put may alias the session fixture's buffers, and the step donates.
    pp = placer.params(jax.tree.map(jnp.copy, params))
    state = create_train_state(pp, tx, jax.random.PRNGKey(3), reward_params=placed_rm)
    state = state.replace(opt_state=placer.opt_state(state.opt_state, tx, pp))
    rm = scoring.RewardModel(config=rm_config, weight=2.0, microbatches=2)
    rl = step_lib.RLConfig(num_prompts=P, aggregation="token-mean")
    rl_step = step_lib.make_rl_step(model_config, sc, rl, tx, return_rollout=True,
                                    scorer=_scorer({"reward_model": 2.0}, rm))
    with sharding.activate(mesh, rules):
        new, metrics, samples = rl_step(state, placer.batch(batch))
    ref = _reference_scores(rm_params, rm_config, batch, samples["tokens"], samples["mask"])
    assert np.std(ref) > 0.05  # The scores differ between completions: a real comparison.
    # Two float32 forward passes (sharded vs not); the weight 2 is exact, the means add P·G.
    numerics.assert_forward_close(np.asarray(samples["rewards"]) / 2.0, ref, rm_config, TP + N)
    atol = numerics.reorder_atol(numerics.forward_chain(rm_config, TP + N) + P * G,
                                 np.abs(ref).max())
    correct = _verifier(samples["tokens"], None, None)
    # A mean of 0/1 values over P·G = 16 rows: exact.
    np.testing.assert_allclose(float(metrics["reward/correct"]), float(np.mean(correct)))
    np.testing.assert_allclose(float(metrics["reward/reward_model"]), ref.mean(), atol=atol)
    if 0 < np.mean(correct) < 1:
        c = np.asarray(correct) > 0
        np.testing.assert_allclose(float(metrics["reward/reward_model_correct"]),
                                   ref[c].mean(), atol=atol)
    for a, b in zip(jax.tree.leaves(new.reward_params), jax.tree.leaves(rm_params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # Frozen.
    assert float(metrics["train/update_norm"]) > 0.0


def test_mixed_with_the_verifier_and_metrics(setup):
    """verdict weight w_v, reward-model weight w: rewards = w_v·verdict + w·score; the
    agreement metric counts the correct-over-incorrect pairs of each group."""
    batch, rm_config, rm_params, sc, _ = setup
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 60, size=(P * G, N)).astype(np.int32)
    mask = (np.arange(N)[None, :] < rng.integers(1, N + 1, size=(P * G, 1))).astype(np.int32)
    rollout = sampling.Rollout(
        tokens=jnp.asarray(tokens), mask=jnp.asarray(mask), logprobs=jnp.zeros((P * G, N)),
        lengths=jnp.asarray(mask.sum(1)), finished=jnp.ones((P * G,), bool),
        prompt_tokens=jnp.asarray(np.repeat(batch["prompt_tokens"], G, 0)),
        prompt_mask=jnp.asarray(np.repeat(batch["prompt_mask"], G, 0)))
    rm = scoring.RewardModel(config=rm_config, weight=0.5)
    scorer = _scorer({"token": 1.0, "reward_model": 0.5}, rm)
    x = scoring.Inputs(rollout, answers=jnp.repeat(jnp.asarray(batch["answers"]), G),
                       group_size=G, reward_params=rm_params)
    rewards, metrics, _ = jax.jit(scorer.score_device)(x)
    ref = _reference_scores(rm_params, rm_config, batch, tokens, mask)
    verdict = (tokens[:, 0] % 2 == 0).astype(np.float32)
    # Two float32 forward passes, then w·score + verdict (one more rounding, terms ≤ 1 + w·|s|).
    np.testing.assert_allclose(np.asarray(rewards), verdict + 0.5 * ref, rtol=0,
                               atol=numerics.reorder_atol(numerics.forward_chain(rm_config, TP + N)
                                                          + 1, 1 + 0.5 * np.abs(ref).max()))
    assert float(metrics["reward/token"]) == pytest.approx(verdict.mean())  # 0/1 over 16: exact
    s, c = ref.reshape(P, G), verdict.reshape(P, G)
    pairs = [(s[p, i] > s[p, j]) for p in range(P) for i in range(G) for j in range(G)
             if c[p, i] == 1 and c[p, j] == 0]
    expected = float(np.mean(pairs)) if pairs else 0.0
    # A count over the pairs divided by their number: one rounding each side.
    assert float(metrics["reward/reward_model_agreement"]) == pytest.approx(expected)


def test_missing_reward_params_is_a_clear_error(setup, model_config, params):
    batch, rm_config, _, sc, _ = setup
    tx = optax.adam(1e-3)
    rl_step = step_lib.make_rl_step(model_config, sc, step_lib.RLConfig(num_prompts=P), tx,
                                    scorer=scoring.token_scorer(
                                        _verifier, reward_model=scoring.RewardModel(rm_config)))
    state = create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="state.reward_params"):
        rl_step(state, jax.tree.map(jnp.asarray, batch))


def test_split_path_adds_the_reward_model_to_host_rewards(setup, tok, model_config, params):
    """The split step: reward = host reward + w · reward-model score of each sequence (the
    reward model a device term after the seam)."""
    batch, rm_config, rm_params, sc, examples = setup
    tx = optax.adam(1e-3)
    rl = step_lib.RLConfig(num_prompts=P)

    def verify(text, example):  # A stand-in host verifier.
        return float(len(text) % 2 == 0)

    setup = scoring.Setup(scoring.Verifier(verify=verify, answer_key=None), tokenizer=tok,
                          reward_model=scoring.RewardModel(rm_config, weight=0.5),
                          num_samples=G)
    scorer = scoring.assemble(setup, {})
    assert [(t.name, t.where) for t in scorer.terms] == [("verifier", "sample"),
                                                        ("reward_model", "device")]
    step = step_lib.make_split_step(Sampler(model_config, sc), scorer, rl, tx)
    state = create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(2),
                               reward_params=jax.tree.map(jnp.copy, rm_params))  # Donated.
    _, metrics, samples = step(state, jax.tree.map(jnp.asarray, batch), examples)
    ref = _reference_scores(rm_params, rm_config, batch, samples["tokens"], samples["mask"])
    texts = scoring.decode_completions(tok, samples["tokens"], samples["mask"])
    host = np.array([verify(t, None) for t in texts], np.float32)
    # As above: two float32 forward passes, one more rounding for the sum, P·G for the mean.
    chain = numerics.forward_chain(rm_config, TP + N)
    np.testing.assert_allclose(np.asarray(samples["rewards"]), host + 0.5 * ref, rtol=0,
                               atol=numerics.reorder_atol(chain + 1, 1 + 0.5 * np.abs(ref).max()))
    np.testing.assert_allclose(float(metrics["reward/reward_model"]), ref.mean(),
                               atol=numerics.reorder_atol(chain + P * G, np.abs(ref).max()))
    assert float(metrics["reward/correct"]) == pytest.approx(float(np.mean(host >= 1)))  # exact
