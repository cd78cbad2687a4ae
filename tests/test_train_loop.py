"""`scripts/train.py` on the command line (config file + `--config.x=y` overrides) and config errors.

The subprocess run uses the same small overrides as tests/test_configs.py, so with the
persistent compile cache (passed on through JAX_COMPILATION_CACHE_DIR) it reuses that
file's compiled programs.
"""
import json
import os
import subprocess
import sys

import jax
import pytest

from rlvr_jax.train import loop, rl_config
from rlvr_jax.train.config import arithmetic_config, default_config
from rlvr_jax.train.logging import read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "train.py")
QUICKSTART = os.path.join(ROOT, "configs", "quickstart.py")

SMALL_FLAGS = [
    "--config.sft.steps=2", "--config.sft.batch_size=8",
    "--config.rl.num_prompts=4", "--config.rl.num_samples=2",
    "--config.sampling.max_new_tokens=16",
    "--config.eval.num_prompts=8", "--config.eval.batch_size=8", "--config.eval.every=0",
    "--config.mesh.num_devices=1",
]


def _env():
    env = dict(os.environ)  # conftest's XLA_FLAGS / JAX_PLATFORMS carry over.
    env["RLVR_JAX_NO_PROGRESS"] = "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cache = jax.config.jax_compilation_cache_dir
    if cache:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1"
    return env


def _train(workdir, *flags, timeout=400):
    return subprocess.run(
        [sys.executable, SCRIPT, "--config", QUICKSTART, "--workdir", str(workdir), *flags],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


def test_train_script_with_overrides(tmp_path):
    workdir = tmp_path / "run"
    proc = _train(workdir, "--config.rl.steps=2", "--config.seed=3", *SMALL_FLAGS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(workdir / "config.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["rl"]["steps"] == 2 and saved["seed"] == 3
    assert saved["rl"]["num_samples"] == 2 and saved["eval"]["num_prompts"] == 8
    assert saved["rl"]["kl_coef"] == 0.0  # The file's own setting survives the overrides.
    records = read_metrics(str(workdir / "metrics.jsonl"))
    assert [r["step"] for r in records if r["phase"] == "rl"] == [1, 2]
    assert [r["step"] for r in records if r["phase"] == "eval"] == [0, 2]
    assert all("rollout/reward_mean" in r for r in records if r["phase"] == "rl")
    with open(workdir / "summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    assert set(summary) >= {"after_warmup", "after_rl"}
    assert "held-out greedy pass@1" in proc.stdout


@pytest.mark.parametrize("key,value,words", [
    ("aggregation", "foo", ("aggregation", "foo")),
    ("advantage", "ppo", ("advantage", "ppo")),
    ("policy_loss", "dpo", ("policy_loss", "dpo")),
    ("kl_kind", "k9", ("kl_kind", "k9")),
    ("epochs", 0, ("epochs",)),
])
def test_bad_rl_value_is_a_clear_value_error(key, value, words):
    config = default_config()
    setattr(config.rl, key, value)
    with pytest.raises(ValueError) as err:
        rl_config.from_config(config)
    for word in words:
        assert word in str(err.value)


def test_unknown_algorithm_is_a_value_error():
    with pytest.raises(ValueError, match="unknown algorithm 'ppo2'.*dapo"):
        default_config(algorithm="ppo2")


def test_run_rejects_a_bad_value_before_training(tmp_path, monkeypatch):
    """A typo in config.rl must stop `run` before the warm-up and evaluation, not after them.

    (Shapes as in tests/test_configs.py, so the warm-up and evaluation programs that run
    today before the error come from the compile cache.)
    """
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    config = arithmetic_config()
    config.rl.aggregation = "foo"
    config.sft.steps = 2
    config.sft.batch_size = 8
    config.eval.num_prompts = 8
    config.eval.batch_size = 8
    config.sampling.max_new_tokens = 16
    with pytest.raises(ValueError, match="aggregation.*foo"):
        loop.run(config, str(tmp_path), progress=False)
    metrics = tmp_path / "metrics.jsonl"
    assert not metrics.exists() or not read_metrics(str(metrics)), \
        "run() trained and evaluated before validating config.rl"
