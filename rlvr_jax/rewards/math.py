"""Math answer rewards: final-answer extraction, normalisation and equivalence.

Two verifiers share one interface ``(completion: str, reference) -> float``:

* :func:`math_reward` — our rule verifier (pure Python, no dependencies). Exact
  rational arithmetic for numbers, fractions, ``\\frac``, percentages, decimals
  and simple expressions; numeric evaluation at fixed points for expressions in
  variables; intervals, tuples and unordered answer lists.
* :func:`math_verify_reward` — the ``math-verify`` library (the ``math`` extra),
  imported lazily. Its own timeouts use ``SIGALRM`` and fail off the main
  thread, so they are switched off here: run it through
  :class:`rlvr_jax.rewards.pool.RewardPool`, which enforces the timeout.

Both are audited on a labelled set of answer pairs by
``scripts/audit_verifier.py``; the measured false-negative / false-positive
rates are in ``docs/verifiers.md``.
"""
from __future__ import annotations

import cmath
import math as _pymath
import re
from fractions import Fraction

# --------------------------------------------------------------------------- extraction

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*(?::\s*)?", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?%?|-?\.\d+%?")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
MAX_ANSWER_CHARS = 400


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """Contents of the brace group opening at ``text[start] == '{'`` and the end index."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def extract_boxed(text: str) -> list[str]:
    """All ``\\boxed{...}`` / ``\\fbox{...}`` contents, in order (nested braces allowed).

    ``\\boxed 5`` (no braces) yields the following token. Unbalanced boxes are skipped.
    """
    found = []
    for cmd in _BOX_COMMANDS:
        for m in re.finditer(re.escape(cmd) + r"(?![a-zA-Z])", text):
            i = m.end()
            while i < len(text) and text[i] == " ":
                i += 1
            if i < len(text) and text[i] == "{":
                got = _braced(text, i)
                if got is not None:
                    found.append((m.start(), got[0]))
            elif i > m.end():
                tok = re.match(r"[^\s$]+", text[i:])
                if tok:
                    found.append((m.start(), tok.group(0)))
    return [s for _, s in sorted(found)]


def _sentence_end(text: str) -> str:
    """``text`` up to the end of its first line/sentence (a '.' that is not a decimal point)."""
    line = text.split("\n", 1)[0]
    m = re.search(r"\.(?!\d)(?=\s|$)", line)
    return line[:m.start()] if m else line


def extract_answer(text: str, *, fallback_last_number: bool = True,
                   several_boxed: str = "reject") -> str | None:
    """The final answer of a completion, or ``None`` when there is none.

    Strategies, first that applies wins: ``<answer>…</answer>`` tag (its last
    occurrence, searched again for a box), ``\\boxed{…}``, GSM8K ``#### x``,
    "the answer is x" (last occurrence, up to the end of its sentence), and
    finally the last number in the text (``fallback_last_number``).

    Args:
      text: the completion.
      fallback_last_number: use the last number when nothing explicit is found.
      several_boxed: ``"reject"`` — several boxed answers that are not all
        equivalent give ``None`` (hedging is not rewarded); ``"last"`` — take the last.
    """
    if several_boxed not in ("reject", "last"):
        raise ValueError(f"several_boxed must be 'reject' or 'last', got {several_boxed!r}")
    if not isinstance(text, str):
        raise ValueError(f"completion must be a str, got {type(text).__name__}")
    tags = _ANSWER_TAG.findall(text)
    if tags:
        inner = tags[-1]
        boxed = extract_boxed(inner)
        if boxed:
            return _pick_boxed(boxed, several_boxed)
        inner = inner.strip()
        return inner or None
    boxed = extract_boxed(text)
    if boxed:
        return _pick_boxed(boxed, several_boxed)
    if "####" in text:
        ans = text.rsplit("####", 1)[1].strip().split("\n", 1)[0].strip()
        return ans or None
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:
        ans = _sentence_end(text[phrases[-1].end():]).strip()
        if ans:
            return ans
    if fallback_last_number:
        nums = _NUMBER.findall(text)
        if nums:
            return nums[-1].strip()
    return None


def _pick_boxed(boxed: list[str], several_boxed: str) -> str | None:
    last = boxed[-1].strip()
    if several_boxed == "last" or len(boxed) == 1:
        return last or None
    if all(answers_equivalent(b, last) for b in boxed[:-1]):
        return last or None
    return None


# --------------------------------------------------------------------------- normalisation

_DROP = [
    "\\displaystyle", "\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\quad", "\\qquad",
    "\\big", "\\Big", "\\bigl", "\\bigr", "\\(", "\\)", "\\[", "\\]", "$",
]
_TEXT_CMDS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")


def normalize_answer(answer) -> str:
    """A canonical string form: LaTeX noise, ``$``, spacing, assignments and degree signs removed.

    ``\\dfrac``/``\\tfrac`` become ``\\frac``, ``\\text{..}`` its contents (so units
    become trailing words), ``1{,}000``/``1,000`` become ``1000``, ``x = 3`` becomes
    ``3``, ``\\%`` becomes ``%``; whitespace is collapsed and a trailing period dropped.
    """
    s = str(answer).strip().replace("\u2212", "-").replace("\u2013", "-")
    s = s.replace("{,}", ",").replace("\\$", " ").replace("\\%", "%")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    for _ in range(3):
        s = _TEXT_CMDS.sub(lambda m: " " + m.group(1) + " ", s)
    for tok in _DROP:
        s = s.replace(tok, " " if tok.startswith("\\q") else "")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°|\\circ", "", s)
    s = s.replace("\\ ", " ").replace("~", " ")
    s = re.sub(r"\s+", " ", s).strip()
    s = s.rstrip(".").strip()
    # A single assignment "x = 3" / "k=3" → "3" (not for relations such as "x <= 3").
    parts = s.split("=")
    if len(parts) == 2 and re.fullmatch(r"\s*[a-zA-Z](?:_\{?\w+\}?)?\s*", parts[0]):
        s = parts[1].strip()
    if not re.fullmatch(r"[(\[][^,]*,[^,]*[)\]]", s):  # keep "(1,234)" an interval
        s = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    return s


# --------------------------------------------------------------------------- parsing

class _ParseError(ValueError):
    pass


def _latex_to_plain(s: str) -> str:
    """Rewrite the LaTeX subset we evaluate into a plain infix expression."""
    out, i = [], 0
    while i < len(s):
        if s.startswith("\\frac", i):
            i += 5
            args = []
            for _ in range(2):
                while i < len(s) and s[i] == " ":
                    i += 1
                if i < len(s) and s[i] == "{":
                    got = _braced(s, i)
                    if got is None:
                        raise _ParseError("unbalanced \\frac")
                    args.append(_latex_to_plain(got[0]))
                    i = got[1]
                elif i < len(s) and s[i].isalnum():
                    args.append(s[i])
                    i += 1
                else:
                    raise _ParseError("bad \\frac")
            out.append(f"(({args[0]})/({args[1]}))")
        elif s.startswith("\\sqrt", i):
            i += 5
            index = None
            if i < len(s) and s[i] == "[":
                j = s.index("]", i)
                index = _latex_to_plain(s[i + 1:j])
                i = j + 1
            if i < len(s) and s[i] == "{":
                got = _braced(s, i)
                if got is None:
                    raise _ParseError("unbalanced \\sqrt")
                arg, i = _latex_to_plain(got[0]), got[1]
            elif i < len(s) and s[i].isalnum():
                arg, i = s[i], i + 1
            else:
                raise _ParseError("bad \\sqrt")
            out.append(f"sqrt({arg})" if index is None else f"(({arg})^(1/({index})))")
        elif s[i] == "\\":
            m = re.match(r"\\([a-zA-Z]+)", s[i:])
            if not m:
                raise _ParseError(f"bad command at {s[i:i + 8]!r}")
            name = m.group(1)
            repl = {"cdot": "*", "times": "*", "div": "/", "pi": "pi", "infty": "inf",
                    "ln": "ln", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan",
                    "exp": "exp", "e": "e"}.get(name)
            if repl is None:
                raise _ParseError(f"unsupported command \\{name}")
            out.append(f" {repl} ")
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


_TOKEN = re.compile(r"\s*(?:((?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+(?![\d.]))?)|([a-zA-Z]+)|(\*\*|[-+*/^()%]))")
_FUNCS = {"sqrt", "ln", "log", "sin", "cos", "tan", "exp"}
_CONSTS = {"pi", "inf", "e"}


def _tokenize(s: str) -> list[tuple[str, str]]:
    toks, i = [], 0
    s = s.rstrip()
    while i < len(s):
        m = _TOKEN.match(s, i)
        if not m or m.end() == i:
            raise _ParseError(f"unexpected {s[i:i + 8]!r}")
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
    return toks


class _Parser:
    """Recursive descent: expr := term (±term)*; term := unary ((*|/|implicit) unary)*;
    unary := -unary | power; power := atom (^ unary)?; atom := num | var | const | f(atom) | (expr) | atom%."""

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
            raise _ParseError(f"trailing {self.peek()}")
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
        while self.peek() == ("op", "%"):
            self.take()
            node = ("%", node)
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
            return ("call", val, self.power())
        if (kind, val) == ("op", "("):
            node = self.expr()
            if self.take() != ("op", ")"):
                raise _ParseError("missing )")
            return node
        raise _ParseError(f"unexpected token {val!r}")


def _variables(node) -> set[str]:
    if node[0] == "var":
        return {node[1]}
    return set().union(*[_variables(c) for c in node[1:] if isinstance(c, tuple)])


def _has_percent(node) -> bool:
    return node[0] == "%" or any(_has_percent(c) for c in node[1:] if isinstance(c, tuple))


_CONST_VALUES = {"pi": _pymath.pi, "e": _pymath.e, "inf": _pymath.inf}
_FUNC_VALUES = {"sqrt": cmath.sqrt, "ln": cmath.log, "log": cmath.log, "sin": cmath.sin,
                "cos": cmath.cos, "tan": cmath.tan, "exp": cmath.exp}


def _evaluate(node, env, percent_scale):
    """Exact ``Fraction`` where possible, else ``float``/``complex``."""
    op = node[0]
    if op == "num":
        return node[1]
    if op == "var":
        return env[node[1]]
    if op == "const":
        return _CONST_VALUES[node[1]]
    if op == "neg":
        return -_evaluate(node[1], env, percent_scale)
    if op == "%":
        return _evaluate(node[1], env, percent_scale) * percent_scale
    if op == "call":
        arg = _evaluate(node[2], env, percent_scale)
        if node[1] == "sqrt" and isinstance(arg, Fraction) and arg >= 0:
            rn, rd = _pymath.isqrt(arg.numerator), _pymath.isqrt(arg.denominator)
            if rn * rn == arg.numerator and rd * rd == arg.denominator:
                return Fraction(rn, rd)
        return _FUNC_VALUES[node[1]](complex(arg))
    a = _evaluate(node[1], env, percent_scale)
    b = _evaluate(node[2], env, percent_scale)
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
        if isinstance(b, Fraction) and b.denominator == 1 and isinstance(a, Fraction):
            if abs(b) > 64 or (abs(a.numerator) > 10 ** 6 and abs(b) > 8):
                return complex(a) ** complex(b)  # bounded cost: no huge exact powers
            return a ** int(b) if a != 0 or b > 0 else complex("nan")
        return complex(a) ** complex(b)
    raise _ParseError(op)


def _parse_expr(s: str):
    s = s.strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        raise _ParseError("empty or too long")
    return _Parser(_tokenize(_latex_to_plain(s))).parse()




def _close(a, b) -> bool:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    a, b = complex(a), complex(b)
    if any(_pymath.isnan(v) for v in (a.real, a.imag, b.real, b.imag)):
        return False
    if _pymath.isinf(abs(a)) or _pymath.isinf(abs(b)):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _scalars_equal(pa, pb) -> bool:
    """Numeric equality of two parsed expressions; a percentage may be read as p or p/100."""
    vars_a, vars_b = _variables(pa), _variables(pb)
    if vars_a != vars_b:
        return False
    names = sorted(vars_a)
    scales_a = (Fraction(1, 100), 1) if _has_percent(pa) else (1,)
    scales_b = (Fraction(1, 100), 1) if _has_percent(pb) else (1,)
    for sa in scales_a:
        for sb in scales_b:
            ok = True
            for k in range(3 if names else 1):
                env = {n: Fraction(k * 7 + j * 3 + 2, 5 + j) * (-1) ** (j + k)
                       for j, n in enumerate(names)}
                try:
                    if not _close(_evaluate(pa, env, sa), _evaluate(pb, env, sb)):
                        ok = False
                        break
                except (ZeroDivisionError, OverflowError, ValueError, KeyError):
                    ok = False
                    break
            if ok:
                return True
    return False


_UNIT_TAIL = re.compile(r"^(.*?[\d)}])\s+([a-zA-Z]+(?:\^?\d)?(?:\s*(?:/|per)?\s*[a-zA-Z]+(?:\^?\d)?)*)$")


def _split_unit(s: str) -> tuple[str, str]:
    """``"5 cm"`` → ``("5", "cm")``; no unit → ``(s, "")``."""
    m = _UNIT_TAIL.match(s)
    if m and not re.search(r"\b(?:or|and)\b", m.group(2)):
        return m.group(1).strip(), m.group(2).lower().replace(" ", "")
    return s, ""


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and braces."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _atoms_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    a_val, a_unit = _split_unit(a)
    b_val, b_unit = _split_unit(b)
    if a_unit and b_unit and a_unit.rstrip("s") != b_unit.rstrip("s"):
        return False
    if a_val.lower() == b_val.lower():
        return True
    try:
        return _scalars_equal(_parse_expr(a_val), _parse_expr(b_val))
    except (_ParseError, ZeroDivisionError, OverflowError, ValueError, RecursionError, KeyError):
        return False


def _structure(s: str):
    """``("interval", "(", "]", [items])`` for bracketed pairs/tuples, ``("set", items)`` for
    a top-level comma list or ``\\{…\\}``, else ``("atom", s)``."""
    if "\\cup" in s:
        return ("union", [_structure(p.strip()) for p in s.split("\\cup")])
    if s.startswith("\\{") and s.endswith("\\}"):
        return ("set", _split_top(s[2:-2]))
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        inner = _split_top(s[1:-1])
        if len(inner) >= 2 and _matching(s):
            return ("interval", s[0], s[-1], inner)
    items = _split_top(s)
    if len(items) >= 2:
        return ("set", items)
    return ("atom", s)


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


def _structures_equal(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "atom":
        return _atoms_equal(a[1], b[1])
    if a[0] == "interval":
        return (a[1] == b[1] and a[2] == b[2] and len(a[3]) == len(b[3])
                and all(_atoms_equal(x, y) for x, y in zip(a[3], b[3])))
    if a[0] == "union":
        return len(a[1]) == len(b[1]) and all(_structures_equal(x, y) for x, y in zip(a[1], b[1]))
    # unordered lists: greedy one-to-one matching
    left = list(b[1])
    if len(a[1]) != len(left):
        return False
    for x in a[1]:
        for j, y in enumerate(left):
            if _atoms_equal(x, y):
                del left[j]
                break
        else:
            return False
    return True


def answers_equivalent(prediction, reference) -> bool:
    """Whether two final answers are mathematically the same (our rule verifier).

    Args:
      prediction: an extracted answer string (``None`` → False).
      reference: the reference answer (str, int, float or Fraction).
    """
    if prediction is None or reference is None:
        return False
    a, b = normalize_answer(prediction), normalize_answer(reference)
    if not a or not b:
        return False
    if a == b:
        return True
    if len(a) > MAX_ANSWER_CHARS or len(b) > MAX_ANSWER_CHARS:
        return False
    return _structures_equal(_structure(a), _structure(b))


def math_reward(completion: str, reference, *, fallback_last_number: bool = True,
                several_boxed: str = "reject") -> float:
    """1.0 when the completion's final answer equals ``reference``, else 0.0 (rule verifier).

    See :func:`extract_answer` for the extraction order and :func:`answers_equivalent`
    for equivalence.
    """
    pred = extract_answer(completion, fallback_last_number=fallback_last_number,
                          several_boxed=several_boxed)
    return 1.0 if answers_equivalent(pred, reference) else 0.0


# --------------------------------------------------------------------------- math-verify

def math_verify_available() -> bool:
    """Whether the optional ``math-verify`` package can be imported."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return False
    return True


def _import_math_verify():
    try:
        import math_verify
    except ImportError as e:
        raise ImportError(
            "math_verify_reward needs the optional 'math-verify' package: "
            "pip install 'rlvr_jax[math]' (or math-verify==0.9.0); "
            "math_reward is the dependency-free rule verifier.") from e
    import logging
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return math_verify


def math_verify_reward(completion: str, reference) -> float:
    """1.0 when ``math-verify`` judges the completion equal to ``reference``, else 0.0.

    math-verify's own timeouts (``SIGALRM``) are disabled here; run this inside a
    :class:`~rlvr_jax.rewards.pool.RewardPool`, which kills a worker that hangs.
    The reference is parsed as ``$reference$`` unless it already has a math delimiter or a box.
    """
    mv = _import_math_verify()
    ref = str(reference)
    if not re.search(r"(?<!\\)\$", ref) and "\\boxed" not in ref:
        ref = f"${ref}$"
    gold = mv.parse(ref, parsing_timeout=None)
    pred = mv.parse(completion, parsing_timeout=None)
    if not gold or not pred:
        return 0.0
    return 1.0 if mv.verify(gold, pred, timeout_seconds=None) else 0.0


def get_math_verifier(name: str = "rule"):
    """``"rule"`` → :func:`math_reward`; ``"math_verify"`` → :func:`math_verify_reward`
    (ImportError with install hint when missing); ``"auto"`` → math-verify when installed,
    else the rule verifier (with a warning)."""
    if name == "rule":
        return math_reward
    if name == "math_verify":
        _import_math_verify()
        return math_verify_reward
    if name == "auto":
        if math_verify_available():
            return math_verify_reward
        import warnings
        warnings.warn("math-verify is not installed; using the rule verifier (math_reward).")
        return math_reward
    raise ValueError(f"unknown math verifier {name!r}; expected 'rule', 'math_verify' or 'auto'")
