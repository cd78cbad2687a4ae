"""Final-answer extraction: which span of a completion is its committed answer.

The last committed answer counts. ``<answer>`` tags outrank everything (a ``<think>`` block
never answers); an earlier box that the response explicitly retracts is ignored; two live
alternatives (different boxes, "6 or 9") or a negated answer ("the answer is not 5") are
no answer.
"""
from __future__ import annotations

import itertools
import re

MAX_BOX_CHARS = 4000  # a longer box is no answer (and scanning stays linear)
_BOX = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*(?::\s*)?", re.IGNORECASE)
_UNIT_WORDS = (r"(?:\s*(?:\\text\{\s*)?(?:seconds?|minutes?|hours?|days?|weeks?|years?|cm|mm|km|m|"
               r"meters?|inches|inch|feet|foot|miles?|kg|g|grams?|dollars?|cents?|degrees?)\b\}?)?")
_NUMBER_UNIT = re.compile(r"(?<![A-Za-z_])(?:-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?%?|-?\.\d+%?)" + _UNIT_WORDS)
_NEGATION = re.compile(r"(?:\bnot|n't|cannot|\bnever|\bneither|\bnor|\\neq?|≠|!=)\s*(?:equal\s+to\s+|be\s+)?"
                       r"\$?\s*$", re.IGNORECASE)
_ALTERNATIVE = re.compile(r"\d[^.\n]{0,40}?\bor\s*\$?\s*$", re.IGNORECASE)
# An explicit retraction: says the earlier answer was wrong.
_RETRACT_STRONG = re.compile(
    r"\b(?:that|this|it|my\s+(?:previous\s+|earlier\s+|first\s+)?answer|the\s+above)\s*"
    r"(?:'s|is|was)\s+(?:wrong|incorrect|not\s+(?:right|correct))"
    r"|\bscratch\s+that\b|\bI\s+(?:made\s+an?\s+(?:mistake|error)|retract)|\bcorrection\s*:"
    r"|\bno,?\s+wait\b", re.IGNORECASE)
# A self-correction marker: retracts an earlier box only when a new box follows it.
_RETRACT_WEAK = re.compile(
    _RETRACT_STRONG.pattern + r"|\b(?:wait|actually|hmm|hold\s+on|oops|on\s+(?:second\s+thought|"
    r"reflection)|I\s+mis(?:read|counted|calculated|understood)|let\s+me\s+(?:re-?check|"
    r"double[-\s]?check|reconsider|recompute|re-?calculate|re-?do|re-?examine))\b", re.IGNORECASE)
# Words that make a following retraction conditional or negated: a hedge, not a retraction
# ("unless I made a mistake", "I don't think that's wrong").
_HEDGED = re.compile(r"(?:\b(?:unless|if|in\s+case|whether)|n't\s+think|\bnot\s+think|\bdoubt)"
                     r"\s*$", re.IGNORECASE)


def retraction(text: str):
    """The first explicit retraction in ``text`` that is not hedged (a ``re.Match``) or None."""
    for m in _RETRACT_STRONG.finditer(text):
        if not _HEDGED.search(text[max(0, m.start() - 30):m.start()]):
            return m
    return None


def _closing_braces(text: str) -> dict[int, int]:
    """``{index of '{': index of its matching '}'}`` in one pass (unmatched ones absent)."""
    stack, match = [], {}
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            match[stack.pop()] = i
    return match


def _box_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, contents)`` of every balanced box, outermost only, in order."""
    spans, closing = [], None
    for m in _BOX.finditer(text):
        if spans and m.start() < spans[-1][1]:
            continue  # inside the previous box
        i = m.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            closing = _closing_braces(text) if closing is None else closing
            end = closing.get(i)
            if end is not None and end - i <= MAX_BOX_CHARS:
                spans.append((m.start(), end + 1, text[i + 1:end]))
        elif i > m.end():
            tok = re.match(r"[^\s$]+", text[i:i + 200])
            if tok:
                spans.append((m.start(), i + tok.end(), tok.group(0)))
    return spans


def extract_boxed(text: str) -> list[str]:
    """All ``\\boxed{...}`` / ``\\fbox{...}`` contents, in order (nested braces allowed).

    A box inside another box is part of the outer one (``\\boxed{\\boxed{5}}`` yields one
    answer); ``\\boxed 5`` (no braces) yields the following token; unbalanced boxes are skipped.
    """
    return [c for _, _, c in _box_spans(text)]


def _sentence_end(text: str) -> str:
    """``text`` up to the end of its first line/sentence (a '.' that is not a decimal point)."""
    line = text.split("\n", 1)[0]
    m = re.search(r"\.(?!\d)(?=\s|$)", line)
    return line[:m.start()] if m else line


_HEDGE_WORDS = (r"\b(?:if|or|unless|either|maybe|perhaps|possibly|assuming|approximately|"
                r"about|but|could|might|alternatively)\b")
_REMARK = re.compile(  # "42 (after checking step 3)", "12 — computed over 3 iterations"
    r"\s+\((?![^()]*" + _HEDGE_WORDS + r")(?=[^()]*(?<![\\a-zA-Z])[a-zA-Z]{3,})[^()]*\)?\s*$"
    r"|\s*(?:—|–|\s--)\s*(?!.*" + _HEDGE_WORDS + r")[a-zA-Z].*$", re.IGNORECASE)


def _trim_remark(ans: str) -> str:
    """An answer phrase without markdown emphasis, quotes and a trailing remark in words (a
    parenthesis or a dash clause that is not a hedge such as "(or 13)" / "— if …")."""
    ans = re.sub(r'^\\?["“]\s*|\s*\\?["”]$', "", ans.strip("*_ \t"))  # quoted: "12 and 13"
    return _REMARK.sub("", ans).strip("*_ \t")


def _from_phrase(text: str) -> str | None:
    """The last "the answer is x" (up to the end of its sentence); ``None`` when negated or
    retracted afterwards; ``""`` when there is no such phrase."""
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if not phrases:
        return ""
    last = phrases[-1]
    if re.search(r"n't\s*$|\bnot\s*$", text[max(0, last.start() - 12):last.start()], re.IGNORECASE):
        return None  # "the answer isn't" is caught by the phrase itself; "is not the answer"
    ans = _trim_remark(_sentence_end(text[last.end():]).strip())
    verb = list(re.finditer(r"\b(?:is|are|equals?|be)\b", ans))
    if verb and re.search(r"[a-zA-Z]{2,}", ans[:verb[-1].start()]):
        ans = ans[verb[-1].end():].strip()  # "Final answer: the largest $n$ is 34"
    ans = re.sub(r"\s*(?:,|;|\()\s*(?:and\s+|but\s+)?not\s+[^,;]*\)?$", "", ans)  # "5, not 6"
    if re.match(r"(?:not|n't|never|neither)\b|\\neq?\b|≠", ans, re.IGNORECASE):
        return None
    if retraction(text[last.end() + len(ans):]):
        return None
    return ans or ""


_MATH_SPAN = re.compile(  # bounded span length: linear scanning of unclosed delimiters
    r"(?<!\\)\$\$(.{1,1000}?)(?<!\\)\$\$|(?<!\\)\$(.{1,1000}?)(?<!\\)\$|\\\((.{1,1000}?)\\\)"
    r"|\\\[(.{1,1000}?)\\\]", re.DOTALL)


def _negated_or_alternative(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 80):start]
    if _NEGATION.search(before) or _ALTERNATIVE.search(before):
        return True
    if re.match(r"\s*(?:or\b|\\neq?\b|≠|(?:is|was)(?:\s+not\b|n't))", text[end:], re.IGNORECASE):
        return True
    return bool(retraction(text[end:]))


def _span_answer(span: str) -> str | None:
    """The answer in a math span: after the last ``=`` of a chain ``x = 2+3 = 5``, before
    ``\\approx``; ``None`` for a negated relation."""
    span = re.split(r"\\approx|≈", span)[0].strip()
    if re.fullmatch(r"[a-zA-Z]\s*(?:\\neq?\b|≠|!=)\s*[^=<>]+", span):
        return span  # "x \neq 3": all reals but 3 (never the value 3)
    if re.search(r"\\neq?\b|≠|!=", span):
        return None
    if span.count("=") >= 2 and not re.search(r"[<>]=|=[<>]|\\[lg]eq?|[,;]", span):
        span = span.rsplit("=", 1)[1].strip()
    elif span.count("=") == 1 and not re.search(r"[<>]|\\[lg]eq?", span):
        lhs = re.sub(r"\\[a-zA-Z]+", "", span.split("=")[0])
        if re.search(r"\d", lhs) and not re.search(r"[a-zA-Z]", lhs):
            span = span.split("=")[1].strip()  # "6 \times 7 = 42": a computation's result
    return span or None


# A closing remark or a check after the answer ("Check: …", "I hope this helps"): the
# fallback reads the text before it, when that has a number and the remark concludes nothing.
_ASIDE = re.compile(r"(?:\n\s*(?:\*\*)?(?:check|verification|verify|note|sanity\s+check|"
                    r"double[-\s]?check)\s*(?:\*\*)?\s*:|\bI\s+hope\b|\bhope\s+this\s+helps\b|"
                    r"\blet\s+me\s+know\b|\bfeel\s+free\b)", re.IGNORECASE)
_CONCLUDES = re.compile(r"\b(?:therefore|thus|hence|so|answer|total|final|result)\b",
                        re.IGNORECASE)


def _without_remarks(text: str) -> str:
    """``text`` up to a trailing check or closing remark (see :data:`_ASIDE`)."""
    for m in itertools.islice(_ASIDE.finditer(text), 16):  # bounded work on repeated remarks
        head, tail = text[:m.start()], text[m.start():]
        if _NUMBER_UNIT.search(head) and not _CONCLUDES.search(tail):
            return head
    return text


def final_list(text: str) -> list[str]:
    """The math spans of the response's last sentence when they form a list ("so $x = -3$ or
    $x = 2$."): joined only by commas, "or", "and"; nothing but punctuation after them."""
    region, _ = _answer_region(text)
    region = region.rstrip()
    start = max(region.rfind(". ", 0, max(0, len(region) - 2)), region.rfind("\n"))
    sentence = region[start + 1:]
    spans = list(_MATH_SPAN.finditer(sentence))
    if len(spans) < 2 or sentence[spans[-1].end():].strip(" .;!"):
        return []
    for prev, cur in zip(spans, spans[1:]):
        if not re.fullmatch(r"\s*(?:,|,?\s*(?:or|and))\s*", sentence[prev.end():cur.start()]):
            return []
    return [next(g for g in sp.groups() if g is not None).strip() for sp in spans]


def _from_last_number(text: str) -> str | None:
    """The fallback answer: the whole text when it is a single token (``\\frac{10}{9}``); else
    the last math span (``$…$``, ``\\(…\\)``, ``\\[…\\]``) when it holds the last number or ends
    the text; else the last number (with a trailing unit word). Not one that is negated, an
    alternative ("6 or 9") or retracted."""
    whole = text.strip()
    if (whole and not re.search(r"\s", whole) and len(whole) <= 400 and not _MATH_SPAN.search(whole)
            and not _BOX.search(whole) and whole.count("{") == whole.count("}")):
        return whole
    found = list(_NUMBER_UNIT.finditer(text))
    last = found[-1] if found else None
    spans = list(_MATH_SPAN.finditer(text[-20000:]))
    if spans:
        off = max(0, len(text) - 20000)
        sp = spans[-1]
        start, end = sp.start() + off, sp.end() + off
        holds = last is not None and start <= last.start() < end
        if holds or not text[end:].strip(" \t\n.,;:!"):
            inner = next(g for g in sp.groups() if g is not None)
            if _negated_or_alternative(text, start, end):
                return None
            return _span_answer(inner)
    if last is None or _negated_or_alternative(text, last.start(), last.end()):
        return None
    return last.group(0).strip()


def live_boxes(text: str) -> list[str]:
    """The contents of the boxes of the answer region that no later self-correction retracts
    (for a response that boxes each element of a list separately)."""
    region, _ = _answer_region(text)
    spans = _box_spans(region)
    if not spans or retraction(region[spans[-1][1]:]):
        return []
    live = [spans[0]]
    for prev, cur in zip(spans, spans[1:]):
        if _RETRACT_WEAK.search(region[prev[1]:cur[0]]):
            live = []
        live.append(cur)
    return [c.strip() for _, _, c in live]


def _pick_boxes(spans, text: str, several_boxed: str):
    """The committed box among ``spans``: earlier boxes retracted by a later marker followed by
    a new box are dropped; live boxes that disagree give ``None`` (``"reject"``)."""
    from rlvr_jax.rewards.math.equiv import answers_equivalent
    live = [spans[0]]
    for prev, cur in zip(spans, spans[1:]):
        if _RETRACT_WEAK.search(text[prev[1]:cur[0]]):
            live = []
        live.append(cur)
    last = live[-1][2].strip()
    if several_boxed == "last" or len(live) == 1:
        return last or None
    if all(answers_equivalent(s[2], last) for s in live[:-1]):
        return last or None
    return None


def _answer_region(text: str) -> tuple[str, bool]:
    """``(region, tagged)``: the last ``<answer>`` block (to ``</answer>`` or the end of the text),
    else the text after the last ``</think>``; an unclosed ``<think>`` leaves nothing."""
    start = text.rfind("<answer>")
    if start >= 0:
        inner = text[start + len("<answer>"):]
        end = inner.find("</answer>")
        return (inner if end < 0 else inner[:end]), True
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1], False
    if "<think>" in text:
        return "", False
    return text, False


def extract_answer(text: str, *, fallback_last_number: bool = True,
                   several_boxed: str = "reject") -> str | None:
    """The final answer of a completion, or ``None`` when there is none.

    Region: the last ``<answer>…</answer>`` block if any (an unclosed one runs to the end),
    else the text after the last ``</think>`` (an unclosed ``<think>`` has no answer). In it,
    first that applies wins: ``\\boxed{…}`` (outermost; a box followed by a self-correction
    and a new box is dropped; several live boxes must agree), GSM8K ``#### x``, "the answer
    is x" (last occurrence, up to the end of its sentence; a negated one is no answer), a
    whole ``<answer>`` block, and finally the last number (``fallback_last_number``; not one
    that is negated, an alternative "6 or 9", or retracted).

    Args:
      text: the completion.
      fallback_last_number: use the last number when nothing explicit is found.
      several_boxed: ``"reject"`` — several live boxed answers that are not all
        equivalent give ``None`` (hedging is not rewarded); ``"last"`` — take the last.
    """
    if several_boxed not in ("reject", "last"):
        raise ValueError(f"several_boxed must be 'reject' or 'last', got {several_boxed!r}")
    if not isinstance(text, str):
        raise ValueError(f"completion must be a str, got {type(text).__name__}")
    region, tagged = _answer_region(text)
    spans = _box_spans(region)
    if spans:
        after = region[spans[-1][1]:]
        strong = retraction(after)
        if not strong:
            boxed = _pick_boxes(spans, region, several_boxed)
            later = _from_phrase(after)  # "\boxed{8}. … so the answer is 9": two answers
            if boxed and later and re.search(r"\d", later) and several_boxed == "reject":
                from rlvr_jax.rewards.math.equiv import answers_equivalent
                if not answers_equivalent(later, boxed):
                    return None
            return boxed
        region = after[strong.end():]  # the last box is retracted: look for what replaces it
        phrase = _from_phrase(region)
        return phrase or None
    if "####" in region:
        ans = region.rsplit("####", 1)[1].strip().split("\n", 1)[0].strip()
        return ans or None
    phrase = _from_phrase(region)
    if phrase is None or phrase:
        return phrase
    if tagged:
        return region.strip() or None
    if fallback_last_number:
        return _from_last_number(_without_remarks(region))
    return None
