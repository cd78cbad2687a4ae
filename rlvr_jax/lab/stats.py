"""Seed-level statistics of a finding: per-arm mean / IQM with bootstrap intervals over seeds,
paired differences between arms (paired by seed) and the verdict.

The resampling is `rlvr_jax.evaluation.metrics.bootstrap_ci` (a percentile bootstrap over
runs, the procedure of rliable's `get_interval_estimates`; the project's own, not the
`rliable` package). Every interval here is over training seeds: the held-out prompts of a
seed are averaged first, so the prompt-sampling noise is inside each seed's number.
"""
from typing import Any, Dict, List, Sequence

import jax
import numpy as np

from rlvr_jax.evaluation.metrics import bootstrap_ci, iqm
from rlvr_jax.lab.spec import Check, Finding

NUM_RESAMPLES = 5000
CURVE_POINTS = 25  # Training-curve points per run kept in results.json.
SUPPORTED, CONTRADICTED, UNDECIDED = "supported", "contradicted", "undecided"


def _key(name: str) -> jax.Array:
    return jax.random.PRNGKey(sum(ord(ch) * 31 ** i for i, ch in enumerate(name)) % (2 ** 31))


def interval(values: Sequence[float], *, name: str = "", statistic: str = "mean"
             ) -> Dict[str, float]:
    """{"value", "low", "high"}: `statistic` ("mean" | "iqm") of the per-seed `values` [R] and
    its 95% percentile-bootstrap interval over seeds (R = 1: the value, twice)."""
    x = np.asarray(values, np.float32)
    if len(x) == 1:
        return {"value": float(x[0]), "low": float(x[0]), "high": float(x[0])}
    point, low, high = bootstrap_ci(_key(name + statistic), x, statistic=statistic,
                                    num_resamples=NUM_RESAMPLES)
    return {"value": float(point), "low": float(low), "high": float(high)}


def arm_summary(per_seed: List[Dict[str, Any]], metrics: Sequence[str], arm: str
                ) -> Dict[str, Any]:
    """{"per_seed": [...], "mean": {m: v}, "ci95": {m: [low, high]}, "iqm": {m: v}} of one arm
    (`per_seed`: [{"seed": s, metric: value, ...}] in seed order); a metric some seed lacks
    (e.g. a training metric of the warm-up arm) is left out."""
    out: Dict[str, Any] = {"per_seed": per_seed, "mean": {}, "ci95": {}, "iqm": {}}
    for m in metrics:
        if any(m not in row for row in per_seed):
            continue
        vals = [row[m] for row in per_seed]
        ci = interval(vals, name=f"{arm}/{m}")
        out["mean"][m] = ci["value"]
        out["ci95"][m] = [ci["low"], ci["high"]]
        out["iqm"][m] = float(iqm(np.asarray(vals, np.float32)))
    return out


def paired_difference(a: Sequence[float], b: Sequence[float], *, name: str = ""
                      ) -> Dict[str, Any]:
    """The mean over seeds of a_s - b_s with its 95% seed-level bootstrap interval, and the
    per-seed differences (`a`, `b`: [R] values of two arms, same seeds in the same order)."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    ci = interval(d, name=name)
    return {"mean": ci["value"], "ci95": [ci["low"], ci["high"]], "per_seed": d.tolist(),
            "wins": int(np.sum(d > 0)), "seeds": int(len(d))}


def judge(check: Check, low: float, high: float) -> str:
    """`check` against the interval [low, high] of its mean paired difference."""
    m = check.margin
    if check.expect == ">":
        return SUPPORTED if low > 0 else CONTRADICTED if high < 0 else UNDECIDED
    if check.expect == "<":
        return SUPPORTED if high < 0 else CONTRADICTED if low > 0 else UNDECIDED
    if check.expect == ">=":
        return SUPPORTED if low > -m else CONTRADICTED if high < -m else UNDECIDED
    if check.expect == "<=":
        return SUPPORTED if high < m else CONTRADICTED if low > m else UNDECIDED
    # "~": inside ±margin.
    if -m < low and high < m:
        return SUPPORTED
    return CONTRADICTED if low > m or high < -m else UNDECIDED


def verdict(outcomes: Sequence[str]) -> str:
    """reproduced (every check supported) / not reproduced (one contradicted) / inconclusive
    at this scale (otherwise)."""
    if outcomes and all(o == SUPPORTED for o in outcomes):
        return "reproduced"
    if any(o == CONTRADICTED for o in outcomes):
        return "not reproduced"
    return "inconclusive at this scale"


def summarize(finding: Finding, results: Dict[str, list]) -> Dict[str, Any]:
    """results.json's content from the runner's {arm: [pair result per seed]}."""
    arms: Dict[str, Any] = {}
    metrics = sorted({m for rows in results.values() for r in rows for m in r["metrics"]},
                     key=_metric_order)
    for arm, rows in results.items():
        per_seed = [{"seed": r["seed"], **r["metrics"]} for r in rows]
        arms[arm] = arm_summary(per_seed, metrics, arm)
        arms[arm]["wall_s"] = [round(r["wall_s"], 1) for r in rows]
    checks = []
    for c in finding.checks:
        a = [r["metrics"][c.metric] for r in results[c.a]]
        b = [r["metrics"][c.metric] for r in results[c.b]]
        diff = paired_difference(a, b, name=f"{c.a}-{c.b}/{c.metric}")
        outcome = judge(c, *diff["ci95"])
        checks.append({"metric": c.metric, "a": c.a, "b": c.b, "expect": c.expect,
                       "margin": c.margin, "note": c.note, "difference": diff,
                       "outcome": outcome})
    return {"finding": finding.name, "paper": finding.paper, "claim": finding.claim,
            "verdict": verdict([c["outcome"] for c in checks]), "checks": checks,
            "seeds": len(next(iter(results.values()))), "eval": dict(finding.eval.__dict__),
            "notes": finding.notes, "arms": arms,
            "curves": {arm: [_thin(r.get("curves", {})) for r in rows]
                       for arm, rows in results.items()}}


def _thin(curves: Dict[str, list], points: int = CURVE_POINTS) -> Dict[str, list]:
    """Every stride-th point of each curve (about `points` of them), 4 decimals."""
    stride = max(1, len(curves.get("step", [])) // points)
    return {k: [v if v is None or k == "step" else round(v, 4) for v in vals[stride - 1::stride]]
            for k, vals in curves.items()}


def rounded(obj, digits: int = 5):
    """`obj` (nested dicts / lists) with every float rounded: small results.json files."""
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v, digits) for v in obj]
    return obj


def _metric_order(m: str):
    name, _, k = m.partition("@")
    return (name, int(k) if k.isdigit() else 0)
