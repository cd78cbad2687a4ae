"""Memory plan by compilation: per-device memory of the RL step for 7B–70B shapes.

    python scripts/memory_plan.py --out plan.jsonl                 # the default grid
    python scripts/memory_plan.py --preset qwen2.5-7b --devices 8 --rules fsdp --tensor 1 \
        --layers 2 4                                               # one point
    python scripts/memory_plan.py --here --preset qwen2.5-0.5b --layers 4 4 --prompts 8 \
        --rows 64 --prompt-len 128 --new-tokens 512 --microbatches 2   # on this backend

Each point is compiled (not run) on N fake CPU devices in its own process, at two shallow
depths, and every byte figure is extrapolated linearly per layer to the model's depth (the
full-depth compile is too slow on a small CPU machine). Logic: `rlvr_jax/memory_plan.py`.
Prints a markdown table (GiB per device) at the end.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlvr_jax import memory_plan  # noqa: E402

# (preset, devices, rules, tensor axis size, microbatches, prompts P); G = 256 / P, so every
# point samples 256 rows (P must divide over the batch shards: 64 prompts on 64-way fsdp).
DEFAULT_GRID = [
    ("qwen2.5-7b", 8, "fsdp", 1, 4, 32), ("qwen2.5-7b", 8, "fsdp_tp", 4, 4, 32),
    ("qwen2.5-7b", 64, "fsdp", 1, 4, 64), ("qwen2.5-7b", 64, "fsdp_tp", 8, 4, 32),
    ("llama3.1-8b", 8, "fsdp", 1, 4, 32), ("llama3.1-8b", 8, "fsdp_tp", 4, 4, 32),
    ("llama3.1-8b", 64, "fsdp", 1, 4, 64), ("llama3.1-8b", 64, "fsdp_tp", 8, 4, 32),
    ("llama3.1-70b", 256, "fsdp_tp", 8, 4, 32),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", help="one point instead of the default grid")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--rules", default="fsdp")
    parser.add_argument("--tensor", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--layers", type=int, nargs=2, default=(2, 4),
                        help="the two compiled depths the per-layer extrapolation uses")
    parser.add_argument("--prompts", type=int, default=32, help="P (one point)")
    parser.add_argument("--rows", type=int, default=256, help="sampled rows B = P * G")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=1024)
    parser.add_argument("--remat", default="full")
    parser.add_argument("--cache-window", type=int, default=-1,
                        help="the sampler's cache_window (-1: automatic, 0: one phase)")
    parser.add_argument("--out", default=None, help="append raw JSON lines here")
    parser.add_argument("--here", action="store_true",
                        help="one point at depth --layers[0], compiled in this process on its "
                        "own backend (e.g. the GPU cross-check), no extrapolation")
    args = parser.parse_args()
    from rlvr_jax.sampling import cache_window_setting  # Imports jax: after parsing.
    try:
        window = cache_window_setting(args.cache_window)
    except ValueError as e:
        parser.error(f"--cache-window {e}")
    if args.here:
        print(json.dumps(memory_plan.plan(
            args.preset, rules=args.rules, tensor=args.tensor, n_layers=args.layers[0],
            microbatches=args.microbatches, prompts=args.prompts,
            samples=args.rows // args.prompts, prompt_len=args.prompt_len,
            new_tokens=args.new_tokens, remat=args.remat, cache_window=window)))
        return
    grid = ([(args.preset, args.devices, args.rules, args.tensor, args.microbatches,
              args.prompts)] if args.preset else DEFAULT_GRID)
    rows = []
    for preset, devices, rules, tensor, micro, prompts in grid:
        depth = memory_plan.model_config(preset).n_layers
        points = []
        for n_layers in args.layers:
            try:
                r = memory_plan.run_in_subprocess(
                    devices, preset=preset, rules=rules, tensor=tensor, n_layers=n_layers,
                    microbatches=micro, prompts=prompts, samples=args.rows // prompts,
                    prompt_len=args.prompt_len, new_tokens=args.new_tokens, remat=args.remat,
                    cache_window=window)
            except Exception as e:  # noqa: BLE001 - report and go on with the grid.
                print(f"FAILED {preset} {devices} {rules}: {e}", flush=True)
                break
            points.append(r)
            print(json.dumps(r), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(r) + "\n")
        if len(points) == 2:
            rows.append(memory_plan.extrapolate(points[0], points[1], depth))
    print(memory_plan.TABLE_HEADER)
    for r in rows:
        print(memory_plan.format_row(r))


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
