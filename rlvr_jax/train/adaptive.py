"""`config.data`'s adaptive data (docs/data.md), built for a run: a finite prompt set
(`data.size`), the online filter, a difficulty curriculum, a task mixture.

    check(config)                         ConfigError naming the field (no device, cheap)
    task_and_sources(config)              (task, train, held-out, warm-up sources)
    attach(config, source, loader)        the adaptive object the loop tells each step's
                                          results (or None); sets `loader.admit` for a filter
"""
from typing import Dict, Tuple

from rlvr_jax import tasks
from rlvr_jax.data import adaptive, datasets
from rlvr_jax.train.errors import ConfigError, user_input


def _fail(field: str, message: str):
    raise ConfigError(f"{field}: {message}")


def mixture_entries(d) -> Tuple[Tuple[str, float], ...]:
    """((name, weight), ...) of `data.mixture` ("add:2,mul:1"; a missing weight is 1)."""
    entries = []
    for part in (p.strip() for p in str(d.mixture).split(",")):
        if not part:
            continue
        name, _, weight = part.partition(":")
        try:
            entries.append((name.strip(), float(weight) if weight.strip() else 1.0))
        except ValueError:
            _fail("data.mixture", f"{part!r} is not name:weight (e.g. \"add:2,mul:1\")")
    names = [n for n, _ in entries]
    if len(set(names)) != len(names):
        _fail("data.mixture", f"a name is repeated in {d.mixture!r}")
    if any(w < 0 for _, w in entries) or not sum(w for _, w in entries) > 0:
        _fail("data.mixture", f"weights must be >= 0 with a positive sum, got {d.mixture!r}")
    return tuple(entries)


def _mixture_task(d) -> adaptive.MixtureTask:
    entries, specs = mixture_entries(d), d.mixture_tasks.to_dict()
    unknown = set(specs) - {n for n, _ in entries}
    if unknown:
        _fail("data.mixture_tasks", f"{sorted(unknown)} not named in data.mixture={d.mixture!r}")
    components = {}
    for name, _ in entries:
        knobs = dict(specs.get(name, {}))
        task = knobs.pop("task", name)
        if task not in tasks.TASKS:
            _fail("data.mixture", f"{name!r} is neither a task ({', '.join(sorted(tasks.TASKS))})"
                  " nor has a \"task\" in data.mixture_tasks")
        with user_input(f"data.mixture_tasks.{name}"):
            components[name] = tasks.get(task, **knobs)
    with user_input("data.mixture"):
        return adaptive.MixtureTask(components, [w for _, w in entries])


def _level_tasks(d):
    c = d.curriculum
    if not c.levels:
        _fail("data.curriculum.levels", f"is empty; give the values of {c.knob!r}, easiest first")
    out, listed = [], isinstance(d.task_kwargs.get(c.knob), (tuple, list))
    for value in c.levels:
        if listed and isinstance(value, str):  # ops levels "add", "add+mul": tuples.
            value = tuple(v for v in value.split("+") if v)
        with user_input("data.curriculum.levels"):
            out.append(tasks.get(d.task, **{**d.task_kwargs.to_dict(), c.knob: value}))
    return out


def check(config) -> None:
    """Raises ConfigError, naming the field, for a bad `data.size`, `data.filter`,
    `data.curriculum` or `data.mixture`: bad values, a filter without a finite prompt set,
    a curriculum or mixture on file data or with a finite set, two of them at once."""
    d = config.data
    if d.size < 0:
        _fail("data.size", f"must be >= 0 (0: an endless stream), got {d.size}")
    if d.size and d.source != "task":
        _fail("data.size", f"applies to data.source=task (a file has its own size); got "
              f"data.source={d.source}")
    on = [name for name, flag in (("data.filter", d.filter.enabled),
                                  ("data.curriculum", d.curriculum.knob),
                                  ("data.mixture", d.mixture)) if flag]
    if len(on) > 1:
        _fail(on[1], f"cannot be combined with {on[0]} (one adaptive scheme per run)")
    f = d.filter
    if f.enabled and d.source == "task" and not d.size:
        _fail("data.filter.enabled", "filtering needs a finite prompt set: set data.size "
              "(e.g. 512) or use file data")
    with user_input("data.filter"):
        adaptive.PromptFilter(1, low=f.low, high=f.high, ema=f.ema,
                              readmit_epochs=f.readmit_epochs)
    for field in ("curriculum", "mixture"):
        if on and on[0] == f"data.{field}" and (d.source != "task" or d.size):
            _fail(f"data.{field}", "needs data.source=task and data.size=0 (an endless stream "
                  "of generated problems)")
    c = d.curriculum
    if c.knob:
        if c.window <= 0:
            _fail("data.curriculum.window", f"must be positive, got {c.window}")
        if not 0.0 < c.promote_at <= 1.0:
            _fail("data.curriculum.promote_at", f"must be in (0, 1], got {c.promote_at}")
        if c.knob not in d.task_kwargs:
            _fail("data.curriculum.knob", f"{c.knob!r} is not among data.task_kwargs "
                  f"({', '.join(sorted(d.task_kwargs))})")
        _level_tasks(d)
    if d.mixture:
        _mixture_task(d)


def task_and_sources(config):
    """(task, train source, held-out source, warm-up source) of `data.source=task`:

    - plain: the task's stream; with `data.size` RL draws from a fixed set of that many
      prompts (the stream's first ones) while the warm-up keeps the whole stream (a small
      curated RL set beside plentiful worked solutions; a warm-up of hundreds of steps on
      N prompts would memorise them);
    - curriculum: training walks the levels; warm-up and evaluation use the last level
      (the target), so every arm of a comparison shares the same warm-up;
    - mixture: a `MixtureTask` (its held-out stream uses the fixed weights).
    """
    d, seed = config.data, config.seed
    if d.mixture:
        task = _mixture_task(d)
        train = adaptive.Mixture(task, seed=seed, adaptive=d.mixture_adaptive,
                                 group_size=config.rl.num_samples)
        return task, train, datasets.TaskSource(task, seed=seed + 1, split="test"), train
    if d.curriculum.knob:
        levels = _level_tasks(d)
        train = adaptive.Curriculum(levels, seed=seed, promote_at=d.curriculum.promote_at,
                                    window=d.curriculum.window,
                                    names=[str(v) for v in d.curriculum.levels])
        target = levels[-1]
        return (target, train, datasets.TaskSource(target, seed=seed + 1, split="test"),
                datasets.TaskSource(target, seed=seed, split="train"))
    with user_input("data.task_kwargs"):
        task = tasks.get(d.task, **d.task_kwargs.to_dict())
    stream = datasets.TaskSource(task, seed=seed, split="train")
    train = datasets.TaskSource(task, seed=seed, split="train", size=d.size) if d.size else stream
    return task, train, datasets.TaskSource(task, seed=seed + 1, split="test"), stream


def attach(config, source, loader):
    """The object the loop calls `observe(batch, correct [P', G])` on after each RL step
    (and saves `state()` of in checkpoints), or None without adaptive data. A filter is
    made over `source`'s prompts and becomes `loader.admit`."""
    d = config.data
    if d.filter.enabled:
        f = adaptive.PromptFilter(len(source), low=d.filter.low, high=d.filter.high,
                                  ema=d.filter.ema, readmit_epochs=d.filter.readmit_epochs)
        loader.admit = f.admit
        return f
    return source if isinstance(source, (adaptive.Curriculum, adaptive.Mixture)) else None


def loader_metrics(config, loader) -> Dict[str, float]:
    """Counts since the start: data/dropped (a file's prompts over data.max_prompt_len)
    for file data, data/filtered and data/forced with a filter."""
    state, out = loader.state(), {}
    if config.data.source != "task":
        out["data/dropped"] = float(state["dropped"])
    if config.data.filter.enabled:
        out.update({"data/filtered": float(state["filtered"]),
                    "data/forced": float(state["forced"])})
    return out
