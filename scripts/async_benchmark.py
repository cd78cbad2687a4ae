"""RL steps per second, synchronous vs asynchronous rollouts (docs/async.md), as JSON.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        python scripts/async_benchmark.py --config configs/async_arithmetic.py --steps 40

Runs the config's RL loop once per mode, with the same seed, a shorter warm-up
(--sft-steps) and no periodic evaluation, and reports per mode the median of the RL
steps' `perf/step_time_s` (the first --skip steps, which compile, left out), steps/s, and
the weight sync's mean seconds and bytes. Modes:

  sync       rl.max_staleness=0, mesh.sampler_devices=0 on one device, no correction
             (rl.proximal=none, rl.tis_cap=0): today's one program, the quickstart's
  split      rl.max_staleness=0 on split meshes: sample on device 1, then train on device 0
             (the same programs as async1, no overlap: the overlap is split / async1)
  async1     rl.max_staleness=1, mesh.sampler_devices=1
  async2     rl.max_staleness=2, mesh.sampler_devices=1

--overlap instead times one compute-bound program (60 chained 256×256 matmuls) on device 0
alone, on device 1 alone, and dispatched on both at once: whether this backend runs two
devices' programs at the same time (JAX's asynchronous dispatch, no threads).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("RLVR_JAX_NO_PROGRESS", "1")

MODES = {"sync": (0, 0, 1), "split": (0, 1, 2), "async1": (1, 1, 2), "async2": (2, 1, 2)}


def measure(config, mode: str, skip: int) -> list:
    """The RL step records of one run of `config` in `mode` (`MODES`: staleness, sampler
    devices, devices), the first `skip` left out."""
    from rlvr_jax.train import loop
    from rlvr_jax.train.logging import read_metrics
    k, s, n = MODES[mode]
    config = config.copy_and_resolve_references()
    config.rl.max_staleness, config.mesh.sampler_devices, config.mesh.num_devices = k, s, n
    if mode == "sync":
        config.rl.proximal, config.rl.tis_cap = "none", 0.0
    with tempfile.TemporaryDirectory() as workdir:
        loop.run(config, workdir, progress=False)
        return [r for r in read_metrics(os.path.join(workdir, "metrics.jsonl"))
                if r["phase"] == "rl"][skip:]


def summarize(rl: list) -> dict:
    """Median step time, steps/s, quartiles and the weight sync of RL step records."""
    import numpy as np
    times = np.array([r["perf/step_time_s"] for r in rl])
    out = {"steps_measured": len(times), "median_step_s": float(np.median(times)),
           "steps_per_s": float(1.0 / np.median(times)),
           "step_s_quartiles": [float(q) for q in np.percentile(times, [25, 75])]}
    if "async/weight_sync_s" in rl[0]:
        out["weight_sync_s"] = float(np.mean([r["async/weight_sync_s"] for r in rl]))
        out["weight_sync_bytes"] = float(rl[-1]["async/weight_sync_bytes"])
    return out


def overlap_check(repeats: int = 5) -> dict:
    """Median seconds of the program on device 0, on device 1, and on both at once."""
    import time
    import jax
    import jax.numpy as jnp
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 60, lambda i, y: jnp.tanh(y @ y), x))
    xs = [jax.device_put(jnp.full((256, 256), 0.01), d) for d in jax.devices()[:2]]
    jax.block_until_ready([f(x) for x in xs])  # Compiled for both devices.

    def median(fn):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times.append(time.perf_counter() - t0)
        return sorted(times)[repeats // 2]
    one, two = median(lambda: f(xs[0])), median(lambda: f(xs[1]))
    both = median(lambda: [f(x) for x in xs])
    return {"device0_s": one, "device1_s": two, "both_s": both, "overlap": (one + two) / both,
            "load_average": os.getloadavg()}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/async_arithmetic.py")
    p.add_argument("--steps", type=int, default=40, help="RL steps per mode")
    p.add_argument("--skip", type=int, default=5, help="first RL steps left out (compile)")
    p.add_argument("--sft-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--repeats", type=int, default=1, help="runs per mode, the modes "
                   "interleaved (a shared machine's load then falls on all of them alike)")
    p.add_argument("--overlap", action="store_true", help="only the overlap check")
    args = p.parse_args(argv)
    if args.overlap:
        result = overlap_check()
        print(json.dumps(result, indent=1))
        return result
    from rlvr_jax.train.cli import load_config_file
    config = load_config_file(args.config)
    config.seed, config.rl.steps, config.sft.steps = args.seed, args.steps, args.sft_steps
    config.eval.every, config.eval.num_prompts, config.eval.batch_size = 0, 50, 50
    config.eval.k, config.checkpoint.every, config.log_samples_every = 1, 0, 0
    result = {"config": args.config, "steps": args.steps, "sft_steps": args.sft_steps,
              "seed": args.seed, "modes": {}}
    records = {mode: [] for mode in args.modes.split(",")}
    for _ in range(args.repeats):
        for mode in records:
            records[mode] += measure(config, mode, args.skip)
            print(json.dumps({mode: summarize(records[mode])}), file=sys.stderr, flush=True)
    modes = result["modes"] = {mode: summarize(rl) for mode, rl in records.items()}
    result["load_average"] = os.getloadavg()
    if "sync" in modes and "async1" in modes:
        result["async1_over_sync"] = modes["async1"]["steps_per_s"] / modes["sync"]["steps_per_s"]
    if "split" in modes and "async1" in modes:
        result["async1_over_split"] = modes["async1"]["steps_per_s"] / modes["split"]["steps_per_s"]
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
