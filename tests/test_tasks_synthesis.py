"""Program-synthesis task: prompts, worked solutions, hidden tests, splits, sandboxed reward."""
import numpy as np
import pytest

from rlvr_jax import scoring, tasks
from rlvr_jax.data import adaptive
from rlvr_jax.data.tokenizers import load_tokenizer
from rlvr_jax.rewards import code as rc
from rlvr_jax.scoring import components


def test_examples_show_f0_f1_and_hide_the_tests():
    task = tasks.get("synthesis", max_slope=9, max_intercept=20, shown=2, num_tests=4)
    for ex in task.generate(50, seed=0):
        a, b = ex.meta["slope"], ex.meta["intercept"]
        assert ex.prompt == f"f(0)={b} f(1)={a + b}:"
        assert ex.solution == f"b={b} a={a + b}-{b}={a} #### x*{a}+{b}"
        assert ex.answer == f"x*{a}+{b}"
        tests = ex.meta["tests"]["tests"]
        assert len(tests) == 4
        for t in tests:  # hidden inputs: never f(0) or f(1), the expected value is right
            x, y = (int(v) for v in t.replace("assert f(", "").split(") == "))
            assert x >= 2 and y == a * x + b
            assert f"f({x})" not in ex.prompt
    three = tasks.get("synthesis", shown=3).example(0, seed=0)
    assert three.prompt.count("f(") == 3 and "f(2)=" in three.prompt


def test_splits_are_disjoint_and_deterministic():
    task = tasks.get("synthesis")
    train = {ex.key for ex in task.generate(300, seed=0, split="train")}
    test = task.generate(100, seed=1, split="test")
    assert not train & {ex.key for ex in test}
    assert [ex.key for ex in test] == [ex.key for ex in task.generate(100, seed=1, split="test")]
    assert len({ex.key for ex in test}) > 50  # a held-out split of distinct functions


def test_reward_runs_the_answer_in_the_sandbox():
    """The verifier (`scoring.task_verifier`) and the `code` component agree; equivalent
    expressions pass; prose, wrong or multi-line answers score 0; the worked solution fits
    the builtin tokenizer. The task itself never runs a program."""
    task = tasks.get("synthesis", max_intercept=20)
    verifier = scoring.task_verifier(task)
    ex = task.example(3, seed=0)
    a, b = ex.meta["slope"], ex.meta["intercept"]
    good = [ex.solution, f"#### {a}*x+{b}", f"#### {b} + x * {a}", f"#### (x+0)*{a}+{b}"]
    bad = [f"#### x*{a + 1}+{b}", f"x*{a}+{b}", f"#### x*{a}+{b}\nimport os",
           f"#### x*{a}+{b} #### 1", "#### __import__('os')._exit(0)", "#### lambda: 1", ""]
    texts = good + bad
    verdicts = [verifier.verify(t, ex) for t in texts]
    assert verdicts == [1.0] * len(good) + [0.0] * len(bad)
    code = components.host_component("code", task)
    comp = [code(t, ex) for t in texts]
    assert comp[:len(good)] == [1.0] * len(good) and max(comp[len(good):]) < 1.0
    batch = rc.program_rewards([task.program(t, ex) for t in texts], [ex.meta["tests"]] * len(texts))
    np.testing.assert_array_equal(batch, np.asarray(comp, np.float32))
    assert verifier.check_steps(ex.solution, ex)
    assert not verifier.check_steps(f"b={b} a={a + b}-{b}={a + 1} #### x*{a}+{b}", ex)
    assert not verifier.check_steps(f"b={b} a={a + b}-{b}={a} #### x*{a + 1}+{b}", ex)
    assert task.answer_key(f"#### x * {a} + {b}") == task.answer_key(ex.solution)
    for fn in (task.verify, task.check_steps):
        with pytest.raises(TypeError, match="task_verifier"):
            fn(ex.solution, ex)
    tok = load_tokenizer("builtin")
    assert tok.decode(tok.encode(ex.solution)) == ex.solution


def test_a_mixture_with_synthesis_runs_its_programs_through_the_scorer():
    """A mixture's synthesis examples are judged in the sandbox, its arithmetic ones by
    arithmetic's own verify: the scorer asks the mixture which task an example is."""
    mix = adaptive.MixtureTask({"syn": tasks.get("synthesis"), "add": tasks.Arithmetic()}, [1, 1])
    verifier = scoring.task_verifier(mix)
    examples = mix.generate(12, seed=0)
    assert {ex.task for ex in examples} == {"syn", "add"}
    for ex in examples:
        assert verifier.verify(ex.solution, ex) == 1.0 and verifier.check_steps(ex.solution, ex)
        wrong = ex.solution.replace("#### ", "#### 1")
        assert verifier.verify(wrong, ex) == 0.0
    syn = next(ex for ex in examples if ex.task == "syn")
    with pytest.raises(TypeError, match="sandbox"):
        mix.verify(syn.solution, syn)


def test_bad_knobs():
    for kwargs in (dict(shown=1), dict(max_slope=0), dict(num_tests=0),
                   dict(num_tests=200, max_test_input=99), dict(style="long")):
        with pytest.raises(ValueError):
            tasks.get("synthesis", **kwargs)
