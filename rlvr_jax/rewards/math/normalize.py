"""Answer normalisation: one canonical string per written form, plus choice letters.

Only the form changes here, never the value: LaTeX wrappers and spacing go, ``\\dfrac`` →
``\\frac``, thousands separators (``1,000``, ``1{,}000``, ``1 000``) are joined, a repeating
decimal ``0.1\\overline{6}`` becomes the exact fraction it denotes, a mixed number
``2\\frac{1}{4}`` becomes ``(2+1/4)``, a number word becomes its digits.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr_jax.rewards.math.parse import braced

_DROP = [
    "\\displaystyle", "\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\quad", "\\qquad",
    "\\bigl", "\\bigr", "\\Bigl", "\\Bigr", "\\big", "\\Big", "\\(", "\\)", "\\[", "\\]", "$",
]
_TEXT_CMDS = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|texttt|textup|textsl|emph|mathrm|mathbf"
    r"|mathit|mathsf|mathtt|mathnormal|mbox|hbox|operatorname|hat|vec|boldsymbol|bm)\s*\{([^{}]*)\}")
_THOUSANDS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?:,\d{3})+(?![\d,])")  # "0,125" is a decimal
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d.,])")
_DEGREE = r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\circ|\\degree)"
_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)\s*\\(?:overline|bar|dot)\s*\{?\s*(\d+)\s*\}?")
_MIXED = re.compile(r"(?<![\w.^_{}()\\])(\d+)\s*\\frac\s*\{(\d+)\}\s*\{(\d+)\}")
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
                      "eighty": "80", "ninety": "90", "hundred": "100", "a hundred": "100",
                      "one hundred": "100", "a thousand": "1000", "one thousand": "1000"})


_MATRIX = re.compile(r"\\begin\{([pbB]?matrix|smallmatrix|array)\}(?:\{[^{}]*\})?(.*?)\\end\{\1\}",
                     re.DOTALL)


def _matrix_form(m: re.Match) -> str:
    rows = [r for r in (r.strip() for r in m.group(2).split("\\\\")) if r]
    return "\\matrix{" + ";".join("&".join(c.strip() for c in r.split("&")) for r in rows) + "}"


def unwrap_boxes(s: str) -> str:
    """``\\boxed{x}`` / ``\\fbox{x}`` → ``x`` anywhere in ``s`` (nested boxes too)."""
    for _ in range(64):
        m = re.search(r"\\(?:boxed|fbox)\s*(?=\{)", s)
        if not m:
            return s
        got = braced(s, m.end())
        if got is None:
            return s
        s = s[:m.start()] + got[0] + s[got[1]:]
    return s


def _repeating_to_fraction(m: re.Match) -> str:
    sign, whole, fixed, rep = m.groups()
    if len(whole) + len(fixed) + len(rep) > 1000:
        return m.group(0)  # too long to be an answer; left unparseable
    whole = int(whole or 0)
    value = Fraction(whole) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value += Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    return f"{sign}({value.numerator}/{value.denominator})"


def _mixed_to_sum(m: re.Match) -> str:
    whole, num, den = m.groups()
    if int(den) == 0 or int(num) >= int(den):
        return m.group(0)  # not a proper fraction: "2\frac{5}{3}" stays a product
    return f"({whole}+{num}/{den})"


def normalize_answer(answer, *, strip_assign: bool = True) -> str:
    """A canonical string form: LaTeX noise, ``$``, spacing and assignments removed.

    A degree sign ending a value becomes the unit word ``degree`` (``90^\\circ`` →
    ``90 degree``), others are dropped; ``∞`` → ``\\infty``, ``\\langle…\\rangle`` → ``(…)``,
    ``\\colon`` → ``:``. ``strip_assign=False`` keeps an assignment ``y = 2x`` (to compare
    equations).

    ``\\dfrac``/``\\tfrac`` become ``\\frac``, ``\\text{..}`` its contents (so units become
    trailing words), ``1{,}000``/``1,000``/``1 000`` become ``1000``, ``x = 3`` becomes ``3``,
    ``\\%`` and "percent" become ``%``, ``0.\\overline{3}`` becomes ``(1/3)``, ``2\\frac{1}{4}``
    becomes ``(2+1/4)``, a number word (``two``) its digits; whitespace is collapsed and a
    trailing period dropped; ``pmatrix``/``bmatrix`` become ``\\matrix{a&b;c&d}``.
    """
    s = str(answer).strip().replace("\u2212", "-").replace("\u2013", "-").replace("\u00d7", "\\times")
    s = unwrap_boxes(s)
    s = _MATRIX.sub(_matrix_form, s)
    s = re.sub(r"(\d)(?:\{,\}|,)\\!\s*(?=\d{3})", r"\1,", s)  # "11,\! 111" thousands
    s = s.replace("{,}", ",").replace("\\$", " ").replace("\\%", "%").replace("\\#", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\cfrac", "\\frac")
    s = re.sub(r"\\left\s*\.|\\right\s*\.", "", s)
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)\s*\\?([|{}])", r"\1", s)
    for _ in range(3):
        s = _TEXT_CMDS.sub(lambda m: " " + m.group(1) + " ", s)
    for tok in _DROP:
        s = s.replace(tok, " " if tok.startswith("\\q") else "")
    # A degree sign ending a value is the unit "degree" (it converts to radians); others go.
    s = re.sub(_DEGREE + r"(?=\s*(?:$|[,;)\]]|\\\}|\.\s*$))", " degree", s)
    s = re.sub(_DEGREE, "", s)
    s = s.replace("∞", "\\infty").replace("\\langle", "(").replace("\\rangle", ")")
    s = s.replace("⟨", "(").replace("⟩", ")").replace("\\colon", ":")
    s = s.replace("\\ ", " ").replace("~", " ").replace("\\infinity", "\\infty")
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s+\^", "^", s)
    s = re.sub(r"^[(\[]\s*(\\matrix\{.*\})\s*[)\]]$", r"\1", s)  # "\left[\begin{array}…\right]"
    s = s.rstrip(".").strip()
    s = re.sub(r"(?<=[\d)}])\s*percent\b", "%", s, flags=re.IGNORECASE)
    s = _REPEATING.sub(_repeating_to_fraction, s)
    s = _MIXED.sub(_mixed_to_sum, s)
    word = _NUMBER_WORDS.get(s.lower())
    if word is not None:
        s = word
    # A single assignment "x = 3" / "k=3" → "3" (not for relations such as "x <= 3").
    if strip_assign:
        s = strip_assignment(s)
    if not re.fullmatch(r"[(\[][^,]*,[^,]*[)\]]", s):  # keep "(1,234)" an interval
        s = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    s = _SPACED_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), s)
    return s


_NAME = r"[a-zA-Z](?:_\{?\w+\}?)?"
_LHS = (r"(?:" + _NAME + r"|[a-zA-Z]\([a-z]\)|[A-Z]{2,3}|\|[A-Za-z]{1,3}\|"
        r"|\(\s*[a-zA-Z](?:\s*,\s*[a-zA-Z])+\s*\)|" + _NAME + r"\s*:\s*" + _NAME + r")")


def strip_assignment(s: str) -> str:
    """``x = 3`` / ``x_1=3`` / ``f(x) = ...`` / ``(p,q) = (3,2)`` / ``AB = 4`` / ``|AB| = 4`` /
    ``V_1:V_2 = 11:21`` / ``x \\in (1,2)`` → the right-hand side."""
    m = re.fullmatch(r"\s*" + _LHS + r"\s*(?:=|\\in)\s*(.+)", s)
    if m and "=" not in m.group(1):
        return m.group(1).strip()
    return s


# --------------------------------------------------------------------------- choices

_CHOICE = re.compile(r"^\(?\s*([A-E])\s*\)(?=\s|$|\d|-)\s*(.*)$|^([A-E])$|^([A-E])[.:]\s+(.*)$")


def split_choice(s: str) -> tuple[str, str] | None:
    """``(B) 24`` / ``\\textbf{(B)}\\ 24`` (normalised) / ``B`` → ``("B", "24")`` / ``("B", "")``."""
    m = _CHOICE.match(s.strip())
    if not m:
        return None
    if m.group(1):
        return m.group(1), m.group(2).strip()
    if m.group(3):
        return m.group(3), ""
    return m.group(4), m.group(5).strip()
