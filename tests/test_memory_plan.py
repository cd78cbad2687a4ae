"""Tests for rlvr_jax.perf.memory_plan: its bookkeeping, and the plan of a LoRA / QLoRA run.

The plan at real shapes takes minutes per point on 2 CPU cores, so it is exercised by
`scripts/memory_plan.py` (docs/performance.md); here the `tiny` preset's update is compiled
on the 8 fake devices of conftest (full fine-tuning and QLoRA, a few seconds each).
"""
import functools

import jax
import pytest

from rlvr_jax import models
from rlvr_jax.models import lora, presets
from rlvr_jax.perf import memory_plan

# A workload every batch and weight axis of `tiny` (at 1 layer) divides over 8 devices.
TINY = dict(program="update", n_layers=1, prompts=8, samples=2, prompt_len=8, new_tokens=8,
            microbatches=2, logprob_chunk=4, kl_coef=0.001)


@functools.lru_cache(maxsize=None)
def _tiny_plan(**lora_kw):
    return memory_plan.plan("tiny", **TINY, **lora_kw)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs the 8 fake devices of conftest")
def test_plan_of_a_qlora_run_has_adapter_state_and_no_reference_copy():
    full, qlora = _tiny_plan(), _tiny_plan(lora_rank=4, quantize_base="nf4")
    mc = presets.get("tiny", n_layers=1).replace(lora_rank=4, lora_alpha=8.0,
                                               lora_targets=lora.TARGETS)
    # Counted here from the trees a run initialises (the plan counts from the configs).
    count = lambda tree: sum(x.size for x in jax.tree.leaves(tree))  # noqa: E731
    key = jax.random.PRNGKey(0)
    assert qlora["trainable_params"] == count(
        jax.eval_shape(lambda: lora.init_adapters(mc, key)))
    assert full["trainable_params"] == full["params"] == count(
        jax.eval_shape(lambda: models.init_params(mc.replace(lora_rank=0), key)))
    # The reference of a LoRA run is its base with the adapters off: no copy (a KL term is on).
    assert full["ref_params_bytes"] > 0 and qlora["ref_params_bytes"] == 0
    # AdamW holds mu and nu of the trainable part only (+ the same scalar step counts).
    assert (qlora["opt_state_bytes"] - 2 * qlora["trainable_bytes"]
            == full["opt_state_bytes"] - 2 * full["trainable_bytes"] >= 0)
    assert full["trainable_bytes"] == full["params_bytes"]
    assert 0 < qlora["trainable_bytes"] < qlora["params_bytes"]
    # The nf4 base: 0.5 + 4/64 bytes for each kernel parameter instead of 4; the compiled
    # program's arguments (the donated state and the batch) shrink with it.
    assert qlora["params_bytes"] < full["params_bytes"]
    assert qlora["argument_size_in_bytes"] < full["argument_size_in_bytes"]
    for r in (full, qlora):
        assert r["peak_bytes"] >= r["argument_size_in_bytes"] + r["temp_size_in_bytes"] > 0
    head = memory_plan.summary(qlora)
    assert head["lora_rank"] == 4 and head["quantize_base"] == "nf4"
    assert head["gib_per_device"]["reference"] == 0 and head["collectives"]


def test_quantized_base_needs_lora():
    with pytest.raises(ValueError, match="needs LoRA"):
        memory_plan.plan("tiny", **TINY, quantize_base="int8")


def test_per_device_bytes_follow_the_sharding():
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    n = jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("fsdp",))
    shapes = {"a": jax.ShapeDtypeStruct((8 * n, 3), jnp.float32),
              "b": jax.ShapeDtypeStruct((5,), jnp.bfloat16)}
    shardings = {"a": NamedSharding(mesh, PartitionSpec("fsdp")),
                 "b": NamedSharding(mesh, PartitionSpec())}
    assert memory_plan._per_device_bytes(shapes, shardings) == 8 * 3 * 4 + 5 * 2


def test_extrapolate_is_linear_per_layer():
    a = {"n_layers": 2, "x_bytes": 100, "mesh": {"fsdp": 1}, "name": "m"}
    b = {"n_layers": 4, "x_bytes": 140, "mesh": {"fsdp": 1}, "name": "m"}
    out = memory_plan.extrapolate(a, b, 10)
    assert out["x_bytes"] == 260 and out["n_layers"] == 10
    assert out["extrapolated_from"] == [2, 4] and out["name"] == "m"


@pytest.mark.skipif(jax.device_count() < 8, reason="needs the 8 fake devices of conftest")
def test_plan_of_the_rl_step_holds_a_reward_model():
    """A reward model in the one-program step: its frozen parameters are in the state (their
    bytes per device as the rules shard them) and in the program's arguments; the split
    path's update refuses it (the reward model is scored outside the update)."""
    from rlvr_jax import sharding
    from rlvr_jax.models import reward_model as rm_lib
    from rlvr_jax.train import reference
    step = dict(TINY, program="rl_step")
    without = memory_plan.plan("tiny", **step)
    with_rm = memory_plan.plan("tiny", **step, reward_model="tiny")
    assert without["reward_params_bytes"] == 0
    config = presets.get("tiny", n_layers=1, dtype="bfloat16")  # The plan's compute dtype.
    stored = rm_lib.reward_param_shapes(config, 1)
    held = jax.eval_shape(lambda p: reference.frozen_scorer_params(p, config), stored)
    mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 1})
    shardings = sharding.logical_to_mesh_sharding(rm_lib.reward_logical_axes(config), mesh,
                                                  sharding.get_rules("fsdp"), stored)
    expected = memory_plan._per_device_bytes(held, shardings)
    assert with_rm["reward_params_bytes"] == expected > 0
    # Held frozen in bf16 (trunk; norm scales and the score head float32): about half the
    # float32 bytes it is stored in.
    assert expected < 0.6 * memory_plan._per_device_bytes(stored, shardings)
    # The reward model's parameters are arguments of the step: exactly their bytes more.
    assert (with_rm["argument_size_in_bytes"] - without["argument_size_in_bytes"]) == expected
    headline = memory_plan.summary(with_rm)  # GiB to 3 decimals: 0 for `tiny`.
    assert headline["reward_model"] == "tiny" and "reward_model" in headline["gib_per_device"]
    with pytest.raises(ValueError, match="program='rl_step'"):
        memory_plan.plan("tiny", **TINY, reward_model="tiny")
