"""Data that adapts to the policy: per-prompt pass rates, online filtering, a difficulty
curriculum and task mixtures — each resumable exactly (docs/data.md).

Each adaptive piece is told what the rollouts already sampled scored (`observe(batch,
correct)` after every RL step), changes only between steps, and has a `state()` of plain
JSON values that goes into the checkpoint: `restore(state)` (with the loader's) makes the
next batch exactly the one that would have followed. `metrics()` are logged as `data/...`.

    PromptFilter(n, low=0.0, high=1.0, ema=1.0, readmit_epochs=1)   finite prompt sets
    Curriculum([task per level], seed=0, promote_at=0.8, window=8)   a stream, easy first
    Mixture(MixtureTask({...}, weights), seed=0, adaptive=True, group_size=G)

Shapes: P prompts per step, G samples each; `correct` is [P, G] bool.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Sequence

import numpy as np

from rlvr_jax.tasks import base as task_base


def group_pass_rates(correct, valid=None) -> np.ndarray:
    """[P] fraction of each prompt's G samples that are correct (`correct` [P, G]); NaN on
    rows where `valid` [P] is False."""
    rates = np.asarray(correct, np.float64).mean(axis=1)
    if valid is not None:
        rates = np.where(np.asarray(valid, bool), rates, np.nan)
    return rates


def informative_fraction(p, group_size: int):
    """Expected fraction of groups of `group_size` samples, each correct with probability
    `p`, that are neither all correct nor all wrong: 1 − p^G − (1 − p)^G."""
    p = np.asarray(p, np.float64)
    return 1.0 - p**group_size - (1.0 - p)**group_size


# ---------------------------------------------------------------------------------------
# online filtering over a finite prompt set
# ---------------------------------------------------------------------------------------
class PromptFilter:
    """Per-prompt pass-rate tracking over N prompts, and the online filter it drives.

    Tracking: after a prompt's visit its pass rate r (fraction of its G samples correct)
    updates ``rate ← r`` on the first visit, else ``rate ← ema·r + (1 − ema)·rate``
    (ema = 1: the newest visit alone); `visits` and the epoch of the newest visit are kept.

    Filter (`admit`, called by the loader): a visited prompt whose rate is ≤ `low` (never
    solved) or ≥ `high` (always solved) sits out the next `readmit_epochs` epochs after its
    newest visit and is then re-admitted for one visit, which updates its rate (0: it never
    comes back). `low` < 0 or `high` > 1 switch that side off. Skipped prompts are counted
    in the loader's state.
    """

    def __init__(self, n: int, *, low: float = 0.0, high: float = 1.0, ema: float = 1.0,
                 readmit_epochs: int = 1):
        if n <= 0:
            raise ValueError(f"a prompt filter needs a finite prompt set, got {n} prompts")
        if not 0.0 < ema <= 1.0:
            raise ValueError(f"ema must be in (0, 1], got {ema}")
        if low >= high:
            raise ValueError(f"need low < high, got low={low}, high={high}")
        if readmit_epochs < 0:
            raise ValueError(f"readmit_epochs must be >= 0, got {readmit_epochs}")
        self.n, self.low, self.high, self.ema = n, low, high, ema
        self.readmit_epochs = readmit_epochs
        self.rate = np.zeros((n,), np.float64)
        self.visits = np.zeros((n,), np.int64)
        self.last_epoch = np.full((n,), -1, np.int64)

    def extreme(self) -> np.ndarray:
        """[N] bool: visited prompts whose rate is at or past a threshold."""
        return (self.visits > 0) & ((self.rate <= self.low) | (self.rate >= self.high))

    def admit(self, index: int, epoch: int) -> bool:
        """Whether the loader takes prompt `index` in `epoch` (see the class docstring)."""
        if self.visits[index] == 0 or not (self.rate[index] <= self.low
                                           or self.rate[index] >= self.high):
            return True
        return self.readmit_epochs > 0 and epoch - self.last_epoch[index] > self.readmit_epochs

    def observe(self, batch, correct) -> None:
        """Updates the rates of `batch`'s prompts (`batch.indices` [P], `batch.epochs` [P],
        `batch.valid` [P]) from `correct` [P, G]; filler rows are ignored."""
        rates = group_pass_rates(correct, batch.valid)
        for i, epoch, r in zip(batch.indices, batch.epochs, rates):
            if np.isnan(r):
                continue
            first = self.visits[i] == 0
            self.rate[i] = r if first else self.ema * r + (1.0 - self.ema) * self.rate[i]
            self.visits[i] += 1
            self.last_epoch[i] = epoch

    def metrics(self) -> Dict[str, float]:
        """data/visited_fraction, data/solved_fraction (rate ≥ high), data/unsolved_fraction
        (rate ≤ low): fractions of the N prompts."""
        seen = self.visits > 0
        return {"data/visited_fraction": float(seen.mean()),
                "data/solved_fraction": float((seen & (self.rate >= self.high)).mean()),
                "data/unsolved_fraction": float((seen & (self.rate <= self.low)).mean())}

    def state(self) -> dict:
        return {"rate": self.rate.tolist(), "visits": self.visits.tolist(),
                "last_epoch": self.last_epoch.tolist()}

    def restore(self, state: Mapping) -> None:
        for name in ("rate", "visits", "last_epoch"):
            value = np.asarray(state[name], getattr(self, name).dtype)
            if value.shape != (self.n,):
                raise ValueError(f"prompt filter state has {value.shape[0]} prompts, this run "
                                 f"{self.n} (was data.size changed?)")
            setattr(self, name, value)


# ---------------------------------------------------------------------------------------
# a curriculum over a task generator's difficulty knob
# ---------------------------------------------------------------------------------------
class Curriculum:
    """A source whose example i comes from the current difficulty level's task.

    ``source[i] = tasks[level].example(i, seed=seed, split=split)``. After each RL step the
    batch's pass rate (correct samples / samples) is appended to the level's window; when
    the window holds `window` steps and their mean is ≥ `promote_at`, the next level starts
    with an empty window. The last level is kept to the end; levels never go back.
    """

    finite = False

    def __init__(self, level_tasks: Sequence[task_base.Task], *, seed: int = 0,
                 split: str = "train", promote_at: float = 0.8, window: int = 8,
                 names: Sequence[str] = ()):
        if not level_tasks:
            raise ValueError("a curriculum needs at least one level")
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.tasks, self.seed, self.split = list(level_tasks), seed, split
        self.promote_at, self.window = promote_at, window
        self.names = list(names) or [str(i) for i in range(len(self.tasks))]
        self.level, self.history = 0, []

    def __getitem__(self, i: int) -> task_base.Example:
        return self.tasks[self.level].example(int(i), seed=self.seed, split=self.split)

    def observe(self, batch, correct) -> None:
        rates = group_pass_rates(correct, batch.valid)
        self.history = (self.history + [float(np.nanmean(rates))])[-self.window:]
        last = self.level == len(self.tasks) - 1
        if not last and len(self.history) == self.window and \
                np.mean(self.history) >= self.promote_at:
            self.level, self.history = self.level + 1, []

    def metrics(self) -> Dict[str, float]:
        """data/level (0-based) and data/level_pass_rate (mean of the window; 0 if empty)."""
        return {"data/level": float(self.level),
                "data/level_pass_rate": float(np.mean(self.history)) if self.history else 0.0}

    def state(self) -> dict:
        return {"level": self.level, "history": list(self.history)}

    def restore(self, state: Mapping) -> None:
        level = int(state["level"])
        if not 0 <= level < len(self.tasks):
            raise ValueError(f"curriculum state is at level {level}; this run has "
                             f"{len(self.tasks)} levels (was data.curriculum changed?)")
        self.level, self.history = level, [float(h) for h in state["history"]]


# ---------------------------------------------------------------------------------------
# task mixtures
# ---------------------------------------------------------------------------------------
class MixtureTask(task_base.Task):
    """Several named tasks as one: example i of a stream draws its component with the given
    weights (from its own generator of (seed, i)) and is that component's example i, with
    `Example.task` set to the component's name, which `verify`, `check_steps` and
    `reasoning_steps` dispatch on. Every component must use the same answer format.

    `token_verifier` exists when every component has the same class with one (e.g. two
    arithmetic mixtures): the answer is an integer either way. `answer_key` is a shared
    class's, else the normalised answer text.
    """

    name = "mixture"
    salt = 977

    def __init__(self, components: Mapping[str, task_base.Task], weights: Sequence[float]):
        if not components:
            raise ValueError("a mixture needs at least one task")
        formats = {t.answer_format for t in components.values()}
        if len(formats) != 1:
            raise ValueError(f"the mixture's tasks use different answer formats {formats}")
        super().__init__(test_fraction=0.0, answer_format=formats.pop())
        self.components = dict(components)
        self.weights = normalized(weights, len(self.components))
        self._same = len({type(t) for t in self.components.values()}) == 1

    def choose(self, index: int, seed: int, weights=None) -> str:
        """The component of example `index` under `weights` (default: the mixture's)."""
        w = self.weights if weights is None else normalized(weights, len(self.components))
        u = task_base.rng_for(seed, index, self.salt).random()
        k = min(int(np.searchsorted(np.cumsum(w), u, side="right")), len(w) - 1)
        return list(self.components)[k]

    def example(self, index: int, *, seed: int, split: str = "train",
                weights=None) -> task_base.Example:
        name = self.choose(index, seed, weights)
        ex = self.components[name].example(index, seed=seed, split=split)
        return dataclasses.replace(ex, task=name)

    def task_of(self, example) -> task_base.Task:
        if example.task not in self.components:
            raise ValueError(f"example of task {example.task!r} is not from this mixture "
                             f"({', '.join(self.components)})")
        return self.components[example.task]

    def verify(self, completion, example):
        return self.task_of(example).verify(completion, example)

    def check_steps(self, completion, example):
        return self.task_of(example).check_steps(completion, example)

    def reasoning_steps(self, completion, example):
        return self.task_of(example).reasoning_steps(completion, example)

    def step_scores(self, completion, example):
        return self.task_of(example).step_scores(completion, example)

    def answer_key(self, completion):
        first = next(iter(self.components.values()))
        return first.answer_key(completion) if self._same else super().answer_key(completion)

    def token_verifier(self, tokenizer):
        first = next(iter(self.components.values()))
        return first.token_verifier(tokenizer) if self._same else None


def normalized(weights: Sequence[float], n: int) -> np.ndarray:
    """`weights` as probabilities; a ValueError unless there are n of them, ≥ 0, sum > 0."""
    w = np.asarray(list(weights), np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"need {n} non-negative weights with a positive sum, got "
                         f"{list(weights)}")
    return w / w.sum()


class Mixture:
    """A stream over a `MixtureTask` whose weights may follow the policy.

    Fixed (``adaptive=False``): the task's weights. Adaptive: each component's pass rate p_k
    is tracked (``p_k ← ema·r + (1 − ema)·p_k`` with r its prompts' mean pass rate in a step,
    starting at 0.5) and the weights are ``w_k ∝ base_k · max(1 − p_k^G − (1 − p_k)^G,
    floor)``: the expected fraction of informative groups (neither all right nor all wrong;
    the groups GRPO learns from), so mastered and hopeless tasks are drawn less, but never stop being drawn.
    """

    finite = False

    def __init__(self, task: MixtureTask, *, seed: int = 0, split: str = "train",
                 adaptive: bool = False, group_size: int = 8, ema: float = 0.3,
                 floor: float = 0.05):
        self.task, self.seed, self.split, self.adaptive = task, seed, split, adaptive
        self.group_size, self.ema, self.floor = group_size, ema, floor
        self.names = list(task.components)
        self.pass_rate = np.full((len(self.names),), 0.5)

    def weights(self) -> np.ndarray:
        if not self.adaptive:
            return self.task.weights
        signal = np.maximum(informative_fraction(self.pass_rate, self.group_size), self.floor)
        return normalized(self.task.weights * signal, len(self.names))

    def __getitem__(self, i: int) -> task_base.Example:
        return self.task.example(int(i), seed=self.seed, split=self.split,
                                 weights=self.weights())

    def observe(self, batch, correct) -> None:
        rates = group_pass_rates(correct, batch.valid)
        for k, name in enumerate(self.names):
            mine = [r for ex, r in zip(batch.examples, rates) if ex.task == name
                    and not np.isnan(r)]
            if mine:
                self.pass_rate[k] = self.ema * np.mean(mine) + (1 - self.ema) * self.pass_rate[k]

    def metrics(self) -> Dict[str, float]:
        """data/weight/<name> and data/pass_rate/<name> (the tracked p_k) per component."""
        out = {f"data/weight/{n}": float(w) for n, w in zip(self.names, self.weights())}
        out.update({f"data/pass_rate/{n}": float(p) for n, p in zip(self.names, self.pass_rate)})
        return out

    def state(self) -> dict:
        return {"pass_rate": self.pass_rate.tolist()}

    def restore(self, state: Mapping) -> None:
        rates = np.asarray(state["pass_rate"], np.float64)
        if rates.shape != self.pass_rate.shape:
            raise ValueError(f"mixture state has {rates.shape[0]} tasks, this run "
                             f"{len(self.names)} (was data.mixture changed?)")
        self.pass_rate = rates
