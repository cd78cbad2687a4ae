"""Countdown: reach a target from given numbers with + - * / (each number at most once).

Formats:
  prompt    ``"3 5 7 -> 22:"``
  solution  ``"5*3=15 15+7=22 #### (5*3)+7"``   (style="steps"; ``"#### (5*3)+7"`` for "direct")

`verify` parses the expression after the single ``####`` marker with a small recursive-descent
parser (no `eval`): non-negative integer literals, binary + - * /, parentheses; exact rational
arithmetic (division by zero scores 0); the literals must be a sub-multiset of the given
numbers. 1.0 when the value equals the target. `check_steps` additionally requires the steps
before the marker (``x op y=z``, whitespace-separated) to be correct arithmetic on numbers
still available (each given number or intermediate result used once), the last one
producing the target.
"""
from __future__ import annotations

import collections
import fractions
import re


from rlvr_jax.tasks import base

_TOKEN = re.compile(r"\s*(?:(\d+)|([-+*/()]))")
_STEP = re.compile(r"(\d+)([-+*/])(\d+)=(\d+)")
MAX_EXPR_CHARS = 200


class _Parser:
    """expr := term (('+'|'-') term)*; term := atom (('*'|'/') atom)*; atom := INT | '(' expr ')'."""

    def __init__(self, text: str):
        self.toks, pos = [], 0
        text = text.rstrip(base.WHITESPACE)
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"bad character at {pos}")
            self.toks.append(int(m.group(1)) if m.group(1) is not None else m.group(2))
            pos = m.end()
        self.i, self.literals, self.depth = 0, [], 0

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def parse(self) -> fractions.Fraction:
        value = self._expr()
        if self.i != len(self.toks):
            raise ValueError("trailing tokens")
        return value

    def _expr(self):
        value = self._term()
        while self._peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            rhs = self._term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def _term(self):
        value = self._atom()
        while self._peek() in ("*", "/"):
            op = self.toks[self.i]
            self.i += 1
            rhs = self._atom()
            if op == "/" and rhs == 0:
                raise ValueError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def _atom(self):
        tok = self._peek()
        self.i += 1
        if isinstance(tok, int):
            self.literals.append(tok)
            return fractions.Fraction(tok)
        if tok == "(":
            self.depth += 1
            if self.depth > 32:
                raise ValueError("nesting too deep")
            value = self._expr()
            if self._peek() != ")":
                raise ValueError("missing ')'")
            self.i += 1
            self.depth -= 1
            return value
        raise ValueError(f"unexpected token {tok!r}")


def evaluate(expression: str) -> tuple[fractions.Fraction, list[int]]:
    """(exact value, integer literals used) of an expression; ValueError if malformed."""
    if len(expression) > MAX_EXPR_CHARS:
        raise ValueError("expression too long")
    parser = _Parser(expression)
    return parser.parse(), parser.literals


def _apply(op: str, x: int, y: int, *, min_divisor: int = 2) -> int | None:
    """Exact non-negative integer result of ``x op y``, or None (the generator skips /1)."""
    if op == "+":
        return x + y
    if op == "*":
        return x * y
    if op == "-":
        return x - y if x >= y else None
    return x // y if y >= min_divisor and x % y == 0 else None


class Countdown(base.Task):
    """Countdown problems.

    Args (keyword-only):
      num_numbers: how many numbers are given (2..6).
      max_number: numbers are drawn from 1..max_number.
      max_target: targets are in 1..max_target (and differ from every given number).
      ops: allowed operations used by the generator (the verifier accepts all four).
      style: "steps" or "direct" (see module docstring).
      test_fraction: share of problems (by hash) in the test split.
      answer_format: "marker" or "tags" (`rlvr_jax.tasks.base`).
    """

    name = "countdown"
    salt = 2

    def __init__(self, *, num_numbers: int = 3, max_number: int = 20, max_target: int = 100,
                 ops=("+", "-", "*", "/"), style: str = "steps", test_fraction: float = 0.1,
                 answer_format: str = "marker"):
        super().__init__(test_fraction=test_fraction, answer_format=answer_format)
        if not 2 <= num_numbers <= 6:
            raise ValueError(f"num_numbers must be in 2..6, got {num_numbers}")
        if max_number < 2 or max_target < 2:
            raise ValueError("max_number and max_target must be >= 2")
        ops = tuple(ops)
        if not ops or any(op not in "+-*/" for op in ops):
            raise ValueError(f"ops must be a non-empty subset of + - * /, got {ops}")
        if style not in ("steps", "direct"):
            raise ValueError(f"style must be 'steps' or 'direct', got {style!r}")
        self.num_numbers, self.max_number, self.max_target = num_numbers, max_number, max_target
        self.ops, self.style = ops, style

    def _sample(self, rng):
        for _ in range(1000):
            numbers = [int(x) for x in rng.integers(1, self.max_number + 1, self.num_numbers)]
            pool = [(n, str(n), True) for n in numbers]  # (value, expression, is_atom)
            rng.shuffle(pool)
            steps = []
            n_steps = int(rng.integers(1, self.num_numbers))
            ok = True
            for _ in range(n_steps):
                (x, ex, ax), (y, ey, ay) = pool.pop(), pool.pop()
                if x < y and rng.random() < 0.5:
                    (x, ex, ax), (y, ey, ay) = (y, ey, ay), (x, ex, ax)
                op = self.ops[int(rng.integers(len(self.ops)))]
                z = _apply(op, x, y)
                if z is None or z == 0:
                    ok = False
                    break
                steps.append(f"{x}{op}{y}={z}")
                pool.append((z, f"{ex if ax else '(' + ex + ')'}{op}{ey if ay else '(' + ey + ')'}",
                             False))
            if not ok:
                continue
            target, expression = pool[-1][0], pool[-1][1]
            if 1 <= target <= self.max_target and target not in numbers:
                break
        else:
            raise ValueError("countdown: could not generate a problem with these knobs")
        nums = " ".join(str(n) for n in numbers)
        answer = expression
        solution = self.render(" ".join(steps) if self.style == "steps" else None, answer)
        return base.Example(prompt=f"{nums} -> {target}:", answer=answer, solution=solution,
                            task=self.name, key=f"countdown:{nums}->{target}", split="train",
                            answer_value=target,
                            meta={"numbers": numbers, "target": target})

    def verify(self, completion: str, example: base.Example) -> float:
        parts = self.split(completion)
        if parts is None:
            return 0.0
        try:
            value, literals = evaluate(parts[1])
        except (ValueError, RecursionError):
            return 0.0
        available = collections.Counter(example.meta["numbers"])
        if collections.Counter(literals) - available:
            return 0.0
        return float(value == example.meta["target"])

    def step_scores(self, completion: str, example: base.Example):
        """[(end_char, 1.0 or 0.0), ...]: a step ``x op y=z`` is right when it is correct
        arithmetic on numbers still available (a wrong step leaves the pool as it was);
        None when the answer format fails."""
        chunks = self.reasoning_chunks(completion)
        if chunks is None:
            return None
        pool, out = collections.Counter(example.meta["numbers"]), []
        for end, chunk in chunks:
            m = _STEP.fullmatch(chunk)
            ok = m is not None
            if ok:
                x, op, y, z = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
                need = collections.Counter([x, y])
                ok = not (need - pool) and _apply(op, x, y, min_divisor=1) == z
            if ok:
                pool = pool - need
                pool[z] += 1
            out.append((end, float(ok)))
        return out

    def steps_are_right(self, chunks: list[str], example: base.Example) -> bool:
        pool = collections.Counter(example.meta["numbers"])
        last = None
        for chunk in chunks:
            m = _STEP.fullmatch(chunk)
            if m is None:
                return False
            x, op, y, z = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
            need = collections.Counter([x, y])
            if need - pool or _apply(op, x, y, min_divisor=1) != z:
                return False
            pool -= need
            pool[z] += 1
            last = z
        return last == example.meta["target"]
