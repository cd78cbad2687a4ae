"""Math verifier on the answer classes of issue #48 ("Bad days (c)"): the labelled set written
before the fixes (tests/data/answer_pairs_bad_days.jsonl) at the issue's target, and one focused
test per convention (docs/verifiers.md, "Conventions for the answers people write")."""
import collections
import os

import pytest

from rlvr_jax.rewards import audit
from rlvr_jax.rewards import math as rm
from rlvr_jax.rewards.math import choices, forms, units

BAD_DAYS = os.path.join(os.path.dirname(__file__), "data", "answer_pairs_bad_days.jsonl")
TARGET = 0.07  # the target: the default verifier errs on at most 7% of these pairs


def box(s):
    return f"So the final answer is $\\boxed{{{s}}}$."


def test_bad_days_set_at_target():
    """The default verifier (math_reward) on every pair, in-process (pure Python, ~0.1 s);
    the existing sets stay at 0 mistakes in test_rewards_math_hard's
    test_labelled_sets_have_no_mistakes (no regression)."""
    pairs = audit.load_pairs(BAD_DAYS)
    wrong = [p for p in pairs
             if (rm.math_reward(audit.pair_completion(p), p["reference"]) == 1.0) != p["equivalent"]]
    assert len(wrong) / len(pairs) <= TARGET, wrong
    by_class = collections.Counter(p["category"] for p in pairs)
    assert len(by_class) >= 15 and min(by_class.values()) >= 10, by_class
    assert sum(p["equivalent"] for p in pairs) >= 100 and sum(not p["equivalent"] for p in pairs) >= 80


@pytest.mark.parametrize("ref,cand,ok", [
    ("3.5", "3,5", True), ("0.125", "0,125", True), ("3, 5", "3,5", True),     # decimal comma
    ("1.5", "1,500", False), ("1000", "1,000", True), ("3", "3,5", False),     # vs thousands
    ("7:32", "\\frac{7}{32}", True), ("7:32", "14:64", True), ("7:32", "32:7", False),  # ratio
    ("1:2:3", "2:4:6", True), ("1:2:3", "1:2:4", False),
    ("y = 2x + 3", "2x - y + 3 = 0", True), ("y = 2x + 3", "y = -2x - 3", False),  # equations
    ("x^2+y^2=25", "(x-1)(x^2+y^2-25)=0", False),
    ("(2, -3)", "x = 2, y = -3", True), ("\\{-3, 2\\}", "x = 2, y = -3", False),  # points
    ("x = -5, p = 3", "-5, 3", True), ("x = -5, p = 3", "3, -5", False),        # ... in order
    ("x = 2, y = 3", "y = 3, x = 2", True),                                     # ... by name
    ("\\{-3, 2\\}", "x = -3, y = 2", False),                                    # never a set
    ("1,22", "1.22", True), ("V_1:V_2 = 11:21", "11:21", True),  # reference forms (others')
    ("\\{1, 2\\}", "(1, 2)", False), ("(1, 2)", "\\{1, 2\\}", False),               # tuple vs set
    ("(0, 5)", "(0, 2) \\cup [2, 5)", True), ("(0, 5)", "(0, 2) \\cup (2, 5)", False),
    ("(-\\infty,-2)\\cup(-2,\\infty)", "x \\neq -2", True), ("(-\\infty, \\infty)", "\\mathbb{R}", True),
    ("[2, \\infty)", "[2, \\infty]", False),
    ("(1, \\infty)", "x < 1 \\text{ or } x > 1", False), ("\\mathbb{R}", "x > 1, x < 5", False),
    ("(2, \\infty)", "\\{x \\mid x > 2\\}", True), ("\\emptyset", "\\{\\}", True),    # set-builder
    ("\\begin{pmatrix}2&4\\\\6&8\\end{pmatrix}", "2\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
    ("(2, -1, 3)", "2\\mathbf{i} - \\mathbf{j} + 3\\mathbf{k}", True),            # i, j, k
    ("(2, -1, 3)", "2i + j + 3k", False), ("3 + 4i", "3 + 4j", True), ("3 + 4i", "3 - 4j", False),
    ("2 \\text{ m}^2", "20000 \\text{ cm}^2", True), ("2 \\text{ m}^2", "2 \\text{ m}", False),  # units
    ("10 \\text{ m/s}", "36 \\text{ km/h}", True), ("1 \\text{ L}", "1000 \\text{ cm}^3", True),
    ("\\frac{\\pi}{2}", "90^\\circ", True), ("30^\\circ", "30", True),              # degrees
    ("\\frac{\\pi}{6}", "30", False), ("30", "\\frac{\\pi}{6}", False), ("30^\\circ", "0.5236", False),
    ("listen", "\\text{silent}", False), ("Alice", "\\text{\\emph{Alice}}", True),   # words
])
def test_conventions(ref, cand, ok):
    assert rm.math_reward(box(cand), ref) == float(ok)


@pytest.mark.parametrize("completion,ref,ok", [
    # A retraction between two boxes: the later box counts.
    ("So $\\boxed{8}$. Hold on, I forgot a day. $\\boxed{9}$", "9", True),
    ("So $\\boxed{8}$. Hold on, I forgot a day. $\\boxed{9}$", "8", False),
    # A hedge after a single box keeps it; an unhedged retraction withdraws it.
    ("Thus $\\boxed{8}$. Unless I made a mistake, this is right.", "8", True),
    ("Thus $\\boxed{8}$. I don't think that's wrong.", "8", True),
    ("Thus $\\boxed{8}$. Wait, that's wrong.", "8", False),
    ("It is $\\boxed{8}$ or $\\boxed{10}$.", "8", False),
    # A box and a later stated answer that disagree: two answers, none counts.
    ("Thus $\\boxed{8}$. Let me check if that is wrong: it is, so the answer is 9.", "8", False),
    ("Thus $\\boxed{8}$. Let me check if that is wrong: it is, so the answer is 9.", "9", False),
    ("Thus $\\boxed{8}$. So the final answer is \"8\".", "8", True),
    ("Thus $\\boxed{8}$ is the answer: eight ways in all.", "8", True),     # words, no number
    # The answer phrase drops a remark in words, not a hedge.
    ("The answer is 17 (since 17 is prime).", "17", True),
    ("The answer is 12 (or 13 if we count today).", "12", False),
    ("The answer is 12 (but it could be 13).", "12", False),
    ("The answer is 12 \u2014 though it might be 13.", "12", False),
    ("The final answer is 12 \u2014 computed in 3 steps.", "12", True),
    # The fallback skips a closing check or remark.
    ("So there are 20 apples.\n\nNote: there were 5 baskets.", "5", False),
    ("So there are 20 apples.\n\nNote: there were 5 baskets.", "20", True),
    ("That makes 42. I hope this helps with your 2 questions!", "42", True),
    # "x = a or x = b" ending the response answers a list reference, never a single value.
    ("So $x = -3$ or $x = 2$.", "-3, 2", True), ("So $x = -3$ or $x = 2$.", "2", False),
    ("We get $(1+2+3+4+5+6)/6 = 3,5$.", "3.5", True),
    ("We find that $x \\neq 3$.", "x != 3", True), ("We find that $x \\neq 3$.", "3", False),
])
def test_extraction_conventions(completion, ref, ok):
    assert rm.math_reward(completion, ref) == float(ok)


OPTIONS = "The options are (A) 12 (B) 24 (C) 36 (D) 48."


@pytest.mark.parametrize("completion,ref,ok", [
    (OPTIONS + " We get $\\boxed{24}$.", "B", True), (OPTIONS + " We get $\\boxed{36}$.", "B", False),
    ("We get $\\boxed{24}$.", "B", False),                       # no options listed
    (OPTIONS + " So $\\boxed{B}$.", "24", True), ("So $\\boxed{B}$.", "24", False),
    ("A. 24\nB. 24\nC. 36\n\nThus $\\boxed{24}$.", "B", False),  # the value under two letters
    ("(A) 1 (B) 2\n(A) 3 (B) 4\n\n$\\boxed{2}$", "B", False),    # a letter with two values
])
def test_choice_letter_vs_listed_value(completion, ref, ok):
    assert rm.math_reward(completion, ref) == float(ok)


def test_helpers():
    assert choices.listed_options("$\\textbf{(A)}\\ 12 \\qquad \\textbf{(B)}\\ 24$") == {
        "A": "12", "B": "24"}
    assert forms.decimal_comma("12,75") == "12.75" and forms.decimal_comma("1,500") is None
    assert forms.ratio_terms("7 : 32") == ["7", "32"] and forms.ratio_terms("x:3") is None
    assert units.unit_dims("sq ft") == units.unit_dims("ft^2")
    assert units.unit_dims("km/h")[0] == units.unit_dims("m/s")[0]
    assert units.unit_dims("cm^2")[0] != units.unit_dims("cm")[0]
    assert units.split_unit("90 degree") == ("90", "degree")
    assert rm.normalize_answer("90^\\circ") == "90 degree"
    assert rm.normalize_answer("y = 2x", strip_assign=False) == "y = 2x"
