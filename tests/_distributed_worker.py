"""Child process of tests/test_distributed.py: one of N JAX processes on CPU.

Usage: python _distributed_worker.py PORT NUM_PROCESSES PROCESS_ID LOCAL_DEVICES CKPT_IN CKPT_OUT
Joins the runtime through `rlvr_jax.distributed.initialize`, builds one mesh over
every process's devices, and prints one JSON line with what it computed. CKPT_IN: a
checkpoint one process wrote (restored here, compared with its values.npz); CKPT_OUT: where
the processes save one together (process 0 writes its values.npz).
"""
import json
import os
import sys

port, num_processes, process_id, local_devices = (int(a) for a in sys.argv[1:5])
ckpt_in, ckpt_out = sys.argv[5:7]
os.environ["XLA_FLAGS"] = (os.environ.get("RLVR_JAX_TEST_XLA_FLAGS", "")  # conftest's, if any
                           + f" --xla_force_host_platform_device_count={local_devices}")
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_numpy_rank_promotion", "raise")
if os.environ.get("RLVR_JAX_CACHE_DIR"):  # The test suite's persistent compile cache.
    jax.config.update("jax_compilation_cache_dir", os.environ["RLVR_JAX_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from rlvr_jax import distributed, models, sharding  # noqa: E402

distributed.initialize({"coordinator_address": f"127.0.0.1:{port}",
                        "num_processes": num_processes, "process_id": process_id,
                        "initialization_timeout": 60})
result = {"process_index": jax.process_index(), "process_count": jax.process_count(),
          "global_devices": jax.device_count(), "local_devices": jax.local_device_count(),
          "main": distributed.is_main_process()}

# 1. A global array whose rows come from the processes that own them; a global sum.
global_rows = 4 * jax.device_count()
full = np.arange(global_rows * 3, dtype=np.float32).reshape(global_rows, 3)
mesh = sharding.make_mesh({"data": -1, "fsdp": 1, "tensor": 1})
rules = sharding.get_rules("dp")
rows = sharding.process_batch_rows(global_rows, mesh, rules=rules)
batch = sharding.make_global_batch({"x": full[rows]}, mesh, rules=rules)
total = jax.jit(lambda b: jnp.sum(b["x"] * b["x"]),
                out_shardings=NamedSharding(mesh, PartitionSpec()))(batch)
result["rows"] = [rows.start, rows.stop]
result["sum_sq"] = float(total)
result["expected_sum_sq"] = float(np.sum(full * full))

# 2. The tiny model under the fsdp_tp preset on a mesh spanning both processes
#    (fsdp across processes over DCN, tensor within a process): the mean logit
#    and its single-device value on the same full batch.
cfg = models.presets.get("tiny", d_model=64, d_ff=128, n_heads=8, n_kv_heads=8,
                         vocab_size=128)
params = models.init_params(cfg, jax.random.PRNGKey(0))  # Same seed: same values everywhere.
specs = models.param_logical_axes(cfg)
mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 2, "dcn_fsdp": num_processes})
rules = sharding.get_rules("fsdp_tp")
sharded = sharding.shard_params(params, specs, mesh, rules)
tokens = np.asarray(jax.random.randint(jax.random.PRNGKey(1), (8, 16), 0, cfg.vocab_size))
# Every process generated the same full batch: each device takes its rows.
global_tokens = sharding.make_global_batch(tokens, mesh, rules=rules, same_on_all_processes=True)
with sharding.activate(mesh, rules):
    stats = jax.jit(
        lambda p, t: jnp.stack([jnp.mean(models.forward(p, t, config=cfg)[0]),
                                jnp.mean(jnp.abs(models.forward(p, t, config=cfg)[0]))]),
        out_shardings=NamedSharding(mesh, PartitionSpec()))(sharded, global_tokens)
local = models.jit_forward(params, jnp.asarray(tokens), jnp.ones_like(tokens), config=cfg)
result["mesh"] = dict(mesh.shape)
result["embed_sharding"] = str(sharded["embed"].sharding.spec)
result["embed_local_shape"] = list(sharded["embed"].addressable_shards[0].data.shape)
result["model_stats"] = [float(v) for v in np.asarray(stats)]
result["single_device_stats"] = [float(jnp.mean(local)), float(jnp.mean(jnp.abs(local)))]
result["max_abs_logit"] = float(jnp.max(jnp.abs(local)))
result["logits_size"] = int(local.size)

# 2b. A rollout on that mesh, each prompt's KV kept once for its rows (share_prompt_kv: the
#     prefix's groups split over fsdp across processes), against one device's rollout over
#     the copied cache.
from rlvr_jax import sampling  # noqa: E402

sc = sampling.SamplingConfig(temperature=0.9, max_new_tokens=6, num_samples=2,
                             share_prompt_kv=True)
prompts = tokens[:4, :6]
with sharding.activate(mesh, rules):
    shared = jax.jit(lambda p, t: sampling.generate(
        p, t, jnp.ones_like(t), jax.random.PRNGKey(2), model_config=cfg, sampling_config=sc),
        out_shardings=NamedSharding(mesh, PartitionSpec()))(
        sharded, sharding.make_global_batch(prompts, mesh, rules=rules,
                                            same_on_all_processes=True))
copied = sampling.jit_generate(params, jnp.asarray(prompts), jnp.ones((4, 6), jnp.int32),
                               jax.random.PRNGKey(2), model_config=cfg,
                               sampling_config=sc.replace(share_prompt_kv=False))
result["shared_rollout"] = {
    "tokens": np.asarray(shared.tokens).tolist(), "want_tokens": np.asarray(copied.tokens).tolist(),
    "logprobs": np.asarray(shared.logprobs).tolist(),
    "want_logprobs": np.asarray(copied.logprobs).tolist()}

# 3. Checkpoints across process counts: restore one written by 1 process on this mesh,
#    save one together (the test restores it in 1 process). Compared bit for bit.
from rlvr_jax.train.checkpoint import Checkpointer  # noqa: E402
from tests._checkpoint_state import make_state  # noqa: E402

mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 1})
state = make_state(cfg, mesh, sharding.get_rules("fsdp"))
with Checkpointer(ckpt_in) as ckpt:
    restored, extra = ckpt.restore(None, state)
saved = np.load(os.path.join(ckpt_in, "values.npz"))
flat = jax.tree_util.tree_leaves_with_path(distributed.to_host(restored))
result["restore_1to2_exact"] = all(
    np.array_equal(saved[jax.tree_util.keystr(k)], v) for k, v in flat) and len(flat) == len(
        saved.files)
result["restore_1to2_extra"] = extra
result["restored_local_shape"] = list(restored["params"]["embed"].addressable_shards[0].data.shape)
with Checkpointer(ckpt_out) as ckpt:
    ckpt.save(1, state, {"written_by": num_processes}, force=True)
values = distributed.to_host(state)  # A collective: every process, not only process 0.
if distributed.is_main_process():
    np.savez(os.path.join(ckpt_out, "values.npz"), **{
        jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(values)})

# 4. Host scoring shared out over the processes, and the same-batch check.
from rlvr_jax import scoring  # noqa: E402
from rlvr_jax.scoring.score import score_shared  # noqa: E402


def verify(text, example):
    if example == 2:
        raise ValueError("a failing sample")  # Scored 0 and counted, on its process.
    return {"reward": float(example), "who": float(jax.process_index())}


texts, examples = [f"t{i}" for i in range(7)], list(range(7))
verdicts, components, info = score_shared(scoring.HostScorer(verify, names=("who",)), texts,
                                          examples)
result["scored"] = [verdicts.tolist(), components["who"].tolist(), info["errors"]]
distributed.check_same_on_all_processes({"x": np.arange(4)}, "the same data")
try:
    distributed.check_same_on_all_processes({"x": np.arange(4) + process_id}, "data.task=demo")
    result["differ_error"] = None
except ValueError as e:
    result["differ_error"] = str(e)

# 5. Label-free rewards and process rewards of a rollout batch-sharded over the processes
#    (each device holds one of its 8 rows): the test computes them in one process.
from rlvr_jax.data.tokenizers import load_tokenizer  # noqa: E402
from tests._text_terms_case import rollout_rows, text_terms  # noqa: E402

tok = load_tokenizer("builtin")
mesh = sharding.make_mesh({"data": -1, "fsdp": 1, "tensor": 1})
rollout = sharding.make_global_batch(dict(zip(("tokens", "mask", "logprobs"), rollout_rows(tok))),
                                     mesh, rules=sharding.get_rules("dp"),
                                     same_on_all_processes=True)
result["text_terms"] = text_terms(tok, rollout["tokens"], rollout["mask"], rollout["logprobs"])
result["text_terms_spread"] = not rollout["tokens"].is_fully_addressable

# 6. Bad days over processes: a SIGTERM seen by process 1 only stops both after the same
#    step; a workdir that a live run holds (a lock only process 0's host can check) is
#    refused on both.
import socket  # noqa: E402

from rlvr_jax.train import lock, preempt  # noqa: E402
from rlvr_jax.train.errors import ConfigError  # noqa: E402

result["sigterm_none"] = preempt.requested()
preempt._FLAG["set"] = jax.process_index() == 1
result["sigterm_one"] = preempt.requested()
preempt._FLAG["set"] = False
held = ckpt_out + "_workdir"
if jax.process_index() == 0:
    os.makedirs(held)
    with open(os.path.join(held, lock.LOCK), "w") as f:
        f.write(f"{os.getpid()} {socket.gethostname()}\n")
distributed.sync("locked")
try:
    lock.check_all_processes(held)
    result["lock_refusal"] = None
except ConfigError as e:
    result["lock_refusal"] = str(e)

distributed.sync("done")
print("RESULT " + json.dumps(result), flush=True)
distributed.shutdown()
