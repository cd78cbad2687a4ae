"""PNG training curves from a run's metrics.jsonl (one panel per metric, x = step).

    python scripts/plot.py runs/quickstart                      # -> runs/quickstart/metrics.png
    python scripts/plot.py runs/a/metrics.jsonl --keys eval/pass@1,train/entropy --out a.png
    python scripts/plot.py runs/a --all --smooth 0.9

Without --keys it plots the usual RLVR curves that the file has (reward, pass@1, KL,
entropy, response length, loss); `eval/x` panels get their `x_ci_low`/`x_ci_high` band;
smoothing (EMA) skips eval points. Needs matplotlib (the `viz` extra); no display needed.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PREFERRED = ("rollout/reward_mean", "train/pass@1", "eval/pass@1", "eval/cot_pass@1", "loss/kl",
             "reward/kl_penalty", "train/entropy", "rollout/response_length", "train/loss",
             "rollout/truncation_rate", "train/grad_norm", "sft/loss")


def numeric_keys(records):
    """Metric names with at least one number, in first-seen order (CI bounds excluded)."""
    return list(dict.fromkeys(k for r in records for k, v in r.items()
                              if k not in ("step", "phase", "time") and isinstance(v, (int, float))
                              and not k.endswith(("_ci_low", "_ci_high"))))


def series(records, key, phase=None):
    """(steps, values) of `key` in file order; null (non-finite) values become NaN."""
    rows = [r for r in records if key in r and (phase is None or r.get("phase") == phase)]
    return [r["step"] for r in rows], [math.nan if r[key] is None else r[key] for r in rows]


def ema(values, weight):
    """Exponential moving average that skips NaNs (they stay NaN)."""
    out, last = [], None
    for v in values:
        last = last if math.isnan(v) else v if last is None else weight * last + (1 - weight) * v
        out.append(math.nan if math.isnan(v) else last)
    return out


def plot(records, keys, out, *, smooth=0.0, title=""):
    from matplotlib.figure import Figure  # No pyplot: no GUI backend, no global state.
    cols = min(3, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig = Figure(figsize=(4.5 * cols, 3.2 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for phase in sorted({r.get("phase") for r in records if key in r}, key=str):
            steps, vals = series(records, key, phase)
            smoothed = ema(vals, smooth) if smooth and phase != "eval" else vals
            ax.plot(steps, smoothed, marker="." if len(steps) < 30 else None, label=str(phase))
            lo, hi = (series(records, key + s, phase)[1] for s in ("_ci_low", "_ci_high"))
            if len(lo) == len(hi) == len(steps) and not any(map(math.isnan, lo + hi)):
                ax.fill_between(steps, lo, hi, alpha=0.2)
        ax.set_title(key, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(ax.get_lines()) > 1:
            ax.legend(fontsize=8)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("path", help="a run directory or its metrics.jsonl")
    p.add_argument("--keys", default="", help="comma-separated metric names")
    p.add_argument("--all", action="store_true", help="plot every numeric metric")
    p.add_argument("--smooth", type=float, default=0.0, help="EMA weight in [0, 1)")
    p.add_argument("--out", default="", help="PNG path (default: beside metrics.jsonl)")
    args = p.parse_args(argv)
    from rlvr_jax.train.logging import read_metrics
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        _fail("plot.py needs matplotlib: pip install -c constraints.txt -e \".[viz]\"")
    path = os.path.join(args.path, "metrics.jsonl") if os.path.isdir(args.path) else args.path
    if not os.path.isfile(path):
        _fail(f"no such file: {path}")
    try:
        records = read_metrics(path)
    except ValueError as e:
        _fail(f"{path}: {e}")
    available = numeric_keys(records)
    if args.keys:
        keys = args.keys.split(",")
    else:
        keys = available if args.all else [k for k in PREFERRED if k in available] or available
    missing = [k for k in keys if k not in available]
    if missing or not keys:
        _fail(f"--keys: not in {path}: {missing or 'any metric'}; available: {available}")
    if not 0.0 <= args.smooth < 1.0:
        _fail(f"--smooth: must be in [0, 1), got {args.smooth}")
    run_dir = os.path.dirname(os.path.abspath(path))
    out = args.out or os.path.join(run_dir, "metrics.png")
    plot(records, keys, out, smooth=args.smooth, title=os.path.basename(run_dir))
    print(f"{len(keys)} curves -> {out}")


def _fail(message: str) -> None:
    """One `error:` line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
