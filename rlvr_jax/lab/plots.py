"""PNG plots of a finding's results.json: pass@k curves with seed-level intervals, paired
differences against a reference arm, and training curves (mean over seeds, min-max band)."""
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


def passk_plot(summary: Dict[str, Any], path: str, reference: str) -> str:
    """Left: mean pass@k per arm (95% seed-bootstrap band); right: the paired difference
    arm - `reference` per k with its interval. Returns `path`."""
    plt = _plt()
    ks = _ks(summary)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for arm, a in summary["arms"].items():
        mean = [a["mean"][f"pass@{k}"] for k in ks]
        low = [a["ci95"][f"pass@{k}"][0] for k in ks]
        high = [a["ci95"][f"pass@{k}"][1] for k in ks]
        line, = left.plot(ks, mean, marker="o", ms=3, label=arm)
        left.fill_between(ks, low, high, alpha=0.2, color=line.get_color())
        if arm == reference:
            continue
        diffs = [stats.paired_difference(
            [r[f"pass@{k}"] for r in a["per_seed"]],
            [r[f"pass@{k}"] for r in summary["arms"][reference]["per_seed"]],
            name=f"{arm}-{reference}/pass@{k}") for k in ks]
        right.plot(ks, [d["mean"] for d in diffs], marker="o", ms=3, label=arm,
                   color=line.get_color())
        right.fill_between(ks, [d["ci95"][0] for d in diffs], [d["ci95"][1] for d in diffs],
                           alpha=0.2, color=line.get_color())
    right.axhline(0.0, color="black", lw=0.8)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    left.set_ylabel("pass@k (held-out)")
    right.set_ylabel(f"pass@k − {reference} (paired by seed)")
    fig.suptitle(f"{summary['finding']}: {summary['seeds']} seeds, 95% seed-bootstrap "
                 f"intervals", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path


def curves_plot(summary: Dict[str, Any], path: str) -> str:
    """One panel per training metric: mean over seeds per arm, min-max band. Returns path."""
    plt = _plt()
    keys = sorted({k for runs in summary["curves"].values() for c in runs for k in c
                   if k != "step"})
    if not keys:
        return ""
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for arm, runs in summary["curves"].items():
            runs = [c for c in runs if c.get(key)]
            if not runs:
                continue
            n = min(len(c[key]) for c in runs)
            y = np.array([[np.nan if v is None else v for v in c[key][:n]] for c in runs], float)
            steps = runs[0]["step"][:n]
            line, = ax.plot(steps, np.nanmean(y, 0), label=arm)
            ax.fill_between(steps, np.nanmin(y, 0), np.nanmax(y, 0), alpha=0.2,
                            color=line.get_color())
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
