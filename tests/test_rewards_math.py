"""Math verifiers: extraction, equivalence, adversarial outputs, labelled-set audit."""
import os
import sys

import pytest

from rlvr_jax.rewards import audit
from rlvr_jax.rewards import math as rm

PAIRS = os.path.join(os.path.dirname(__file__), "data", "answer_pairs.jsonl")


# ---------------------------------------------------------------- extraction

@pytest.mark.parametrize("text,expected", [
    ("so \\boxed{\\frac{1}{\\sqrt{2}}} is it", "\\frac{1}{\\sqrt{2}}"),
    ("nested \\boxed{\\{1, \\{2\\}\\}} set", "\\{1, \\{2\\}\\}"),
    ("\\boxed{{a}+{b}}", "{a}+{b}"),
    ("\\fbox{12}", "12"),
    ("\\boxed 7 done", "7"),
    ("Janet has 3 eggs.\n#### 1,234\n", "1,234"),
    ("Thus the answer is 3.5. Yes, sure.", "3.5"),
    ("Final answer: 12", "12"),
    ("I got 5 then 7", "7"),
    ("<think>2+2 is 4, or 5</think><answer>4</answer>", "4"),
    ("<answer>so \\boxed{9}</answer>", "9"),
    ("The value is -2.5 overall", "-2.5"),
])
def test_extract_answer(text, expected):
    assert rm.extract_answer(text) == expected


def test_extract_answer_nothing():
    assert rm.extract_answer("no numbers here") is None
    assert rm.extract_answer("answer: 7", fallback_last_number=False) == "7"
    assert rm.extract_answer("only 7 in prose", fallback_last_number=False) is None
    assert rm.extract_answer("\\boxed{") is None
    with pytest.raises(ValueError):
        rm.extract_answer(7)
    with pytest.raises(ValueError):
        rm.extract_answer("x", several_boxed="first")


def test_unbalanced_box_is_skipped():
    assert rm.extract_boxed("\\boxed{1 \\boxed{2}") == ["2"]


# ---------------------------------------------------------------- equivalence

@pytest.mark.parametrize("a,b", [
    ("12/36", "1/3"), ("0.5", "1/2"), ("1,000", "1000"), ("50%", "0.5"), ("\\frac{1}{2}", "1/2"),
    ("-3", "-3.0"), ("x=3", "3"), ("5 cm", "5"), ("(1,2]", "(1, 2]"), ("2\\sqrt{2}", "\\sqrt{8}"),
    ("2(x+1)", "2x+2"), ("3, 2, 1", "1,2,3"), ("1.5\\times10^{3}", "1500"), ("\u22125", "-5"),
    ("(-\\infty, 0) \\cup (1, \\infty)", "(-\\infty,0)\\cup(1,\\infty)"),
])
def test_equivalent(a, b):
    assert rm.answers_equivalent(a, b)
    assert rm.answers_equivalent(b, a)


@pytest.mark.parametrize("a,b", [
    ("[1,2]", "(1,2)"), ("0.333", "1/3"), ("5 m", "5 cm"), ("x^2", "x"), ("-5", "5"), ("50%", "5"),
    ("1,2", "1,2,3"), ("(1,2)", "(2,1)"), ("\\sqrt{3}", "1.732"), ("a-b", "b-a"), ("12 or 13", "12"),
])
def test_not_equivalent(a, b):
    assert not rm.answers_equivalent(a, b)
    assert not rm.answers_equivalent(b, a)


def test_numeric_reference_types():
    assert rm.math_reward("\\boxed{0.25}", 0.25) == 1.0
    assert rm.math_reward("\\boxed{4}", 4) == 1.0
    assert rm.answers_equivalent(None, "4") is False


@pytest.mark.timeout(120)  # A hang guard (a runaway evaluation never returns), not a bound.
def test_huge_power_is_bounded():
    assert rm.math_reward("\\boxed{9^{9^{9^{9}}}}", "7") == 0.0
    assert rm.math_reward("\\boxed{" + "(" * 300 + "1" + ")" * 300 + "}", "1") in (0.0, 1.0)


# ---------------------------------------------------------------- adversarial

REF = "7"


@pytest.mark.parametrize("completion", [
    # judge-fooling prefixes and empty reasoning
    "Thought process:", ":", ".", "Let's solve this problem step by step.", "Solution:",
    "The answer is correct.", "\\boxed{}", "",
    # the right number hidden in the prose, a different final answer
    "3 + 4 = 7, so doubling gives \\boxed{14}",
    "We know 7 is prime. Therefore the result is 8",
    "The answer is 7. Wait, that is wrong: the answer is 9.",
    # hedging: several boxed answers, enumerations
    "\\boxed{7} or maybe \\boxed{8}",
    "\\boxed{6, 7, 8}", "\\boxed{7 or 8}", "\\boxed{\\text{7 or 8}}", "\\boxed{7x}",
    "\\boxed{7777777}", "\\boxed{7 \\pm 1}",
    "<answer>6</answer> \\boxed{7}",
])
def test_rule_verifier_rejects_adversarial(completion):
    assert rm.math_reward(completion, REF) == 0.0


def test_several_equal_boxes_pass_and_last_mode():
    assert rm.math_reward("\\boxed{7} i.e. \\boxed{7.0}", REF) == 1.0
    assert rm.math_reward("\\boxed{8} no, \\boxed{7}", REF) == 0.0
    assert rm.math_reward("\\boxed{8} no, \\boxed{7}", REF, several_boxed="last") == 1.0


def test_prose_answers_pass():
    assert rm.math_reward("Adding them, the answer is $7$.", REF) == 1.0
    assert rm.math_reward("... so 3+4 = 7", REF) == 1.0
    assert rm.math_reward("... so 3+4 = 7", REF, fallback_last_number=False) == 0.0


# ---------------------------------------------------------------- math-verify

def test_math_verify_missing_gives_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "math_verify", None)
    assert not rm.math_verify_available()
    with pytest.raises(ImportError, match="pip install"):
        rm.get_math_verifier("math_verify")
    with pytest.warns(UserWarning, match="rule verifier"):
        assert rm.get_math_verifier("auto") is rm.math_reward
    with pytest.raises(ValueError):
        rm.get_math_verifier("llm")


def test_math_verify_reward():
    pytest.importorskip("math_verify")
    # Verdicts without math-verify's timeouts: a slow first parse on a loaded machine
    # cannot turn into a 0 (the timeouts are tested in test_rewards_math_hard.py).
    assert rm.math_verify_reward("so $\\boxed{\\frac{1}{2}}$", "0.5", timeout_s=None) == 1.0
    assert rm.math_verify_reward("so $\\boxed{3}$", "0.5", timeout_s=None) == 0.0
    assert rm.math_verify_reward("Thought process:", "0.5", timeout_s=None) == 0.0
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="timeout_s"):
            rm.math_verify_reward("so $\\boxed{3}$", "0.5", timeout_s=bad)
    assert rm.get_math_verifier("auto") is rm.math_verify_reward


# ---------------------------------------------------------------- labelled set

def test_labelled_set_and_rule_verifier_rates():
    pairs = audit.load_pairs(PAIRS)
    assert len(pairs) >= 200
    labels = [p["equivalent"] for p in pairs]
    assert sum(labels) >= 100 and len(labels) - sum(labels) >= 100
    verdicts = [rm.math_reward(audit.as_completion(p["candidate"]), p["reference"]) == 1.0
                for p in pairs]
    fn = sum(l and not v for l, v in zip(labels, verdicts)) / sum(labels)
    fp = sum(v and not l for l, v in zip(labels, verdicts)) / (len(labels) - sum(labels))
    # Regression guard for the rates reported in docs/verifiers.md (0 FN, 0 FP, in-sample).
    assert fn == 0 and fp == 0, (fn, fp)


def test_load_pairs_rejects_bad_rows(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reference": "1", "candidate": "1", "equivalent": "yes", "category": "x"}\n')
    with pytest.raises(ValueError, match="bad pair"):
        audit.load_pairs(str(bad))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no pairs"):
        audit.load_pairs(str(empty))
