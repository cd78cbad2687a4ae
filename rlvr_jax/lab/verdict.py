"""Lab v2 verdicts: few-seed tests, the smallest effect of interest, Holm, gates, a schedule.

Per check (paired per-seed differences d = metric(a) − metric(b), n seeds, m = its margin):

  expect  supported if               contradicted if                no effect ≥ m if
  ">"     t-test d̄ > 0               t-test d̄ < 0                  TOST |d̄| < m
  "<"     t-test d̄ < 0               t-test d̄ > 0                  TOST |d̄| < m
  ">="    t-test d̄ > −m              t-test d̄ < −m                 —
  "<="    t-test d̄ < +m              t-test d̄ > +m                 —
  "~"     TOST |d̄| < m               two-sided t-test outside ±m    —

(one-sided Student t-tests, n − 1 df, `stats.t_pvalue`; TOST `stats.equivalence_pvalue`).
Each column is one family: its p-values are Holm-adjusted across the finding's testable
checks and compared with α_look = alpha / (number of looks in the seed schedule). An
outcome is the first that holds of contradicted, no effect ≥ m, supported; else
undecided. A check whose mechanism gate fails, or that `lab.audit` refuses, is "not
testable here" and leaves the families. The exact sign-flip p-value of the supported column
is reported beside the t-test's (a distribution-free check of the same direction).

Finding verdict, in this order: not reproduced (a check contradicted), not testable here
(a check untestable; the gate is named), no effect at this scale (a check shows no effect
≥ m), reproduced (every check supported), inconclusive.

The pre-registered verdict (`preregistered`) is the v1 rule (`stats.judge`: the 95%
seed-bootstrap interval of d̄ against 0 / ±m; every check supported: reproduced, one
contradicted: not reproduced, else inconclusive) on the checks and seed count registered
before the first run (`Finding.prereg`).
"""
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from rlvr_jax.lab import stats
from rlvr_jax.lab.spec import Check, Finding
from rlvr_jax.lab.stats import CONTRADICTED, SUPPORTED, UNDECIDED

NO_EFFECT, UNTESTABLE = "no effect ≥ m", "not testable here"
REPRODUCED, NOT_REPRODUCED, NULL = "reproduced", "not reproduced", "no effect at this scale"
INCONCLUSIVE = "inconclusive"
PerSeed = Dict[str, List[Dict[str, Any]]]  # {arm: [{"seed": s, metric: value, ...}]}


def _values(per_seed: PerSeed, arm: str, metric: str, n: int) -> Optional[np.ndarray]:
    rows = per_seed[arm][:n]
    if any(metric not in r for r in rows):
        return None
    return np.asarray([r[metric] for r in rows], np.float64)


def check_pvalues(check: Check, d: Sequence[float]) -> Dict[str, Optional[float]]:
    """{"support", "contradict", "no_effect", "sign_flip"}: the unadjusted p-values of
    `check` on the differences `d` [n] (see the module table; None where not applicable)."""
    m, t = check.margin, stats.t_pvalue
    d = np.asarray(d, np.float64)
    no_effect = stats.equivalence_pvalue(d, m) if check.expect in (">", "<") else None
    if check.expect == "~":
        outside = min(1.0, 2.0 * min(t(d, m, "greater"), t(d, -m, "less")))
        return {"support": stats.equivalence_pvalue(d, m), "contradict": outside,
                "no_effect": None, "sign_flip": None}
    mu0 = {">": 0.0, "<": 0.0, ">=": -m, "<=": m}[check.expect]
    up = check.expect in (">", ">=")
    hi, lo = ("greater", "less") if up else ("less", "greater")
    return {"support": t(d, mu0, hi), "contradict": t(d, mu0, lo), "no_effect": no_effect,
            "sign_flip": stats.sign_flip_pvalue(d - mu0, hi)}


def gates(finding: Finding, per_seed: PerSeed, n: int) -> List[Dict[str, Any]]:
    """Each gate's value (mean over the first `n` seeds), whether it passed, and the check
    indices it guards."""
    out = []
    for g in finding.gates:
        x = _values(per_seed, g.arm, g.metric, n)
        y = _values(per_seed, g.arm, g.minus, n) if g.minus else 0.0
        value = None if x is None or y is None else float(np.mean(x - y))
        passed = value is not None and (value >= g.threshold if g.op == ">=" else
                                        value <= g.threshold)
        out.append({"name": g.name, "value": value, "op": g.op, "threshold": g.threshold,
                    "passed": passed,
                    "checks": list(g.checks) or list(range(len(finding.checks)))})
    return out


def _holm(values: List[Optional[float]], keep: List[int]) -> List[Optional[float]]:
    idx = [i for i in keep if values[i] is not None]
    out: List[Optional[float]] = [None] * len(values)
    for i, p in zip(idx, stats.holm([values[i] for i in idx]) if idx else []):
        out[i] = p
    return out


def _outcome(adj: Dict[str, Optional[float]], alpha: float) -> str:
    for key, outcome in (("contradict", CONTRADICTED), ("no_effect", NO_EFFECT),
                         ("support", SUPPORTED)):
        if adj[key] is not None and adj[key] < alpha:
            return outcome
    return UNDECIDED


def finding_verdict(checks: Sequence[Dict[str, Any]]) -> Dict[str, str]:
    """{"verdict", "reason"} from the judged checks (see the module docstring)."""
    outcomes = [c["outcome"] for c in checks]
    if CONTRADICTED in outcomes:
        return {"verdict": NOT_REPRODUCED, "reason": "a check is contradicted"}
    untestable = [c["reason"] for c in checks if c["outcome"] == UNTESTABLE]
    if untestable:
        return {"verdict": UNTESTABLE, "reason": "; ".join(dict.fromkeys(untestable))}
    if NO_EFFECT in outcomes:
        return {"verdict": NULL, "reason": "a claimed effect is smaller than its m here"}
    if outcomes and all(o == SUPPORTED for o in outcomes):
        return {"verdict": REPRODUCED, "reason": "every check supported"}
    return {"verdict": INCONCLUSIVE, "reason": "a check is undecided"}


def next_stage(finding: Finding, n: int, verdict: str) -> Optional[int]:
    """The schedule's rule: the next look's seed count when the verdict at `n` seeds is
    inconclusive and a later look exists; else None (stop)."""
    later = [s for s in finding.stages if s > n]
    return later[0] if verdict == INCONCLUSIVE and later else None


def judge(finding: Finding, per_seed: PerSeed, problems: Sequence[Any] = ()
          ) -> Dict[str, Any]:
    """The v2 verdict of `finding` from its arms' per-seed metrics (all arms: the same
    seeds in the same order) and `lab.audit` problems: {"verdict", "reason", "seeds",
    "alpha_look", "next_stage", "gates", "checks": [...]} (results.json's "v2")."""
    n = min(len(rows) for rows in per_seed.values())
    alpha = finding.alpha / len(finding.stages)
    gate_rows = gates(finding, per_seed, n)
    reasons: Dict[int, str] = {}
    for g in gate_rows:
        for i in g["checks"]:
            if not g["passed"]:
                shown = "not measured" if g["value"] is None else f"{g['value']:.4f}"
                reasons.setdefault(i, f"gate failed: {g['name']} ({shown})")
    for p in problems:
        if p.kind == "refuse":
            reasons.setdefault(p.check, f"refused by the static check: {p.message}")
    rows: List[Dict[str, Any]] = []
    for i, c in enumerate(finding.checks):
        a, b = _values(per_seed, c.a, c.metric, n), _values(per_seed, c.b, c.metric, n)
        if a is None or b is None:
            raise ValueError(f"{finding.name}: the stored results lack {c.metric} of "
                             f"{c.a} or {c.b}; run the finding again")
        d = a - b
        lo, hi = stats.paired_t_interval(d) if n > 1 else (float(d[0]), float(d[0]))
        rows.append({"metric": c.metric, "a": c.a, "b": c.b, "expect": c.expect,
                     "m": c.margin, "mean": float(d.mean()), "t95": [lo, hi],
                     "per_seed": d.tolist(), "wins": int(np.sum(d > 0)), "seeds": n,
                     "p": check_pvalues(c, d) if n > 1 else
                     {"support": None, "contradict": None, "no_effect": None,
                      "sign_flip": None},
                     "flags": [p.message for p in problems
                               if p.check == i and p.kind == "flag"]})
    keep = [i for i in range(len(rows)) if i not in reasons]
    adjusted = {k: _holm([r["p"][k] for r in rows], keep)
                for k in ("support", "contradict", "no_effect")}
    for i, r in enumerate(rows):
        r["holm"] = {k: adjusted[k][i] for k in adjusted}
        r["outcome"] = UNTESTABLE if i in reasons else _outcome(r["holm"], alpha)
        r["reason"] = reasons.get(i, "")
    out = finding_verdict(rows)
    return {**out, "seeds": n, "alpha_look": alpha, "gates": gate_rows, "checks": rows,
            "next_stage": next_stage(finding, n, out["verdict"])}


def preregistered(finding: Finding, per_seed: PerSeed) -> Dict[str, Any]:
    """The pre-registered verdict: `finding.prereg`'s rule (v1; v2 for a finding registered
    under v2) on its checks (default: the current ones) and first `prereg.seeds` seeds
    (default: all stored):
    {"verdict", "seeds", "note", "checks": [{"metric", "a", "b", "expect", "margin",
    "mean", "ci95", "outcome"}]}."""
    pre = finding.prereg
    n = min(len(rows) for rows in per_seed.values())
    n = min(n, pre.seeds or n)
    if pre.rule == "v2":  # Registered under v2: the v2 verdict is the pre-registered one.
        v2 = judge(finding, {a: r[:n] for a, r in per_seed.items()})
        return {"verdict": v2["verdict"], "seeds": n, "note": pre.note, "rule": "v2",
                "checks": [{"metric": c["metric"], "a": c["a"], "b": c["b"],
                            "expect": c["expect"], "margin": c["m"], "mean": c["mean"],
                            "ci95": c["t95"], "outcome": c["outcome"]}
                           for c in v2["checks"]]}
    rows = []
    for c in pre.checks or finding.checks:
        a, b = _values(per_seed, c.a, c.metric, n), _values(per_seed, c.b, c.metric, n)
        diff = stats.paired_difference(a, b, name=f"{c.a}-{c.b}/{c.metric}")
        rows.append({"metric": c.metric, "a": c.a, "b": c.b, "expect": c.expect,
                     "margin": c.margin, "mean": diff["mean"], "ci95": diff["ci95"],
                     "outcome": stats.judge(c, *diff["ci95"])})
    return {"verdict": stats.verdict([r["outcome"] for r in rows]), "seeds": n,
            "note": pre.note, "rule": "v1", "checks": rows}


def attach(finding: Finding, summary: Dict[str, Any], problems: Sequence[Any] = ()
           ) -> Dict[str, Any]:
    """`summary` (results.json's content: arms with per-seed rows) with "preregistered"
    and "v2" set from its stored per-seed numbers; arms the spec no longer has are
    ignored."""
    per_seed = {arm: summary["arms"][arm]["per_seed"] for arm in finding.arms
                if arm in summary["arms"]}
    summary["preregistered"] = preregistered(finding, per_seed)
    summary["v2"] = judge(finding, per_seed, problems)
    return summary
