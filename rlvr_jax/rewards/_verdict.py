"""Trusted side of the code reward: what to ask the sandbox, and the verdict on its answers.

An ``assert`` test is parsed here (``ast``, never executed). Its condition becomes a small
tree: ``and`` / ``or`` / ``not`` and comparison chains (``== != < <= > >= in not in is
is not``) are evaluated on this side; their operands are leaves. A leaf that is a Python
literal (``18``, ``"abc"``, ``[1, (2, 3)]``, ``{1, 2}``, ``None``; ``ast.literal_eval``) is
evaluated here and never sent to the sandbox; any other leaf (``f(3)``) is sent as source
text, evaluated inside the sandbox, and comes back as plain JSON. So a test written as
``assert f(3) == 18`` gives the sandbox ``f(3)`` and nothing else: the expected value is
out of the untrusted program's reach, and an object that claims to equal everything, a
patched ``__eq__`` or builtins, or a forged result line can only supply a value for
``f(3)`` — which a wrong program gets compared against 18 here.

Values: JSON has no tuples or sets; tuples (from either side) compare as lists, so
``assert f() == (1, 2)`` accepts ``[1, 2]``. A leaf that failed (exception, not plain
JSON, never reported) makes the test fail when the verdict needs it (``and`` / ``or``
short-circuit as in Python). A bare ``assert g(x)`` has no literal side: its truth is
whatever the sandbox reports, so keep expected values in literal operands.
"""
from __future__ import annotations

import ast
import json
import operator

_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
MAX_TEST_CHARS = 100_000


class LeafFailed(Exception):
    """An operand the sandbox could not evaluate to plain JSON."""


def _normalize(value):
    """Tuples become lists, recursively (how JSON carries them)."""
    if isinstance(value, (tuple, list)):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    return value


def _literal(node):
    try:
        return True, _normalize(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _tree(node, exprs: list, index: dict):
    """A verdict tree of the condition ``node``; non-literal leaves are appended to exprs."""
    if isinstance(node, ast.BoolOp):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        return (kind, [_tree(v, exprs, index) for v in node.values])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", _tree(node.operand, exprs, index))
    if isinstance(node, ast.Compare) and all(type(op) in _OPS for op in node.ops):
        leaves = [_tree(n, exprs, index) if isinstance(n, (ast.BoolOp, ast.UnaryOp, ast.Compare))
                  else _leaf(n, exprs, index) for n in [node.left] + node.comparators]
        return ("cmp", [_OPS[type(op)] for op in node.ops], leaves)
    return _leaf(node, exprs, index)


def _leaf(node, exprs, index):
    ok, value = _literal(node)
    if ok:
        return ("lit", value)
    src = ast.unparse(node)
    if src not in index:
        index[src] = len(exprs)
        exprs.append(src)
    return ("expr", index[src])


def compile_tests(tests) -> tuple[list, list]:
    """(exprs, checks): the expression sources the sandbox evaluates (deduplicated) and one
    verdict tree per test. Each test is Python source holding only ``assert`` statements
    (several asserts in one test must all hold); raises ValueError otherwise."""
    exprs, index, checks = [], {}, []
    for i, test in enumerate(tests):
        if len(test) > MAX_TEST_CHARS:
            raise ValueError(f"test {i} is longer than {MAX_TEST_CHARS} characters")
        try:
            body = ast.parse(test, mode="exec").body
        except SyntaxError as e:
            raise ValueError(f"test {i} is not valid Python: {e.msg}: {test!r}") from None
        if not body or not all(isinstance(s, ast.Assert) for s in body):
            raise ValueError(f"mode='assert': test {i} must be assert statements only "
                             f"(the verdict is taken outside the sandbox), got {test!r}")
        checks.append([_tree(s.test, exprs, index) for s in body])
    return exprs, checks


def _eval(tree, values):
    kind = tree[0]
    if kind == "lit":
        return tree[1]
    if kind == "expr":
        found = values.get(tree[1])
        if found is None:
            raise LeafFailed(tree[1])
        return found[0]
    if kind == "not":
        return not _eval(tree[1], values)
    if kind in ("and", "or"):
        result = None
        for sub in tree[1]:
            result = _eval(sub, values)
            if bool(result) != (kind == "and"):
                return result
        return result
    ops, leaves = tree[1], tree[2]
    left = _eval(leaves[0], values)
    for op, leaf in zip(ops, leaves[1:]):
        right = _eval(leaf, values)
        if not op(left, right):
            return False
        left = right
    return True


def passes(check, values: dict) -> bool:
    """Whether every assert of one test holds, given ``values``: ``{expr index: (value,)}``
    for the leaves the sandbox evaluated. Any failure is a fail, never an exception."""
    try:
        return all(bool(_eval(tree, values)) for tree in check)
    except (LeafFailed, TypeError, ValueError, RecursionError, MemoryError):
        return False


def _strict_constant(name):
    raise ValueError(f"{name} is not plain JSON")


def read_lines(text: str, count: int, key: str) -> tuple[dict, dict]:
    """Parses the sandbox's result lines: ({index: (payload, exit)} for each index < count whose
    first report carries ``key``, {"done": bool, "loaded": bool (the program ran; assert
    mode), "program_error": str | None})."""
    values, seen, meta = {}, set(), {"done": False, "loaded": False, "program_error": None}
    for line in text.splitlines():
        try:
            obj = json.loads(line, parse_constant=_strict_constant)
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict):
            continue
        for flag in ("done", "loaded"):
            if obj.get(flag) is True:
                meta[flag] = True
        if isinstance(obj.get("program_error"), str) and meta["program_error"] is None:
            meta["program_error"] = obj["program_error"][:100]
        i = obj.get("i")
        if type(i) is int and 0 <= i < count and i not in seen:
            seen.add(i)  # The first report of an index counts, value or error.
            if key in obj:
                values[i] = (obj[key], obj.get("exit"))
    return values, meta


def io_passes(reported, expected: str, max_chars: int) -> bool:
    """An io case passes when the program finished (exit 0) and its stdout, whitespace-split,
    equals the expected output's (compared here; the expectation never enters the sandbox)."""
    if reported is None:
        return False
    out, status = reported
    return (isinstance(out, str) and len(out) <= max_chars and status == 0
            and out.split() == str(expected).split())
