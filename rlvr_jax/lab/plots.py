"""PNG plots of a finding's results.json: pass@k curves with seed-level intervals, paired
differences against a reference arm, and training curves (mean over seeds, min-max band).
An arm has one colour in every plot: matplotlib's cycle colour of its index in the spec's
arm order (`colours`)."""
import os
from typing import Any, Dict, List

import numpy as np

from rlvr_jax.lab import stats


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ks(summary: Dict[str, Any]) -> List[int]:
    return list(summary["eval"]["ks"])


def colours(summary: Dict[str, Any]) -> Dict[str, str]:
    """{arm: "C<i>"}: i its index among all the finding's arms (warm-up included), so an arm
    keeps its colour in a plot that leaves some arms out (curves.png has no warm-up)."""
    return {arm: f"C{i % 10}" for i, arm in enumerate(summary["arms"])}


def _interval(values) -> tuple:
    """(mean, low, high): the 95% Student-t interval over seeds (one seed: the value)."""
    v = np.asarray(values, np.float64)
    if v.size < 2:
        return float(v.mean()), float(v.mean()), float(v.mean())
    low, high = stats.paired_t_interval(v)
    return float(v.mean()), low, high


def passk_plot(summary: Dict[str, Any], path: str, reference: str) -> str:
    """Left: mean pass@k per arm (95% t-interval band over seeds); right: the paired
    difference arm - `reference` per k with its 95% t-interval. Returns `path`."""
    plt = _plt()
    ks, colour = _ks(summary), colours(summary)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ref_rows = summary["arms"][reference]["per_seed"]
    for arm, a in summary["arms"].items():
        own = [_interval([r[f"pass@{k}"] for r in a["per_seed"]]) for k in ks]
        left.plot(ks, [x[0] for x in own], marker="o", ms=3, label=arm, color=colour[arm])
        left.fill_between(ks, [x[1] for x in own], [x[2] for x in own], alpha=0.2,
                          color=colour[arm])
        if arm == reference:
            continue
        diffs = [_interval([r[f"pass@{k}"] - q[f"pass@{k}"]
                            for r, q in zip(a["per_seed"], ref_rows)]) for k in ks]
        right.plot(ks, [d[0] for d in diffs], marker="o", ms=3, label=arm, color=colour[arm])
        right.fill_between(ks, [d[1] for d in diffs], [d[2] for d in diffs], alpha=0.2,
                           color=colour[arm])
    right.axhline(0.0, color="black", lw=0.8)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    left.set_ylabel("pass@k (held-out)")
    right.set_ylabel(f"pass@k − {reference} (paired by seed)")
    fig.suptitle(f"{summary['finding']}: {summary['seeds']} seeds, 95% Student-t intervals "
                 f"over seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path


def curves_plot(summary: Dict[str, Any], path: str) -> str:
    """One panel per training metric: mean over seeds per arm, min-max band; a metric no
    arm logged (e.g. loss/kl when no arm has a KL term) gets no panel. Returns path."""
    plt = _plt()
    keys = sorted({k for runs in summary["curves"].values() for c in runs for k in c
                   if k != "step" and any(v is not None for v in c[k])})
    if not keys:
        return ""
    colour = colours(summary)
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for arm, runs in summary["curves"].items():
            runs = [c for c in runs if c.get(key) and any(v is not None for v in c[key])]
            if not runs:
                continue
            n = min(len(c[key]) for c in runs)
            y = np.array([[np.nan if v is None else v for v in c[key][:n]] for c in runs], float)
            steps = runs[0]["step"][:n]
            ax.plot(steps, np.nanmean(y, 0), label=arm, color=colour.get(arm))
            ax.fill_between(steps, np.nanmin(y, 0), np.nanmax(y, 0), alpha=0.2,
                            color=colour.get(arm))
        ax.set_xlabel("RL step")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path


def write_plots(summary: Dict[str, Any], directory: str, reference: str) -> List[str]:
    """passk.png and curves.png (when there are training curves) in `directory`."""
    out = [passk_plot(summary, os.path.join(directory, "passk.png"), reference)]
    c = curves_plot(summary, os.path.join(directory, "curves.png"))
    return out + ([c] if c else [])
