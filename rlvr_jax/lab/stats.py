"""Seed-level statistics of a finding: per-arm mean / IQM with bootstrap intervals over seeds,
paired differences between arms (paired by seed) and the v1 verdict (the pre-registered
rule); below it, the v2 few-seed tests (Student t, exact sign flips, TOST, Holm, a seed ×
prompt bootstrap) that `lab.verdict` judges with.

The v1 resampling is `rlvr_jax.evaluation.metrics.bootstrap_ci` (a percentile bootstrap over
runs, the procedure of rliable's `get_interval_estimates`; the project's own, not the
`rliable` package). Every interval here but the last is over training seeds: the held-out
prompts of a seed are averaged first, so the prompt-sampling noise is inside each seed's
number; `seed_prompt_bootstrap` resamples both (the report's "seed × prompt" intervals,
from the per-prompt values new results store).
"""
import math
from typing import Any, Dict, List, Sequence, Tuple

import jax
import numpy as np
import scipy.stats

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
    """results.json's content from the runner's {arm: [pair result per seed]}: per arm
    also "per_prompt" {"prompts": [digest per seed], "values": {metric: [S][P]}} when every
    seed stored it; "warmup": each seed's warm-up criterion record (None: fixed steps)."""
    arms: Dict[str, Any] = {}
    metrics = sorted({m for rows in results.values() for r in rows for m in r["metrics"]},
                     key=_metric_order)
    for arm, rows in results.items():
        per_seed = [{"seed": r["seed"], **r["metrics"]} for r in rows]
        arms[arm] = arm_summary(per_seed, metrics, arm)
        arms[arm]["wall_s"] = [round(r["wall_s"], 1) for r in rows]
        if all(r.get("per_prompt") for r in rows):  # Pairs stored before lab v2 lack it.
            arms[arm]["per_prompt"] = {
                "prompts": [r["per_prompt"]["prompts"] for r in rows],
                "values": {m: [r["per_prompt"]["values"][m] for r in rows]
                           for m in rows[0]["per_prompt"]["values"]
                           if all(m in r["per_prompt"]["values"] for r in rows)}}
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
            "warmup": [rows[0].get("warmup") for rows in zip(*results.values())],
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


# ----------------------------------------------------------------------------- v2: tests
# Few-seed inference (docs/findings.md, "Statistics"): the Student t distribution with n − 1
# degrees of freedom for the mean of n paired differences (SciPy's, a dependency of JAX), an
# exact sign-flip test, TOST equivalence and Holm's step-down correction. Float64 throughout.

def _mean_se(diffs) -> Tuple[np.ndarray, float, float]:
    d = np.asarray(diffs, np.float64).reshape(-1)
    if d.size < 2:
        raise ValueError(f"need at least 2 paired differences, got {d.size}")
    return d, float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


def paired_t_interval(diffs: Sequence[float], level: float = 0.95) -> Tuple[float, float]:
    """(lo, hi): the Student-t interval d̄ ± t_{(1+level)/2, n−1} · s / √n of the mean of
    the n paired differences `diffs` [n] (s: their sample standard deviation, ddof 1)."""
    d, mean, se = _mean_se(diffs)
    half = float(scipy.stats.t.ppf(0.5 + 0.5 * level, d.size - 1)) * se
    return mean - half, mean + half


def t_pvalue(diffs: Sequence[float], mu0: float = 0.0, alternative: str = "greater") -> float:
    """One-sample t-test of the mean of `diffs` [n] against `mu0`: with T = (d̄ − mu0)/(s/√n)
    and F the t CDF (n − 1 df), "greater" (H1: mean > mu0) gives 1 − F(T), "less" F(T),
    "two-sided" 2·min(F(T), 1 − F(T)). Zero spread (s = 0): T = ±∞ (0 or 1); d̄ = mu0: 1."""
    d, mean, se = _mean_se(diffs)
    if se == 0.0:
        t = 0.0 if mean == mu0 else math.copysign(math.inf, mean - mu0)
        if t == 0.0:
            return 1.0
    else:
        t = (mean - mu0) / se
    low = float(scipy.stats.t.cdf(t, d.size - 1))
    up = float(scipy.stats.t.sf(t, d.size - 1))  # 1 − F(T) without the cancellation.
    p = {"greater": up, "less": low, "two-sided": 2.0 * min(low, up)}.get(alternative)
    if p is None:
        raise ValueError(f"alternative must be greater / less / two-sided, got {alternative!r}")
    return min(1.0, p)


def equivalence_pvalue(diffs: Sequence[float], margin: float) -> float:
    """TOST (two one-sided t-tests) of |mean| < margin: max(p of H0 mean ≤ −margin vs
    greater, p of H0 mean ≥ +margin vs less); below α: "no effect ≥ margin"."""
    if margin <= 0:
        raise ValueError(f"equivalence margin must be > 0, got {margin}")
    return max(t_pvalue(diffs, -margin, "greater"), t_pvalue(diffs, margin, "less"))


MAX_SIGN_FLIP_N = 20


def sign_flip_pvalue(diffs: Sequence[float], alternative: str = "two-sided") -> float:
    """Exact sign-flip (paired permutation) test of a zero mean: over all 2^n patterns ε of
    signs, the share whose mean m_ε = mean(ε·d) is at least as extreme as the observed d̄:
    "greater" m_ε ≥ d̄, "less" m_ε ≤ d̄, "two-sided" |m_ε| ≥ |d̄|, each up to rounding
    (a tolerance of 1e-9 · mean|d|, far above float64 sums' error, far below any real gap).
    The smallest p is 1/2^n one-sided (n = 5: 0.031), 2/2^n two-sided. n ≤ 20."""
    d = np.asarray(diffs, np.float64).reshape(-1)
    n = d.size
    if not 1 <= n <= MAX_SIGN_FLIP_N:
        raise ValueError(f"sign_flip_pvalue: 1 <= n <= {MAX_SIGN_FLIP_N}, got {n}")
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
    means = (np.where(bits, -1.0, 1.0) * d).mean(axis=1)
    obs, tol = float(d.mean()), 1e-9 * float(np.abs(d).mean())
    hits = {"greater": means >= obs - tol, "less": means <= obs + tol,
            "two-sided": np.abs(means) >= abs(obs) - tol}.get(alternative)
    if hits is None:
        raise ValueError(f"alternative must be greater / less / two-sided, got {alternative!r}")
    return float(hits.mean())


def holm(pvalues: Sequence[float]) -> List[float]:
    """Holm's step-down adjusted p-values, in the input order: with p_(1) ≤ … ≤ p_(k)
    sorted, p̃_(i) = min(1, max_{j ≤ i} (k − j + 1)·p_(j)) (monotone in i, capped at 1).
    Rejecting p̃ < α controls the family-wise error at α."""
    p = np.asarray(pvalues, np.float64).reshape(-1)
    k = p.size
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adj
    return out.tolist()


def seed_prompt_bootstrap(values: np.ndarray, *, level: float = 0.95, num_resamples: int = 5000,
                          seed: int = 0) -> Dict[str, float]:
    """Two-stage (seed × prompt) percentile bootstrap of the grand mean of `values` [S, P]
    (per seed, per held-out prompt; for a paired difference pass a − b, same prompts): each
    resample draws S seeds with replacement, then P prompts with replacement within each
    drawn seed. {"value", "low", "high"}. Its variance is (1/S)·[Var_s(m_s) + mean_s(σ_s²)/P]
    (plug-in; m_s, σ_s² a seed's prompt mean and variance): seeds and prompts both count."""
    x = np.asarray(values, np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"values must be [seeds, prompts], got shape {x.shape}")
    s, p = x.shape
    rng = np.random.default_rng(seed)
    out = np.empty(num_resamples)
    for i in range(0, num_resamples, 500):  # Chunks: [r, S, P] indices stay small.
        r = min(500, num_resamples - i)
        seeds = rng.integers(0, s, (r, s))
        prompts = rng.integers(0, p, (r, s, p))
        out[i:i + r] = x[seeds[:, :, None], prompts].mean(axis=(1, 2))
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(out, [tail, 100.0 - tail])
    return {"value": float(x.mean()), "low": float(low), "high": float(high)}
