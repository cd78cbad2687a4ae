"""Rewards from the config (issue 14): weighted components, the checks that run before any
compilation, host scoring in-process and in a process pool (failures scored 0 and
counted), the tags answer format that `format` rewards, held-out splits of file data."""
import dataclasses
import json
import os
import pickle
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import rewards, sampling, scoring, tasks
from rlvr_jax.data import datasets
from rlvr_jax.train import build
from rlvr_jax.train.config import arithmetic_config, default_config
from tests.reference import rewards_ref


@pytest.fixture
def compiles():
    """The JAX compilations (``/jax/core/compile`` events) while the test runs."""
    events = []

    def on_event(event, *args, **kwargs):
        if event.startswith("/jax/core/compile"):
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    yield events
    jax.monitoring.unregister_event_duration_listener(on_event)


def _config(components="", weights="", **task_kwargs):
    config = arithmetic_config()
    config.reward.components, config.reward.weights = components, weights
    for k, v in task_kwargs.items():
        config.data.task_kwargs[k] = v
    return config


# ----------------------------------------------------------------------------- the checks

@pytest.mark.parametrize("components,weights,message", [
    ("mathh", "", "reward.components: unknown component 'mathh'; known: token, task, math, "
                  "math_verify, code, format, majority, self_certainty, overlong"),
    ("task,format", "1,0.2,3", "reward.weights: 3 weights for 2 components (task, format)"),
    ("task,format", "1,x", "reward.weights: not a comma-separated list of numbers"),
    ("task,task", "", "reward.components: a component is repeated"),
    ("token,format", "", "reward.components: 'token' scores on device and combines only with"),
    ("overlong", "", "reward.components: 'overlong' alone is no reward"),
    ("task,noise", "", "reward.components: 'noise' is not a component (it is set by other"),
])
def test_bad_reward_config_fails_before_any_compilation(components, weights, message, compiles):
    reward = default_config().reward
    reward.components, reward.weights = components, weights
    with pytest.raises(ValueError) as err:
        scoring.check_reward_config(reward)
    assert str(err.value).startswith(message), str(err.value)
    assert compiles == []  # A cheap check: no jax work behind it.
    config = _config(components, weights)  # The trainer's builder checks the same way.
    with pytest.raises(ValueError, match=message.split(":")[0]):
        _scorer(config, tasks.get("arithmetic"), None)


def test_the_trainer_rejects_an_unknown_component_before_building_anything(tmp_path, compiles,
                                                                          monkeypatch):
    from rlvr_jax.train import loop

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(build, "initial_params", no_model)
    config = _config("mathh")
    with pytest.raises(ValueError, match="^reward.components: unknown component 'mathh'"):
        loop.run(config, str(tmp_path), progress=False)
    assert compiles == []  # No compilation.
    assert not (tmp_path / "metrics.jsonl").exists()


def test_other_reward_fields_are_checked():
    reward = default_config().reward
    for field, value, words in (("verifier", "llm", "reward.verifier: unknown verifier 'llm'"),
                                ("num_workers", -1, "reward.num_workers: must be >= 0"),
                                ("timeout_s", 0.0, "reward.timeout_s: must be > 0")):
        bad = default_config().reward
        bad[field] = value
        with pytest.raises(ValueError, match=words):
            scoring.check_reward_config(bad)
    scoring.check_reward_config(reward)
    reward.components, reward.weights = " task , format ", "1, 0.25"
    assert scoring.parse_components(reward) == (("task", 1.0), ("format", 0.25))
    reward.weights = ""
    assert scoring.parse_components(reward) == (("task", 1.0), ("format", 1.0))


# ----------------------------------------------------------------------------- the builder

def _scorer(config, task, tok):
    from rlvr_jax.train.rl_config import from_config
    return scoring.scorer_from_config(config, task, tok, rl=from_config(config))


def test_no_components_is_the_verifier_of_before(tok):
    """The default (no components) is exactly `choose_verifier`, weight 1: the quickstart
    keeps its on-device token verifier and no other term."""
    arithmetic = tasks.get("arithmetic")
    scorer = _scorer(_config(), arithmetic, tok)
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token"]
    ex = arithmetic.example(0, seed=0)
    assert scorer.verifier.verify(ex.solution, ex) == 1.0
    assert scorer.verifier.verify(ex.solution + "1", ex) == 0.0
    config = _config()
    config.reward.verifier = "math_verify" if rewards.math_verify_available() else "math"
    math = _scorer(config, None, tok)
    assert not math.traceable and [(t.name, t.where) for t in math.terms] == [
        ("verifier", "sample")]
    pickle.dumps(math.verifier.verify)  # Picklable: a pool worker can run it.


def test_task_plus_format_scores_each_component_and_correctness(tok):
    task = tasks.get("arithmetic", answer_format="tags")
    scorer = _scorer(_config("task,format", "1.0,0.5", answer_format="tags"), task, tok)
    assert not scorer.traceable and [t.name for t in scorer.terms] == ["task", "format"]
    verifier = scorer.verifier
    ex = task.make("add", 12, 34)
    assert ex.solution == "<think>6 4</think><answer>46</answer>"
    host = pickle.loads(pickle.dumps(scorer._pool_fn()[0]))
    assert host(ex.solution, ex) == {"task": 1.0, "format": 1.0, "reward": 1.5, "correct": 1.0}
    assert host("<answer>46</answer>", ex) == {"task": 1.0, "format": 0.0, "reward": 1.0,
                                                "correct": 1.0}
    assert host("<think>6 4</think><answer>47</answer>", ex)["reward"] == 0.5
    assert verifier.verify("<answer>46</answer>", ex) == 1.0  # Eval: correctness only.


def test_format_alone_still_counts_correctness_with_the_task_verifier(tok):
    task = tasks.get("sorting", answer_format="tags")
    config = _config("format")
    config.data.task = "sorting"
    fn, _ = _scorer(config, task, tok)._pool_fn()
    ex = task.example(0, seed=0)
    out = fn("<think>x</think><answer>9</answer>", ex)
    assert out["format"] == 1.0 and out["correct"] == 0.0 and out["reward"] == 1.0


def test_on_device_components_weight_the_token_verifier_and_add_overlong(tok):
    """token (weight 0.5) + overlong on device: rewards 0.5·verdict + penalty; reward/correct
    from the unweighted verdicts; reward/token logged."""
    config = _config("token,overlong", "0.5,1.0")
    config.sampling.max_new_tokens = 8
    scorer = _scorer(config, tasks.get("arithmetic"), tok)
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token", "overlong"]
    b, n = 4, 8
    lengths = jnp.array([2, 8, 8, 3], jnp.int32)
    mask = (jnp.arange(n)[None, :] < lengths[:, None]).astype(jnp.int32)
    rollout = sampling.Rollout(tokens=jnp.zeros((b, n), jnp.int32), mask=mask,
                               logprobs=jnp.zeros((b, n)), lengths=lengths,
                               finished=lengths < n, prompt_tokens=jnp.zeros((b, 2), jnp.int32),
                               prompt_mask=jnp.zeros((b, 2), jnp.int32))
    verdicts = jnp.array([1.0, 1.0, 0.0, 0.0])
    scorer.verifier = dataclasses.replace(scorer.verifier, token=lambda t, m, a: verdicts)
    x = scoring.Inputs(rollout, answers=jnp.zeros((b,), jnp.int32), group_size=2)
    r, metrics, _ = jax.jit(scorer.score_device)(x)
    penalty = rewards_ref.overlong_penalty_np(np.asarray(lengths), max_length=n, buffer_length=2)
    np.testing.assert_allclose(np.asarray(r), 0.5 * np.asarray(verdicts) + penalty, rtol=1e-6)
    assert float(metrics["reward/correct"]) == 0.5 and float(metrics["reward/token"]) == 0.5
    assert float(metrics["reward/overlong"]) == pytest.approx(float(np.mean(penalty)))


# ----------------------------------------------------------------------------- host scoring

def _moody(text, example):
    """A verifier that hangs, crashes its process, raises or answers, by the text."""
    if text == "hang":
        time.sleep(60)
    if text == "die":
        os._exit(3)
    if text == "raise":
        raise RuntimeError("verifier bug")
    return {"reward": float(text), "task": float(text), "correct": float(text)}


def _rollout(b, n=4):
    z = jnp.zeros((b, n), jnp.int32)
    rows = jnp.broadcast_to(jnp.arange(b, dtype=jnp.int32)[:, None], (b, n))  # Row i: i.
    return sampling.Rollout(tokens=rows, mask=z + 1, logprobs=jnp.zeros((b, n)),
                            lengths=jnp.full((b,), n), finished=jnp.ones((b,), bool),
                            prompt_tokens=z, prompt_mask=z)


class _Texts:
    """A tokenizer whose row i (tokens all i) decodes to texts[i]."""

    def __init__(self, texts):
        self.texts = texts

    def decode(self, ids, stop_at_eos=True):
        return self.texts[int(ids[0])]


def _score_on_host(fn, texts, **pool):
    """(rewards [B], metrics) of the host verifier `fn` alone (one sample term) on `texts`:
    the scorer's host stage, then its (empty) device stage."""
    scorer = scoring.Scorer(scoring.Verifier(verify=fn, answer_key=None),
                            [scoring.Term("verifier", "sample", fn)], tokenizer=_Texts(texts),
                            **pool)
    try:
        rollout = _rollout(len(texts))
        host = scorer.score_host(rollout, [None] * len(texts), 1)
        r, metrics, _ = scorer.score_device(scoring.Inputs(rollout), host)
        return r, dict(metrics, **host.metrics), scorer
    finally:
        scorer.close()


def test_pool_scoring_survives_hung_and_crashing_samples():
    """In a pool: a hung sample times out, a dying worker and a raising verifier score 0;
    all are counted in the metrics and the other samples keep their rewards. The honest
    samples get a budget they cannot hit; the hung one its own pool with a short one."""
    texts = ["1", "die", "0", "raise", "1"]  # "0" was queued behind "die": sent again.
    scorer = scoring.Scorer(scoring.Verifier(verify=_moody, answer_key=None),
                            [scoring.Term("verifier", "sample", _moody)],
                            tokenizer=_Texts(texts), num_workers=2, timeout_s=600.0)
    with scorer.host_scorer():
        x = scoring.Inputs(_rollout(5))
        host = scorer.score_host(x.rollout, [None] * 5, 1)
        r, metrics = host.rewards, host.metrics
        scorer.tokenizer = _Texts(["1", "0"])
        r2 = scorer.score_host(_rollout(2), [None] * 2, 1).rewards  # The pool still works.
    np.testing.assert_array_equal(np.asarray(r), [1, 0, 0, 0, 1])
    np.testing.assert_array_equal(np.asarray(r2), [1, 0])
    assert float(metrics["reward/host_timeouts"]) == 0.0
    assert float(metrics["reward/host_errors"]) == 2.0
    assert float(metrics["reward/correct"]) == pytest.approx(2 / 5)
    assert float(metrics["reward/task"]) == pytest.approx(2 / 5)
    # The hung sample (60 s) is cut at its 1 s timeout: had it not been, it would score
    # through the error path after its sleep (`float("hang")` raises) and count no timeout.
    r, metrics, _ = _score_on_host(_moody, ["hang"], num_workers=1, timeout_s=1.0)
    np.testing.assert_array_equal(np.asarray(r), [0])
    assert float(metrics["reward/host_timeouts"]) == 1.0
    assert float(metrics["reward/host_errors"]) == 0.0


def test_in_process_scoring_counts_a_raising_sample():
    r, metrics, _ = _score_on_host(_moody, ["1", "raise", "0"])
    np.testing.assert_array_equal(np.asarray(r), [1, 0, 0])
    assert float(metrics["reward/host_errors"]) == 1.0
    assert float(metrics["reward/host_timeouts"]) == 0.0


def test_pool_and_in_process_give_the_same_component_rewards(tok):
    """The run's scorer's host pool (`Scorer.host_scorer`) on countdown solutions and
    corruptions: the pool and the in-process loop agree sample by sample."""
    config = _config("task,format", "1.0,0.2")
    config.data.task = "countdown"
    config.data.task_kwargs = dict(max_number=9, max_target=30, answer_format="tags")
    task = tasks.get("countdown", max_number=9, max_target=30, answer_format="tags")
    examples = task.generate(12, seed=3)
    texts = [ex.solution for ex in examples[:6]] + [
        ex.solution.replace("<think>", "") for ex in examples[6:9]] + [
        "#### " + ex.answer for ex in examples[9:]]
    outputs = {}
    config.reward.timeout_s = 600.0  # Honest samples: a budget they cannot hit.
    for workers in (0, 2):
        config.reward.num_workers = workers
        scorer = _scorer(config, task, tok)
        with scorer.host_scorer() as pool:
            outputs[workers] = pool(texts, examples)
    (v0, c0, _), (v2, c2, _) = outputs[0], outputs[2]
    np.testing.assert_array_equal(v0, v2)
    assert set(c0) == set(c2) == {"task", "format", "correct"}
    for k in c0:
        np.testing.assert_array_equal(c0[k], c2[k])
    np.testing.assert_allclose(v0, [1.2] * 6 + [1.0] * 3 + [0.0] * 3, rtol=1e-6)


# ----------------------------------------------------------------------------- tags format

@pytest.mark.parametrize("name", ["arithmetic", "countdown", "sorting"])
def test_tags_format_solutions_earn_task_and_format_rewards(name):
    task = tasks.get(name, answer_format="tags")
    for ex in task.generate(30, seed=1):
        assert rewards.format_reward(ex.solution) == 1.0
        assert task.verify(ex.solution, ex) == 1.0 and task.check_steps(ex.solution, ex)
        answer = ex.solution[ex.solution.index("<answer>"):]
        assert task.verify(answer, ex) == 1.0  # No think block: right, but no format reward.
        assert rewards.format_reward(answer) == 0.0
        for bad in (f"#### {ex.answer}", ex.solution + " more", ex.solution + answer,
                    ex.solution.replace("</answer>", "")):
            assert task.verify(bad, ex) == 0.0, bad
    marker = tasks.get(name)
    ex = marker.example(0, seed=1)
    assert "####" in ex.solution and marker.verify(ex.solution, ex) == 1.0
    assert task.token_verifier(None) is None  # Tags are scored on the host.
    with pytest.raises(ValueError, match="answer_format"):
        tasks.get(name, answer_format="xml")


# ----------------------------------------------------------------------------- held-out data

def _write_jsonl(path, prompts):
    path.write_text("".join(json.dumps({"prompt": p, "answer": str(i)}) + "\n"
                            for i, p in enumerate(prompts)))


def test_file_data_is_split_by_prompt_hash_and_disjoint(tmp_path):
    prompts = [f"What is {i} + {i % 7}?" for i in range(300)]
    prompts += prompts[:40]  # Duplicated prompts must land on one side only.
    _write_jsonl(tmp_path / "d.jsonl", prompts)
    config = _config()
    config.data.source, config.data.path = "jsonl", str(tmp_path / "d.jsonl")
    task, train, test = build.build_task_and_sources(config)
    train_prompts = {train[i].prompt for i in range(len(train))}
    test_prompts = {test[i].prompt for i in range(len(test))}
    assert task is None and not train_prompts & test_prompts
    assert len(train) + len(test) == 340 and 15 <= len(test) <= 50
    assert "hash split: held out" in build.eval_data_name(config, test)
    _, _, again = build.build_task_and_sources(config)  # Deterministic.
    assert [again[i].prompt for i in range(len(again))] == [test[i].prompt
                                                            for i in range(len(test))]
    config.data.eval_fraction = 0.0
    with pytest.raises(ValueError, match="data.eval_fraction"):
        build.build_task_and_sources(config)


def test_a_small_held_out_file_is_evaluated_once_per_prompt():
    config = _config()
    config.eval.num_prompts, config.eval.batch_size = 500, 250
    examples = [tasks.Example(f"q{i}", "1", "", "t", str(i), "") for i in range(600)]
    for n, sizes in ((40, (40, 40)), (300, (250, 250)), (600, (500, 250))):
        assert build.eval_sizes(config, datasets.ExampleList(examples[:n])) == sizes
    assert build.eval_sizes(config, datasets.TaskSource(tasks.get("sorting"))) == (500, 250)


def test_eval_path_is_the_held_out_set(tmp_path, capsys):
    _write_jsonl(tmp_path / "train.jsonl", [f"q{i}" for i in range(20)])
    _write_jsonl(tmp_path / "eval.jsonl", ["q3", "e1", "e2"])
    config = _config()
    config.data.source, config.data.path = "jsonl", str(tmp_path / "train.jsonl")
    config.data.eval_path = str(tmp_path / "eval.jsonl")
    _, train, test = build.build_task_and_sources(config)
    assert len(train) == 20 and [test[i].prompt for i in range(3)] == ["q3", "e1", "e2"]
    name = build.eval_data_name(config, test)
    assert name.startswith("data.eval_path") and "1 also in data.path" in name
    assert "1 prompts of data.eval_path" in capsys.readouterr().out  # Overlap is warned.


def test_task_data_names_its_test_split():
    config = _config()
    task, train, test = build.build_task_and_sources(config)
    assert build.eval_data_name(config, test).startswith("arithmetic test split")
    assert not {train[i].key for i in range(200)} & {test[i].key for i in range(200)}


def test_split_by_prompt_needs_both_sides():
    exs = datasets.ExampleList([tasks.Example("p", "1", "", "t", "k", "")])
    with pytest.raises(ValueError, match="held out"):
        datasets.split_by_prompt(exs, test_fraction=0.5)


def test_code_component_reads_tests_from_the_answer_field():
    """`code` on a JSONL-style example: the answer field holds the tests (JSON list or one
    assert per line); the completion's fenced block runs in the sandbox."""
    from rlvr_jax.scoring import host_reward as components
    program = "```python\ndef add(a, b):\n    return a + b\n```"
    as_json = tasks.Example("write add", json.dumps(["assert add(1, 2) == 3",
                                                     "assert add(2, 2) == 4"]), "", "t", "k", "")
    as_lines = tasks.Example("write add", "assert add(1, 2) == 3\nassert add(0, 0) == 1\n",
                             "", "t", "k", "")
    assert components.code_tests(as_lines) == ["assert add(1, 2) == 3", "assert add(0, 0) == 1"]
    host = components.HostReward([("code", components.code_component, 1.0)], correct="code")
    assert host(program, as_json) == {"code": 1.0, "reward": 1.0, "correct": 1.0}
    assert host(program, as_lines)["code"] == 0.5  # One of two tests passes.
