"""Multi-turn episodes with tools on the host (rlvr_jax.multiturn.host / tools): the same
episodes as the on-device path for the same seed, tools that raise or hang, the sandboxed
Python tool, the lookup tool, the number-guessing game and its task."""
import dataclasses
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import multiturn, tasks
from rlvr_jax.multiturn import HostReply
from rlvr_jax.tasks.guess_number import guess_reply
from tests import numerics
from tests.multiturn_helpers import doc_example, prompt_arrays, sampling_config


_prompts = prompt_arrays


def _sc(tok, **kw):
    return sampling_config(tok, **{"max_new_tokens": 24, "num_samples": 4, "temperature": 1.5,
                                   **kw})


def _assert_same_episodes(a, b, model_config, prompt_len):
    (ra, ea), (rb, eb) = a, b
    for name in ("tokens", "mask", "loss_mask", "turn_ids", "finished"):
        np.testing.assert_array_equal(np.asarray(getattr(ra, name)), np.asarray(getattr(rb, name)),
                                      err_msg=name)
    numerics.assert_forward_close(ra.logprobs, rb.logprobs, model_config,
                                  prompt_len + ra.tokens.shape[1])
    for name in ("turns", "calls", "errors", "env_reward"):
        np.testing.assert_array_equal(np.asarray(getattr(ea, name)), np.asarray(getattr(eb, name)),
                                      err_msg=name)


def test_calculator_on_the_host_gives_the_device_episodes(params, model_config, tok):
    """Same seed, same episodes: the device calculator inside the program vs the host one
    between segments. A random policy at T=1.5 closes turns with ']' often enough to call
    (mostly malformed calls, answered '=?'): 0-5 calls in these 32 rows by seed; seed 13
    makes 5 on CPU, so no single draw can leave the comparison without a call. A well-formed
    call is checked on its own."""
    device = multiturn.Calculator.for_tokenizer(tok, max_turns=3, max_turn_tokens=8)
    host = multiturn.build_env("calculator_host", tok, max_turns=3, max_turn_tokens=8,
                               max_obs_tokens=device.max_obs_tokens,
                               timeout_s=600.0)  # A budget its answers cannot hit.
    prompts, pmask = _prompts(tok, ["12*34=", "7*8=", "100-1=", "5+5="] * 2)
    answers = jnp.zeros((8,), jnp.int32)
    rng = jax.random.PRNGKey(13)
    on_device = multiturn.jit_generate_episodes(params, prompts, pmask, answers, rng,
                                                model_config=model_config,
                                                sampling_config=_sc(tok), env=device)
    with multiturn.HostTools(host, tok, num_workers=2) as tools:
        on_host = multiturn.play_on_host(params, prompts, pmask, answers, rng,
                                         model_config=model_config, sampling_config=_sc(tok),
                                         env=host, tools=tools)
        assert tools.calls == int(np.asarray(on_host[1].calls).sum()) > 0
    _assert_same_episodes(on_device, on_host, model_config, prompts.shape[1])
    # The host tool's observation for a well-formed call is the device tool's.
    assert host.respond(None, "x[123*456]").text == "=56088"


@dataclasses.dataclass(frozen=True)
class Flaky(multiturn.HostEnv):
    """Every model token but EOS calls; by the call's characters: some raise, the others
    answer ' ok' (reward 0.25). Its answers come back within a budget they cannot hit (a
    hanging call is `Hangs`, below)."""
    timeout_s: float = 600.0

    def respond(self, state, turn_text):
        if sum(map(ord, turn_text)) % 2:
            raise RuntimeError("tool broke")
        return HostReply(" ok", state, reward=0.25)


def test_a_tool_that_raises_answers_an_error_and_the_run_goes_on(params, model_config, tok):
    env = Flaky(call_end_ids=tuple(i for i in range(model_config.vocab_size)
                                   if i != tok.eos_id), max_turns=6, max_turn_tokens=4,
                max_obs_tokens=4)
    prompts, pmask = _prompts(tok, ["1+1=", "2+2="])
    with multiturn.HostTools(env, tok, num_workers=4) as tools:
        rollout, eps = multiturn.play_on_host(
            params, prompts, pmask, jnp.zeros((2,), jnp.int32), jax.random.PRNGKey(0),
            model_config=model_config, sampling_config=_sc(tok, num_samples=2,
                                                           max_new_tokens=16),
            env=env, tools=tools)
    errors, calls = np.asarray(eps.errors), np.asarray(eps.calls)
    assert calls.sum() > 0 and 0 < errors.sum() < calls.sum()
    np.testing.assert_allclose(np.asarray(eps.env_reward), 0.25 * (calls - errors))
    tokens, mask, loss = (np.asarray(x) for x in (rollout.tokens, rollout.mask, rollout.loss_mask))
    text = tok.decode([int(t) for t in tokens[0][(mask[0] == 1) & (loss[0] == 0)]])
    assert "error" in text or "ok" in text


def test_python_tool_runs_in_the_sandbox():
    # Programs that end by themselves get a budget they cannot hit; the loop a short one.
    env = multiturn.PythonTool(call_end_ids=(98,), max_obs_tokens=16, timeout_s=600.0)
    assert env.respond(None, "[print(6*7)]").text == " 42"
    short = dataclasses.replace(env, timeout_s=1.0)
    for tool, bad in ((env, "[print(1/]"), (env, "[1/0]"), (short, "[while True: pass]"),
                      (env, "[import os; os._exit(1)]")):
        reply = tool.respond(None, bad)
        assert reply.error and reply.text == env.error_text, bad
    # The program is isolated: it cannot see the trainer's files or environment.
    reply = env.respond(None, "[import os; print(os.environ.get('HOME'))]")
    assert not reply.error and "/root" not in reply.text


def test_lookup_tool(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"key": "Paris", "text": "capital of France"}) + "\n\n"
                    + json.dumps({"key": "7", "text": "seven"}) + "\n")
    env = multiturn.LookupTool(call_end_ids=(98,), corpus_path=str(path))
    assert env.respond(None, "look [ paris]").text == " capital of France"
    assert env.respond(None, "[7]").text == " seven"
    assert env.respond(None, "[Rome]").text == " none"
    with pytest.raises(FileNotFoundError, match="no such file"):
        multiturn.LookupTool(call_end_ids=(98,), corpus_path=str(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": 1}\n')
    with pytest.raises(ValueError, match="line 1"):
        multiturn.LookupTool(call_end_ids=(98,), corpus_path=str(bad))


def test_guess_number_game_and_task():
    task = tasks.get("guess_number")
    assert guess_reply(1, 32, 20, "16") == (" up 17-32", 17, 32, False)
    assert guess_reply(17, 32, 20, "24") == (" down 17-23", 17, 23, False)
    assert guess_reply(17, 23, 20, "20")[0] == " yes"
    assert guess_reply(17, 23, 20, "x")[3]
    ex = task.make(1, 32, 20, [16, 24, 20])
    assert ex.solution == "[16] up 17-32[24] down 17-23[20] yes"
    assert task.verify(ex.solution, ex) == 1.0 and task.check_steps(ex.solution, ex)
    # Scored on the model's tokens: the guesses alone (replies are never read).
    assert task.verify("[16][24][20]", ex) == 1.0
    assert task.verify("[1][2][3][4][5][6][20]", ex) == 0.0  # Past ⌈log2 32⌉ + 1 = 6 guesses.
    assert task.verify("yes [21]", ex) == 0.0
    assert not task.check_steps("[16][10][20]", ex)  # 10 was already ruled out.
    examples = task.generate(300, seed=0)
    rate = np.mean([task.verify(e.solution, e) for e in examples])
    assert 0.5 < rate < 0.95  # The warm-up traces search at random inside the interval.
    assert all(e.meta["lo"] <= e.answer_value <= e.meta["hi"] for e in examples)
    test = {e.key for e in task.generate(50, seed=0, split="test")}
    assert not test & {e.key for e in examples}


@dataclasses.dataclass(frozen=True)
class Hangs(multiturn.HostEnv):
    timeout_s: float = 0.3

    def respond(self, state, turn_text):
        time.sleep(60)
        return HostReply(" late", state)


def test_a_hanging_call_is_answered_with_an_error_at_its_timeout(tok):
    """Answered at its timeout: waited for, the call would answer ' late' without error."""
    env = Hangs(call_end_ids=(98,), max_obs_tokens=8)
    turn = np.zeros((2, env.max_turn_tokens), np.int32)
    turn[:, 0] = 98
    with multiturn.HostTools(env, tok, num_workers=2) as tools:
        out = tools.answer([None, None], turn, np.array([1, 1]), np.array([True, False]))
    assert out.error.tolist() == [True, False] and out.obs_len[1] == 0
    assert tok.decode([int(t) for t in out.obs[0, :out.obs_len[0]]]) == env.error_text


def test_the_docs_host_tool_example_runs():
    """docs/multiturn.md's ≤20-line host tool, executed as written."""
    scope = doc_example("A host tool in ≤ 20 lines")
    env = scope["Reverse"](call_end_ids=(98,))
    state = env.start(None)
    replies = []
    for _ in range(4):
        reply = env.respond(state, "x[abc]")
        state = reply.state if not reply.error else state
        replies.append((reply.text, reply.error))
    assert replies == [(" cba", False)] * 3 + [(" no", True)]


def test_a_whole_host_game_run_through_the_trainer(tmp_path, monkeypatch):
    """configs/guess_number.py end to end at toy size (`loop.run`, the split path): the
    warm-up replays its traces against the game, evaluation and RL play episodes on the host,
    the rewards are the task's verdicts on the guesses, the metrics carry the tool statistics
    and the host tools' cost."""
    import importlib.util
    import os
    from rlvr_jax.train import loop
    from rlvr_jax.train.logging import read_metrics
    path = os.path.join(os.path.dirname(__file__), "..", "configs", "guess_number.py")
    spec = importlib.util.spec_from_file_location("guess_number_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    for section, key, value in (("sft", "steps", 2), ("sft", "batch_size", 8), ("rl", "steps", 1),
                                ("rl", "num_prompts", 2), ("rl", "num_samples", 2),
                                ("eval", "num_prompts", 4), ("eval", "batch_size", 4),
                                ("eval", "k", 1), ("checkpoint", "every", 0),
                                ("sampling", "max_new_tokens", 64), ("env", "max_turns", 5),
                                ("log_samples_every", None, 1)):
        if key is None:
            config[section] = value
        else:
            setattr(config[section], key, value)
    config.data.task_kwargs = dict(min_width=8, max_width=8, max_start=60)
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    summary = loop.run(config, str(tmp_path), progress=False)
    assert 0.0 <= summary["after_rl"]["eval/pass@1"] <= 1.0
    rl = [r for r in read_metrics(os.path.join(tmp_path, "metrics.jsonl")) if r["phase"] == "rl"]
    assert len(rl) == 1
    for key in ("tool/calls", "tool/call_rate", "tool/segments", "tool/host_ms_per_call",
                "episode/observation_fraction", "reward/correct", "train/loss"):
        assert np.isfinite(rl[0][key]), key
    task = tasks.get("guess_number", min_width=8, max_width=8, max_start=60)
    for sample in read_metrics(os.path.join(tmp_path, "samples.jsonl")):
        lo, hi = (int(x) for x in sample["prompt"].rstrip("?").split("-"))
        ex = task.make(lo, hi, int(sample["answer"]))
        assert sample["reward"] == task.verify(sample["completion"], ex)
