"""Combine named reward components into one scalar reward, keeping each as a metric."""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One named component ``fn(completion, reference) -> float`` with its weight."""
    name: str
    fn: Callable
    weight: float = 1.0


class CombinedReward:
    """``reward = Σ_k weight_k · fn_k(completion, reference)``.

    Calling it returns ``{"reward": total, name_k: value_k, ...}`` (unweighted component
    values), the form :class:`rlvr_jax.rewards.pool.RewardPool` reports per component.
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
