"""What a run may do with its workdir — start, start again, resume or refuse — decided by
reading it (`plan`), before any file is written (`prepare`).

A workdir holds ONE run: `config.json` (its config, written when it starts), `metrics.jsonl`,
`samples.jsonl`, TensorBoard events, `checkpoints/` and, once it finished, `summary.json`.

  new or empty                          start
  same config, interrupted, no checkpoint   start again from the beginning (the files the
                                        interrupted run wrote are replaced; a notice says so)
  checkpoint, config that may resume    resume from the latest checkpoint (also to go on
                                        training a finished run: raise rl.steps)
  anything else                         refuse with a one-line `ConfigError`: a finished run,
                                        a different config (the differing fields named),
                                        files of an unknown run, a file instead of a directory

Resuming allows these fields to differ from the checkpointed run: `RESUMABLE`.

Only intact checkpoints count (`train/integrity.py`): damaged newer steps are listed in the
plan and moved aside by `prepare` (`<step>.damaged`), which also takes the workdir lock
(`train/lock.py`) and removes what a killed save left (`*.orbax-checkpoint-tmp*`).
"""
import dataclasses
import json
import os
from typing import Callable, List, Optional, Tuple

from rlvr_jax.train import integrity
from rlvr_jax.train import lock as lock_lib
from rlvr_jax.train.logging import EVENTS_SUFFIX
from rlvr_jax.train.errors import ConfigError

CONFIG, METRICS, SAMPLES, SUMMARY, CHECKPOINTS = (
    "config.json", "metrics.jsonl", "samples.jsonl", "summary.json", "checkpoints")
RUN_FILES = (CONFIG, METRICS, SAMPLES, SUMMARY)

# Fields a resumed run may change: how long it trains and what it logs or saves, and where
# the arrays live (orbax re-shards on restore). Everything else must match the checkpoint.
RESUMABLE = ("rl.steps", "eval.every", "checkpoint.", "log_every", "log_samples_every",
             "log_num_samples", "mesh.", "distributed.")


@dataclasses.dataclass(frozen=True)
class Plan:
    """mode: "start" | "restart" | "resume"; resume_step: the checkpoint to resume from;
    notice: a line for the user ("" when starting a new workdir); damaged: [(step, what is
    wrong)] of the damaged checkpoints newer than resume_step, moved aside by `prepare`."""
    workdir: str
    mode: str
    resume_step: Optional[int] = None
    notice: str = ""
    damaged: Tuple[Tuple[int, str], ...] = ()


def plan(config, workdir: str) -> Plan:
    """Reads `workdir` and decides; raises `ConfigError` where the run must not go on."""
    if os.path.exists(workdir) and not os.path.isdir(workdir):
        raise ConfigError(f"--workdir: {workdir} is a file, not a directory")
    directory = os.path.join(workdir, CHECKPOINTS)
    good, damaged = integrity.newest_good(directory)
    p = _plan(config, workdir, [] if good is None else [good], bool(damaged))
    if not damaged:
        return p
    notice = integrity.describe(directory, good, damaged)
    return dataclasses.replace(p, damaged=tuple(damaged),
                               notice=notice + (f"\n{p.notice}" if p.notice else ""))


def _plan(config, workdir: str, steps: List[int], damaged: bool) -> Plan:
    present = [n for n in RUN_FILES if os.path.exists(os.path.join(workdir, n))]
    if not present and not steps:
        return Plan(workdir, "start")
    if CONFIG not in present:
        raise ConfigError(f"--workdir: {workdir} holds {', '.join(present) or 'checkpoints'} of a "
                          "run without its config.json; use a new --workdir")
    stored = _read_config(os.path.join(workdir, CONFIG))
    finished = SUMMARY in present
    if steps:
        return _resume_plan(config, workdir, stored, steps[-1], finished)
    if finished:
        raise ConfigError(f"--workdir: {workdir} holds a finished run (summary.json) " + (
            "whose checkpoints are all damaged (kept in checkpoints/); nothing to continue from"
            if damaged else "and no checkpoint to continue from; use a new --workdir"))
    changed = _changes(stored, config)
    if changed:
        raise ConfigError(f"--workdir: {workdir} holds an interrupted run of another config "
                          f"({_describe(changed)}); use a new --workdir")
    return Plan(workdir, "restart", notice=f"{workdir}: the run there was interrupted before "
                f"its first checkpoint; starting it again from the beginning")


def _resume_plan(config, workdir: str, stored: dict, latest: int, finished: bool) -> Plan:
    changed = [c for c in _changes(stored, config) if not c[0].startswith(RESUMABLE)]
    if changed:
        raise ConfigError(f"--workdir: {workdir} holds checkpoints of another config "
                          f"({_describe(changed)}); resuming needs the same config (only "
                          f"rl.steps, eval.every, checkpoint.*, log_* and mesh.* may change); "
                          "use a new --workdir")
    if not config.checkpoint.resume:
        raise ConfigError(f"checkpoint.resume: is False but {workdir} holds checkpoints (latest "
                          f"RL step {latest}); use a new --workdir or resume")
    steps = config.rl.steps
    if latest > steps:
        raise ConfigError(f"rl.steps: {steps} is below the latest checkpoint's RL step "
                          f"{latest} in {workdir}")
    if finished and latest == steps:
        raise ConfigError(f"--workdir: {workdir} holds a finished run ({steps} RL steps); "
                          "raise rl.steps to train on from its last checkpoint, or use a new "
                          "--workdir")
    what = "continuing the finished run" if finished else "resuming the run"
    return Plan(workdir, "resume", resume_step=latest,
                notice=f"{workdir}: {what} from its RL step {latest} checkpoint "
                       f"(to RL step {steps})")


def prepare(p: Plan, config) -> Callable[[], None]:
    """Makes the workdir ready for `p` (the first write of a run, process 0): takes its lock
    (returns the function releasing it), moves damaged checkpoints aside, removes partial
    ones, and on a restart the files of the interrupted run; (re)writes config.json."""
    os.makedirs(p.workdir, exist_ok=True)
    release = lock_lib.acquire(p.workdir)
    directory = os.path.join(p.workdir, CHECKPOINTS)
    for step, _ in p.damaged:
        integrity.set_aside(directory, step)
    integrity.clean_tmp(directory)
    if p.mode == "restart":
        for name in (METRICS, SAMPLES):
            _remove(os.path.join(p.workdir, name))
        for name in os.listdir(p.workdir):
            if name.startswith("events.out.tfevents.") and name.endswith(EVENTS_SUFFIX):
                _remove(os.path.join(p.workdir, name))
    write_json_atomic(os.path.join(p.workdir, CONFIG), _as_dict(config))
    return release


def config_diff(old: dict, new: dict, prefix: str = "",
                defaults: Optional[dict] = None) -> List[tuple]:
    """[(dotted field, old value, new value)] where two config dicts differ. With
    `defaults` (a config dict of the same shape), a field absent from `old` whose new value
    is its default is no difference: a run saved before that field existed ran as if it
    had its default."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        default = (defaults or {}).get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{prefix}{key}.",
                               default if isinstance(default, dict) else None)
        elif a != b and not (a == "<absent>" and b == default):
            out.append((f"{prefix}{key}", a, b))
    return out


def _changes(stored: dict, config) -> List[tuple]:
    """config_diff of a stored run's config and `config`, new fields at their defaults
    (under the same algorithm preset) not counted."""
    from rlvr_jax.train.config import default_config
    defaults = _as_dict(default_config(algorithm=config.rl.algorithm))
    return config_diff(stored, _as_dict(config), defaults=defaults)


def write_json_atomic(path: str, obj) -> None:
    """Writes `obj` as JSON to `path` through a temporary file and a rename: a kill leaves
    the old file or the new one, never half of one."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _as_dict(config) -> dict:
    """The config as plain JSON values (tuples become lists, as in config.json)."""
    return json.loads(config.to_json_best_effort())


def _read_config(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: unreadable ({e}); use a new --workdir") from e


def _describe(changed: List[tuple], show: int = 3) -> str:
    parts = [f"{field} {json.dumps(a)} -> {json.dumps(b)}" for field, a, b in changed[:show]]
    more = f" and {len(changed) - show} more" if len(changed) > show else ""
    return ", ".join(parts) + more


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
