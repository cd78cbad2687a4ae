"""`scripts/benchmark.py sample` runs on the tiny preset and prints the documented JSON."""
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLE_KEYS = {"benchmark", "preset", "dtype", "prompts", "samples", "sequences", "prompt_len",
               "new_tokens", "force_length", "generated_tokens", "tokens_per_s", "total_s",
               "prefill_ms", "decode_step_ms", "device_kind", "platform", "jax_version", "compile_s",
               "cache_window"}


def test_sample_benchmark_prints_json():
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(jax.config.jax_compilation_cache_dir or ""))
    cmd = [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "sample", "--preset", "tiny",
           "--prompts", "4", "--samples", "2", "--prompt-len", "8", "--new-tokens", "16",
           "--force-length", "--repeats", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert SAMPLE_KEYS <= set(result)
    assert result["sequences"] == 8
    assert result["generated_tokens"] == 4 * 2 * 16  # --force-length: exactly N per row.
    assert result["tokens_per_s"] > 0 and result["total_s"] > 0
    assert result["prefill_ms"] > 0 and result["decode_step_ms"] >= 0
    assert result["platform"] == "cpu"


def test_benchmark_requires_a_subcommand():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "sample" in proc.stderr


def _load_benchmark_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("benchmark", ROOT / "scripts" / "benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_and_rl_step_benchmarks_print_json(capsys):
    benchmark = _load_benchmark_module()
    benchmark.main(["train", "--preset", "tiny", "--repeats", "1", "--microbatches", "2"])
    train = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert train["benchmark"] == "train" and train["sequences"] == 8
    assert train["tokens_per_s"] > 0 and 0 < train["mfu_vs_799"] < 1
    assert train["mfu_vs_989"] < train["mfu_vs_799"]
    benchmark.main(["rl_step", "--preset", "tiny", "--repeats", "1", "--microbatches", "2"])
    step = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert step["generated_tokens"] == 4 * 2 * 16
    assert step["step_s"] >= step["sampling_s"] + step["update_s"] > 0


def test_decode_cost_benchmark_prints_the_step_and_the_rollout(capsys):
    benchmark = _load_benchmark_module()
    benchmark.main(["decode_cost", "--preset", "tiny", "--prompts", "2", "--samples", "2",
                    "--prompt-len", "8", "--new-tokens", "24", "--step", "8",
                    "--cache-window", "8"])
    cost = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cost["benchmark"] == "decode_cost" and cost["cache_slots"] == 8 + 24 - 1
    assert 1 < cost["ratio_gather_rows"] <= cost["ratio"]
    rollout = cost["rollout"]
    assert rollout["cache_window"] == 8 and [s for s, _ in rollout["phases"]] == [16, 24, 31]
    assert rollout["bytes_per_step"] < cost["bytes_accessed"]  # Fewer unfilled slots read.


def test_real_length_draws_follow_the_recipe():
    from rlvr_jax import workloads
    n = 512
    c = workloads.completion_lengths(256, n, seed=0)
    z = np.random.default_rng(0).standard_normal(256)  # The recipe, written out independently.
    expected = np.minimum(n, np.maximum(1, np.round(np.exp(np.log(0.35 * n) - 0.5 + z))))
    np.testing.assert_array_equal(c, expected)
    p = workloads.prompt_lengths(32, 128, seed=0)
    assert p.dtype == np.int32 and p.min() >= 32 and p.max() <= 128
    np.testing.assert_array_equal(p, workloads.prompt_lengths(32, 128, seed=0))
    with pytest.raises(ValueError, match="new_tokens"):
        workloads.completion_lengths(4, 0)
