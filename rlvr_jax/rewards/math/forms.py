"""Answer forms beyond one scalar: decimal commas, ratios, equations, ``i``/``j``/``k``
vectors, a scalar times a matrix, set-builder sets, ``\\mathbb{R}`` and ``x \\neq a``, and
unions of intervals with numeric ends (merged, so ``(0,2)\\cup[2,5) = (0,5)``).

Each helper reads a normalised answer and returns ``None`` when the form does not apply; the
caller (:mod:`.equiv`) decides what to compare. Conventions are conservative: an ambiguous
reading is no reading.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr_jax.rewards.math import parse as _parse

_ERRORS = (_parse.ParseError, ZeroDivisionError, OverflowError, ValueError, RecursionError,
           KeyError, TypeError, ArithmeticError)
# One number with one comma that cannot be a thousands separator: "3,5", "12,75", "0,125".
_DECIMAL_COMMA = re.compile(r"-?(?:0,\d+|\d+,(?:\d{1,2}|\d{4,}))%?")


def decimal_comma(value: str) -> str | None:
    """``"3,5"`` → ``"3.5"`` for a single number with a decimal comma (never three digits
    after a non-zero group: ``1,500`` is fifteen hundred), else ``None``."""
    return value.replace(",", ".") if _DECIMAL_COMMA.fullmatch(value.strip()) else None


def _number(s: str):
    """The value of a variable-free expression (``None`` when it is not one)."""
    try:
        node = _parse.parse_expr(s)
        if _parse.variables(node):
            return None
        return _parse.evaluate(node, {})
    except _ERRORS:
        return None


def ratio_terms(s: str) -> list[str] | None:
    """``"7:32"`` / ``"1 : 2 : 3"`` → the terms (2 to 4 numbers, none zero), else ``None``."""
    if ":" not in s or re.search(r"[=<>{}\\]|\bx\b", s):
        return None
    terms = [t.strip() for t in s.split(":")]
    if not 2 <= len(terms) <= 4:
        return None
    values = [_number(t) for t in terms]
    if any(v is None or v == 0 for v in values):
        return None
    return terms


def ratios_equal(xs: list[str], ys: list[str]) -> bool:
    """Proportional ratios: ``14:64`` = ``7:32`` (each term exact or within float noise)."""
    if len(xs) != len(ys):
        return False
    a, b = [_number(t) for t in xs], [_number(t) for t in ys]
    if any(v is None for v in a + b):
        return False
    return all(_parse.values_close(a[k] * b[0], b[k] * a[0]) for k in range(1, len(a)))


def equation_sides(s: str) -> tuple[str, str] | None:
    """``(lhs, rhs)`` of an equation with one ``=`` (no relations, no lists), else ``None``."""
    if s.count("=") != 1 or re.search(r"[<>,;]|\\[lg]e|\\neq?|\\approx", s):
        return None
    lhs, rhs = (p.strip() for p in s.split("="))
    return (lhs, rhs) if lhs and rhs else None


def equations_equal(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether two equations ``L = R`` are the same up to rearrangement and a non-zero factor:
    ``L_a - R_a = c (L_b - R_b)`` at six fixed points (same variables, one constant ``c``)."""
    try:
        fa = _parse.parse_expr(f"({a[0]})-({a[1]})")
        fb = _parse.parse_expr(f"({b[0]})-({b[1]})")
    except _ERRORS:
        return False
    names = _parse.variables(fa)
    if not names or names != _parse.variables(fb):
        return False
    ratio = None
    for k in range(6):
        env = {n: Fraction(k * 7 + j * 3 + 2, 5 + j + k) * (-1) ** (j + k)
               for j, n in enumerate(sorted(names))}
        try:
            va, vb = _parse.evaluate(fa, env), _parse.evaluate(fb, env)
        except _ERRORS:
            return False
        if vb == 0 or va == 0:
            if not (_parse.values_close(va, 0) and _parse.values_close(vb, 0)):
                return False
            continue
        r = va / vb
        if ratio is None:
            ratio = r
        elif not _parse.values_close(r, ratio):
            return False
    return ratio is not None


def ijk_vector(s: str, n: int) -> list[str] | None:
    """``2i - j + 3k`` → ``["2", "-1", "3"]`` (``n`` = 2 or 3 components) when ``s`` is linear
    in the unit vectors ``i, j, k`` with constant coefficients and names ``j`` or ``k``."""
    if n not in (2, 3) or not re.search(r"[jk]", s):
        return None
    try:
        node = _parse.parse_expr(s)
    except _ERRORS:
        return None
    names = "ijk"[:n]
    if not _parse.variables(node) <= set(names):
        return None
    try:
        def at(*v):
            return _parse.evaluate(node, dict(zip(names, map(Fraction, v))))
        zero = at(*([0] * n))
        coef = [at(*[int(j == k) for j in range(n)]) for k in range(n)]
        if zero != 0 or at(*([1] * n)) != sum(coef) or at(*([2] * n)) != 2 * sum(coef):
            return None
    except _ERRORS:
        return None
    if not all(isinstance(c, Fraction) for c in coef):
        return None
    return [f"{c.numerator}/{c.denominator}" for c in coef]


def scaled_matrix(s: str) -> str | None:
    """``2\\matrix{1&2;3&4}`` → ``\\matrix{(1)*(2)&…}``: a scalar times a matrix, entrywise."""
    m = re.fullmatch(r"(.*?)\s*(?:\\cdot|\\times|\*)?\s*(\\matrix\{.*\})", s)
    if not m or not m.group(1) or "\\matrix" in m.group(1):
        return None
    k = "-1" if m.group(1).strip() == "-" else m.group(1)
    if _number(k) is None:
        return None
    rows = [r.split("&") for r in m.group(2)[8:-1].split(";")]
    return "\\matrix{" + ";".join("&".join(f"({c.strip()})*({k})" for c in r) for r in rows) + "}"


_REALS = r"(?:\\mathbb\s*\{?\s*R\s*\}?|ℝ|\\R\b|\\reals\b)"


def set_rewrite(s: str) -> str | None:
    """Set notations as the answers we compare: ``\\{x \\mid P\\}`` / ``\\{x : P\\}`` /
    ``\\{x \\in \\mathbb{R} \\mid P\\}`` → ``P``; ``\\{\\}`` → ``\\emptyset``; ``\\mathbb{R}`` →
    ``(-\\infty,\\infty)``; ``\\mathbb{R} \\setminus \\{a\\}`` and ``x \\neq a`` → the union
    of the two open rays."""
    m = re.fullmatch(r"\\\{\s*([a-zA-Z])\s*(?:\\in\s*" + _REALS + r"\s*)?(?:\\mid|\||:)\s*(.+)\\\}", s)
    if m:
        return m.group(2).strip()
    if re.fullmatch(r"\\\{\s*\\\}|\{\s*\}", s):
        return "\\emptyset"
    if re.fullmatch(_REALS, s):
        return "(-\\infty,\\infty)"
    m = (re.fullmatch(_REALS + r"\s*(?:\\setminus|\\backslash|-)\s*\\\{([^{}]+)\\\}", s)
         or re.fullmatch(r"[a-zA-Z]\s*(?:\\neq?|≠|!=)\s*([^=<>,]+)", s))
    if m and _number(m.group(1)) is not None:
        a = m.group(1).strip()
        return f"(-\\infty,{a})\\cup({a},\\infty)"
    return None


def interval_pieces(struct) -> list | None:
    """A union of intervals with numeric ends as sorted, merged ``(lo, lo_closed, hi,
    hi_closed)`` pieces (``None`` when an end is not a real number)."""
    parts = struct[1] if struct[0] == "union" else [struct]
    pieces = []
    for p in parts:
        if p[0] != "interval" or len(p[3]) != 2:
            return None
        ends = []
        for e in p[3]:
            v = _number(e)
            if v is None or (not isinstance(v, Fraction) and (v.imag or v.real != v.real)):
                return None
            ends.append(v if isinstance(v, Fraction) else v.real)
        if ends[0] > ends[1]:
            return None
        pieces.append((ends[0], p[1] == "[", ends[1], p[2] == "]"))
    pieces.sort(key=lambda q: (q[0], not q[1]))
    merged = [pieces[0]]
    for lo, lc, hi, hc in pieces[1:]:
        plo, plc, phi, phc = merged[-1]
        if lo < phi or (lo == phi and (lc or phc)):
            if hi > phi or (hi == phi and hc):
                merged[-1] = (plo, plc, hi, hc)
        else:
            merged.append((lo, lc, hi, hc))
    return merged


def pieces_equal(a: list, b: list) -> bool:
    """Equality of two :func:`interval_pieces` results (ends exact or within float noise)."""
    return len(a) == len(b) and all(
        x[1] == y[1] and x[3] == y[3] and _parse.values_close(x[0], y[0])
        and _parse.values_close(x[2], y[2]) for x, y in zip(a, b))
