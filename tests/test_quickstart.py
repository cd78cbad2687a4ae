"""The README's main job in miniature: warm-up then GRPO learns on CPU (a ≤60 s variant)."""
import json
import time

import numpy as np
import pytest

from rlvr_jax.train import run
from rlvr_jax.train.config import arithmetic_config


@pytest.mark.slow
def test_grpo_improves_reward_and_heldout_pass_at_1(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    config = arithmetic_config("grpo")
    config.rl.kl_coef = 0.0
    config.sft.steps = 250
    config.sft.learning_rate = 5e-3
    config.rl.steps = 60
    config.rl.learning_rate = 3e-4
    config.eval.every = 0
    config.eval.num_prompts = 200
    config.eval.batch_size = 200
    start = time.perf_counter()
    summary = run(config, str(tmp_path), progress=False)
    elapsed = time.perf_counter() - start
    before = summary["after_warmup"]["eval/pass@1"]
    after = summary["after_rl"]["eval/pass@1"]
    records = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    rewards = [r["rollout/reward_mean"] for r in records if r["phase"] == "rl"]
    early, late = np.mean(rewards[:20]), np.mean(rewards[-20:])
    print(f"pass@1 {before:.3f} -> {after:.3f}; reward {early:.3f} -> {late:.3f}; "
          f"{elapsed:.1f} s")
    assert 0.1 < before < 0.7, "the warm-up should land in a useful range"
    assert after > before + 0.05
    assert late > early + 0.03  # Sampled reward, first vs last 20 of 60 RL steps.
    assert (tmp_path / "summary.json").exists()
