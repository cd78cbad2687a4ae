"""Answer-choice letters against the options a response lists.

A multiple-choice reference ``B`` is matched by the value of option (B) when the response
lists the options (``(A) 12 (B) 24 …``, ``\\textbf{(B)}\\ 24``, a line ``B. 24``) and boxes
that value; a value reference ``24`` is matched by a letter whose listed option is 24. The
listing must be unambiguous: at least two letters, no letter listed with two different
values, and the value under exactly one letter. The response's own listing is trusted: a
value that maps to one letter is the same commitment as writing that letter, so this grants
nothing a letter would not.
"""
from __future__ import annotations

import re

from rlvr_jax.rewards.math import normalize as _norm
from rlvr_jax.rewards.math.equiv import answers_equivalent, reference_answer
from rlvr_jax.rewards.math.extract import _box_spans

_MARK = re.compile(r"\\textbf\{\s*\(([A-E])\)\s*\}|\(([A-E])\)|^[ \t]*([A-E])[.)](?=\s)",
                   re.MULTILINE)
_VALUE_END = re.compile(r"\n|\\qquad|\\quad|\$|\.\s|;|\.$")


def listed_options(text: str) -> dict[str, str] | None:
    """``{letter: value}`` of the options listed in ``text`` (outside boxes); ``None`` when
    fewer than two letters are listed or a letter is listed with two different values."""
    for start, end, _ in reversed(_box_spans(text)):
        text = text[:start] + " " + text[end:]
    text = text.replace("\\ ", " ")
    marks = list(_MARK.finditer(text))
    options: dict[str, str] = {}
    for m, nxt in zip(marks, marks[1:] + [None]):
        letter = next(g for g in m.groups() if g)
        value = text[m.end():nxt.start() if nxt else len(text)]
        value = _VALUE_END.split(value, 1)[0].strip(" \t,:")
        if not value:
            continue
        if letter in options and _norm.normalize_answer(options[letter]) != _norm.normalize_answer(value):
            return None
        options[letter] = value
    return options if len(options) >= 2 else None


def via_options(completion: str, prediction, reference) -> bool:
    """Whether a bare letter and a value (either side) match through the options that
    ``completion`` lists (see the module docstring)."""
    if prediction is None or reference is None:
        return False
    a = _norm.normalize_answer(prediction)
    b = _norm.normalize_answer(reference_answer(reference))
    ca, cb = _norm.split_choice(a), _norm.split_choice(b)
    if (ca is None) == (cb is None) or (cb is not None and cb[1]) or (ca is not None and ca[1]):
        return False  # both letters (or neither), or a letter with its value: decided already
    options = listed_options(completion)
    if not options:
        return False
    if cb is not None:  # a value against a reference letter
        letters = [k for k, v in options.items() if answers_equivalent(prediction, v)]
        return letters == [cb[0]]
    value = options.get(ca[0])
    if value is None:
        return False
    letters = [k for k, v in options.items() if answers_equivalent(v, value)]
    return letters == [ca[0]] and answers_equivalent(value, reference)
