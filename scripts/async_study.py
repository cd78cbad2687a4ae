"""Held-out pass@1 by staleness, paired by seed (docs/async.md), as JSON.

    python scripts/async_study.py --runs runs/async_study

reads RUNS/<arm>_s<seed>/summary.json and metrics.jsonl for the arms sync (staleness 0:
configs/quickstart.py), k1 and k2 (configs/async_arithmetic.py with rl.max_staleness 1, 2)
and prints per arm and seed pass@1 after the warm-up and after RL and the median RL step
time, and per async arm the paired difference to sync (the lab's statistics,
`rlvr_jax.lab.stats`: mean over seeds, its 95% Student-t interval, the seed bootstrap
interval, the TOST p-value of |difference| < 0.03, and the step-rate ratio).
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def read_arm(runs: str, arm: str) -> dict:
    """{seed: {"after_warmup", "after_rl", "median_step_s"}} of the finished runs of `arm`."""
    import numpy as np
    from rlvr_jax.train.logging import read_metrics
    out = {}
    for path in sorted(glob.glob(os.path.join(runs, f"{arm}_s*", "summary.json"))):
        seed = int(re.search(r"_s(\d+)$", os.path.dirname(path)).group(1))
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
        rl = [r for r in read_metrics(os.path.join(os.path.dirname(path), "metrics.jsonl"))
              if r["phase"] == "rl"][5:]  # The first steps compile.
        out[seed] = {"after_warmup": summary["after_warmup"]["eval/pass@1"],
                     "after_rl": summary["after_rl"]["eval/pass@1"],
                     "median_step_s": float(np.median([r["perf/step_time_s"] for r in rl]))}
    return out


def main(argv=None) -> dict:
    from rlvr_jax.lab import stats
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="runs/async_study")
    args = p.parse_args(argv)
    arms = {arm: read_arm(args.runs, arm) for arm in ("sync", "k1", "k2")}
    result = {"arms": arms, "paired": {}}
    for arm in ("k1", "k2"):
        seeds = sorted(set(arms[arm]) & set(arms["sync"]))
        if len(seeds) < 2:
            continue
        a = [arms[arm][s]["after_rl"] for s in seeds]
        b = [arms["sync"][s]["after_rl"] for s in seeds]
        d = stats.paired_difference(a, b, name=f"{arm}-sync")
        d["t95"] = list(stats.paired_t_interval(d["per_seed"]))
        d["tost_p_within_0.03"] = stats.equivalence_pvalue(d["per_seed"], 0.03)
        d["seeds_used"] = seeds
        d["steps_per_s_ratio"] = [arms["sync"][s]["median_step_s"] / arms[arm][s]["median_step_s"]
                                  for s in seeds]
        result["paired"][f"{arm}-sync"] = d
    print(json.dumps(stats.rounded(result, 4), indent=1))
    return result


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
