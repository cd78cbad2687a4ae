"""The reproduction lab: published claims re-tested at small scale, several seeds per arm.

    python scripts/reproduce.py list
    python scripts/reproduce.py run NAME [--seeds N] [--quick] [--out DIR] [--work DIR]
    python scripts/reproduce.py report NAME [--out DIR]   # markdown tables of results.json

`run` trains every arm x seed of configs/repro/NAME.py (each seed's warm-up once, shared by
all its arms), evaluates pass@k on held-out prompts, and writes DIR/NAME/results.json (per
seed, mean, 95% seed-bootstrap interval and IQM per arm; paired differences; the verdict)
and PNG plots. Finished arm x seed pairs (in --work, default DIR/NAME/work) are skipped,
so an interrupted run continues where it stopped. `--quick` is a seconds-long smoke run of
the pipeline (tiny warm-up, 2 RL steps, 8 prompts; not a measurement). See docs/findings.md.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("RLVR_JAX_NO_PROGRESS", "1")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the findings, one per line")
    run = sub.add_parser("run", help="run (or finish) a finding's arms x seeds")
    run.add_argument("name")
    run.add_argument("--seeds", type=int, default=0, help="seeds 0..N-1 (default: the "
                     "finding's own count)")
    run.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    run.add_argument("--out", default="runs/findings", help="results go to OUT/NAME/")
    run.add_argument("--work", default="", help="warm-ups and runs (default OUT/NAME/work; "
                     "shared warm-ups: pass the same --work to several findings)")
    rep = sub.add_parser("report", help="markdown tables of OUT/NAME/results.json")
    rep.add_argument("name")
    rep.add_argument("--out", default="runs/findings")
    return p


def report(args) -> int:
    from rlvr_jax.lab import report as report_lib
    path = os.path.join(args.out, args.name, "results.json")
    if not os.path.exists(path):
        print(f"error: no {path}; run `reproduce.py run {args.name} --out {args.out}` first",
              file=sys.stderr)
        return 2
    with open(path) as f:
        print(report_lib.markdown(json.load(f)), end="")
    return 0


def list_findings() -> int:
    from rlvr_jax import lab
    for name in lab.names():
        f = lab.load(name)
        print(f"{name:17s} {len(f.arms)} arms x {f.seeds} seeds  \"{f.paper}\"")
    return 0


def run(args) -> int:
    from rlvr_jax import lab
    from rlvr_jax.lab import plots, runner, stats
    try:
        finding = lab.load(args.name)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.seeds < 0:
        print("error: --seeds must be >= 1", file=sys.stderr)
        return 2
    if args.quick:
        finding = finding.quick_version()
    out = os.path.join(args.out, finding.name)
    work = args.work or os.path.join(out, "work")
    os.makedirs(out, exist_ok=True)
    _compilation_cache(os.path.join(work, "_jax_cache"))
    t0 = time.time()
    results = runner.run_finding(finding, work, seeds=args.seeds or None)
    summary = stats.summarize(finding, results)
    summary["quick"] = bool(args.quick)
    summary["wall_s_this_invocation"] = round(time.time() - t0, 1)
    summary["wall_s_all_pairs"] = round(sum(w for a in summary["arms"].values()
                                            for w in a["wall_s"]), 1)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(stats.rounded(summary), f, indent=1)
    plots.write_plots(summary, out, finding.reference_arm)
    print(f"[{finding.name}] verdict: {summary['verdict']}")
    for c in summary["checks"]:
        d = c["difference"]
        print(f"  {c['metric']}: {c['a']} - {c['b']} = {d['mean']:+.3f} "
              f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] (expect {c['expect']}"
              f"{' ' + str(c['margin']) if c['margin'] else ''}): {c['outcome']}")
    print(f"results: {os.path.join(out, 'results.json')}")
    return 0


def _compilation_cache(path: str) -> None:
    """JAX's persistent compilation cache: the same arm at another seed compiles the same
    programs, which are then read back instead of compiled again."""
    import jax
    if jax.config.jax_compilation_cache_dir:  # Set already (the test suite's): keep it.
        return
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return {"list": lambda a: list_findings(), "run": run, "report": report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
