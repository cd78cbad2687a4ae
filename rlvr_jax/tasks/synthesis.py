"""Program synthesis: write the body of ``f`` from a few of its values.

Formats:
  prompt    ``"f(0)=3 f(1)=8:"``                  (``shown`` values, from f(0) on)
  solution  ``"b=3 a=8-3=5 #### x*5+3"``          (style="steps"; ``"#### x*5+3"`` for "direct")

The hidden function is ``f(x) = a*x + b`` (slope ``a`` in 1..max_slope, intercept ``b``
in 0..max_intercept). The answer is a Python expression in ``x`` — any one: ``x*5+3``,
``5*x+3`` and ``3+x*5`` are all right — that `program` wraps as ``def f(x): return …``
(one line; a missing or multi-line answer is no program). Its verdict is a sandbox run
against ``num_tests`` hidden inputs (``example.meta["tests"]``, never shown in the prompt,
drawn from ``shown``..``max_test_input``), which the task never runs itself: the reward is
the sandboxed ``code`` component and correctness `scoring.task_verifier(task).verify` (1.0
when every hidden test passes). Nothing is evaluated in-process. `steps_hold`: ``b=`` is
f(0) and ``a=f(1)-f(0)=…`` is right, on the values of the prompt.
"""
from __future__ import annotations

import re

from rlvr_jax.tasks import base

TEMPLATE = "def f(x):\n    return {answer}\n"
_STEPS = re.compile(r"b=(-?\d+) a=(-?\d+)-(-?\d+)=(-?\d+)")


class Synthesis(base.ProgramTask):
    """Synthesise ``f`` (a linear function of ``x``) from its first values.

    Args (keyword-only):
      max_slope: the slope a is drawn from 1..max_slope.
      max_intercept: the intercept b is drawn from 0..max_intercept.
      shown: how many values the prompt shows (f(0) .. f(shown-1)); at least 2.
      num_tests: hidden test inputs per problem.
      max_test_input: hidden inputs are drawn from shown..max_test_input.
      style: "steps" or "direct".
      test_fraction: share of problems (by hash of the function) in the test split.
      answer_format: "marker" or "tags" (`rlvr_jax.tasks.base`).
    """

    name = "synthesis"
    salt = 4

    def __init__(self, *, max_slope: int = 9, max_intercept: int = 99, shown: int = 2,
                 num_tests: int = 4, max_test_input: int = 99, style: str = "steps",
                 test_fraction: float = 0.2, answer_format: str = "marker"):
        super().__init__(test_fraction=test_fraction, answer_format=answer_format)
        if max_slope < 1 or max_intercept < 0:
            raise ValueError(f"need max_slope >= 1 and max_intercept >= 0, got {max_slope}, "
                             f"{max_intercept}")
        if shown < 2:
            raise ValueError(f"shown must be >= 2 (f(0) and f(1)), got {shown}")
        if not 1 <= num_tests <= max_test_input - shown + 1:
            raise ValueError(f"need 1 <= num_tests <= max_test_input - shown + 1, got "
                             f"num_tests={num_tests}, max_test_input={max_test_input}")
        if style not in ("steps", "direct"):
            raise ValueError(f"style must be 'steps' or 'direct', got {style!r}")
        self.max_slope, self.max_intercept, self.shown = max_slope, max_intercept, shown
        self.num_tests, self.max_test_input, self.style = num_tests, max_test_input, style

    def _sample(self, rng):
        a = int(rng.integers(1, self.max_slope + 1))
        b = int(rng.integers(0, self.max_intercept + 1))
        inputs = sorted(int(x) for x in rng.choice(
            range(self.shown, self.max_test_input + 1), self.num_tests, replace=False))
        values = [a * x + b for x in range(self.shown)]
        answer = f"x*{a}+{b}"
        steps = f"b={values[0]} a={values[1]}-{values[0]}={a}"
        solution = self.render(steps if self.style == "steps" else None, answer)
        prompt = " ".join(f"f({x})={v}" for x, v in enumerate(values)) + ":"
        tests = {"tests": [f"assert f({x}) == {a * x + b}" for x in inputs], "mode": "assert"}
        return base.Example(prompt=prompt, answer=answer, solution=solution, task=self.name,
                            key=f"synthesis:{a}*x+{b}", split="train",
                            meta={"tests": tests, "slope": a, "intercept": b, "shown": values})

    def program(self, completion: str, example: base.Example) -> str | None:
        """``def f(x): return <answer>`` for the one-line final answer, else None."""
        del example
        parts = self.split(completion)
        answer = None if parts is None else parts[1].strip(base.WHITESPACE)
        if not answer or "\n" in answer or "\r" in answer:
            return None
        return TEMPLATE.replace("{answer}", answer)

    def answer_key(self, completion: str):
        """The answer with all whitespace removed (``x * 5 + 3`` and ``x*5+3`` vote
        together), or None."""
        parts = self.split(completion)
        key = None if parts is None else "".join(parts[1].split())
        return key or None

    def steps_are_right(self, chunks: list[str], example: base.Example) -> bool:
        m = _STEPS.fullmatch(" ".join(chunks))
        if m is None:
            return False
        b, f1, f0, a = (int(g) for g in m.groups())
        shown = example.meta["shown"]
        return b == shown[0] and f0 == shown[0] and f1 == shown[1] and a == f1 - f0
