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


def code_component(completion: str, example) -> float:
    """`rewards.code_reward`: the pass fraction of the example's tests (`code_tests`) run
    on the completion's program in the sandbox."""
    from rlvr_jax.rewards.code import code_reward  # Lazily: only code runs need the sandbox.
    return code_reward(completion, code_tests(example))


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
