"""Multi-digit arithmetic: ``a+b``, ``a-b`` (a >= b), ``a*b``.

Formats (kept short for tiny models; every character is in the builtin tokenizer):

  prompt    ``"456+257="``
  solution  ``"13 11 7 #### 713"``   (style="steps"; completion = solution + EOS)
            ``"#### 713"``           (style="direct")

Worked steps, least-significant column first:
  add: the column sums including the carry in (0..19): digit = s % 10, carry out = s // 10.
  sub: per column (a_i - b_i - borrow_in) mod 10 + 10 * borrow_out (0..19), so the same
       "digit = s % 10, flag = s // 10" reading applies.
  mul: the partial products ``a * b_j * 10**j`` for each digit b_j of b.

`verify` follows the shared rule of `rlvr_jax.tasks.base` (one ``####``, then only the
integer). `check_steps` also requires the reasoning before the marker to be exactly the
step list above (whitespace-separated).
"""
from __future__ import annotations

import numpy as np

from rlvr_jax.tasks import base

_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


def column_steps(op: str, a: int, b: int) -> list[int]:
    """The worked steps for ``a op b`` (see module docstring)."""
    if op == "mul":
        return [a * int(d) * 10**j for j, d in enumerate(reversed(str(b)))]
    da, db = str(a)[::-1], str(b)[::-1]
    steps, flag = [], 0
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        if op == "add":
            s = x + y + flag
            flag = s // 10
            steps.append(s)
        elif op == "sub":
            v = x - y - flag
            flag = 1 if v < 0 else 0
            steps.append(v % 10 + 10 * flag)
        else:
            raise ValueError(f"unknown op {op!r}")
    return steps


class Arithmetic(base.Task):
    """Arithmetic problems.

    Args (keyword-only):
      ops: subset of ("add", "sub", "mul"), drawn uniformly.
      min_digits, max_digits: digits of each operand, drawn uniformly per operand.
      mul_max_digits: cap on the digits of the second factor of a product (default
        `max_digits`); small values keep products and step lists short.
      style: "steps" (column steps before the marker) or "direct" (marker and answer only).
      test_fraction: share of the problem space (by hash) reserved for the test split.
      answer_format: "marker" (``#### 713``) or "tags"
        (``<think>13 11 7</think><answer>713</answer>``; scored on the host only).
    """

    name = "arithmetic"
    salt = 1

    def __init__(self, *, ops=("add",), min_digits: int = 1, max_digits: int = 2,
                 mul_max_digits: int | None = None, style: str = "steps",
                 test_fraction: float = 0.1, answer_format: str = "marker"):
        super().__init__(test_fraction=test_fraction, answer_format=answer_format)
        ops = tuple(ops)
        if not ops or any(op not in _SYMBOL for op in ops):
            raise ValueError(f"ops must be a non-empty subset of {tuple(_SYMBOL)}, got {ops}")
        if not 1 <= min_digits <= max_digits:
            raise ValueError(f"need 1 <= min_digits <= max_digits, got {min_digits}, {max_digits}")
        mul_max_digits = max_digits if mul_max_digits is None else mul_max_digits
        if not 1 <= mul_max_digits:
            raise ValueError(f"mul_max_digits must be >= 1, got {mul_max_digits}")
        widest = max_digits + (mul_max_digits if "mul" in ops else 1)
        if widest > base.MAX_ANSWER_DIGITS:
            raise ValueError(f"answers could reach {widest} digits; at most "
                             f"{base.MAX_ANSWER_DIGITS} fit the int32 on-device verifier")
        if style not in ("steps", "direct"):
            raise ValueError(f"style must be 'steps' or 'direct', got {style!r}")
        self.ops, self.min_digits, self.max_digits = ops, min_digits, max_digits
        self.mul_max_digits, self.style = mul_max_digits, style

    def _operand(self, rng: np.random.Generator, hi_digits: int) -> int:
        d = int(rng.integers(self.min_digits, max(self.min_digits, hi_digits) + 1))
        lo = 0 if d == 1 else 10 ** (d - 1)
        return int(rng.integers(lo, 10**d))

    def make(self, op: str, a: int, b: int, *, split: str = "train") -> base.Example:
        """The example for one given problem (no split rejection; `split` is recorded)."""
        if op == "sub" and a < b:
            raise ValueError("sub problems need a >= b")
        value = {"add": a + b, "sub": a - b, "mul": a * b}[op]
        answer = str(value)
        steps = " ".join(str(s) for s in column_steps(op, a, b))
        solution = self.render(steps if self.style == "steps" else None, answer)
        prompt = f"{a}{_SYMBOL[op]}{b}="
        return base.Example(prompt=prompt, answer=answer, solution=solution, task=self.name,
                            key=f"{op}:{a}{_SYMBOL[op]}{b}", split=split, answer_value=value,
                            meta={"op": op, "a": a, "b": b})

    def _sample(self, rng):
        op = self.ops[int(rng.integers(len(self.ops)))]
        a = self._operand(rng, self.max_digits)
        b = self._operand(rng, self.mul_max_digits if op == "mul" else self.max_digits)
        if op == "sub" and a < b:
            a, b = b, a
        return self.make(op, a, b)

    def verify(self, completion: str, example: base.Example) -> float:
        return float(self.int_answer(completion) == example.answer_value)

    def answer_key(self, completion: str) -> int | None:
        return self.int_answer(completion)

    def token_verifier(self, tokenizer):
        """`make_token_verifier(tokenizer)`: the integer answer checked on device (marker
        format only; the tags format is scored on the host)."""
        if self.answer_format != "marker":
            return None
        from rlvr_jax.tasks.token_verifier import make_token_verifier
        return make_token_verifier(tokenizer)

    def step_scores(self, completion: str, example: base.Example):
        """[(end_char, 1.0 or 0.0), ...]: reasoning chunk i is right when it is worked step
        i (a chunk past the worked steps is wrong); None when the answer format fails."""
        chunks = self.reasoning_chunks(completion)
        if chunks is None:
            return None
        m = example.meta
        expected = ([str(s) for s in column_steps(m["op"], m["a"], m["b"])]
                    if self.style == "steps" else [])
        return [(end, float(i < len(expected) and text == expected[i]))
                for i, (end, text) in enumerate(chunks)]

    def check_steps(self, completion: str, example: base.Example) -> bool:
        m = example.meta
        expected = ([str(s) for s in column_steps(m["op"], m["a"], m["b"])]
                    if self.style == "steps" else [])
        return self.reasoning_steps(completion, example) == expected
