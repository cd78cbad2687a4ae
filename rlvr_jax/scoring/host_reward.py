"""The per-completion (sample) terms' host functions and their weighted sum, for the pool.

Each component is ``fn(completion: str, example) -> float`` where ``example`` is a
`rlvr_jax.tasks.Example` (from a task or a JSONL / Parquet / TFDS row). They are
module-level functions or ``functools.partial``s of them, so a `RewardPool` worker can
unpickle them. `CombinedReward` sums weighted ``fn(completion, reference)`` terms, keeping
each as a metric; `HostReward` (the scorer's sample terms) also reports the correctness
verdict (``"correct"``) that `reward/correct` and pass@k are defined on.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Callable, Optional, Sequence, Tuple

from rlvr_jax.rewards.format import format_reward
from rlvr_jax.tasks.base import ProgramTask


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One named component ``fn(completion, reference) -> float`` with its weight."""
    name: str
    fn: Callable
    weight: float = 1.0


class CombinedReward:
    """``reward = Σ_k weight_k · fn_k(completion, reference)``.

    Calling it returns ``{"reward": total, name_k: value_k, ...}`` (unweighted component
    values), the form :class:`rlvr_jax.rewards.RewardPool` reports per component.
    Picklable when every ``fn`` is (module-level functions or ``functools.partial``).
    """

    def __init__(self, terms: Sequence[RewardTerm]):
        terms = list(terms)
        if not terms:
            raise ValueError("CombinedReward needs at least one term")
        names = [t.name for t in terms]
        if len(set(names)) != len(names) or "reward" in names:
            raise ValueError(f"term names must be unique and not 'reward': {names}")
        for t in terms:
            if not callable(t.fn):
                raise ValueError(f"term {t.name!r}: fn is not callable")
        self.terms = terms

    def __call__(self, completion: str, reference) -> dict:
        out = {t.name: float(t.fn(completion, reference)) for t in self.terms}
        out["reward"] = float(sum(t.weight * out[t.name] for t in self.terms))
        return out


def on_answer(completion: str, example, *, reward: Callable) -> float:
    """``reward(completion, example.answer)``: a math verifier on the reference answer."""
    return float(reward(completion, example.answer))


def format_component(completion: str, example) -> float:
    """`format_reward`: 1.0 for exactly ``<think>…</think><answer>…</answer>``."""
    del example
    return format_reward(completion)


def code_tests(example):
    """The tests of a code example: ``example.meta["tests"]`` when present, else the answer
    field read as JSON (a list of assert statements or ``{"tests": [...], "mode": "io"}``),
    else the answer's non-empty lines (one assert statement each)."""
    if isinstance(example.meta, dict) and "tests" in example.meta:
        return example.meta["tests"]
    try:
        tests = json.loads(example.answer)
    except (TypeError, ValueError):
        tests = None
    if isinstance(tests, (list, dict)):
        return tests
    return [line for line in str(example.answer).splitlines() if line.strip()]


def completion_program(completion: str, example, task=None) -> str | None:
    """The program a completion stands for: the task's own when `example`'s task is a
    `tasks.base.ProgramTask` (synthesis: its template filled with the one-line answer;
    None without one), else the completion's last fenced Python block."""
    from rlvr_jax.rewards.code import extract_code
    game = None if task is None else task.task_of(example)
    if isinstance(game, ProgramTask):
        return game.program(completion, example)
    return extract_code(completion)


def code_component(completion: str, example, *, task=None, partial_credit: bool = True) -> float:
    """The pass fraction (all-pass 1/0 without `partial_credit`) of the example's tests
    (`code_tests`) run in the sandbox on the completion's program (`completion_program`)."""
    from rlvr_jax.rewards.code import program_rewards  # Lazily: only code runs need it.
    program = completion_program(completion, example, task)
    return float(program_rewards([program], [code_tests(example)], partial_credit=partial_credit,
                                 parallel=1)[0])


def task_verdict(completion: str, example, *, task) -> float:
    """The verdict of `example`'s task: for a `ProgramTask`, 1.0 when its program passes
    every hidden test in the sandbox (else 0.0); for any other task its own `verify`."""
    game = task.task_of(example)
    if isinstance(game, ProgramTask):
        return code_component(completion, example, task=game, partial_credit=False)
    return game.verify(completion, example)


def task_steps(completion: str, example, *, task) -> bool:
    """CoT-pass: the task's `check_steps`; for a `ProgramTask`, the sandbox verdict and
    its `steps_hold`."""
    game = task.task_of(example)
    if isinstance(game, ProgramTask):
        return (task_verdict(completion, example, task=game) == 1.0
                and game.steps_hold(completion, example))
    return game.check_steps(completion, example)


class HostReward(CombinedReward):
    """``Σ_k weight_k · fn_k(completion, example)`` plus the correctness verdict.

    Calling it returns ``{"reward": total, name_k: value_k, ..., "correct": verdict}``
    where ``verdict`` is the value of the component named ``correct`` (a correctness
    component of the sum), or of ``correct_fn`` when no component of the sum decides
    correctness (e.g. a format-only reward; then it costs one more verifier call).

    Args:
      terms: ``(name, fn, weight)`` triples; names unique, not "reward" or "correct".
      correct: the name of the term whose value is the verdict, or None.
      correct_fn: ``fn(completion, example) -> float`` for the verdict when ``correct`` is
        None.
    """

    def __init__(self, terms: Sequence[Tuple[str, Callable, float]], *,
                 correct: Optional[str] = None, correct_fn: Optional[Callable] = None):
        super().__init__([RewardTerm(n, f, float(w)) for n, f, w in terms])
        names = [t.name for t in self.terms]
        if "correct" in names:
            raise ValueError("a reward component may not be named 'correct'")
        if (correct is None) == (correct_fn is None):
            raise ValueError("give exactly one of correct (a term name) and correct_fn")
        if correct is not None and correct not in names:
            raise ValueError(f"correct={correct!r} is not one of the terms {names}")
        self.correct, self.correct_fn = correct, correct_fn

    @property
    def names(self) -> Tuple[str, ...]:
        """The entries a call returns besides "reward": the terms' names, then "correct"."""
        return tuple(t.name for t in self.terms) + ("correct",)

    def __call__(self, completion: str, example) -> dict:
        out = super().__call__(completion, example)
        out["correct"] = (out[self.correct] if self.correct is not None
                          else float(self.correct_fn(completion, example)))
        return out
