"""Synthetic tasks: generators, splits, host verifiers (incl. adversarial outputs), step checks."""
import pytest

from rlvr_jax import tasks

ALL = [
    tasks.Arithmetic(ops=("add", "sub", "mul"), min_digits=1, max_digits=3, mul_max_digits=2),
    tasks.Arithmetic(ops=("add",), max_digits=2, style="direct"),
    tasks.Countdown(num_numbers=4, max_number=25),
    tasks.Countdown(num_numbers=3, style="direct"),
    tasks.Sorting(min_len=2, max_len=7, max_value=30),
]


@pytest.mark.parametrize("task", ALL, ids=lambda t: f"{t.name}-{t.style}")
def test_reference_solutions_verify_and_steps_check(task):
    for ex in task.generate(200, seed=3):
        assert ex.solution.endswith(f"{tasks.MARKER} {ex.answer}")
        assert task.verify(ex.solution, ex) == 1.0, ex
        assert task.check_steps(ex.solution, ex), ex


@pytest.mark.parametrize("task", ALL, ids=lambda t: f"{t.name}-{t.style}")
def test_generation_is_deterministic_and_splits_are_disjoint(task):
    train = task.generate(300, seed=0, split="train")
    assert train == task.generate(300, seed=0, split="train")
    assert train[100:] == task.generate(200, seed=0, split="train", start=100)
    assert train != task.generate(300, seed=1, split="train")
    test = task.generate(100, seed=0, split="test")
    assert {e.key for e in train}.isdisjoint({e.key for e in test})
    assert all(tasks.split_of(e.key, test_fraction=task.test_fraction) == "test" for e in test)
    assert all(e.split == "train" for e in train) and all(e.split == "test" for e in test)


def test_arithmetic_values_and_format():
    task = tasks.Arithmetic(ops=("add",), max_digits=3)
    ex = task.make("add", 456, 257)
    assert (ex.prompt, ex.solution, ex.answer_value) == ("456+257=", "13 11 7 #### 713", 713)
    sub = task.make("sub", 456, 257)
    assert sub.solution == "19 19 1 #### 199"
    mul = task.make("mul", 23, 58)
    assert mul.solution == "184 1150 #### 1334"
    for op in ("add", "sub", "mul"):
        t = tasks.Arithmetic(ops=(op,), max_digits=4, mul_max_digits=3)
        for e in t.generate(100, seed=2):
            a, b = e.meta["a"], e.meta["b"]
            assert e.answer_value == {"add": a + b, "sub": a - b, "mul": a * b}[op]


def test_arithmetic_adversarial():
    task = tasks.Arithmetic()
    ex = task.make("add", 23, 58)
    zero = ["81", "the answer is 81", "Thought process:", "Thought process: 81",
            "I think #### is 81", "#### 81 #### 81", "#### 80 #### 81", "#### 81 #### 80",
            "#### 81.", "#### 81 because", "##### 81", "### 81", "#### 8 1", "#### 80",
            "#### 81!", "\\boxed{81}", "#### 0081000", "#### +81", "#### 81/1", "#### 081 x",
            "#### 1234567890", "#### 81e0", "#### \u0668\u0661"]
    for text in zero:
        assert task.verify(text, ex) == 0.0, text
    for text in ["#### 81", "####81", "  #### 81 \n", "x #### 81", "#### 081",
                 "Thought process: #### 81", "11,8 ### #### 81"]:
        assert task.verify(text, ex) == 1.0, text
    # correct answer, wrong or missing reasoning: passes verify, fails check_steps
    for text in ["#### 81", "Thought process: #### 81", "11 9 #### 81", "11 8 1 #### 81"]:
        assert not task.check_steps(text, ex), text
    assert task.check_steps("11 8 #### 81", ex) and task.check_steps(" 11  8\n####81", ex)


def test_countdown_verifier_is_safe_and_strict():
    task = tasks.Countdown()
    ex = tasks.Countdown().generate(1, seed=0)[0]
    ex = ex.__class__(**{**ex.to_dict(), "meta": {"numbers": [3, 5, 7], "target": 22}})
    assert task.verify("#### 5*3+7", ex) == 1.0
    assert task.verify("#### (3*5)+7", ex) == 1.0
    assert task.verify("#### 7+3*5 ", ex) == 1.0
    zero = ["#### 22", "#### 5*3+7+0", "#### 7+7+7+1", "#### 3*5+7*1", "#### (5*3)+7)",
            "#### 5*3+7 #### 5*3+7", "5*3+7", "#### __import__('os').system('true')",
            "#### 5**3", "#### 7/(5-5)+22", "#### 5*3+7.0", "#### -3+25", "#### 3 5 7",
            "#### " + "(" * 100 + "22" + ")" * 100, "#### 5*3+7 = 22", "Thought process:",
            "#### " + "1+" * 200 + "1"]
    for text in zero:
        assert task.verify(text, ex) == 0.0, text
    assert task.check_steps("5*3=15 15+7=22 #### 5*3+7", ex)
    assert not task.check_steps("5*3=15 15+7=23 #### 5*3+7", ex)   # wrong arithmetic
    assert not task.check_steps("5*3=15 5+7=12 #### 5*3+7", ex)    # 5 reused
    assert not task.check_steps("#### 5*3+7", ex)                   # no reasoning
    assert not task.check_steps("5*3=15 15+7=22 #### 22", ex)       # answer not an expression


def test_sorting_verifier():
    task = tasks.Sorting()
    ex = task.generate(1, seed=0)[0]
    ex = ex.__class__(**{**ex.to_dict(), "answer": "3 3 5 9", "meta": {"values": [5, 3, 9, 3]}})
    assert task.verify("#### 3 3 5 9", ex) == 1.0
    for text in ["#### 3 5 9", "#### 3  3 5 9", "#### 9 5 3 3", "#### 3,3,5,9", "3 3 5 9",
                 "#### 3 3 5 9 #### 3 3 5 9", "#### 3 3 5 9 10", "Thought process:"]:
        assert task.verify(text, ex) == 0.0, text
    assert task.check_steps("3<=3<5<9 #### 3 3 5 9", ex)
    assert not task.check_steps("3<3<5<9 #### 3 3 5 9", ex)
    assert not task.check_steps("3<=3<5 #### 3 3 5 9", ex)
    assert not task.check_steps("3<=3<5<9<10 #### 3 3 5 9", ex)


def test_bad_knobs_raise():
    with pytest.raises(ValueError, match="ops"):
        tasks.Arithmetic(ops=("pow",))
    with pytest.raises(ValueError, match="digits"):
        tasks.Arithmetic(ops=("mul",), max_digits=6)
    with pytest.raises(ValueError, match="test_fraction"):
        tasks.Arithmetic(test_fraction=1.0)
    with pytest.raises(ValueError, match="split"):
        tasks.Arithmetic().generate(1, seed=0, split="valid")
    with pytest.raises(ValueError, match="test split is empty"):
        tasks.Arithmetic(test_fraction=0.0).generate(1, seed=0, split="test")
    with pytest.raises(ValueError, match="unknown task"):
        tasks.get("chess")
    assert isinstance(tasks.get("sorting", max_len=4), tasks.Sorting)
