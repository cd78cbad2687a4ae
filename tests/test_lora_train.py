"""A LoRA run end to end: PPO (value model) with a KL term on the split (host-scored) path,
adapter-only checkpoints with the base saved once, exact resume, and the exports.

One tiny run of 3 RL steps after a 2-step full-weight warm-up; a copy of it with its last
checkpoints removed is resumed and must end bitwise equal (same programs, same inputs).
"""
import importlib.util
import json
import os
import shutil

import jax
import numpy as np
import optax
import pytest

from rlvr_jax.models import lora, peft_format
from rlvr_jax.train import adapters, loop
from rlvr_jax.train.checkpoint import Checkpointer, load_run
from rlvr_jax.train.config import default_config
from rlvr_jax.train.logging import read_metrics

from tests import numerics


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")


def _config():
    config = default_config("ppo")  # A value model (GAE) beside the LoRA policy.
    config.mesh.num_devices = 1
    config.data.max_prompt_len = 10
    config.sampling.max_new_tokens = 12
    config.reward.verifier = "task"  # The split path: sample, score on the host, update.
    config.reward.num_workers = 0
    config.rl.kl_coef = 1e-2         # The reference: the base with the adapters off.
    config.rl.entropy_coef = 1e-3    # Non-zero gradients although nothing is solved.
    config.rl.learning_rate = 1e-2
    config.sft.steps = 2             # The warm-up trains the full weights ...
    config.sft.batch_size = 4
    config.model.lora.rank = 2       # ... RL the adapters.
    config.model.lora.targets = "q,v,down"
    config.rl.steps = 3
    config.rl.num_prompts = 2
    config.rl.num_samples = 2
    config.eval.num_prompts = 4
    config.eval.batch_size = 4
    config.eval.every = 0
    config.checkpoint.every = 1
    config.checkpoint.keep = 10
    return config


def _comparable(path):
    return [(r["phase"], r["step"], {k: v for k, v in r.items()
                                     if k != "time" and not k.startswith("perf/")})
            for r in read_metrics(path)]


@pytest.mark.slow  # Two runs (warm-up, PPO on the split path, evaluations): ~95 s under load.
def test_lora_run_checkpoints_resumes_exactly_and_exports(tmp_path, tok):
    config = _config()
    full_dir, workdir = str(tmp_path / "full"), str(tmp_path / "resumed")
    full = loop.run(config, full_dir, progress=False)
    state = full["state"]
    ckpts = os.path.join(full_dir, "checkpoints")
    assert Checkpointer(ckpts).all_steps() == (0, 1, 2, 3)

    # Checkpoints hold the adapters (and their AdamW state) only; the base is saved once.
    saved = Checkpointer(ckpts).metadata()
    assert jax.tree.structure(saved["params"]) == jax.tree.structure(lora.split(state.params)[0])
    mu = optax.tree_utils.tree_get(state.opt_state, "mu")
    assert jax.tree.structure(mu) == jax.tree.structure(lora.split(state.params)[0])
    assert state.ref_params is None and state.value_params is not None
    with open(os.path.join(full_dir, adapters.BASE_JSON)) as f:
        assert json.load(f)["source"] == "workdir"  # Trained by the warm-up.
    base = adapters.read_base(full_dir, None)
    for got, want in zip(jax.tree.leaves(lora.base_of(state.params)), jax.tree.leaves(base)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))  # Frozen in RL.
    rl = [m for p, _, m in _comparable(os.path.join(full_dir, "metrics.jsonl")) if p == "rl"]
    assert all(m["train/update_norm"] > 0 for m in rl) and "loss/kl" in rl[0]

    # Resumed from step 1: the same lines and the same final state, bitwise.
    shutil.copytree(full_dir, workdir)
    for step in ("2", "3"):
        shutil.rmtree(os.path.join(workdir, "checkpoints", step))
    os.remove(os.path.join(workdir, "summary.json"))
    resumed = loop.run(config, workdir, progress=False)
    assert _comparable(os.path.join(workdir, "metrics.jsonl")) == \
        _comparable(os.path.join(full_dir, "metrics.jsonl"))
    for got, want in zip(jax.tree.leaves(resumed["state"]), jax.tree.leaves(state)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

    # Exports: PEFT adapter + HF base; the merged model; evaluation's loader.
    spec = importlib.util.spec_from_file_location("convert_checkpoint", os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
        "convert_checkpoint.py"))
    convert_checkpoint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert_checkpoint)
    out = str(tmp_path / "peft")
    convert_checkpoint.main(["orbax-to-peft", full_dir, out])
    model_config, params = load_run(full_dir, tokenizer=tok)
    back = peft_format.load_peft(os.path.join(out, "adapter"), model_config)
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(lora.split(state.params)[0])):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(SystemExit):  # The run's base is not an HF directory.
        convert_checkpoint.main(["orbax-to-peft", full_dir, str(tmp_path / "x"), "--no-base"])
    convert_checkpoint.main(["orbax-to-hf", full_dir, str(tmp_path / "merged")])
    from rlvr_jax.models import hf, transformer
    merged_config, merged = hf.load_hf_checkpoint(tmp_path / "merged")
    tokens = np.arange(12, dtype=np.int32).reshape(2, 6) % model_config.vocab_size
    want = transformer.jit_forward(params, tokens, None, config=model_config)
    got = transformer.jit_forward(merged, tokens, None, config=merged_config)
    numerics.assert_forward_close(got, want, model_config, 6,
                                  extra=model_config.n_layers * 4 * (model_config.d_ff + 3))
