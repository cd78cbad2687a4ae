"""Shared pieces of the synthetic verifiable tasks.

Every task produces `Example`s whose `solution` is a worked solution that ends with the
final-answer marker ``"#### "`` followed by the answer, e.g. ``"13 11 7 #### 713"``. The
completion a policy should produce is exactly such a text followed by the tokenizer's EOS.

Answer-format rule shared by every host verifier (and mirrored token by token by
`rlvr_jax.tasks.token_verifier`): the completion must contain the marker ``####`` exactly
once (the first run of four ``#`` counts), and everything after it must be the answer in the
task's canonical form, optionally surrounded by ASCII whitespace (space, tab, CR, LF).
Prose after the answer, a second marker, or an answer hidden in prose without the marker
all score 0.

Answer formats (the `answer_format` knob of every task): ``"marker"`` (the default, above)
or ``"tags"``: the worked solution is ``<think>13 11 7</think><answer>713</answer>`` (what
`rlvr_jax.rewards.format_reward` asks for). In the tags format a completion must hold
exactly one ``<answer>…</answer>`` block, with only whitespace after it; the block's text is
the answer (same canonical form, optional surrounding whitespace) and the reasoning is the
``<think>`` block before it (or the text before ``<answer>``). The marker means nothing there.

Held-out splits: `split_of(key)` hashes a canonical problem key (e.g. ``"add:23+58"``)
with SHA-256; a fixed fraction of the hash space is the test split. A generator asked for one
split rejects problems of the other, so train and test are disjoint by construction and the
test set of a task is the same in every run and on every machine.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

import numpy as np

MARKER = "####"
ANSWER_FORMATS = ("marker", "tags")
WHITESPACE = " \t\r\n"
MAX_ANSWER_DIGITS = 9  # integer answers must fit in int32 for the on-device verifier
SPLITS = ("train", "test")

_INT_TAIL = re.compile(r"[ \t\r\n]*(-?)([0-9]+)[ \t\r\n]*")
_TAGGED = re.compile(r"(?P<before>.*)<answer>(?P<answer>.*)</answer>[ \t\r\n]*", re.DOTALL)
_THINK = re.compile(r"[ \t\r\n]*<think>(?P<think>.*)</think>[ \t\r\n]*", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Example:
    """One problem.

    Attributes:
      prompt: the text the policy sees (no chat template applied).
      answer: the reference answer in canonical text form (e.g. ``"81"``, ``"1 3 5"``).
      solution: worked solution ending in ``"#### " + answer`` (supervised warm-up target;
        append EOS when tokenising).
      task: the task name (``"arithmetic"``, ``"countdown"``, ``"sorting"``).
      key: canonical problem key; its hash decides the split.
      split: ``"train"`` or ``"test"``.
      answer_value: the integer answer when the task has one (arithmetic), else None.
      meta: task-specific data the verifiers need (operands, numbers, target, ...).
    """

    prompt: str
    answer: str
    solution: str
    task: str
    key: str
    split: str
    answer_value: int | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def split_of(key: str, *, test_fraction: float) -> str:
    """``"test"`` when the SHA-256 of `key` falls in the first `test_fraction` of hash space."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    h = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return "test" if h < test_fraction * 2.0**64 else "train"


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split


def split_answer(completion: str) -> tuple[str, str] | None:
    """(reasoning, tail) around the single marker, or None if the marker count is not 1."""
    if completion.count(MARKER) != 1:
        return None
    before, after = completion.split(MARKER)
    return before, after


def split_tagged(completion: str) -> tuple[str, str] | None:
    """(reasoning, answer text) of a completion in the tags format, or None unless it holds
    exactly one ``<answer>…</answer>`` block followed by whitespace only."""
    if completion.count("<answer>") != 1 or completion.count("</answer>") != 1:
        return None
    m = _TAGGED.fullmatch(completion)
    if m is None:
        return None
    think = _THINK.fullmatch(m.group("before"))
    return (think.group("think") if think else m.group("before")), m.group("answer")


def parse_int_tail(tail: str) -> int | None:
    """The integer in an answer tail (``"  -81 "`` -> -81); None if the tail is anything else.

    At most `MAX_ANSWER_DIGITS` digits (leading zeros count), so values fit in int32.
    """
    m = _INT_TAIL.fullmatch(tail)
    if m is None or len(m.group(2)) > MAX_ANSWER_DIGITS:
        return None
    value = int(m.group(2))
    return -value if m.group(1) else value


def extract_int_answer(completion: str) -> int | None:
    """The integer final answer of a completion under the shared format rule, or None."""
    parts = split_answer(completion)
    return None if parts is None else parse_int_tail(parts[1])


def rng_for(seed: int, index: int, salt: int) -> np.random.Generator:
    """Independent, reproducible generator for example `index` of stream `seed`."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(index), int(salt)])


class Task:
    """Base class: subclasses implement `_sample(rng) -> Example fields`, `verify` and
    `steps_are_right` (or all of `check_steps`).

    Public API (every task):
      example(index, *, seed, split) -> Example   deterministic in (seed, index, split)
      generate(n, *, seed, split, start=0) -> list[Example]
      verify(completion, example) -> float        1.0 correct final answer, else 0.0
      check_steps(completion, example) -> bool    the worked reasoning is correct too
      answer_key(completion) -> hashable | None   the normalised final answer (maj@k)
      token_verifier(tokenizer) -> fn | None      the on-device verifier, if the task has one
      step_scores(completion, example)            per-step verdicts [(end_char, 0/1), ...]
        -> list | None                            (process rewards; tasks with step checkers)
    """

    name = "task"
    salt = 0

    def __init__(self, *, test_fraction: float = 0.1, answer_format: str = "marker"):
        split_of("", test_fraction=test_fraction)  # validates the fraction
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got "
                             f"{answer_format!r}")
        self.test_fraction, self.answer_format = test_fraction, answer_format

    # -- answer format ------------------------------------------------------------------
    def render(self, steps: str | None, answer: str) -> str:
        """The worked solution: `steps` (None for style="direct") and the answer, in the
        task's answer format (``"13 11 7 #### 713"`` or
        ``"<think>13 11 7</think><answer>713</answer>"``)."""
        if self.answer_format == "tags":
            think = "" if steps is None else f"<think>{steps}</think>"
            return f"{think}<answer>{answer}</answer>"
        return f"{MARKER} {answer}" if steps is None else f"{steps} {MARKER} {answer}"

    def split(self, completion: str) -> tuple[str, str] | None:
        """(reasoning, answer text) under the task's answer format, or None."""
        if self.answer_format == "tags":
            return split_tagged(completion)
        return split_answer(completion)

    def int_answer(self, completion: str) -> int | None:
        """The integer final answer under the task's answer format, or None."""
        parts = self.split(completion)
        return None if parts is None else parse_int_tail(parts[1])

    # -- generation ---------------------------------------------------------------------
    def _sample(self, rng: np.random.Generator) -> Example:
        raise NotImplementedError

    def example(self, index: int, *, seed: int, split: str = "train") -> Example:
        """Example `index` of the stream (seed, split): rejection-samples until the problem's
        hash lands in `split`. Raises if the split appears empty for these knobs."""
        check_split(split)
        if split == "test" and self.test_fraction == 0.0:
            raise ValueError(f"{self.name}: test_fraction is 0, the test split is empty")
        rng = rng_for(seed, index, self.salt)
        for _ in range(10_000):
            ex = self._sample(rng)
            if split_of(ex.key, test_fraction=self.test_fraction) == split:
                return dataclasses.replace(ex, split=split)
        raise ValueError(f"{self.name}: no {split} problem found in 10000 draws; the problem "
                         "space is too small for this test_fraction")

    def generate(self, n: int, *, seed: int, split: str = "train", start: int = 0) -> list[Example]:
        return [self.example(start + i, seed=seed, split=split) for i in range(n)]

    # -- verification -------------------------------------------------------------------
    def task_of(self, example: Example) -> "Task":
        """The task that defines `example`'s game and verdict: this one (a mixture answers
        with its component)."""
        del example
        return self

    def verify(self, completion: str, example: Example) -> float:
        raise NotImplementedError

    def check_steps(self, completion: str, example: Example) -> bool:
        """The final answer is correct and so is every reasoning step (`steps_are_right`);
        with style="direct" an empty reasoning passes."""
        chunks = self.reasoning_steps(completion, example)
        if chunks is None:
            return False
        if getattr(self, "style", "steps") == "direct" and not chunks:
            return True
        return self.steps_are_right(chunks, example)

    def step_scores(self, completion: str, example: Example):
        """Per-step verdicts [(end_char, 0/1), ...] of the reasoning before the answer, or
        None (not the task's format, or a task without step checkers: the default)."""
        del completion, example
        return None

    def steps_are_right(self, chunks: list[str], example: Example) -> bool:
        """Whether the reasoning chunks (`reasoning_steps` of a correct answer) are right."""
        raise NotImplementedError

    def answer_key(self, completion: str):
        """The completion's final answer, normalised (whitespace collapsed), or None: the
        votes of maj@k."""
        parts = self.split(completion)
        return None if parts is None or not parts[1].strip() else " ".join(parts[1].split())

    def token_verifier(self, tokenizer):
        """The task's on-device verifier for `tokenizer`: a jittable fn(tokens [B, N],
        mask [B, N], answers [B] int32) -> [B] float32, or None when the task is scored on
        the host only (`verify`)."""
        del tokenizer
        return None

    def reasoning_chunks(self, completion: str) -> list[tuple[int, str]] | None:
        """[(end_char, chunk), ...]: the whitespace-separated chunks of the reasoning before
        the answer (marker or tags format) with the offset just past each chunk in
        `completion`, whatever the final answer; None when the answer format fails."""
        if self.answer_format == "tags":
            if completion.count("<answer>") != 1 or _TAGGED.fullmatch(completion) is None:
                return None
            before = completion[:completion.index("<answer>")]
            think = _THINK.fullmatch(before)
            start, text = (think.start("think"), think.group("think")) if think else (0, before)
        else:
            if completion.count(MARKER) != 1:
                return None
            start, text = 0, completion[:completion.index(MARKER)]
        return [(start + m.end(), m.group()) for m in re.finditer(r"\S+", text)]

    def reasoning_steps(self, completion: str, example: Example) -> list[str] | None:
        """The whitespace-separated reasoning before the marker, or None when the final
        answer is not correct (a step checker then fails at once)."""
        parts = self.split(completion)
        if parts is None or self.verify(completion, example) != 1.0:
            return None
        return parts[0].split()


class ProgramTask(Task):
    """A task whose verdict is a program run in the code sandbox: the task defines the
    program a completion stands for (`program`) and its hidden tests (``example.meta
    ["tests"]``: ``{"tests": [...], "mode": "assert"|"io"}``); the sandbox-backed scorer
    (`rlvr_jax.scoring.task_verifier`, the `code` component) runs it. Correct means every
    test passes. A task never runs programs itself, so `verify` and `check_steps` refuse
    here: call them through `scoring.task_verifier(task)`."""

    def program(self, completion: str, example: Example) -> str | None:
        """The program `completion` stands for, or None (no well-formed answer: 0)."""
        raise NotImplementedError

    def steps_hold(self, completion: str, example: Example) -> bool:
        """`check_steps` without the verdict: the answer format holds and so does every
        reasoning step (`steps_are_right`; with style="direct" an empty reasoning passes).
        The scorer's `check_steps` adds the sandbox verdict."""
        parts = self.split(completion)
        if parts is None:
            return False
        chunks = parts[0].split()
        if getattr(self, "style", "steps") == "direct" and not chunks:
            return True
        return self.steps_are_right(chunks, example)

    def verify(self, completion: str, example: Example) -> float:
        raise TypeError(f"{self.name}: the verdict is a sandbox run; use "
                        "rlvr_jax.scoring.task_verifier(task).verify")

    def check_steps(self, completion: str, example: Example) -> bool:
        raise TypeError(f"{self.name}: the verdict is a sandbox run; use "
                        "rlvr_jax.scoring.task_verifier(task).check_steps")
