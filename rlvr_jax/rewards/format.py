"""Format rewards: does a completion follow the required output template?"""
from __future__ import annotations

import re

_THINK_ANSWER = re.compile(
    r"\s*<think>(?P<think>(?:(?!</?think>|</?answer>).)*)</think>\s*"
    r"<answer>(?P<answer>(?:(?!</?think>|</?answer>).)*)</answer>\s*", re.DOTALL)


def format_reward(completion: str, *, require_nonempty: bool = True) -> float:
    """1.0 when the completion is exactly ``<think>…</think><answer>…</answer>``, else 0.0.

    Only whitespace may surround or separate the two blocks; each tag appears once and
    blocks do not nest. ``require_nonempty``: both blocks must contain non-space text.
    """
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a str, got {type(completion).__name__}")
    m = _THINK_ANSWER.fullmatch(completion)
    if m is None:
        return 0.0
    if require_nonempty and not (m.group("think").strip() and m.group("answer").strip()):
        return 0.0
    return 1.0


def extract_tag(completion: str, tag: str = "answer") -> str | None:
    """Contents of the last ``<tag>…</tag>`` block, stripped, or ``None``."""
    if not re.fullmatch(r"[A-Za-z_][\w-]*", tag):
        raise ValueError(f"bad tag name {tag!r}")
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", completion, re.DOTALL)
    return found[-1].strip() if found else None
