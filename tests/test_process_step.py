"""Process rewards end to end: a hand-made rollout whose step rewards must land on the tokens
that end each step, their routing through every kind of estimator in the update, and one
split-path RL step with them on the tiny model."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import sampling, scoring, tasks
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.algorithms import resolve
from rlvr_jax.train.experience import Experience, Groups
from rlvr_jax.train.state import create_train_state
from tests.reference import advantages_ref
from tests.reference import process_ref

N = 16


def completion_rows(tok, texts):
    """tokens, mask [B, N = 16]: each text's ids, then EOS (in the mask), then padding."""
    tokens = np.full((len(texts), N), tok.pad_id, np.int32)
    mask = np.zeros((len(texts), N), np.int32)
    for b, text in enumerate(texts):
        ids = tok.encode(text)[:N - 1] + [tok.eos_id]
        tokens[b, :len(ids)], mask[b, :len(ids)] = ids, 1
    return tokens, mask


def test_step_rewards_land_on_the_tokens_that_end_each_step(tok):
    task = tasks.get("arithmetic", ops=("add",), min_digits=3, max_digits=3)
    ex = task.make("add", 456, 257)                  # Worked steps 13 11 7, answer 713.
    texts = ["13 11 7 #### 713",                     # all right          -> tokens 1, 4, 6
             "13 12 7 #### 713",                     # step 2 wrong, answer right
             "13 11 8 #### 813",                     # step 3 wrong, answer wrong
             "13 11",                                # no marker: no steps
             "1 3 #### 713"]                         # steps "1", "3": both wrong -> tokens 0, 2
    tokens, mask = completion_rows(tok, texts)
    texts = scoring.decode_completions(tok, tokens, mask)
    steps, metrics = scoring.step_rewards_on_host(texts, [ex] * 5, tokens, mask,
                                                  step_scores=task.step_scores, tokenizer=tok)
    want_ends = np.zeros((5, N), bool)
    want_values = np.zeros((5, N), np.float32)
    for b, placed in enumerate([{1: 1, 4: 1, 6: 1}, {1: 1, 4: 0, 6: 1}, {1: 1, 4: 1, 6: 0}, {},
                                {0: 0, 2: 0}]):
        for t, v in placed.items():
            want_ends[b, t], want_values[b, t] = True, v
    np.testing.assert_array_equal(steps.ends, want_ends)
    np.testing.assert_array_equal(steps.values, want_values)
    # Counts divided once in float64, as on the right: equal.
    assert metrics["process/steps_per_completion"] == pytest.approx(11 / 5)
    assert metrics["process/step_accuracy"] == pytest.approx(7 / 11)
    assert metrics["process/all_steps_correct"] == pytest.approx(1 / 5)
    gated, _ = scoring.step_rewards_on_host(texts, [ex] * 5, tokens, mask,
                                            step_scores=task.step_scores, tokenizer=tok,
                                            verdicts=[task.verify(t, ex) for t in texts])
    np.testing.assert_array_equal(gated.ends, want_ends)   # Same steps, wrong answers -> 0.
    np.testing.assert_array_equal(gated.values[[0, 1]], want_values[[0, 1]])
    assert not gated.values[2:].any()


def test_sorting_comparisons_are_steps(tok):
    task = tasks.get("sorting")
    ex = task.example(0, seed=0)                     # sort 7 9 4 3 4
    texts = ["3<4<=4<7<9 #### 3 4 4 7 9", "3<4<4<7<9 #### 3 4 4 7 9"]
    tokens, mask = completion_rows(tok, texts)
    steps, _ = scoring.step_rewards_on_host(texts, [ex] * 2, tokens, mask,
                                            step_scores=task.step_scores, tokenizer=tok)
    # Tokens: 3 < 4 <= 4 < 7 < 9: the comparisons end at tokens 2, 4, 6, 8.
    np.testing.assert_array_equal(np.flatnonzero(steps.ends[0]), [2, 4, 6, 8])
    np.testing.assert_array_equal(steps.values[0, [2, 4, 6, 8]], [1, 1, 1, 1])
    np.testing.assert_array_equal(steps.values[1, [2, 4, 6, 8]], [1, 0, 1, 1])  # 4<4 is false


def _groups_and_exp(seed, p=2, g=3, n=7):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, n + 1, p * g)
    mask = (np.arange(n)[None, :] < lengths[:, None])
    ends = (rng.random((p * g, n)) < 0.4) & mask
    values = np.where(ends, rng.integers(0, 2, (p * g, n)), 0).astype(np.float32)
    rewards = rng.integers(0, 2, (p, g)).astype(np.float32)
    valid = np.ones((p,), bool)
    groups = Groups(rollout=None, rewards=jnp.asarray(rewards), valid=jnp.asarray(valid),
                    steps=scoring.StepRewards(values=jnp.asarray(values), ends=jnp.asarray(ends)))
    exp = Experience(tokens=None, attention=None, mask=jnp.asarray(mask.astype(np.int32)),
                     sampler_logp=None, row_valid=jnp.asarray(np.repeat(valid, g)),
                     old_values=jnp.zeros(mask.shape, jnp.float32))
    return groups, exp, rewards, values, ends, mask


def _outcome_tokens(rewards, mask):
    out = np.zeros(mask.shape)
    for i, r in enumerate(rewards.reshape(-1)):
        out[i, np.flatnonzero(mask[i])[-1]] = r
    return out


@pytest.mark.parametrize("advantage,form", [("reinforce_pp", "min"), ("reinforce_pp", "sum"),
                                            ("grpo", "sum"), ("grpo", "min"), ("rloo", "min"),
                                            ("gae", "min")])
def test_the_update_routes_process_rewards(advantage, form):
    groups, exp, rewards, values, ends, mask = _groups_and_exp(0)
    rl = step_lib.RLConfig(num_prompts=2, advantage=advantage, process_weight=0.5,
                           process_form=form, whiten_advantages=False)
    exp, _ = step_lib.advantages_stage(groups, exp, algo=resolve(rl))
    if advantage in ("reinforce_pp", "gae"):       # Process rewards are per-token rewards.
        step_part = (process_ref.min_form_rewards(values, ends, mask) if form == "min"
                     else np.where(ends, values, 0.0))
        per_token = _outcome_tokens(rewards, mask) + 0.5 * step_part
        if advantage == "gae":                      # V = 0, γ = λ = 1, not whitened.
            want = advantages_ref.gae(per_token, np.zeros(mask.shape), mask, 1.0, 1.0)[0]
        else:
            want = advantages_ref.reinforce_plus_plus(per_token, mask, 1.0)
    else:                                           # Outcome + α · group process advantage.
        seq = (advantages_ref.grpo(rewards) if advantage == "grpo"
               else advantages_ref.rloo(rewards)).reshape(-1)
        want = np.where(mask, seq[:, None], 0.0) + 0.5 * process_ref.group_process_advantages(
            values, ends, mask, 3, form)
    # 0/1 rewards: GAE's sums are exact; whitening / group standardisation over ≤ 42 tokens
    # after ≤ 2T roundings errs by ≤ γ_60·(M/std)·(1 + 2|A|) ≈ 4e-6·(M/std)·(1 + 2|A|).
    np.testing.assert_allclose(exp.advantages, want, rtol=1e-4, atol=1e-4)


def test_split_step_with_process_rewards(tok, model_config, params):
    """One split-path step with min-form process rewards: logged, finite, and required by
    the update."""
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    examples = task.generate(2, seed=0)
    verifier = scoring.task_verifier(task)
    width = 8
    ptoks = np.full((2, width), tok.pad_id, np.int32)
    pmask = np.zeros((2, width), np.int32)
    for i, ex in enumerate(examples):
        ids = tok.encode(ex.prompt, add_bos=True)
        ptoks[i, -len(ids):], pmask[i, -len(ids):] = ids, 1
    batch = {"prompt_tokens": jnp.asarray(ptoks), "prompt_mask": jnp.asarray(pmask)}
    sc = sampling.SamplingConfig(max_new_tokens=8, num_samples=4, temperature=1.0,
                                 stop_token_ids=(tok.eos_id,), pad_id=tok.pad_id)
    tx = optax.sgd(0.0)
    rl = step_lib.RLConfig(num_prompts=2, advantage="reinforce_pp", process_weight=1.0,
                           process_form="min")
    scorer = scoring.assemble(scoring.Setup(verifier, rl=rl, tokenizer=tok, num_samples=4), {})
    assert [(t.name, t.where) for t in scorer.terms] == [("verifier", "sample"),
                                                        ("process", "host")]
    step = step_lib.make_split_step(Sampler(model_config, sc), scorer, rl, tx)
    state = create_train_state(jax.tree.map(jnp.copy, params), tx, rng=jax.random.PRNGKey(3))
    _, metrics, samples = step(state, batch, examples)
    metrics = {k: float(v) for k, v in metrics.items()}
    assert {"process/step_accuracy", "process/steps_per_completion"} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values())
    # The step rewards reached the update: with all outcomes 0 only they move advantages.
    if not np.any(np.asarray(samples["rewards"])) and metrics["process/step_accuracy"] > 0:
        assert metrics["advantages/abs_mean"] > 0
    with pytest.raises(ValueError, match="process rewards"):   # The one program has none.
        step_lib.update(state, None, None, None, num_samples=4, model_config=model_config,
                        rl=rl, tx=tx, temperature=1.0)


def test_countdown_and_tags_step_checkers():
    countdown = tasks.get("countdown")
    ex = countdown.example(0, seed=0)                # 20 20 9 -> 11
    text = "20-9=11 9+9=18 20+11=31 #### 20-9"        # 9 is spent; 20 and 11 are not
    assert countdown.step_scores(text, ex) == [(7, 1.0), (14, 0.0), (23, 1.0)]
    tags = tasks.get("arithmetic", answer_format="tags")
    ex = tags.make("add", 456, 257)
    text = "<think>13 12 7</think><answer>713</answer>"
    assert tags.step_scores(text, ex) == [(9, 1.0), (12, 0.0), (14, 1.0)]
    assert tags.step_scores("13 12 7 #### 713", ex) is None   # Not the task's format.
