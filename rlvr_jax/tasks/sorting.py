"""List sorting (a small logic task).

Formats:
  prompt    ``"sort 5 3 9 3:"``
  solution  ``"3<=3<5<9 #### 3 3 5 9"``   (style="steps"; ``"#### 3 3 5 9"`` for "direct")

The worked reasoning is a comparison chain over all the numbers (``<`` or ``<=`` between
neighbours). `verify`: after the single ``####``, exactly the sorted (ascending) numbers,
separated by single spaces, optionally surrounded by whitespace. `check_steps`: the chain
is a permutation of the input, every comparison is true, and the answer is right.
"""
from __future__ import annotations

import collections
import re

from rlvr_jax.tasks import base

_LIST = re.compile(r"[ \t\r\n]*([0-9]+(?: [0-9]+)*)[ \t\r\n]*")
_CHAIN = re.compile(r"[0-9]+(?:(?:<=|<)[0-9]+)*")


class Sorting(base.Task):
    """Sort a list of non-negative integers ascending.

    Args (keyword-only):
      min_len, max_len: list length range.
      max_value: values are drawn from 0..max_value.
      style: "steps" or "direct".
      test_fraction: share of problems (by hash) in the test split.
      answer_format: "marker" or "tags" (`rlvr_jax.tasks.base`).
    """

    name = "sorting"
    salt = 3

    def __init__(self, *, min_len: int = 3, max_len: int = 5, max_value: int = 9,
                 style: str = "steps", test_fraction: float = 0.1,
                 answer_format: str = "marker"):
        super().__init__(test_fraction=test_fraction, answer_format=answer_format)
        if not 2 <= min_len <= max_len:
            raise ValueError(f"need 2 <= min_len <= max_len, got {min_len}, {max_len}")
        if max_value < 1:
            raise ValueError(f"max_value must be >= 1, got {max_value}")
        if style not in ("steps", "direct"):
            raise ValueError(f"style must be 'steps' or 'direct', got {style!r}")
        self.min_len, self.max_len, self.max_value, self.style = min_len, max_len, max_value, style

    def _sample(self, rng):
        n = int(rng.integers(self.min_len, self.max_len + 1))
        values = [int(v) for v in rng.integers(0, self.max_value + 1, n)]
        ordered = sorted(values)
        answer = " ".join(str(v) for v in ordered)
        chain = str(ordered[0]) + "".join(
            ("<=" if b == a else "<") + str(b) for a, b in zip(ordered, ordered[1:]))
        solution = self.render(chain if self.style == "steps" else None, answer)
        listed = " ".join(str(v) for v in values)
        return base.Example(prompt=f"sort {listed}:", answer=answer, solution=solution,
                            task=self.name, key=f"sort:{listed}", split="train",
                            meta={"values": values})

    def verify(self, completion: str, example: base.Example) -> float:
        parts = self.split(completion)
        if parts is None:
            return 0.0
        m = _LIST.fullmatch(parts[1])
        return float(m is not None and m.group(1) == example.answer)

    def step_scores(self, completion: str, example: base.Example):
        """[(end_char, 1.0 or 0.0), ...]: each comparison ``a<b`` / ``a<=b`` of the chain is
        a step, right when it holds and the numbers so far are drawn from the input
        (as a multiset); a chunk that is not a chain is one wrong step; None when the
        answer format fails."""
        chunks = self.reasoning_chunks(completion)
        if chunks is None:
            return None
        out = []
        for end, chunk in chunks:
            if _CHAIN.fullmatch(chunk) is None:
                out.append((end, 0.0))
                continue
            start = end - len(chunk)
            nums = list(re.finditer(r"[0-9]+", chunk))
            ops = re.findall(r"<=|<", chunk)
            left = collections.Counter(example.meta["values"])
            left[int(nums[0].group())] -= 1
            for a, b, op in zip(nums, nums[1:], ops):
                x, y = int(a.group()), int(b.group())
                left[y] -= 1
                ok = (x <= y if op == "<=" else x < y) and min(left.values()) >= 0
                out.append((start + b.end(), float(ok)))
        return out

    def steps_are_right(self, chunks: list[str], example: base.Example) -> bool:
        if len(chunks) != 1 or _CHAIN.fullmatch(chunks[0]) is None:
            return False
        numbers = [int(x) for x in re.findall(r"[0-9]+", chunks[0])]
        comparisons = re.findall(r"<=|<", chunks[0])
        if sorted(numbers) != sorted(example.meta["values"]):
            return False
        return all(a <= b if c == "<=" else a < b
                   for a, b, c in zip(numbers, numbers[1:], comparisons))
