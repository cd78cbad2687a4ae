"""Equivalence of two normalised answers: structure (sets, unions, intervals, tuples, matrices,
inequalities, choice letters), then scalar values (exact where possible), units and percent.

Order is ignored for sets, unions of intervals and lists of solutions; it counts for tuples,
points, vectors and matrices. The first argument is the prediction, the second the
reference: the percent rule is asymmetric (a bare number matches a percentage reference).
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr_jax.rewards.math import forms as _forms
from rlvr_jax.rewards.math import normalize as _norm
from rlvr_jax.rewards.math import parse as _parse
from rlvr_jax.rewards.math import units as _units

MAX_ITEMS = 64
_ERRORS = (_parse.ParseError, ZeroDivisionError, OverflowError, ValueError, RecursionError,
           KeyError, TypeError)


def _matching(s: str) -> bool:
    """Whether the opening bracket at s[0] closes at s[-1] (not "(1)+(2)")."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return False
    return depth == 0


def split_top(s: str) -> list[str]:
    """Split on ``,`` / ``;`` and the words ``or`` / ``and`` outside brackets and braces."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if depth == 0:
            m = re.match(r"\s*(?:,|;|\s(?:or|and)\s)\s*", s[i:]) if ch in ",; " else None
            if m:
                parts.append("".join(cur))
                cur = []
                i += m.end()
                continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _expand_pm(s: str) -> list[str]:
    """``a \\pm b`` → ``[a+(b), a-(b)]``; anything else → ``[s]``."""
    if s.count("\\pm") != 1 or "\\mp" in s:
        return [s]
    a, b = (p.strip() for p in s.split("\\pm"))
    if not b:
        return [s]
    return [f"{a}+({b})", f"{a}-({b})"] if a else [b, f"-({b})"]


def _inequality(s: str):
    """``a < x <= b`` / ``x > 3`` / ``3 \\le x`` → an interval structure, else ``None``."""
    t = re.sub(r"\\(?:leqslant|leq|le)(?![a-zA-Z])|≤", "<=", s)
    t = re.sub(r"\\(?:geqslant|geq|ge)(?![a-zA-Z])|≥", ">=", t)
    t = re.sub(r"\\lt(?![a-zA-Z])", "<", re.sub(r"\\gt(?![a-zA-Z])", ">", t))
    if "<" not in t and ">" not in t:
        return None
    op = r"\s*(<=|>=|<|>)\s*"
    m = re.fullmatch(r"(.+?)" + op + r"([a-zA-Z])" + op + r"(.+)", t)
    if m:
        lo, o1, _, o2, hi = m.groups()
        if o1[0] != o2[0]:
            return None
        if o1[0] == ">":
            lo, hi, o1, o2 = hi, lo, o2, o1
        return ("interval", "[" if "=" in o1 else "(", "]" if "=" in o2 else ")", [lo, hi])
    m = re.fullmatch(r"([a-zA-Z])" + op + r"(.+)", t) or re.fullmatch(r"(.+?)" + op + r"([a-zA-Z])", t)
    if not m:
        return None
    left, o, right = m.groups()
    if len(left) == 1 and left.isalpha():
        bound, upper = right, o[0] == "<"
    else:
        bound, upper = left, o[0] == ">"
    if upper:
        return ("interval", "(", "]" if "=" in o else ")", ["-\\infty", bound])
    return ("interval", "[" if "=" in o else "(", ")", [bound, "\\infty"])


def structure(s: str):
    """``("union", [..])``, ``("set", [..])`` (``("set", [..], "braced")`` for ``\\{…\\}``),
    ``("interval", open, close, [..])`` (also tuples and vectors), ``("point", names,
    values)``, ``("matrix", rows)``, ``("ratio", terms)`` or ``("atom", s)`` for a
    normalised answer."""
    s = re.sub(r"^either\s+", "", s.strip(), flags=re.IGNORECASE)
    s = s.replace("\\varnothing", "\\emptyset")
    rewritten = _forms.set_rewrite(s) or _forms.scaled_matrix(s)
    if rewritten is not None:
        return structure(rewritten)
    if "\\cup" in s:
        return ("union", [structure(p) for p in s.split("\\cup")])
    if s.startswith("\\matrix{") and _matching(s[7:]):
        rows = [[c.strip() for c in r.split("&")] for r in s[8:-1].split(";")]
        if len(rows) == 1 or all(len(r) == 1 for r in rows):
            cells = rows[0] if len(rows) == 1 else [r[0] for r in rows]
            return ("interval", "(", ")", cells) if len(cells) > 1 else ("atom", cells[0])
        return ("matrix", rows)
    if s.startswith("{") and s.endswith("}") and _matching(s) and len(split_top(s[1:-1])) >= 2:
        s = "\\{" + s[1:-1] + "\\}"  # "{1, 2, 3}": a set written without escapes
    if s.startswith("\\{") and s.endswith("\\}"):
        items = [_norm.strip_assignment(p) for p in split_top(s[2:-2])]
        return ("set", [x for it in items for x in _expand_pm(it)], "braced")
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _matching(s):
        inner = split_top(s[1:-1])
        if len(inner) >= 2:
            return ("interval", s[0], s[-1], inner)
    items = split_top(s)
    if len(items) >= 2:
        return _list_structure(items, joined_by_or=bool(re.search(r"\bor\b", s))
                               and not re.search(r"[,;]", s))
    ineq = _inequality(s)
    if ineq is not None:
        return ineq
    pm = _expand_pm(s)
    if len(pm) == 2:
        return ("set", pm)
    terms = _forms.ratio_terms(s)
    if terms is not None:
        return ("ratio", terms)
    return ("atom", s)


def _list_structure(items: list[str], joined_by_or: bool):
    """A top-level list: inequalities joined by "or" are a union (``x<-1 or x>2``; joined
    by commas they are ambiguous: a list, which matches no interval);
    assignments to distinct letters are a named point (``x = 2, y = -3``: ``(2, -3)``, or the
    list ``2, -3`` in that order, or ``y = -3, x = 2``); else an
    unordered list of solutions."""
    ineqs = [_inequality(p) for p in items]
    if joined_by_or and all(ineqs):
        return ("union", ineqs)
    names = [re.match(r"([a-zA-Z])\s*=(?!=)", p) for p in items]
    if all(names) and len({m.group(1) for m in names}) == len(items):
        return ("point", [m.group(1) for m in names], [_norm.strip_assignment(p) for p in items])
    items = [_norm.strip_assignment(p) for p in items]
    return ("set", [x for it in items for x in _expand_pm(it)])


def _one_to_one(xs: list, ys: list, eq) -> bool:
    """Whether a perfect matching exists under ``eq(x, y)`` (augmenting paths, bounded size)."""
    if len(xs) != len(ys) or len(xs) > MAX_ITEMS:
        return False
    cache = {}

    def ok(i, j):
        if (i, j) not in cache:
            cache[(i, j)] = eq(xs[i], ys[j])
        return cache[(i, j)]

    owner = [-1] * len(ys)

    def augment(i, seen):
        for j in range(len(ys)):
            if j not in seen and ok(i, j):
                seen.add(j)
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(xs)))


def _vector_of(atom, other):
    """An ``i``/``j``/``k`` atom read as the vector ``other`` is (a 2- or 3-tuple), else None."""
    if atom[0] != "atom" or other[0] != "interval" or other[1:3] != ("(", ")"):
        return None
    cells = _forms.ijk_vector(atom[1], len(other[3]))
    return None if cells is None else ("interval", "(", ")", cells)


def _points_equal(a, b) -> bool:
    """A named point against a point (by name), a tuple or a bare list (in order); never
    against a braced set."""
    if a[0] == b[0] == "point":
        if sorted(a[1]) != sorted(b[1]):
            return False
        bv = dict(zip(b[1], b[2]))
        return all(atoms_equal(x, bv[n]) for n, x in zip(a[1], a[2]))
    (p, other), flip = ((a, b), False) if a[0] == "point" else ((b, a), True)
    if (other[0] == "set" and other[2:] != ("braced",)) or (
            other[0] == "interval" and other[1:3] == ("(", ")")):
        values = other[1] if other[0] == "set" else other[3]
        return len(values) == len(p[2]) and all(
            atoms_equal(*((y, x) if flip else (x, y))) for x, y in zip(p[2], values))
    return False


def structures_equal(a, b) -> bool:
    """Equality of two :func:`structure` results (``a`` the prediction, ``b`` the reference)."""
    if a[0] == "set" and len(a[1]) == 1:
        a = ("atom", a[1][0])
    if b[0] == "set" and len(b[1]) == 1:
        b = ("atom", b[1][0])
    a = _vector_of(a, b) or a
    b = _vector_of(b, a) or b
    if {a[0], b[0]} <= {"union", "interval"} and "union" in (a[0], b[0]):
        pa, pb = _forms.interval_pieces(a), _forms.interval_pieces(b)
        if pa is not None and pb is not None:
            return _forms.pieces_equal(pa, pb)
    if "ratio" in (a[0], b[0]) and a[0] != b[0]:  # a two-term ratio a:b is the number a/b
        r, x = (a, b) if a[0] == "ratio" else (b, a)
        if x[0] != "atom" or len(r[1]) != 2:
            return False
        q = f"({r[1][0]})/({r[1][1]})"
        return atoms_equal(q, x[1]) if r is a else atoms_equal(x[1], q)
    if "point" in (a[0], b[0]):
        return _points_equal(a, b)
    if a[0] != b[0]:
        return False
    if a[0] == "atom":
        return atoms_equal(a[1], b[1])
    if a[0] == "ratio":
        return _forms.ratios_equal(a[1], b[1])
    if a[0] == "interval":
        return (a[1] == b[1] and a[2] == b[2] and len(a[3]) == len(b[3])
                and all(atoms_equal(x, y) for x, y in zip(a[3], b[3])))
    if a[0] == "matrix":
        return ([len(r) for r in a[1]] == [len(r) for r in b[1]]
                and all(atoms_equal(x, y) for ra, rb in zip(a[1], b[1]) for x, y in zip(ra, rb)))
    if a[0] == "union":
        return _one_to_one(a[1], b[1], structures_equal)
    return _one_to_one(a[1], b[1], lambda x, y: structures_equal(structure(x), structure(y)))


def _exact_value(node):
    try:
        v = _parse.evaluate(node, {})
    except (*_ERRORS, ArithmeticError):
        return None
    return v if isinstance(v, Fraction) else None


def _rename(node, old: str, new: str):
    """The AST with variable ``old`` renamed ``new``."""
    if node[0] == "var":
        return ("var", new) if node[1] == old else node
    return (node[0], *[_rename(c, old, new) if isinstance(c, tuple) else c for c in node[1:]])


def _scalars_equal(pa, pb) -> bool:
    """Numeric equality of two ASTs (no top-level percent), variables at three fixed points;
    ``i`` is the imaginary unit when only one side has it or both do."""
    vars_a, vars_b = _parse.variables(pa), _parse.variables(pb)
    if {frozenset(vars_a), frozenset(vars_b)} == {frozenset("i"), frozenset("j")}:
        pa, pb = _rename(pa, "j", "i"), _rename(pb, "j", "i")  # engineering j against i
        vars_a = vars_b = {"i"}
    env0 = {"i": 1j} if "i" in vars_a | vars_b else {}
    if vars_a - {"i"} != vars_b - {"i"}:
        return False
    names = sorted((vars_a | vars_b) - {"i"})
    for k in range(3 if names else 1):
        env = dict(env0, **{n: Fraction(k * 7 + j * 3 + 2, 5 + j) * (-1) ** (j + k)
                            for j, n in enumerate(names)})
        try:
            if not _parse.values_close(_parse.evaluate(pa, env), _parse.evaluate(pb, env)):
                return False
        except _ERRORS:
            return False
    return True


def _values_equal(a: str, b: str) -> bool:
    """Scalar equality with the percent convention: ``p%`` vs ``q%`` compares ``p`` and ``q``;
    a bare ``c`` matches a reference ``q%`` when ``c = q`` or ``c = q/100``; a prediction ``p%``
    matches a bare reference ``r`` when ``p/100 = r`` (or ``p = r`` for ``r > 1``)."""
    try:
        pa, pb = _parse.parse_expr(a), _parse.parse_expr(b)
    except _ERRORS:
        return False
    ta, tb = _parse.strip_percent(pa), _parse.strip_percent(pb)
    if ta is not None and tb is not None:
        return _scalars_equal(ta, tb)
    if tb is not None:
        return _scalars_equal(pa, tb) or _scalars_equal(pa, ("%", tb))
    if ta is not None:
        if _scalars_equal(pa, pb):
            return True
        ref = _exact_value(pb)
        return ref is not None and ref > 1 and _scalars_equal(ta, pb)
    return _scalars_equal(pa, pb)


_WORDS = re.compile(r"[A-Za-z]+(?: [A-Za-z]+)*")
_NAMES = {*_parse.FUNC_NAMES, "pi", "inf", "infty"}


def is_text(s: str) -> bool:
    """A word answer (``Monday``, ``not prime``): letters only, one word of 3+ letters that
    is no function name. It is text, not a product of variables (``listen`` ≠ ``silent``)."""
    return bool(_WORDS.fullmatch(s)) and any(
        len(w) >= 3 and w.lower() not in _NAMES for w in s.split())


def _unit_scale(a_unit: str, b_unit: str, a_val: str, b_val: str) -> str | None:
    """The factor (an expression) that takes a value in ``a_unit`` to ``b_unit``; ``"1"``
    when there is nothing to convert; ``None`` when the units cannot agree. A unit on one
    side only is ignored, except a degree against a value in ``\\pi`` (radians)."""
    if a_unit == b_unit:
        return "1"
    if not (a_unit and b_unit):
        unit, other = (a_unit, b_val) if a_unit else (b_unit, a_val)
        ang = _units.angle_scale(unit)
        if ang is None or ang == "1" or "\\pi" not in other:
            return "1"
        return ang if a_unit else f"1/{ang}"
    ang_a, ang_b = _units.angle_scale(a_unit), _units.angle_scale(b_unit)
    if ang_a and ang_b:
        return f"({ang_a})/({ang_b})"
    da, db = _units.unit_dims(a_unit), _units.unit_dims(b_unit)
    if da is None or db is None or da[0] != db[0]:
        return None
    q = da[1] / db[1]
    return f"({q.numerator}/{q.denominator})"


def atoms_equal(a: str, b: str) -> bool:
    """Equality of two scalar answers (``a`` prediction, ``b`` reference), units included:
    a unit on one side only is ignored (but degrees convert to a value in ``\\pi``); two
    units must agree or convert exactly (``cm^2``, ``km/h``, ``L``); word answers compare as
    text, case-insensitively."""
    if a == b:
        return True
    if is_text(a) or is_text(b):
        return a.lower().split() == b.lower().split()
    a_val, a_unit = _units.split_unit(a)
    b_val, b_unit = _units.split_unit(b)
    scale = _unit_scale(a_unit, b_unit, a_val, b_val)
    if scale is None:
        return False
    if a_val.lower() == b_val.lower() and scale == "1":
        return True
    if scale != "1":
        a_val = f"({a_val})*{scale}"
    return _values_equal(a_val, b_val)


def _choice_equal(a: str, b: str) -> bool | None:
    """Answer-choice letters: ``None`` when neither side is a choice."""
    ca, cb = _norm.split_choice(a), _norm.split_choice(b)
    if cb is not None and (ca is not None or not cb[1]):
        return ca is not None and ca[0] == cb[0] or (ca is None and a.lower() == b.lower())
    if cb is not None:
        return structures_equal(structure(a), structure(cb[1]))
    if ca is not None and ca[1]:
        return structures_equal(structure(ca[1]), structure(b))
    return None


def reference_answer(reference) -> str:
    """The answer in a reference: itself, or for a reference with boxes the boxed answer —
    several boxes separated only by punctuation, ``and`` or spacing form one list; in a worked
    solution (prose around the boxes) the last box counts."""
    ref = str(reference)
    if "\\boxed" not in ref and "\\fbox" not in ref:
        return ref
    from rlvr_jax.rewards.math.extract import extract_boxed
    boxes = [b.strip() for b in extract_boxed(ref)]
    if not boxes:
        return ref
    outside = re.sub(r"\\(?:boxed|fbox)\s*\{", "", ref)
    for b in boxes:
        outside = outside.replace(b, "", 1)
    prose = re.search(r"[A-Za-z]{2,}", re.sub(r"\\[a-zA-Z]+|\band\b", "", outside))
    if len(boxes) == 1 and not prose:
        return ref  # a box with LaTeX around it: normalisation unwraps it
    return ", ".join(boxes) if len(boxes) > 1 and not prose else boxes[-1]


def answers_equivalent(prediction, reference) -> bool:
    """Whether two final answers are mathematically the same (our rule verifier).

    Args:
      prediction: an extracted answer string (``None`` → False).
      reference: the reference answer (str, int, float or Fraction).
    """
    try:
        return _answers_equivalent(prediction, reference)
    except (ValueError, ArithmeticError, RecursionError, MemoryError):
        return False  # malformed or oversized input is no match, never an exception


def _answers_equivalent(prediction, reference) -> bool:
    if prediction is None or reference is None:
        return False
    ref = reference_answer(reference)
    a, b = _norm.normalize_answer(prediction), _norm.normalize_answer(ref)
    if not a or not b:
        return False
    if a == b:
        return True
    if len(a) > _parse.MAX_ANSWER_CHARS or len(b) > _parse.MAX_ANSWER_CHARS:
        return False
    choice = _choice_equal(a, b)
    if choice is not None:
        return choice
    eq_a = _forms.equation_sides(_norm.normalize_answer(prediction, strip_assign=False))
    eq_b = _forms.equation_sides(_norm.normalize_answer(ref, strip_assign=False))
    if eq_a and eq_b and not (_simple(eq_a) and _simple(eq_b)):
        return _forms.equations_equal(eq_a, eq_b)  # "2x - y + 3 = 0" vs "y = 2x + 3"
    sb = structure(b)
    value, unit = _units.split_unit(a)
    comma = _forms.decimal_comma(value) if sb[0] == "atom" else None
    if comma is not None:  # "3,5" against one number is 3.5; against a list it is a list
        a = f"{comma} {unit}".strip()
    sa = structure(a)
    value, unit = _units.split_unit(b)
    comma = _forms.decimal_comma(value) if sa[0] == "atom" else None
    if comma is not None:  # the same for a reference written with a decimal comma
        sb = structure(f"{comma} {unit}".strip())
    return structures_equal(sa, sb)


def _simple(eq: tuple[str, str]) -> bool:
    """Whether an equation is a plain assignment ``x = …`` (compared by its right side)."""
    return _norm.strip_assignment(f"{eq[0]} = {eq[1]}") != f"{eq[0]} = {eq[1]}"
