"""`scripts/benchmark.py train --compile-only` (`rlvr_jax.perf.update_cost`): the real-length
workload's padded fraction, FLOPs overhead and float32 vocabulary dots, on the tiny model."""
import json

import numpy as np

from rlvr_jax import workloads
from rlvr_jax.perf import benchmarks, update_cost
from rlvr_jax.models import presets

ARGS = ["train", "--compile-only", "--preset", "tiny", "--dtype", "bfloat16", "--prompts", "4",
        "--samples", "2", "--prompt-len", "16", "--new-tokens", "32"]


def _run(capsys, *extra):
    benchmarks.main(ARGS + list(extra))
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_real_lengths_packed(capsys):
    out = _run(capsys, "--lengths", "real", "--pack-length", "64", "--pack-rows", "2")
    real = int(np.sum(np.repeat(workloads.prompt_lengths(4, 16), 2))
               + np.sum(workloads.completion_lengths(8, 32)))
    assert out["real_tokens"] == real and out["f32_vocab_dots"] == 0
    assert out["processed_tokens"] == out["micro_trips"] * 2 * 64
    assert out["padded_fraction"] == 1 - real / out["processed_tokens"]
    assert out["flops_extrapolated"] is False and out["flops_overhead"] > 0


def test_every_trip_of_the_packed_loop_is_counted(capsys):
    """Forced lengths, one sequence per row of 48: 8 rows in one trip of 8 or in four trips
    of 2 do the same model work; XLA counts the loop body once, the benchmark the other three.
    What may differ, per extra trip: work XLA charges per parameter on a body's gradient
    outputs (zero-fill, accumulation, the embedding's scatter-add, casts: at most 8 flops per
    parameter) and the [b, N] scatter-back and masks (a few per completion slot) — far less
    than one trip's model work, which a miscount would add or lose."""
    one = _run(capsys, "--pack-length", "48", "--pack-rows", "8")
    four = _run(capsys, "--pack-length", "48", "--pack-rows", "2")
    assert (one["micro_trips"], four["micro_trips"]) == (1, 4)
    slack = 3 * (8 * presets.get("tiny").num_params() + 64 * 8 * 32)
    assert abs(one["update_flops"] - four["update_flops"]) <= slack
    assert one["update_flops"] / 4 > 20 * slack  # One trip's work dwarfs the slack.


def test_f32_vocab_dots_reads_operand_types():
    line = ('%3 = stablehlo.dot_general %1, %2, contracting_dims = [2] x [0] : '
            '(tensor<2x4x{a}>, tensor<8x151936x{b}>) -> tensor<2x4x151936xf32>')
    count = lambda a, b: update_cost.f32_vocab_dots(line.format(a=a, b=b), 151936)  # noqa: E731
    assert (count("f32", "f32"), count("bf16", "bf16"), count("f32", "bf16")) == (1, 0, 0)
    assert update_cost.f32_vocab_dots(line.format(a="f32", b="f32"), 1000) == 0


def test_timed_train_at_real_lengths_packed(capsys):
    """The timed benchmark runs the packed update on a real-length rollout."""
    benchmarks.main(["train", "--preset", "tiny", "--repeats", "1", "--lengths", "real",
                     "--pack-length", "24", "--pack-rows", "2"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["lengths"] == "real" and out["pack_length"] == 24 and out["tokens_per_s"] > 0
