"""Markdown tables of a finding's results.json (what docs/findings.md shows per finding): the
arms, the checks with the pre-registered (v1) and the v2 outcome (and the seed × prompt
bootstrap interval where per-prompt values are stored), the evaluation, the gates, the
static audit and the verdicts (`summary["preregistered"]`, `summary["v1"]`, `summary["v2"]`:
`lab.verdict`)."""
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from rlvr_jax.lab import stats

SHOWN_KS = (1, 4, 16, 64)
# How each expectation reads on the mean paired difference a − b.
_EXPECT = {">": "> 0", "<": "< 0", ">=": "≥ −{m}", "<=": "≤ +{m}", "~": "within ±{m}"}


def _num(x: Optional[float], fmt: str = ".3f") -> str:
    return "—" if x is None else format(x, fmt)


def _cell(arm: Dict[str, Any], metric: str) -> str:
    vals = [r[metric] for r in arm["per_seed"] if metric in r]
    if not vals or len(vals) < len(arm["per_seed"]):
        return "—"
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return f"{mean:.3f}"
    low, high = stats.paired_t_interval(vals)
    return f"{mean:.3f} ({low:.3f}–{high:.3f})"


def arms_table(summary: Dict[str, Any], ks: Sequence[int] = SHOWN_KS) -> str:
    """Arms × pass@k and every other metric a check reads (e.g. a training metric): the mean
    over seeds (95% Student-t interval over seeds; "—" where an arm lacks it), and the
    seeds."""
    ks = [k for k in ks if f"pass@{k}" in next(iter(summary["arms"].values()))["mean"]]
    cols = [f"pass@{k}" for k in ks]
    cols += [m for m in dict.fromkeys(c["metric"] for c in summary["checks"]) if m not in cols]
    head = "| arm | " + " | ".join(cols) + " | seeds |"
    rows = [head, "|---" * (len(cols) + 2) + "|"]
    for name, arm in summary["arms"].items():
        cells = " | ".join(_cell(arm, m) for m in cols)
        rows.append(f"| {name} | {cells} | {len(arm['per_seed'])} |")
    return "\n".join(rows)


def prompt_interval(summary: Dict[str, Any], metric: str, a: str, b: str
                    ) -> Tuple[Optional[Dict[str, float]], str]:
    """(the 95% seed × prompt bootstrap interval of the mean paired difference a − b of
    `metric` — `stats.seed_prompt_bootstrap` of the per-prompt differences [S, P] — or None,
    why not): it needs both arms' per-prompt values, on the same prompts seed by seed."""
    pa, pb = (summary["arms"][x].get("per_prompt") for x in (a, b))
    if not pa or not pb:
        return None, "no per-prompt values stored"
    if metric not in pa["values"] or metric not in pb["values"]:
        return None, f"no per-prompt {metric} stored"
    if pa["prompts"] != pb["prompts"]:
        return None, "the arms were evaluated on different prompts"
    diff = np.asarray(pa["values"][metric], np.float64) - np.asarray(pb["values"][metric],
                                                                     np.float64)
    return stats.seed_prompt_bootstrap(diff, num_resamples=stats.NUM_RESAMPLES), ""


def checks_table(summary: Dict[str, Any]) -> str:
    """The checks: m, the paired difference (mean over seeds, 95% t-interval, seeds where
    a > b; with per-prompt values stored, also the 95% seed × prompt bootstrap interval),
    the Holm-adjusted t-test p-values (for / against / no effect ≥ m), the exact
    sign-flip p of the claimed direction, the v1 outcome (published rule, all seeds) and
    the v2 outcome."""
    v1 = {(c["metric"], c["a"], c["b"]): c["outcome"] for c in summary["checks"]}
    sp = [prompt_interval(summary, c["metric"], c["a"], c["b"])[0]
          for c in summary["v2"]["checks"]]
    extra = " seed × prompt 95% |" if any(sp) else ""
    rows = ["| check | expected | m | a − b, 95% t-interval |" + extra + " a > b in | Holm p: "
            "for / against / ≈ 0 | sign-flip p | v1 | v2 |", "|---" * (9 + bool(extra)) + "|"]
    for c, ci in zip(summary["v2"]["checks"], sp):
        expect = _EXPECT[c["expect"]].format(m=c["m"])
        h = c["holm"]
        ps = " / ".join(_num(h[k]) for k in ("support", "contradict", "no_effect"))
        outcome = c["outcome"].replace("≥ m", f"≥ {c['m']}")
        cell = "" if not extra else (" — |" if ci is None else
                                     f" {ci['low']:+.3f} to {ci['high']:+.3f} |")
        rows.append(f"| {c['metric']}: {c['a']} − {c['b']} | {expect} | {c['m']} | "
                    f"{c['mean']:+.3f} ({c['t95'][0]:+.3f} to {c['t95'][1]:+.3f}) |{cell} "
                    f"{c['wins']}/{c['seeds']} | {ps} | {_num(c['p']['sign_flip'])} | "
                    f"{v1.get((c['metric'], c['a'], c['b']), '—')} | {outcome} |")
    return "\n".join(rows)


def evaluation_lines(summary: Dict[str, Any]) -> str:
    """How the held-out evaluation was done: the prompts (stream / whole test split), whether
    the intervals include the prompt-sampling noise (seed × prompt bootstrap) or are over
    seeds only (results stored before per-prompt values were kept), and where a warm-up
    criterion stopped each seed's warm-up."""
    ev = summary.get("eval", {})
    where = ("the whole fixed test split, the same prompts for every seed"
             if ev.get("prompts") == "all" else
             f"{ev.get('num_prompts', '?')} prompts of each seed's own test stream")
    lines = [f"- Evaluation: {ev.get('num_samples', '?')} samples per prompt on {where}."]
    why = [prompt_interval(summary, c["metric"], c["a"], c["b"])[1]
           for c in summary["v2"]["checks"]]
    how = (f"two-stage percentile bootstrap (seeds, then prompts within each seed; "
           f"{stats.NUM_RESAMPLES} resamples) of the per-prompt paired differences; the "
           f"verdicts still use the seed-level t-tests")
    missing = "; ".join(dict.fromkeys(w for w in why if w))
    if not missing:
        lines.append(f"- Seed × prompt 95% intervals: {how}.")
    elif all(why):
        lines.append(f"- Intervals over seeds only ({missing}: results stored before the lab "
                     f"kept per-prompt values, or pairs run before then).")
    else:
        lines.append(f"- Seed × prompt 95% intervals for {why.count('')} of {len(why)} checks "
                     f"({how}); the others over seeds only ({missing}).")
    records = summary.get("warmup") or []
    if any(records):
        c = next(r for r in records if r)["criterion"]
        stops = ", ".join(f"seed {i} at step {r['steps']} (pass@1 {r['checks'][-1][1]:.3f}"
                          + ("" if r["reached"] else ", not met") + ")"
                          for i, r in enumerate(records) if r)
        lines.append(f"- Warm-up trained to a criterion: held-out greedy pass@1 ≥ "
                     f"{c['until_pass1']} (checked every {c['every']} steps on "
                     f"{c['num_prompts']} prompts, at most the config's sft.steps); stopped: "
                     f"{stops}.")
    return "\n".join(lines)


def prereg_table(summary: Dict[str, Any]) -> str:
    """The pre-registered checks (v1 rule: 95% seed-bootstrap interval) when they differ
    from the current ones or ran on fewer seeds; "" otherwise."""
    pre = summary["preregistered"]
    same = [(c["metric"], c["a"], c["b"]) for c in pre["checks"]] == [
        (c["metric"], c["a"], c["b"]) for c in summary["checks"]]
    if (same and pre["seeds"] == summary["seeds"]) or pre.get("rule") == "v2":
        return ""
    rows = [f"Pre-registered checks ({pre['seeds']} seeds, v1 rule):", "",
            "| check | a − b, 95% seed bootstrap | expected | outcome |", "|---|---|---|---|"]
    for c in pre["checks"]:
        expect = _EXPECT[c["expect"]].format(m=c["margin"])
        rows.append(f"| {c['metric']}: {c['a']} − {c['b']} | {c['mean']:+.3f} "
                    f"({c['ci95'][0]:+.3f} to {c['ci95'][1]:+.3f}) | {expect} | "
                    f"{c['outcome']} |")
    return "\n".join(rows)


def mechanism_lines(summary: Dict[str, Any]) -> str:
    """The gates (value against threshold) and the static audit's problems, as a list."""
    lines = []
    for g in summary["v2"]["gates"]:
        state = "passed" if g["passed"] else "**failed**"
        lines.append(f"- Gate: {g['name']}: {_num(g['value'], '.4f')} {g['op']} "
                     f"{g['threshold']} — {state} (guards check{'s' * (len(g['checks']) > 1)} "
                     f"{', '.join(str(i + 1) for i in g['checks'])}).")
    for i, c in enumerate(summary["v2"]["checks"]):
        if c["reason"].startswith("refused"):
            lines.append(f"- Static check, check {i + 1}: {c['reason']}.")
        for flag in c["flags"]:
            lines.append(f"- Static check, check {i + 1} (flag): {flag}.")
    return "\n".join(lines)


def verdict_lines(summary: Dict[str, Any]) -> str:
    """The pre-registered, the published (v1, all seeds) and the v2 verdict."""
    pre, v2 = summary["preregistered"], summary["v2"]
    out = [f"- **Pre-registered verdict: {pre['verdict']}** ({pre.get('rule', 'v1')} rule, "
           f"{pre['seeds']} seeds"
           f"{'; ' + pre['note'].rstrip('.') if pre['note'] else ''})."]
    if summary.get("verdict") != pre["verdict"] or pre["seeds"] != summary["seeds"]:
        out.append(f"- **v1 verdict at {summary['seeds']} seeds: {summary['verdict']}.**")
    nxt = (f" The schedule's next look: {v2['next_stage']} seeds (not run)."
           if v2.get("next_stage") else "")
    out.append(f"- **v2 verdict: {v2['verdict']}** ({v2['reason']}; {v2['seeds']} seeds, "
               f"each family Holm-adjusted at α = {v2['alpha_look']:g}).{nxt}")
    return "\n".join(out)


def markdown(summary: Dict[str, Any]) -> str:
    """The tables, the mechanism lines and the verdicts (a results.json with "v2")."""
    parts = [arms_table(summary), checks_table(summary), prereg_table(summary),
             evaluation_lines(summary), mechanism_lines(summary), verdict_lines(summary)]
    return "\n\n".join(p for p in parts if p) + "\n"
