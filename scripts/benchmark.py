"""Benchmarks: sampler throughput, policy-update MFU, a whole RL step, decode bytes, host
scoring; one JSON object each.

    python scripts/benchmark.py sample --preset qwen2.5-0.5b --dtype bfloat16 \
        --prompts 32 --samples 8 --prompt-len 128 --new-tokens 512 --force-length
    python scripts/benchmark.py train --preset qwen2.5-0.5b --dtype bfloat16 --remat dots_no_batch \
        --prompts 32 --samples 8 --prompt-len 128 --new-tokens 512 --microbatches 8
    python scripts/benchmark.py train --lengths real --compile-only --preset qwen2.5-0.5b \
        --dtype bfloat16 --prompts 32 --samples 8 --prompt-len 128 --new-tokens 512 \
        --pack-length 640 --pack-rows 8   # padded fraction, FLOPs overhead, f32 vocab dots
    python scripts/benchmark.py rl_step --preset qwen2.5-0.5b --dtype bfloat16 \
        --prompts 32 --samples 8 --prompt-len 128 --new-tokens 512 --microbatches 8
    python scripts/benchmark.py decode_cost   # bytes of a decode step and a rollout (on CPU)
    python scripts/benchmark.py scoring --verifier task|math|math_verify --count 1024 \
        --workers 0 1 2

See rlvr_jax/perf/benchmarks.py for what each measures and docs/performance.md for results.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlvr_jax.perf.benchmarks import main  # noqa: E402

if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
