"""Runs a finding's arms × seeds: one shared warm-up per seed, RL per arm, pass@k evaluation.

Layout under the work directory `work` (resumable: a finished pair is never redone):

  work/_warmup/KEY/seed_S/params.msgpack   the warm-up of seed S (KEY: a hash of the config
                                           parts the warm-up reads), shared by every arm and
                                           by every finding with the same warm-up
  work/_warmup/KEY/seed_S/warmup.json      its stopping step (a `WarmupCriterion`'s warm-up)
  work/_pairs/PAIR/result.json             a finished arm × seed: metrics, the checked
                                           metrics per held-out prompt, curves, wall time
  work/_pairs/PAIR/run/                    its training workdir (metrics.jsonl, config.json)

PAIR is a hash of the arm's whole config (seed included) and the evaluation, so an arm that
two findings define identically (e.g. a baseline) is trained once.

Pairing: every arm of seed S starts from warm-up S with `config.seed = S` (the same RL
prompt order and the same evaluation prompts and sampling keys), so arms differ only in
their overrides. Several runner processes may share `work` (lock files per pair and per
warm-up, held by a live process id).
"""
import hashlib
import json
import os
import shutil
import time
from typing import Any, Callable, Dict, Optional, Tuple

import flax.serialization
import jax
import numpy as np

from rlvr_jax import models
from rlvr_jax.lab import heldout
from rlvr_jax.lab.spec import Finding, WarmupCriterion
from rlvr_jax.train import build, loop
from rlvr_jax.train import workdir as workdir_lib
from rlvr_jax.train.config import check_key
from rlvr_jax.train.logging import read_metrics
from rlvr_jax.train.validate import validate

_WARMUP_PARTS = ("model", "tokenizer", "data", "sft", "mesh")
_CURVE_POINTS = 60
TRAIN_TAIL = 0.1  # "train:KEY" metrics: the mean over the last 10% of the RL steps.


def apply_overrides(config, overrides: Dict[str, Any]):
    """Sets each dotted key of `overrides` on `config` (unknown keys raise ValueError)."""
    for key, value in overrides.items():
        check_key(config, key)
        node, parts = config, key.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    return config


def arm_config(finding: Finding, arm: str, seed: int):
    """The locked config of `arm` at `seed`: the finding's base, the arm's overrides, no
    periodic evaluation, checkpoints or sample logs (the runner evaluates at the end)."""
    config = finding.base()
    apply_overrides(config, {k: v for k, v in finding.arms[arm].items() if k != "rl.steps"
                             or v != 0})
    config.seed = seed
    if finding.warmup is not None and finding.warmup.max_steps:
        config.sft.steps = finding.warmup.max_steps
    config.eval.every = 0
    config.eval.k = 1
    # With prompts="all" the run's own evaluator is not used (`evaluate`): one batch.
    config.eval.num_prompts = (finding.eval.batch_size if finding.eval.prompts == "all"
                               else finding.eval.num_prompts)
    config.eval.batch_size = finding.eval.batch_size
    config.checkpoint.every = 0
    config.log_samples_every = 0
    return config


def _hash(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warmup_key(config, criterion: Optional[WarmupCriterion] = None) -> str:
    """Hash of what the warm-up depends on: model, tokenizer, data, sft, mesh, sampling
    length, seed and the warm-up criterion if any (RL settings do not enter)."""
    d = config.to_dict()
    parts = {p: d[p] for p in _WARMUP_PARTS}
    parts["max_new_tokens"], parts["seed"] = d["sampling"]["max_new_tokens"], d["seed"]
    if criterion is not None:
        parts["criterion"] = criterion.__dict__
    return _hash(parts)


def _setup(config, workdir: str):
    """loop.Run for `config` in a new `workdir` (its metrics.jsonl open)."""
    if os.path.exists(workdir):  # An interrupted pair: start it again from the warm-up.
        shutil.rmtree(workdir)
    validate(config)
    r, _ = loop.setup(config, workdir_lib.plan(config, workdir), progress=False)
    loop.open_logs(r)
    return r


def warmup_params(r, work: str, log: Callable[[str], None] = print,
                  criterion: Optional[WarmupCriterion] = None):
    """(warm-up params, cache dir) of `r.config`'s seed: trained once from the config's
    initial parameters (logged to r's metrics.jsonl as phase "sft"; with `criterion`, until
    it is met: its record in the cache dir's warmup.json), then read back."""
    config = r.config
    wdir = os.path.join(work, "_warmup", warmup_key(config, criterion), f"seed_{config.seed}")
    path = os.path.join(wdir, "params.msgpack")
    os.makedirs(wdir, exist_ok=True)
    while not os.path.exists(path) and not _try_lock(path + ".lock"):
        time.sleep(5.0)  # Another process is training this warm-up.
    if os.path.exists(path):  # Only the tree's structure is needed: nothing is compiled.
        _unlock_if_mine(path + ".lock")
        shapes = jax.eval_shape(lambda key: models.init_params(r.model_config, key),
                                r.keys["init"])
        with open(path, "rb") as f:
            host = flax.serialization.from_bytes(shapes, f.read())
        return r.placer.params(host), wdir
    init = build.initial_params(config, r.model_config, r.placer, r.keys["init"])
    if criterion is None:
        log(f"  warm-up seed {config.seed}: {config.sft.steps} supervised steps")
        params = loop.warm_up(r, init)
    else:
        log(f"  warm-up seed {config.seed}: until held-out greedy pass@1 >= "
            f"{criterion.until_pass1} (at most {config.sft.steps} steps)")
        params = _warm_up_to(r, init, criterion, wdir, log)
    os.makedirs(wdir, exist_ok=True)
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(flax.serialization.to_bytes(jax.device_get(params)))
    os.replace(tmp, path)
    os.remove(path + ".lock")
    return params, wdir


def _warm_up_to(r, init, criterion: WarmupCriterion, wdir: str, log: Callable[[str], None]):
    """`loop.warm_up` stopped by `criterion` (`heldout.criterion_stop`); writes
    wdir/warmup.json {"steps", "reached", "checks": [[step, pass@1], ...], criterion}."""
    examples = heldout.criterion_examples(r.config, criterion.num_prompts)
    ev = heldout.evaluator_for(r, examples, batch_size=criterion.num_prompts)
    key = jax.random.fold_in(r.keys["eval"], 7)
    record: Dict[str, Any] = {}
    stop = heldout.criterion_stop(criterion, lambda p: ev(p, key)["eval/pass@1"],
                                  r.config.sft.steps, record, log)
    params = loop.warm_up(r, init, stop=stop)
    record["criterion"] = dict(criterion.__dict__)
    workdir_lib.write_json_atomic(os.path.join(wdir, "warmup.json"), record)
    return params


def warmup_record(wdir: str) -> Optional[Dict[str, Any]]:
    """The warm-up criterion's record of a warm-up cache dir (None: a fixed-step warm-up)."""
    path = os.path.join(wdir, "warmup.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def checked_eval_metrics(finding: Finding) -> list:
    """The held-out metrics the checks and gates read (their per-prompt values are kept)."""
    names = [c.metric for c in finding.checks] + [m for g in finding.gates
                                                  for m in (g.metric, g.minus) if m]
    return [m for m in dict.fromkeys(names) if not m.startswith("train")]


def evaluate(r, params, finding: Finding, seed: int) -> Tuple[Dict[str, float], Dict[str, Any]]:
    """(metrics, per-prompt record): pass@k and maj@k (k in the eval's ks), CoT-pass@k
    (tasks with step checks) and mean@n averaged over the held-out prompts — the seed's
    test stream, or with `EvalSpec(prompts="all")` the whole test split — from
    `num_samples` samples per prompt (unbiased pass@k; `heldout.per_prompt`). The record:
    {"prompts": digest of the prompt texts, "values": {checked metric: [P] per prompt}}."""
    spec = finding.eval
    if spec.prompts == "all":
        ev = heldout.evaluator_for(r, heldout.whole_test_split(r.config),
                                   batch_size=spec.batch_size, temperature=spec.temperature)
    else:
        ev = r.evaluator
    per = heldout.per_prompt(ev, params, spec, seed)
    metrics = {k: float(np.mean(v)) for k, v in per.items()}
    values = {m: [round(float(x), 6) for x in per[m]] for m in checked_eval_metrics(finding)
              if m in per}
    return metrics, {"prompts": heldout.prompts_digest(ev.data.examples), "values": values}


def _rl_rows(run_dir: str) -> list:
    """metrics.jsonl's RL lines (dicts), in step order (a last line cut by a kill is left
    out: `logging.read_metrics`)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = read_metrics(path) if os.path.exists(path) else []
    return [x for x in rows if x.get("phase") == "rl"]


def train_metrics(rows: list, keys, tail: float = TRAIN_TAIL) -> Dict[str, float]:
    """Summaries of the training metrics `keys` over the RL log lines `rows` (dicts with
    "step"), for checks: "train:KEY", the mean over the last `tail` share of the lines (at
    least one: where training ended), and "train_avg:KEY", the mean over all of them (the
    area under the curve: how early a metric moved). Missing / None values are skipped;
    a key with no value at all is left out."""
    out: Dict[str, float] = {}
    n_tail = max(1, int(round(tail * len(rows))))
    for key in keys:
        every = [x[key] for x in rows if x.get(key) is not None]
        last = [x[key] for x in rows[-n_tail:] if x.get(key) is not None]
        if every:
            out[f"train_avg:{key}"] = float(np.mean(every))
        if last:
            out[f"train:{key}"] = float(np.mean(last))
    return out


def _curves(rows: list, keys) -> Dict[str, list]:
    """{"step": [...], key: [...]} from the RL log lines `rows`, thinned to ~60 points."""
    stride = max(1, len(rows) // _CURVE_POINTS)
    rows = rows[stride - 1::stride] if rows else []
    out = {"step": [x["step"] for x in rows]}
    for key in keys:
        out[key] = [x.get(key) for x in rows]
    return out


def run_pair(finding: Finding, arm: str, seed: int, work: str,
             log: Callable[[str], None] = print) -> Dict[str, Any]:
    """The result of `arm` at `seed` (read back if finished, else trained and evaluated):
    {"arm", "seed", "metrics": {name: float}, "per_prompt": {"prompts", "values"}, "warmup":
    the criterion's record or None, "curves": {...}, "wall_s", "skipped", "dir"} (pairs
    stored before lab v2's per-prompt values lack "per_prompt" / "warmup");
    None while another live process is running this pair."""
    pair_dir = pair_path(finding, arm, seed, work)
    res = _finished(finding, arm, pair_dir)
    if res is not None:
        return res
    os.makedirs(os.path.dirname(pair_dir), exist_ok=True)
    lock = pair_dir + ".lock"
    if not _try_lock(lock):
        return None
    try:
        return _train_pair(finding, arm, seed, work, pair_dir, log)
    finally:
        os.remove(lock)


def _finished(finding: Finding, arm: str, pair_dir: str) -> Optional[Dict[str, Any]]:
    """The stored result of a finished pair, or None. A pair finished before training
    metrics were recorded gets them from its metrics.jsonl; one that lacks a metric this
    finding's checks read on `arm` (e.g. CoT-pass@k, kept since) counts as unfinished and
    is run again (the same config and seed: the same numbers, plus the missing ones)."""
    out_path = os.path.join(pair_dir, "result.json")
    if not os.path.exists(out_path):
        return None
    with open(out_path) as f:
        res = json.load(f)
    if not finding.is_warmup(arm) and not any(k.startswith("train") for k in res["metrics"]):
        rows = _rl_rows(os.path.join(pair_dir, "run"))
        res["metrics"] = {**res["metrics"], **train_metrics(rows, finding.curves)}
    needed = {c.metric for c in finding.checks if arm in (c.a, c.b)}
    if needed - set(res["metrics"]):
        return None
    return {**res, "arm": arm, "skipped": True, "dir": pair_dir}


def _train_pair(finding: Finding, arm: str, seed: int, work: str, pair_dir: str,
                log: Callable[[str], None]) -> Dict[str, Any]:
    out_path = os.path.join(pair_dir, "result.json")
    t0 = time.time()
    config = arm_config(finding, arm, seed)
    r = _setup(config, os.path.join(pair_dir, "run"))
    params, wdir = warmup_params(r, work, log, finding.warmup)
    if finding.is_warmup(arm):
        metrics, per_prompt = evaluate(r, params, finding, seed)
        curves: Dict[str, list] = {}
        r.writer.close()
        r.samples.close()
    else:
        log(f"  {arm} seed {seed}: {config.rl.steps} RL steps")
        state = loop.reinforce(r, params)
        r.writer.close()
        r.samples.close()
        metrics, per_prompt = evaluate(r, state.params, finding, seed)
        rows = _rl_rows(os.path.join(pair_dir, "run"))
        metrics.update(train_metrics(rows, finding.curves))
        curves = _curves(rows, finding.curves)
    result = {"arm": arm, "seed": seed, "metrics": metrics, "per_prompt": per_prompt,
              "warmup": warmup_record(wdir), "curves": curves, "wall_s": time.time() - t0}
    os.makedirs(pair_dir, exist_ok=True)
    workdir_lib.write_json_atomic(out_path, result)
    return {**result, "skipped": False, "dir": pair_dir}


def pair_path(finding: Finding, arm: str, seed: int, work: str) -> str:
    """work/_pairs/PAIR: PAIR hashes the arm's config at `seed` (warm-up-only arms: the
    warm-up's parts only), the evaluation and the recorded curves."""
    config = arm_config(finding, arm, seed)
    what = ({"warmup": warmup_key(config, finding.warmup)} if finding.is_warmup(arm)
            else {"config": config.to_dict()})
    if finding.warmup is not None and not finding.is_warmup(arm):
        what["warmup"] = warmup_key(config, finding.warmup)
    what.update(eval=finding.eval.key(), curves=list(finding.curves))
    return os.path.join(work, "_pairs", _hash(what))


def run_finding(finding: Finding, work: str, *, seeds: Optional[int] = None,
                log: Callable[[str], None] = print, poll_s: float = 10.0) -> Dict[str, list]:
    """Every arm × seed of `finding` (seed-major: a seed's warm-up is trained once, then its
    arms); returns {arm: [pair result per seed]}. Several processes may share `work`: a
    pair another live process is running is left to it and read back once it is done."""
    n = seeds or finding.seeds
    pending = [(seed, arm) for seed in range(n) for arm in finding.arms]
    done: Dict[tuple, Dict[str, Any]] = {}
    while pending:
        waiting = []
        for seed, arm in pending:
            res = run_pair(finding, arm, seed, work, log)
            if res is None:
                waiting.append((seed, arm))
                continue
            state = "done before" if res["skipped"] else f"{res['wall_s']:.0f} s"
            log(f"[{finding.name}] {arm} seed {seed}: {state}; " + ", ".join(
                f"{k}={v:.3f}" for k, v in res["metrics"].items() if k.startswith("pass@")))
            done[seed, arm] = res
        if len(waiting) == len(pending):
            time.sleep(poll_s)  # All left are another process's: wait for them.
        pending = waiting
    return {arm: [done[seed, arm] for seed in range(n)] for arm in finding.arms}


def _try_lock(path: str) -> bool:
    """Creates `path` holding this process's id, unless a live process holds it."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            with open(path) as f:
                pid = int(f.read() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            return False
        try:
            os.remove(path)  # Left by a process that died.
        except FileNotFoundError:
            pass
        return _try_lock(path)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _unlock_if_mine(path: str) -> None:
    try:
        with open(path) as f:
            mine = f.read() == str(os.getpid())
    except OSError:
        return
    if mine:
        os.remove(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
