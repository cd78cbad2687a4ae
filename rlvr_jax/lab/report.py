"""Markdown tables of a finding's results.json (what docs/findings.md shows per finding)."""
from typing import Any, Dict, Sequence

SHOWN_KS = (1, 4, 16, 64)
# How each expectation reads on the interval of the mean paired difference a − b.
_EXPECT = {">": "> 0", "<": "< 0", ">=": "≥ −{m}", "<=": "≤ +{m}", "~": "within ±{m}"}


def _cell(arm: Dict[str, Any], metric: str) -> str:
    if metric not in arm["mean"]:
        return "—"
    low, high = arm["ci95"][metric]
    return f"{arm['mean'][metric]:.3f} ({low:.3f}–{high:.3f})"


def arms_table(summary: Dict[str, Any], ks: Sequence[int] = SHOWN_KS) -> str:
    """Arms × pass@k and every other metric a check reads (e.g. a training metric): the mean
    over seeds (95% seed-bootstrap interval; "—" where an arm lacks it), and the seeds."""
    ks = [k for k in ks if f"pass@{k}" in next(iter(summary["arms"].values()))["mean"]]
    cols = [f"pass@{k}" for k in ks]
    cols += [m for m in dict.fromkeys(c["metric"] for c in summary["checks"]) if m not in cols]
    head = "| arm | " + " | ".join(cols) + " | seeds |"
    rows = [head, "|---" * (len(cols) + 2) + "|"]
    for name, arm in summary["arms"].items():
        cells = " | ".join(_cell(arm, m) for m in cols)
        rows.append(f"| {name} | {cells} | {len(arm['per_seed'])} |")
    return "\n".join(rows)


def checks_table(summary: Dict[str, Any]) -> str:
    """The verdict's checks: paired difference (mean over seeds, 95% seed-bootstrap
    interval, seeds where a > b), expectation, outcome."""
    rows = ["| check | a − b (paired by seed) | a > b in | expected | outcome |",
            "|---|---|---|---|---|"]
    for c in summary["checks"]:
        d = c["difference"]
        expect = _EXPECT[c["expect"]].format(m=c["margin"])
        rows.append(f"| {c['metric']}: {c['a']} − {c['b']} | {d['mean']:+.3f} "
                    f"({d['ci95'][0]:+.3f} to {d['ci95'][1]:+.3f}) | {d['wins']}/{d['seeds']} "
                    f"seeds | {expect} | {c['outcome']} |")
    return "\n".join(rows)


def markdown(summary: Dict[str, Any]) -> str:
    """Both tables and the verdict line."""
    return (f"{arms_table(summary)}\n\n{checks_table(summary)}\n\n"
            f"**Verdict: {summary['verdict']}.**\n")
