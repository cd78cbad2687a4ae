"""Scalar expressions: a LaTeX subset → a small AST → exact (``Fraction``) or float values.

No ``eval`` and no sympy: a recursive-descent parser over numbers, ``+ - * / ^``, implicit
multiplication, ``\\frac``, ``\\sqrt``, ``\\pi``, ``e``, ``i``, ``%`` and single-letter
variables. Work is bounded: the input length is capped, exact powers are computed only
while the result stays below :data:`MAX_EXACT_BITS` bits, larger ones fall back to floats.
"""
from __future__ import annotations

import cmath
import math as _pymath
import re
from fractions import Fraction

MAX_ANSWER_CHARS = 400
MAX_EXACT_BITS = 200_000


class ParseError(ValueError):
    """The text is not an expression of the supported subset."""


def braced(text: str, start: int, limit: int | None = None) -> tuple[str, int] | None:
    """Contents of the brace group opening at ``text[start] == '{'`` and the end index
    (``None`` when it does not close, or not within ``limit`` characters)."""
    depth = 0
    for i in range(start, len(text) if limit is None else min(len(text), start + limit)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def _command_arg(s: str, i: int) -> tuple[str, int]:
    """One argument of a LaTeX command at ``s[i:]``: a brace group or a single character."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i < len(s) and s[i] == "{":
        got = braced(s, i)
        if got is None:
            raise ParseError("unbalanced braces")
        return latex_to_plain(got[0]), got[1]
    if i < len(s) and s[i].isalnum():
        return s[i], i + 1
    raise ParseError("missing argument")


FUNC_NAMES = ("sqrt", "ln", "log", "sin", "cos", "tan", "sec", "csc", "cot", "arcsin", "arccos",
               "arctan", "sinh", "cosh", "tanh", "exp")
_COMMANDS = {"cdot": "*", "times": "*", "div": "/", "pi": "pi", "infty": "inf", "e": "e",
             **{f: f for f in FUNC_NAMES if f != "sqrt"}}


def latex_to_plain(s: str) -> str:
    """Rewrite the LaTeX subset we evaluate into a plain infix expression."""
    out, i = [], 0
    while i < len(s):
        if s.startswith("\\frac", i):
            num, i = _command_arg(s, i + 5)
            den, i = _command_arg(s, i)
            out.append(f"(({num})/({den}))")
        elif s.startswith("\\sqrt", i):
            i += 5
            index = None
            if i < len(s) and s[i] == "[":
                j = s.find("]", i)
                if j < 0:
                    raise ParseError("unbalanced \\sqrt[")
                index = latex_to_plain(s[i + 1:j])
                i = j + 1
            arg, i = _command_arg(s, i)
            # Spaced: "i\sqrt{3}" is i times a root, not a word "isqrt".
            out.append(f" sqrt({arg})" if index is None else f"(({arg})^(1/({index})))")
        elif s[i] == "\\":
            m = re.match(r"\\([a-zA-Z]+)", s[i:])
            if not m or m.group(1) not in _COMMANDS:
                raise ParseError(f"unsupported command at {s[i:i + 8]!r}")
            out.append(f" {_COMMANDS[m.group(1)]} ")
            i += len(m.group(0))
        elif s[i] == "{":
            out.append("(")
            i += 1
        elif s[i] == "}":
            out.append(")")
            i += 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


_TOKEN = re.compile(r"\s*(?:((?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+(?![\d.]))?)|([a-zA-Z]+)"
                    r"|(\*\*|[-+*/^()%!]))")
_FUNCS = set(FUNC_NAMES)
_CONSTS = {"pi", "inf", "e"}


def tokenize(s: str) -> list[tuple[str, str]]:
    """``[(kind, text)]`` with kinds ``num``, ``name`` (function/constant), ``var``, ``op``."""
    toks, i = [], 0
    s = s.rstrip()
    while i < len(s):
        m = _TOKEN.match(s, i)
        if not m or m.end() == i:
            raise ParseError(f"unexpected {s[i:i + 8]!r}")
        num, word, op = m.groups()
        if num is not None:
            toks.append(("num", num))
        elif word is not None:
            if word in _FUNCS or word in _CONSTS:
                toks.append(("name", word))
            else:  # "xy" is x*y; every letter is a variable
                toks.extend(("var", ch) for ch in word)
        else:
            toks.append(("op", "^" if op == "**" else op))
        i = m.end()
        if len(toks) >= 2 and toks[-1][0] == toks[-2][0] == "num":
            raise ParseError("two numbers side by side")  # "1 2" is not a product
    return toks


class _Parser:
    """expr := term (±term)*; term := unary ((*|/|implicit) unary)*; unary := -unary | power;
    power := postfix (^ unary)?; postfix := atom (% | !)*; atom := num | var | const | f(power) | (expr)."""

    def __init__(self, toks):
        self.toks, self.i = toks, 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def parse(self):
        node = self.expr()
        if self.i != len(self.toks):
            raise ParseError(f"trailing {self.peek()}")
        return node

    def expr(self):
        node = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            node = (self.take()[1], node, self.term())
        return node

    def term(self):
        node = self.unary()
        while True:
            kind, val = self.peek()
            if kind == "op" and val in "*/":
                self.take()
                node = (val, node, self.unary())
            elif kind in ("num", "var", "name") or (kind, val) == ("op", "("):
                node = ("*", node, self.unary())  # implicit multiplication: 2x, 3(4), 2\sqrt{2}
            else:
                return node

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return ("neg", self.unary())
        if self.peek() == ("op", "+"):
            self.take()
            return self.unary()
        return self.power()

    def power(self):
        node = self.postfix()
        if self.peek() == ("op", "^"):
            self.take()
            node = ("^", node, self.unary())
        return node

    def postfix(self):
        node = self.atom()
        while self.peek() in (("op", "%"), ("op", "!")):
            node = (self.take()[1], node)
        return node

    def atom(self):
        kind, val = self.take()
        if kind == "num":
            return ("num", Fraction(val))
        if kind == "var":
            return ("var", val)
        if kind == "name":
            if val in _CONSTS:
                return ("const", val)
            if self.peek() == ("op", "^"):  # \sin^2 x = (\sin x)^2
                self.take()
                exponent = self.postfix()
                return ("^", ("call", val, self.power()), exponent)
            return ("call", val, self.power())
        if (kind, val) == ("op", "("):
            node = self.expr()
            if self.take() != ("op", ")"):
                raise ParseError("missing )")
            return node
        raise ParseError(f"unexpected token {val!r}")


def parse_expr(s: str):
    """The AST of a plain or LaTeX scalar expression (raises :class:`ParseError`)."""
    s = s.strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        raise ParseError("empty or too long")
    return _Parser(tokenize(latex_to_plain(s))).parse()


def variables(node) -> set[str]:
    """The single-letter variables of an AST."""
    if node[0] == "var":
        return {node[1]}
    return set().union(*[variables(c) for c in node[1:] if isinstance(c, tuple)])


def strip_percent(node):
    """``p%`` → ``p`` at the top of an AST (``None`` when the top node is not a percentage)."""
    if node[0] == "%":
        return node[1]
    if node[0] == "neg" and node[1][0] == "%":
        return ("neg", node[1][1])
    return None


_CONST_VALUES = {"pi": _pymath.pi, "e": _pymath.e, "inf": _pymath.inf}
_FUNC_VALUES = {"sqrt": cmath.sqrt, "ln": cmath.log, "log": cmath.log, "sin": cmath.sin,
                "cos": cmath.cos, "tan": cmath.tan, "sec": lambda z: 1 / cmath.cos(z),
                "csc": lambda z: 1 / cmath.sin(z), "cot": lambda z: 1 / cmath.tan(z),
                "arcsin": cmath.asin, "arccos": cmath.acos, "arctan": cmath.atan,
                "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh, "exp": cmath.exp}


def _exact_root(q: Fraction, n: int) -> Fraction | None:
    """The exact ``n``-th root of a non-negative rational when it is rational."""
    if q < 0 or n <= 0 or max(q.numerator.bit_length(), q.denominator.bit_length()) > 4096:
        return None
    out = []
    for part in (q.numerator, q.denominator):
        r = _pymath.isqrt(part) if n == 2 else round(part ** (1.0 / n)) if part < 2 ** 1000 else None
        if r is None:
            return None
        r = next((c for c in (r - 1, r, r + 1) if c >= 0 and c ** n == part), None)
        if r is None:
            return None
        out.append(r)
    return Fraction(out[0], out[1])


def _power(a, b):
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if b == 0:
            return Fraction(1) if a != 0 else complex("nan")
        if b.denominator == 1:
            bits = abs(b.numerator) * max(a.numerator.bit_length(), a.denominator.bit_length())
            if bits <= MAX_EXACT_BITS:
                return a ** int(b) if a != 0 or b > 0 else complex("nan")
        elif b.denominator <= 16 and a >= 0:
            root = _exact_root(a, b.denominator)
            if root is not None:
                return _power(root, Fraction(b.numerator))
    return complex(a) ** complex(b)


def _factorial(a):
    if isinstance(a, Fraction) and a.denominator == 1 and 0 <= a <= 2000:
        return Fraction(_pymath.factorial(int(a)))
    raise ValueError("factorial of a non-integer or a large number")


def evaluate(node, env, percent_scale=Fraction(1, 100)):
    """The value of an AST: an exact ``Fraction`` where possible, else ``complex``."""
    op = node[0]
    if op == "num":
        return node[1]
    if op == "var":
        return env[node[1]]
    if op == "const":
        return _CONST_VALUES[node[1]]
    if op == "neg":
        return -evaluate(node[1], env, percent_scale)
    if op == "%":
        return evaluate(node[1], env, percent_scale) * percent_scale
    if op == "!":
        return _factorial(evaluate(node[1], env, percent_scale))
    if op == "call":
        arg = evaluate(node[2], env, percent_scale)
        if node[1] == "sqrt" and isinstance(arg, Fraction):
            root = _exact_root(arg, 2)
            if root is not None:
                return root
        return _FUNC_VALUES[node[1]](complex(arg))
    a = evaluate(node[1], env, percent_scale)
    b = evaluate(node[2], env, percent_scale)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise ZeroDivisionError
        return a / b
    if op == "^":
        return _power(a, b)
    raise ParseError(op)


def values_close(a, b) -> bool:
    """Equality of two evaluated values.

    Two exact values must be equal. An exact and an inexact (float) value match only when
    the exact one is a small-denominator rational within float noise (1e-12 relative) of the
    other — ``\\sin(\\pi/6) = 1/2`` but a decimal approximation ``1.4142135624 ≠ \\sqrt{2}``
    and a large integer never matches a float. Two inexact values: relative 1e-12.
    """
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    if isinstance(b, Fraction):
        a, b = b, a
    if isinstance(a, Fraction):
        if a.denominator > 10 ** 4 or abs(a) > 2 ** 52:
            return False
    a, b = complex(a), complex(b)
    if any(_pymath.isnan(v) for v in (a.real, a.imag, b.real, b.imag)):
        return False
    if _pymath.isinf(abs(a)) or _pymath.isinf(abs(b)):
        return a == b
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
