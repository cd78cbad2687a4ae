"""Code-reward throughput: completions/s scored in the sandbox, serial vs pool vs batch.

    python benchmarks/code_rewards.py --count 128 --repeats 3

Workload: `count` completions of the program-synthesis task (`rlvr_jax/tasks/synthesis.py`,
4 hidden tests each), half right and half wrong, every program distinct within and across
timed calls (so neither the in-batch dedupe nor the per-process cache helps), plus one
"grouped" workload: GRPO-like groups of 8 completions per prompt of which 6 are the same
text (what a policy that has learned a prompt writes), where the dedupe does help.

Modes (median of `repeats` timed calls after one warm call that starts the sandbox server
or the pool's workers; start-up reported apart):
  serial   `code_reward` one completion after another in this process (`reward.num_workers=0`)
  pool     `HostScorer(code_component, num_workers=2)` (the trainer's default host scoring)
  batch    `code_rewards(..., parallel=2)`: one call, the server runs 2 programs at once
Prints one JSON line.
"""
import argparse
import json
import statistics
import time


def workload(count: int, salt: int, grouped: bool):
    """(texts [count], examples [count]); programs distinct per `salt` unless `grouped`."""
    from rlvr_jax import tasks
    task = tasks.get("synthesis")
    if grouped:
        exs = task.generate(count // 8, seed=salt)
        examples = [ex for ex in exs for _ in range(8)]
        texts = [ex.solution if j < 6 else f"#### x*{ex.meta['slope'] + j}+{salt}"
                 for ex in exs for j in range(8)]
        return texts, examples
    examples = task.generate(count, seed=0)
    texts = []
    for i, ex in enumerate(examples):
        a, b = ex.meta["slope"], ex.meta["intercept"]
        slope = a if i % 2 else a + 1  # half wrong
        texts.append(f"#### x*{slope}+{b}+0*{salt * count + i}")  # a distinct program
    return texts, examples


def timed(fn, make, repeats):
    """(startup_s, median seconds per call) of fn(texts, examples) on fresh workloads."""
    t0 = time.perf_counter()
    fn(*make(10_000))
    startup = time.perf_counter() - t0
    times = []
    for r in range(repeats):
        texts, examples = make(r + 1)
        t0 = time.perf_counter()
        fn(texts, examples)
        times.append(time.perf_counter() - t0)
    return startup, statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["serial", "pool", "batch"])
    args = parser.parse_args()
    from rlvr_jax.rewards import code as rc
    from rlvr_jax.scoring import host_reward as components
    from rlvr_jax.scoring import HostScorer

    def serial(texts, examples):
        return [components.code_component(t, ex) for t, ex in zip(texts, examples)]

    def batch(texts, examples):
        return rc.code_rewards(texts, [components.code_tests(ex) for ex in examples],
                               parallel=2)

    out = {"benchmark": "code_rewards", "completions": args.count}
    for m, mode in enumerate(args.modes):
        pool = HostScorer(components.code_component, num_workers=2) if mode == "pool" else None
        fn = {"serial": serial, "batch": batch, "pool": pool}[mode]
        for grouped in (False, True):
            name = mode + ("_grouped" if grouped else "")
            # Salts differ per mode: no mode reads another's cached results.
            startup, sec = timed(fn, lambda s: workload(args.count, s + 100_000 * (m + 1), grouped),
                                 args.repeats)
            out[f"{name}_per_s"] = round(args.count / sec, 1)
            out[f"{name}_ms_per_completion"] = round(1000 * sec / args.count, 2)
            out[f"{name}_startup_s"] = round(startup, 3)
        if pool is not None:
            pool.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
