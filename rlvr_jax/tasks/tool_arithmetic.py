"""Arithmetic a tiny model cannot do in its head, with a calculator it can call.

  prompt         ``"123*456="``
  tool trace     ``"[123*456]=56088 #### 56088"``: the model writes ``[123*456]``, the
                 calculator (`rlvr_jax.multiturn.Calculator`, config ``env.name="calculator"``)
                 writes the observation ``=56088``, the model copies it after ``####``
  direct trace   ``"#### 56088"``: the answer without the tool

The warm-up mixes both (`tool_fraction` of the worked solutions use the tool), so RL has
something to learn: when to call. Scored like `Arithmetic` (one ``####``, then the integer),
on the model's own tokens: the observation never counts as the answer.
"""
from __future__ import annotations

import numpy as np

from rlvr_jax.tasks import base
from rlvr_jax.tasks.arithmetic import _SYMBOL, Arithmetic


class ToolArithmetic(Arithmetic):
    """`Arithmetic` (default: 3-digit products) with tool-call warm-up traces.

    Args (keyword-only): as `Arithmetic` (style is fixed), plus
      tool_fraction: share of worked solutions that call the calculator (drawn per
        example); the others answer directly.
    """

    name = "tool_arithmetic"
    salt = 8

    def __init__(self, *, ops=("mul",), min_digits: int = 3, max_digits: int = 3,
                 mul_max_digits: int | None = None, tool_fraction: float = 0.5,
                 test_fraction: float = 0.1, style: str = "tool",
                 answer_format: str = "marker"):
        if style != "tool":
            raise ValueError(f"tool_arithmetic's style is 'tool', got {style!r}")
        if answer_format != "marker":
            raise ValueError("tool_arithmetic uses the marker answer format")
        if not 0.0 <= tool_fraction <= 1.0:
            raise ValueError(f"tool_fraction must be in [0, 1], got {tool_fraction}")
        if max_digits > 4 or (mul_max_digits or 0) > 4:
            raise ValueError("the calculator takes operands of at most 4 digits")
        super().__init__(ops=ops, min_digits=min_digits, max_digits=max_digits,
                         mul_max_digits=mul_max_digits, style="direct",
                         test_fraction=test_fraction)
        self.tool_fraction, self.style = tool_fraction, "tool"

    def make(self, op: str, a: int, b: int, *, split: str = "train",
             use_tool: bool = True) -> base.Example:
        """The example for one problem; its worked solution calls the tool if `use_tool`."""
        ex = super().make(op, a, b, split=split)
        call = f"[{a}{_SYMBOL[op]}{b}]"
        solution = (f"{call}={ex.answer_value} {base.MARKER} {ex.answer}" if use_tool
                    else f"{base.MARKER} {ex.answer}")
        return base.Example(prompt=ex.prompt, answer=ex.answer, solution=solution,
                            task=self.name, key=ex.key, split=split,
                            answer_value=ex.answer_value,
                            meta={**ex.meta, "call": call, "tool_trace": use_tool})

    def _sample(self, rng: np.random.Generator) -> base.Example:
        ex = super()._sample(rng)
        m = ex.meta
        return self.make(m["op"], m["a"], m["b"], use_tool=bool(rng.random() < self.tool_fraction))

    def reasoning_steps(self, completion: str, example: base.Example):
        parts = self.split(completion)
        if parts is None or self.verify(completion, example) != 1.0:
            return None
        return parts[0].split()

    def check_steps(self, completion: str, example: base.Example) -> bool:
        """Correct answer, and the reasoning is empty (a direct answer) or exactly the right
        call (``[123*456]``, plus its observation when the text includes it)."""
        chunks = self.reasoning_steps(completion, example)
        if chunks is None:
            return False
        call = example.meta["call"]
        return chunks in ([], [call], [f"{call}={example.answer_value}"])

    def step_scores(self, completion: str, example: base.Example):
        """None: no process rewards for this task."""
        return None
