"""The FSDP update's communication (issue 36): gradients reduce-scattered into their shards,
weights gathered in the compute dtype, and each micro-batch gathering its own weights; the
tensor-parallel decode (`sampling.decode_rules="tp"`) gathering no weight in its loop.

One tiny bf16 model on the 8 fake devices, its split-path update and its one-program RL step
compiled once each from abstract sharded inputs (`perf.programs`; nothing runs), read through
`perf.collectives`.
"""
import functools

import jax
import numpy as np
import pytest

from rlvr_jax import sharding
from rlvr_jax.models import init_params, presets
from rlvr_jax.perf import collectives, programs

MICROBATCHES = 2


def _config():
    # Distinct sizes, so that no activation has a weight's shape: D 64, F 160, V 256, 8 heads
    # of 8 (every weight dimension split 8 ways divides).
    return presets.get("tiny", d_model=64, d_ff=160, vocab_size=256, n_heads=8, n_kv_heads=8,
                       head_dim=8, n_layers=1, dtype="bfloat16", param_dtype="float32",
                       remat="full")


@functools.lru_cache(maxsize=None)
def _compiled():
    mc = _config()
    mesh = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    work = programs.Workload(prompts=8, samples=2, prompt_len=8, new_tokens=8, rl=(
        ("microbatches", MICROBATCHES), ("logprob_chunk", 4), ("kl_coef", 0.001)))
    return collectives.compile_partitioned(
        programs.lower_update(mc, mesh, sharding.get_rules("fsdp"), work))


def _weight_shapes():
    """The full shapes of one layer's FSDP-split matrices (those with a d_model dimension;
    the layer stack's leading axis dropped) and of the embedding."""
    mc = _config()
    params = jax.eval_shape(lambda: init_params(mc, jax.random.PRNGKey(0)))
    shapes = {tuple(x.shape[1:]) for x in jax.tree.leaves(params["layers"])
              if x.ndim >= 3 and mc.d_model in x.shape[1:]}
    return shapes | {tuple(params["embed"].shape)}


@pytest.mark.skipif(jax.device_count() < 8, reason="needs the 8 fake devices of conftest")
def test_fsdp_update_reduce_scatters_gradients_and_gathers_weights_in_bf16():
    compiled, hlo = _compiled()
    recs = collectives.records(hlo)
    weights = _weight_shapes()
    layer = weights - {(256, 64)}  # The embedding: looked up, and the vocabulary-parallel head.
    gathered = {(r["dims"], r["dtype"]) for r in recs if r["kind"] == "all-gather"}
    # Every layer matrix is gathered, in bf16 only (cast on its shards before the gather).
    assert {s for s, dt in gathered if s in layer} == layer
    assert not [(s, dt) for s, dt in gathered if s in weights and dt == "f32"]
    # Every layer matrix's gradient reaches its shards by a reduce-scatter (the partitioner's
    # all-reduce + 1/8 slice), once per micro-batch, and is never all-reduced whole.
    scattered = {}
    for r in recs:
        if r["kind"] == "reduce-scatter" and r["dims"] in layer:
            scattered[r["dims"]] = scattered.get(r["dims"], 0) + r["times"]
    assert set(scattered) == layer and min(scattered.values()) >= MICROBATCHES
    assert not [r for r in recs if r["kind"] == "all-reduce" and r["dims"] in weights]
    # In the program the CPU runs, each micro-batch gathers its own weights (the barrier
    # keeps XLA from hoisting the gathers out of the loop, which would hold every gathered
    # layer for the whole loop). The CPU compiler has rewritten bf16 collectives to f32 by
    # then (its float-normalization pass), so the dtype is not checked there.
    runs = {}
    for r in collectives.records(compiled.as_text()):
        if r["kind"] == "all-gather" and r["dims"] in layer:
            runs[r["dims"]] = runs.get(r["dims"], 0) + r["times"]
    assert set(runs) == layer and min(runs.values()) >= MICROBATCHES


@functools.lru_cache(maxsize=None)
def _rl_step_tp():
    """The one-program RL step decoding with `sampling.decode_rules="tp"` (training: fsdp)."""
    mesh = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    work = programs.Workload(prompts=8, samples=2, prompt_len=4, new_tokens=8, rl=(
        ("microbatches", 1), ("logprob_chunk", 4), ("kl_coef", 0.0)))
    return collectives.compile_partitioned(programs.lower_rl_step(
        _config(), mesh, sharding.get_rules("fsdp"), work, decode_rules="tp"))


@pytest.mark.skipif(jax.device_count() < 8, reason="needs the 8 fake devices of conftest")
def test_tensor_parallel_decode_moves_activations_not_weights():
    mc = _config()
    mesh = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    params = jax.eval_shape(lambda: init_params(mc, jax.random.PRNGKey(0)))
    layout = programs.decode_sampler(mc, mesh, "tp", None).decode_shardings(params)
    # The decode layout: the MLP and the vocabulary split 8 ways, attention replicated.
    assert layout["layers"]["mlp"]["up_kernel"].shard_shape((1, 64, 160)) == (1, 64, 20)
    assert layout["embed"].shard_shape((256, 64)) == (32, 64)
    assert layout["layers"]["attn"]["q_kernel"].is_fully_replicated
    # Inside the decode loop (the one loop whose trips the data decide: it stops when every
    # row has finished) a step moves activations: the MLP's input rows [B, D] gathered and its
    # output reduce-scattered; no weight is gathered there (the training layout gathers every
    # layer's weights there, each step).
    recs = collectives.records(_rl_step_tp()[1])
    assert len({r["loop"] for r in recs if r["dynamic_trips"]}) == 1  # One phase, no compaction.
    decode = [r for r in recs if r["dynamic_trips"]]
    rows = 8 * 2
    assert {"all-gather", "reduce-scatter"} <= {r["kind"] for r in decode
                                                if r["dims"] == (rows, mc.d_model)}
    weights = {tuple(x.shape[1:]) for x in jax.tree.leaves(params["layers"])} | {
        tuple(x.shape) for x in jax.tree.leaves(params) if x.ndim == 2}
    assert not [r for r in decode if r["kind"] == "all-gather" and r["dims"] in weights]


def test_collectives_table_counts_loop_trips_and_reads_reduce_scatters():
    hlo = """HloModule m

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%body (p: (s32[], bf16[16,4])) -> (s32[], bf16[16,4]) {
  %p = (s32[], bf16[16,4]) parameter(0)
  %w = bf16[2,4]{1,0} get-tuple-element(%p), index=1
  %ag = bf16[16,4]{1,0} all-gather(%w), dimensions={0}
  %g = f32[16,4]{1,0} convert(%ag)
  %ar = f32[16,4]{1,0} all-reduce(%g), to_apply=%add
  %ds = f32[2,4]{1,0} dynamic-slice(%ar, %i, %j), dynamic_slice_sizes={2,4}
  ROOT %t = (s32[], bf16[16,4]) tuple(%i, %ag)
}

%cond (q: (s32[], bf16[16,4])) -> pred[] {
  %q = (s32[], bf16[16,4]) parameter(0)
  %i = s32[] get-tuple-element(%q), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%until (q: (s32[], bf16[16,4])) -> pred[] {
  %q = (s32[], bf16[16,4]) parameter(0)
  %i = s32[] get-tuple-element(%q), index=0
  %n = s32[] constant(9)
  %lt = pred[] compare(%i, %n), direction=LT
  %live = pred[] constant(true)
  ROOT %both = pred[] and(%lt, %live)
}

%step (p: (s32[], bf16[16,4])) -> (s32[], bf16[16,4]) {
  %p = (s32[], bf16[16,4]) parameter(0)
  %w = bf16[2,4]{1,0} get-tuple-element(%p), index=1
  %x = bf16[16,4]{1,0} all-gather(%w), dimensions={0}
  %y = bf16[16,4]{1,0} all-gather(%w), dimensions={0}
  ROOT %t = (s32[], bf16[16,4]) tuple(%i, %x)
}

ENTRY %main (a: (s32[], bf16[16,4])) -> (s32[], bf16[16,4]) {
  %a = (s32[], bf16[16,4]) parameter(0)
  %r = f32[8]{0} all-reduce(%v), to_apply=%add
  %w = (s32[], bf16[16,4]) while(%a), condition=%cond, body=%body
  ROOT %d = (s32[], bf16[16,4]) while(%w), condition=%until, body=%step
}
"""
    rows = {(r["kind"], r["dtype"]): r for r in collectives.collectives(hlo)}
    # Three trips: the gather (16·4 bf16 = 128 B) and the sliced all-reduce (16·4 f32, read
    # as a reduce-scatter) three times each; the plain all-reduce outside once. The second
    # loop's condition also tests data (its bound 9 is the counter's, not the trips): its two
    # gathers count once each, flagged, and are one trip's bytes.
    assert rows[("all-gather", "bf16")] == {"kind": "all-gather", "dtype": "bf16",
                                            "bytes": 3 * 128 + 2 * 128, "count": 3 + 2,
                                            "dynamic_trips": True}
    assert collectives.dynamic_loop_per_trip(hlo) == [
        {"kind": "all-gather", "dtype": "bf16", "bytes": 2 * 128, "count": 2}]
    assert rows[("reduce-scatter", "f32")]["bytes"] == 3 * 256
    assert rows[("all-reduce", "f32")]["count"] == 1
    assert "| all-gather | bf16 | 5 |" in collectives.format_table(list(rows.values()))
    np.testing.assert_equal(sorted(rows), sorted([("all-gather", "bf16"),
                                                  ("reduce-scatter", "f32"),
                                                  ("all-reduce", "f32")]))
