"""A memory plan by compilation: per-device memory of the one-program RL step, without
allocating anything.

`plan(...)` builds the RL step (`train.step.make_rl_step`) for a model shape, AOT-compiles it
with abstract, sharded inputs (`jax.ShapeDtypeStruct` + `NamedSharding`, `.lower().compile()`)
on a mesh of (fake) devices, and reads XLA's `memory_analysis()` for one device: arguments
(parameters + optimizer state + batch), temporaries (activations, KV cache, gradients, the
decode copy of the weights, ...), outputs, and the part of the outputs aliased to donated
arguments. It also counts analytically what the parameters, the optimizer state and the KV
cache take per device, so the temporaries can be read.

Fake devices: the CPU platform splits into N devices when XLA_FLAGS carries
`--xla_force_host_platform_device_count=N` before jax is imported, so `run_in_subprocess`
starts one Python process per device count (`scripts/memory_plan.py` is the CLI).

Caveat: this is the CPU compiler's buffer assignment (its fusion, scheduling and
rematerialisation decisions), not the GPU's or the TPU's; treat the figures as a plan to be
checked on the real backend (docs/performance.md has one GPU cross-check).
"""
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Optional

GIB = 1024 ** 3

# Shapes beyond the presets: a Llama-3-70B-shaped model.
EXTRA_SHAPES = {
    "llama3.1-70b": dict(family="llama", vocab_size=128256, d_model=8192, n_layers=80,
                         n_heads=64, n_kv_heads=8, head_dim=128, d_ff=28672,
                         rope_theta=500000.0, rope_scaling=("llama3", 8.0, 1.0, 4.0, 8192),
                         norm_eps=1e-5, tie_embeddings=False, max_position_embeddings=131072),
}


def model_config(name: str, **overrides):
    """A `ModelConfig` from `models.presets` or `EXTRA_SHAPES`, with field overrides."""
    from rlvr_jax.models import presets
    from rlvr_jax.models.config import ModelConfig
    if name in EXTRA_SHAPES:
        return ModelConfig(**{**EXTRA_SHAPES[name], **overrides})
    return presets.get(name, **overrides)


def _per_device_bytes(shapes, shardings) -> int:
    """Bytes one device holds of a pytree of ShapeDtypeStructs under `shardings`."""
    import jax
    import numpy as np
    total = 0
    for s, sh in zip(jax.tree.leaves(shapes), jax.tree.leaves(shardings)):
        shard = sh.shard_shape(s.shape) if s.shape else ()
        total += int(np.prod(shard, dtype=np.int64)) * np.dtype(s.dtype).itemsize
    return total


def plan(preset: str, *, rules: str = "fsdp", tensor: int = 1, n_layers: Optional[int] = None,
         prompts: int = 32, samples: int = 8, prompt_len: int = 512, new_tokens: int = 1024,
         microbatches: int = 4, logprob_chunk: int = 128, dtype: str = "bfloat16",
         param_dtype: str = "float32", remat: str = "full",
         cache_window: Optional[int] = None) -> Dict[str, Any]:
    """Compiles the RL step for `preset` on all visible devices; returns per-device bytes.

    Args:
      preset: a `models.presets` name or an `EXTRA_SHAPES` name.
      rules, tensor: the `sharding.RULE_PRESETS` name and the mesh's tensor axis size
        (fsdp takes the remaining devices; data = 1).
      n_layers: override the depth (to compile a shallow copy and extrapolate per layer).
      prompts, samples, prompt_len, new_tokens: P, G, Tp, N of the rollout (B = P·G rows).
      microbatches, logprob_chunk: `RLConfig` fields of the update.
      dtype, param_dtype, remat: `ModelConfig` overrides (compute, storage, remat policy).
      cache_window: the sampler's `SamplingConfig.cache_window` (None: automatic).

    Returns: a JSON-able dict: the configuration, compile seconds, XLA's per-device
    `memory_analysis()` fields (bytes) and the analytic parameter / optimizer / KV-cache bytes
    per device.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from rlvr_jax import sampling, sharding
    from rlvr_jax.models import transformer
    from rlvr_jax.train import state as state_lib
    from rlvr_jax.train import step as step_lib

    # The layer scan (scan_unroll=1) keeps a shallow copy's per-layer cost that of the deep
    # model, so the per-layer extrapolation holds (the table in docs/performance.md).
    overrides = dict(dtype=dtype, param_dtype=param_dtype, remat=remat, scan_unroll=1)
    if n_layers is not None:
        overrides["n_layers"] = n_layers
    mc = model_config(preset, **overrides)
    n_dev = jax.device_count()
    mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": tensor})
    rule_set = sharding.get_rules(rules)
    sc = sampling.SamplingConfig(temperature=1.0, max_new_tokens=new_tokens,
                                 num_samples=samples, stop_token_ids=(1,), pad_id=0,
                                 cache_window=cache_window)
    rl = step_lib.RLConfig(num_prompts=prompts, microbatches=microbatches,
                           logprob_chunk=logprob_chunk)
    tx = state_lib.make_optimizer(learning_rate=1e-6)

    specs = transformer.param_logical_axes(mc)
    params = jax.eval_shape(lambda: transformer.init_params(mc, jax.random.PRNGKey(0)))
    param_sh = sharding.logical_to_mesh_sharding(specs, mesh, rule_set, params)
    opt_sh = sharding.optimizer_state_sharding(tx, params, specs, mesh, rule_set)
    state = jax.eval_shape(lambda p: state_lib.create_train_state(p, tx, jax.random.PRNGKey(0)),
                           params)
    replicated = NamedSharding(mesh, PartitionSpec())
    state_sh = state.replace(step=replicated, params=param_sh, opt_state=opt_sh,
                             rng=replicated, data_position=replicated)
    state = jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                         state, state_sh)
    rows = NamedSharding(mesh, sharding.batch_spec(rule_set, 2))
    batch = {"prompt_tokens": jax.ShapeDtypeStruct((prompts, prompt_len), jnp.int32,
                                                   sharding=rows),
             "prompt_mask": jax.ShapeDtypeStruct((prompts, prompt_len), jnp.int32,
                                                 sharding=rows),
             "answers": jax.ShapeDtypeStruct((prompts,), jnp.int32,
                                             sharding=NamedSharding(
                                                 mesh, sharding.batch_spec(rule_set, 1)))}

    def verifier(tokens, mask, answers):  # A stand-in: reward 1 if the first token is even.
        del mask, answers
        return (tokens[:, 0] % 2 == 0).astype(jnp.float32)

    rl_step = step_lib.make_rl_step(mc, sc, rl, tx, verifier)
    start = time.perf_counter()
    with sharding.activate(mesh, rule_set):
        compiled = rl_step.lower(state, batch).compile()
    compile_s = time.perf_counter() - start
    mem = compiled.memory_analysis()
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes")
    measured = {f: int(getattr(mem, f)) for f in fields}
    # Peak ≈ arguments + temporaries + outputs not aliased to donated arguments.
    measured["peak_estimate_bytes"] = (measured["argument_size_in_bytes"]
                                       + measured["temp_size_in_bytes"]
                                       + measured["output_size_in_bytes"]
                                       - measured["alias_size_in_bytes"])

    b, s = prompts * samples, prompt_len + new_tokens - 1
    kv_spec = sharding.logical_to_mesh_spec(PartitionSpec(*("batch", "kv_heads", "length", "kv")),
                                            rule_set, (b, mc.n_kv_heads, s, mc.head_dim), mesh)
    kv_shard = NamedSharding(mesh, kv_spec).shard_shape((b, mc.n_kv_heads, s, mc.head_dim))
    kv_bytes = (2 * mc.n_layers * int(np.prod(kv_shard, dtype=np.int64))
                * jnp.dtype(mc.compute_dtype).itemsize)
    return {
        "preset": preset, "n_layers": mc.n_layers, "devices": n_dev, "rules": rules,
        "mesh": dict(mesh.shape), "rows": b, "prompt_len": prompt_len, "new_tokens": new_tokens,
        "microbatches": microbatches, "logprob_chunk": logprob_chunk, "dtype": dtype,
        "param_dtype": param_dtype, "remat": remat, "params": mc.num_params(),
        "cache_window": sampling.cache_window_of(sc),
        "compile_s": round(compile_s, 1), "platform": jax.devices()[0].platform,
        **measured,
        "params_bytes": _per_device_bytes(state.params, param_sh),
        "opt_state_bytes": _per_device_bytes(state.opt_state, opt_sh),
        "kv_cache_bytes": kv_bytes,
    }


def run_in_subprocess(devices: int, timeout: float = 3600, **kwargs) -> Dict[str, Any]:
    """`plan(**kwargs)` in a fresh Python process that sees `devices` fake CPU devices."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={devices}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    code = ("import json, sys; from rlvr_jax import memory_plan; "
            "print('RESULT ' + json.dumps(memory_plan.plan(**json.loads(sys.argv[1]))))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"plan failed ({devices} devices, {kwargs}):\n{proc.stderr[-3000:]}")


def extrapolate(shallow: Dict[str, Any], deeper: Dict[str, Any], n_layers: int) -> Dict[str, Any]:
    """Linear per-layer extrapolation of every byte field from two compiled depths."""
    out = dict(deeper, n_layers=n_layers, extrapolated_from=[shallow["n_layers"],
                                                             deeper["n_layers"]])
    dl = deeper["n_layers"] - shallow["n_layers"]
    for key, value in deeper.items():
        if key.endswith("_bytes"):
            per_layer = (value - shallow[key]) / dl
            out[key] = int(round(value + per_layer * (n_layers - deeper["n_layers"])))
    return out


def format_row(r: Dict[str, Any]) -> str:
    """One markdown table row, GiB per device."""
    g = lambda k: f"{r[k] / GIB:.1f}"  # noqa: E731
    depth = (f"{r['n_layers']} (from {r['extrapolated_from'][0]}+{r['extrapolated_from'][1]})"
             if "extrapolated_from" in r else str(r["n_layers"]))
    mesh = "×".join(f"{k[0]}{v}" for k, v in r["mesh"].items() if v > 1)
    return (f"| {r['preset']} | {depth} | {r['devices']} | {r['rules']} ({mesh}) | "
            f"{g('params_bytes')} | {g('opt_state_bytes')} | {g('kv_cache_bytes')} | "
            f"{g('temp_size_in_bytes')} | {g('argument_size_in_bytes')} | "
            f"{g('peak_estimate_bytes')} |")


TABLE_HEADER = ("| model | layers | devices | rules (mesh) | params | optimizer | KV cache | "
                "temp (XLA) | arguments (XLA) | peak est. |\n"
                "|---|---|---|---|---|---|---|---|---|---|")
