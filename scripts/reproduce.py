"""The reproduction lab: published claims re-tested at small scale, several seeds per arm.

    python scripts/reproduce.py list
    python scripts/reproduce.py run NAME [--seeds N] [--quick] [--out DIR] [--work DIR]
    python scripts/reproduce.py report NAME [--out DIR] [--write]   # tables and verdicts
    python scripts/reproduce.py audit NAME   # the static checks of its arms
    python scripts/reproduce.py eval-cost NAME --num-samples 1024   # time one evaluation

`run` first audits the finding's arms (`rlvr_jax/lab/audit.py`; a check whose arms would
train identically is refused unless --allow-untestable), then trains every arm x seed of
configs/repro/NAME.py (each seed's warm-up once, shared by all its arms), evaluates pass@k
on held-out prompts, and writes DIR/NAME/results.json (per seed, mean, interval and IQM per
arm; paired differences; the pre-registered, v1 and v2 verdicts) and, with the `viz` extra,
PNG plots. Without --seeds it follows the finding's seed schedule (a later look only when
the v2 verdict is inconclusive). Finished arm x seed pairs (in --work, default
DIR/NAME/work) are skipped, so an interrupted run continues where it stopped. `--quick` is
a seconds-long smoke run of the pipeline (tiny warm-up, 2 RL steps, 8 prompts; not a
measurement). `report` re-judges the stored per-seed numbers with the current spec
(--write stores the verdicts back into results.json). `eval-cost` times one pair's held-out
evaluation (seed 0's warm-up, trained in --work if missing) at another sample count,
printing JSON: what a larger k would cost before a run is planned. See docs/findings.md.
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
    run.add_argument("--allow-untestable", action="store_true", help="run a finding whose "
                     "static check refuses a check (that check is judged not testable)")
    rep = sub.add_parser("report", help="markdown tables of OUT/NAME/results.json")
    rep.add_argument("name")
    rep.add_argument("--out", default="runs/findings")
    rep.add_argument("--write", action="store_true", help="store the re-judged verdicts in "
                     "results.json")
    aud = sub.add_parser("audit", help="the static checks of a finding's arms")
    aud.add_argument("name")
    cost = sub.add_parser("eval-cost", help="time one pair's evaluation at N samples")
    cost.add_argument("name")
    cost.add_argument("--num-samples", type=int, required=True)
    cost.add_argument("--num-prompts", type=int, default=0, help="default: the finding's")
    cost.add_argument("--batch-size", type=int, default=8, help="prompts per call")
    cost.add_argument("--work", default="runs/findings/_eval_cost")
    return p


def _load(name: str):
    from rlvr_jax import lab
    try:
        return lab.load(name)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def report(args) -> int:
    from rlvr_jax.lab import audit, stats, verdict
    from rlvr_jax.lab import report as report_lib
    path = os.path.join(args.out, args.name, "results.json")
    if not os.path.exists(path):
        print(f"error: no {path}; run `reproduce.py run {args.name} --out {args.out}` first",
              file=sys.stderr)
        return 2
    finding = _load(args.name)
    if finding is None:
        return 2
    with open(path) as f:
        summary = json.load(f)
    if summary.get("quick"):
        finding = finding.quick_version()
    verdict.attach(finding, summary, audit.audit(finding))
    if args.write:
        with open(path, "w") as f:
            json.dump(stats.rounded(summary), f, indent=1)
    print(report_lib.markdown(summary), end="")
    return 0


def audit_finding(args) -> int:
    from rlvr_jax.lab import audit
    finding = _load(args.name)
    if finding is None:
        return 2
    problems = audit.audit(finding)
    for p in problems:
        c = finding.checks[p.check]
        print(f"{p.kind}: check {p.check + 1} ({c.metric}: {c.a} − {c.b}): {p.message}")
    print(f"[{finding.name}] {len(problems)} problem(s)")
    return 0


def eval_cost(args) -> int:
    """Times the held-out evaluation of seed 0's warm-up (the finding's prompts, or the first
    --num-prompts of them) at --num-samples samples per prompt: once with compilation, once
    compiled. Prints one JSON line."""
    import dataclasses
    from rlvr_jax.lab import WARMUP, heldout, runner
    finding = _load(args.name)
    if finding is None:
        return 2
    if args.num_samples < 1 or args.batch_size < 1:
        print("error: --num-samples and --batch-size must be >= 1", file=sys.stderr)
        return 2
    ks = tuple(k for k in (1, 4, 16, 64, 256, 1024, args.num_samples) if k <= args.num_samples)
    spec = dataclasses.replace(finding.eval, num_samples=args.num_samples,
                               ks=tuple(sorted(set(ks))), batch_size=args.batch_size)
    config = runner.arm_config(finding, WARMUP if WARMUP in finding.arms else
                               next(iter(finding.arms)), 0)
    _compilation_cache(os.path.join(args.work, "_jax_cache"))
    r = runner._setup(config, os.path.join(args.work, "_eval_cost_run"))
    params, _ = runner.warmup_params(r, args.work, lambda s: print(s, file=sys.stderr),
                                     finding.warmup)
    examples = (heldout.whole_test_split(config) if spec.prompts == "all"
                else r.evaluator.data.examples)
    examples = examples[:args.num_prompts or len(examples)]
    ev = heldout.evaluator_for(r, examples, batch_size=args.batch_size,
                               temperature=spec.temperature)
    seconds = []
    for _ in range(2):
        t0 = time.time()
        per = heldout.per_prompt(ev, params, spec, 0)
        seconds.append(round(time.time() - t0, 1))
    print(json.dumps({"finding": finding.name, "num_prompts": len(examples),
                      "num_samples": args.num_samples, "batch_size": args.batch_size,
                      "seconds_first": seconds[0], "seconds_compiled": seconds[1],
                      f"pass@{args.num_samples}": round(float(per[f"pass@{args.num_samples}"]
                                                              .mean()), 4)}))
    return 0


def list_findings() -> int:
    from rlvr_jax import lab
    for name in lab.names():
        f = lab.load(name)
        print(f"{name:17s} {len(f.arms)} arms x {f.seeds} seeds  \"{f.paper}\"")
    return 0


def run(args) -> int:
    from rlvr_jax.lab import audit, runner, stats, verdict
    finding = _load(args.name)
    if finding is None:
        return 2
    if args.seeds < 0:
        print("error: --seeds must be >= 1", file=sys.stderr)
        return 2
    if args.quick:
        finding = finding.quick_version()
    problems = audit.audit(finding)
    refused = [p for p in problems if p.kind == "refuse"]
    for p in problems:
        print(f"[{finding.name}] static check {p.kind}, check {p.check + 1}: {p.message}")
    if refused and not args.allow_untestable:
        print(f"error: the static check refuses {len(refused)} check(s) of {finding.name} "
              f"(see above); pass --allow-untestable to run it anyway", file=sys.stderr)
        return 2
    out = os.path.join(args.out, finding.name)
    work = args.work or os.path.join(out, "work")
    os.makedirs(out, exist_ok=True)
    _compilation_cache(os.path.join(work, "_jax_cache"))
    t0 = time.time()
    seeds = args.seeds or finding.stages[0]
    while True:
        results = runner.run_finding(finding, work, seeds=seeds)
        summary = verdict.attach(finding, stats.summarize(finding, results), problems)
        nxt = None if args.seeds else summary["v2"]["next_stage"]
        if nxt is None:
            break
        print(f"[{finding.name}] v2 inconclusive at {seeds} seeds: the schedule's next look, "
              f"{nxt} seeds")
        seeds = nxt
    summary["quick"] = bool(args.quick)
    summary["wall_s_this_invocation"] = round(time.time() - t0, 1)
    summary["wall_s_all_pairs"] = round(sum(w for a in summary["arms"].values()
                                            for w in a["wall_s"]), 1)
    path = os.path.join(out, "results.json")
    with open(path, "w") as f:
        json.dump(stats.rounded(summary), f, indent=1)
    _print_verdicts(finding.name, summary)
    print(f"results: {path}")
    _plots(summary, out, finding.reference_arm)
    return 0


def _print_verdicts(name: str, summary) -> None:
    v2, pre = summary["v2"], summary["preregistered"]
    print(f"[{name}] pre-registered verdict: {pre['verdict']} ({pre['seeds']} seeds); "
          f"v1: {summary['verdict']}; v2: {v2['verdict']} ({v2['reason']})")
    for c in v2["checks"]:
        print(f"  {c['metric']}: {c['a']} - {c['b']} = {c['mean']:+.3f} "
              f"[{c['t95'][0]:+.3f}, {c['t95'][1]:+.3f}] (expect {c['expect']}, m {c['m']}): "
              f"{c['outcome']}")


def _plots(summary, out: str, reference: str) -> None:
    """passk.png / curves.png, or a note when matplotlib (the `viz` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plots skipped: they need the viz extra (pip install 'rlvr_jax[viz]'); "
              "results.json and the verdicts are written")
        return
    from rlvr_jax.lab import plots
    plots.write_plots(summary, out, reference)


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
    return {"list": lambda a: list_findings(), "run": run, "report": report,
            "audit": audit_finding, "eval-cost": eval_cost}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
