"""Memory plan by compilation: per-device memory and collectives of the RL step for 7B–70B.

    python scripts/memory_plan.py --preset qwen2.5-7b --devices 8 --rules fsdp --json
    python scripts/memory_plan.py --preset qwen2.5-7b --devices 8 --json --lora-rank 16 \
        [--quantize-base nf4]                                      # LoRA / QLoRA
    python scripts/memory_plan.py --preset llama3.1-8b --devices 8 --json \
        --reward-model llama3.1-8b                   # + an 8B reward model in the step
    python scripts/memory_plan.py --preset qwen2.5-7b --devices 8 --json \
        --decode-rules tp                            # decode tensor-parallel
    python scripts/memory_plan.py --out plan.jsonl                 # the default grid
    python scripts/memory_plan.py --here --preset qwen2.5-0.5b --layers 4 4 --prompts 8 \
        --rows 64 --prompt-len 128 --new-tokens 512 --microbatches 2   # on this backend
    python scripts/memory_plan.py --here --run --program update ...   # + one run's memory_stats()

Each point is compiled (not run) on N fake CPU devices in its own process. Deeper models than
`--layers[1]` are compiled at the two `--layers` depths (in the full model's layer-loop mode)
and every byte figure and collective extrapolated per layer; `--full` compiles the full
depth instead. `--json` prints one JSON object per point with `peak_gib_per_device`, the
verdicts per accelerator (usable memory = memory × JAX's default fraction) and `collectives`
[{kind, dtype, bytes, count}] per step. Logic: `rlvr_jax/perf/memory_plan.py`.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlvr_jax.perf import memory_plan  # noqa: E402

# (preset, devices, rules, tensor axis size, prompts P); G = rows / P (P must divide over
# the batch shards: 64 prompts on 64-way fsdp).
DEFAULT_GRID = [
    ("qwen2.5-7b", 8, "fsdp", 1, 32), ("llama3.1-8b", 8, "fsdp", 1, 32),
    ("qwen2.5-7b", 16, "fsdp", 1, 32), ("llama3.1-8b", 16, "fsdp", 1, 32),
    ("qwen2.5-7b", 64, "fsdp", 1, 64), ("llama3.1-8b", 64, "fsdp", 1, 64),
    ("llama3.1-70b", 128, "fsdp_tp", 8, 32), ("llama3.1-70b", 64, "fsdp_tp", 8, 32),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", help="one point instead of the default grid")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--rules", default="fsdp")
    parser.add_argument("--tensor", type=int, default=1)
    parser.add_argument("--program", default="rl_step", choices=("rl_step", "update"))
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--layers", type=int, nargs=2, default=(2, 4),
                        help="the two compiled depths the per-layer extrapolation uses")
    parser.add_argument("--full", action="store_true", help="compile the full depth")
    parser.add_argument("--prompts", type=int, default=32, help="P (one point)")
    parser.add_argument("--rows", type=int, default=256, help="sampled rows B = P * G")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=896)
    parser.add_argument("--remat", default="full")
    parser.add_argument("--attention", default="auto",
                        help="model.attention: pallas_gpu / splash plan the GPU / TPU kernel")
    parser.add_argument("--scan-unroll", type=int, default=0,
                        help="model.scan_unroll of the run (0: unrolled up to 32 layers; 1: scanned)")
    parser.add_argument("--kl-coef", type=float, default=0.001,
                        help="> 0: with the reference model (0: policy only)")
    parser.add_argument("--advantage", default="grpo", help="gae: with a value model")
    parser.add_argument("--reference-memory", default="device",
                        choices=("device", "pinned_host"))
    parser.add_argument("--decode-rules", default="",
                        help="sampling.decode_rules of the run: the RL step decodes in that "
                        "layout (e.g. tp; \"\": the training layout)")
    parser.add_argument("--cache-window", type=int, default=-1,
                        help="the sampler's cache_window (-1: automatic, 0: one phase)")
    parser.add_argument("--lora-rank", type=int, default=0,
                        help="model.lora.rank of a LoRA run (0: full fine-tuning)")
    parser.add_argument("--lora-targets", default="all",
                        help="model.lora.targets (all, or a comma list of q,k,v,o,gate,up,down)")
    parser.add_argument("--quantize-base", default="none", choices=("none", "int8", "nf4"),
                        help="model.lora.quantize_base (QLoRA; needs --lora-rank)")
    parser.add_argument("--reward-model", default="",
                        help="a preset: a scalar reward model of that shape scored inside the "
                        "one-program step (--program rl_step)")
    parser.add_argument("--json", action="store_true",
                        help="print each point's summary (peak_gib_per_device, collectives)")
    parser.add_argument("--out", default=None, help="append the raw JSON lines here")
    parser.add_argument("--here", action="store_true",
                        help="one point at depth --layers[0], compiled in this process on its "
                        "own backend (e.g. the GPU cross-check), no extrapolation")
    parser.add_argument("--run", action="store_true",
                        help="with --here: also run the program once on zeros and report the "
                        "device's memory_stats() (peak bytes in use) beside the plan")
    args = parser.parse_args()
    if args.run and not args.here:
        parser.error("--run needs --here (it runs on this process's backend)")
    from rlvr_jax.cache_phases import cache_window_setting  # Imports jax: after parsing.
    try:
        window = cache_window_setting(args.cache_window)
    except ValueError as e:
        parser.error(f"--cache-window {e}")
    common = dict(program=args.program, prompt_len=args.prompt_len,
                  new_tokens=args.new_tokens, remat=args.remat, kl_coef=args.kl_coef,
                  advantage=args.advantage, reference_memory=args.reference_memory,
                  cache_window=window, microbatches=args.microbatches,
                  scan_unroll=args.scan_unroll, attention=args.attention,
                  lora_rank=args.lora_rank, lora_targets=args.lora_targets,
                  quantize_base=args.quantize_base, reward_model=args.reward_model,
                  decode_rules=args.decode_rules)
    if args.reward_model and args.program != "rl_step":
        parser.error("--reward-model needs --program rl_step (the split path scores it "
                     "outside the update)")
    if args.decode_rules and args.program != "rl_step":
        parser.error("--decode-rules needs --program rl_step (the update does not decode)")
    if args.quantize_base != "none" and not args.lora_rank:
        parser.error("--quantize-base needs --lora-rank > 0 (only a LoRA run's frozen base "
                     "is stored quantized)")
    if args.here:
        print(json.dumps(memory_plan.plan(
            args.preset, rules=args.rules, tensor=args.tensor, n_layers=args.layers[0],
            prompts=args.prompts, samples=args.rows // args.prompts, run=args.run, **common)))
        return
    grid = ([(args.preset, args.devices, args.rules, args.tensor, args.prompts)]
            if args.preset else DEFAULT_GRID)
    rows = []
    for preset, devices, rules, tensor, prompts in grid:
        point = dict(preset=preset, rules=rules, tensor=tensor, prompts=prompts,
                     samples=args.rows // prompts, **common)
        try:
            r = (memory_plan.run_in_subprocess(devices, **point) if args.full
                 else memory_plan.plan_deep(devices, tuple(args.layers), **point))
        except Exception as e:  # noqa: BLE001 - report and go on with the grid.
            print(f"FAILED {preset} {devices} {rules}: {e}", file=sys.stderr, flush=True)
            continue
        rows.append(r)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(r) + "\n")
        print(json.dumps(memory_plan.summary(r) if args.json else r), flush=True)
    if not args.json:
        print(memory_plan.TABLE_HEADER)
        for r in rows:
            print(memory_plan.format_row(r))


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
