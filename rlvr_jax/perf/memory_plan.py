"""A memory plan by compilation: per-device memory and collectives of the RL step that runs,
without allocating anything.

`plan(...)` builds the program (`perf.programs`: the one-program RL step `make_rl_step`, or
the split path's update), AOT-compiles it from abstract, sharded inputs on a mesh of (fake)
devices, and reads XLA's per-device `memory_analysis()` and the collectives of the
partitioned program (`perf.collectives`). The state is the run's: float32 parameters and
AdamW moments sharded by the rules, the reference model in the compute dtype (in host memory
with `reference_memory="pinned_host"`), a value model with `advantage="gae"`, a frozen reward
model (`reward_model`: a shape scored inside the one-program step); with LoRA
(`lora_rank` > 0) a frozen base (`quantize_base`: none, int8, nf4) plus adapters, AdamW over
the adapters only and no reference copy (the reference is the base, adapters off). The model keeps
the run's layer loop (unrolled up to 32 layers, scanned above: `ModelConfig.scan_unroll`),
remat policy and micro-batching.

Deep models: `plan_deep` compiles two shallow copies (2 and 4 layers by default, in the deep
model's layer-loop mode: unrolled copies for a model that unrolls, scanned ones for a model
that scans) and extrapolates every byte figure and every collective linearly per layer
(`extrapolate`); `scripts/memory_plan.py` checks that against a full-depth compile at the
0.5B shape (docs/performance.md).

Fake devices: the CPU platform splits into N devices when XLA_FLAGS carries
`--xla_force_host_platform_device_count=N` before jax is imported, so `run_in_subprocess`
starts one Python process per point.

Caveat: this is the CPU compiler's buffer assignment (its fusion, scheduling and its float32
rewriting of bf16 arithmetic), not the GPU's or the TPU's; treat the figures as a plan to be
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

# Accelerators: (memory per device in GiB, the fraction a JAX process may use by default).
# GPUs: JAX preallocates XLA_PYTHON_CLIENT_MEM_FRACTION = 0.75 of the memory and works in it.
# TPUs: no such fraction; the whole HBM is counted (the runtime's own reserve is not known).
ACCELERATORS = {
    "h100-80gb": (80e9 / GIB, 0.75), "h200-141gb": (141e9 / GIB, 0.75),
    "v5p": (95.0, 1.0), "v6e": (32.0, 1.0), "v5e": (16.0, 1.0),
}


def model_config(name: str, **overrides):
    """A `ModelConfig` from `models.presets` or `EXTRA_SHAPES`, with field overrides."""
    from rlvr_jax.models import presets
    from rlvr_jax.models.config import ModelConfig
    if name in EXTRA_SHAPES:
        return ModelConfig(**{**EXTRA_SHAPES[name], **overrides})
    return presets.get(name, **overrides)


def shallow_config(mc, n_layers: int):
    """`mc` at `n_layers` layers in the layer-loop mode the full depth compiles to (unrolled
    copies of a model that unrolls, a rolled scan for one that scans)."""
    return mc.replace(n_layers=n_layers, scan_unroll=n_layers if mc.layer_unroll > 1 else 1)


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
         program: str = "rl_step", prompts: int = 32, samples: int = 8, prompt_len: int = 128,
         new_tokens: int = 896, microbatches: int = 4, logprob_chunk: int = 128,
         kl_coef: float = 0.001, advantage: str = "grpo", dtype: str = "bfloat16",
         param_dtype: str = "float32", remat: str = "full",
         reference_memory: str = "device", cache_window: Optional[int] = None,
         decode_rules: str = "",
         scan_unroll: Optional[int] = None, attention: str = "auto", lora_rank: int = 0,
         lora_targets: str = "all", quantize_base: str = "none", reward_model: str = "",
         run: bool = False) -> Dict[str, Any]:
    """Compiles `program` for `preset` on all visible devices; returns per-device bytes.

    Args:
      preset: a `models.presets` name or an `EXTRA_SHAPES` name.
      rules, tensor: the `sharding.RULE_PRESETS` name and the mesh's tensor axis size
        (fsdp takes the remaining devices; data = 1).
      n_layers: compile a shallow copy (`shallow_config`) to extrapolate per layer.
      program: "rl_step" (sample + score + update, one program) or "update" (split path).
      prompts, samples, prompt_len, new_tokens: P, G, Tp, N (B = P·G rows of Tp + N).
      microbatches, logprob_chunk, kl_coef, advantage: `RLConfig` fields (kl_coef > 0:
        with a reference model; advantage="gae": with a value model).
      dtype, param_dtype, remat: `ModelConfig` overrides (compute, storage, remat policy).
      reference_memory: "device" or "pinned_host" (`train.reference`).
      cache_window: the sampler's `SamplingConfig.cache_window` (None: automatic).
      decode_rules: the run's `sampling.decode_rules` (a rules preset: the RL step decodes
        in that layout, e.g. "tp"; "": in the training layout).
      scan_unroll: `ModelConfig.scan_unroll` of the run (None: the model's default, 0).
      attention: `ModelConfig.attention`: "pallas_gpu" / "splash" compile the GPU / TPU
        kernel (in Pallas interpret mode on CPU: its block-sized temporaries, not the plain
        path's [B, H, T, T] scores); "auto": this backend's.
      lora_rank, lora_targets, quantize_base: `model.lora.rank` (0: full fine-tuning; alpha
        2 × rank), `.targets` ("all" or a comma list of q,k,v,o,gate,up,down) and
        `.quantize_base` ("none", "int8", "nf4") of a LoRA / QLoRA run.
      reward_model: a preset / `EXTRA_SHAPES` name: a scalar reward model of that shape (the
        run's dtypes and layer loop; at `n_layers` too) scored inside the one-program step
        ("": none). Only with program="rl_step" (the split path scores it elsewhere).
      run: also run the compiled program once on zero inputs and add the device's allocator
        statistics (`run_once`; the plan's check on a GPU or TPU).

    Returns: a JSON-able dict: the configuration, compile seconds, XLA's `memory_analysis()`
    fields, `peak_bytes` (arguments + temporaries + outputs not aliased to donated
    arguments), the analytic bytes per device of the parameters (`params_bytes`; with LoRA
    base + adapters), of their trainable part (`trainable_bytes`: the adapters with LoRA),
    of the optimizer state, the reference and the value model, `collectives`
    [{kind, dtype, bytes, count}] per step (a data-dependent loop, e.g. the decode's,
    counted once) and `loop_trip_collectives`: one trip's of those loops (the largest, e.g.
    a decode step at the full batch; `collectives.dynamic_loop_per_trip`).
    """
    import jax
    from rlvr_jax import sharding
    from rlvr_jax.models import lora
    from rlvr_jax.perf import collectives, programs
    from rlvr_jax.train import state as state_lib
    lora_fields = dict(lora_rank=lora_rank, lora_alpha=2.0 * lora_rank,
                       lora_targets=lora.parse_targets(lora_targets)) if lora_rank else {}
    mc = model_config(preset, dtype=dtype, param_dtype=param_dtype, remat=remat,
                      scan_unroll=scan_unroll or 0, attention=attention, **lora_fields)
    if n_layers is not None:
        mc = shallow_config(mc, n_layers)
    reward_config = _reward_config(reward_model, program, n_layers, dtype=dtype,
                                   param_dtype=param_dtype, remat=remat,
                                   scan_unroll=scan_unroll or 0, attention=attention)
    mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": tensor})
    rule_set = sharding.get_rules(rules)
    work = programs.Workload(prompts=prompts, samples=samples, prompt_len=prompt_len,
                             new_tokens=new_tokens, rl=(
                                 ("microbatches", microbatches), ("logprob_chunk", logprob_chunk),
                                 ("kl_coef", kl_coef), ("advantage", advantage)))
    start = time.perf_counter()
    kw = dict(reference_memory=reference_memory, quantize_base=quantize_base)
    if program == "rl_step":
        lowered = programs.lower_rl_step(mc, mesh, rule_set, work, cache_window, decode_rules,
                                         reward_config=reward_config, **kw)
    else:
        lowered = programs.lower_update(mc, mesh, rule_set, work, **kw)
    compiled, hlo = collectives.compile_partitioned(lowered)
    compile_s = time.perf_counter() - start
    mem = compiled.memory_analysis()
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "host_argument_size_in_bytes")
    out = {f: int(getattr(mem, f, 0) or 0) for f in fields}
    out["peak_bytes"] = (out["argument_size_in_bytes"] + out["temp_size_in_bytes"]
                         + out["output_size_in_bytes"] - out["alias_size_in_bytes"])
    if run:
        out.update(run_once(lowered, compiled))
    tx_state, shardings = programs.abstract_state(
        mc, mesh, rule_set, _optimizer(), work.rl_config(), _optimizer() if advantage == "gae"
        else None, reward_config=reward_config, **kw)
    for name in ("params", "opt_state", "ref_params", "value_params", "reward_params"):
        tree = getattr(tx_state, name)
        out[f"{name}_bytes"] = 0 if tree is None else _per_device_bytes(
            tree, getattr(shardings, name))
    out["trainable_bytes"] = _per_device_bytes(
        *(state_lib.split_trainable(t)[0] for t in (tx_state.params, shardings.params)))
    return {"preset": preset, "n_layers": mc.n_layers, "scan_unroll": scan_unroll or 0,
            "devices": jax.device_count(), "rules": rules, "mesh": dict(mesh.shape),
            "program": program, "rows": prompts * samples, "prompt_len": prompt_len,
            "new_tokens": new_tokens, "microbatches": microbatches, "kl_coef": kl_coef,
            "advantage": advantage, "dtype": dtype, "param_dtype": param_dtype, "remat": remat,
            "reference_memory": reference_memory, "decode_rules": decode_rules,
            "attention": attention,
            "lora_rank": lora_rank, "lora_targets": ",".join(mc.lora_targets) if lora_rank
            else "", "quantize_base": quantize_base, "reward_model": reward_model,
            "params": mc.num_params(),
            "trainable_params": lora.num_params(mc) if lora_rank else mc.num_params(),
            "compile_s": round(compile_s, 1), "platform": jax.devices()[0].platform,
            **out, "collectives": collectives.collectives(hlo),
            "loop_trip_collectives": collectives.dynamic_loop_per_trip(hlo)}


def _reward_config(name: str, program: str, n_layers: Optional[int], **fields):
    """The reward model's `ModelConfig` (None without `name`), shallow like the policy."""
    if not name:
        return None
    if program != "rl_step":
        raise ValueError("reward_model: the reward model is scored inside the one-program "
                         "step; plan it with program='rl_step' (the split path scores it "
                         "outside the update)")
    config = model_config(name, **fields)
    return config if n_layers is None else shallow_config(config, n_layers)


def run_once(lowered, compiled) -> Dict[str, Any]:
    """Runs `compiled` (of `lowered`) once on zero inputs made on the devices as it expects
    them; returns the first device's allocator statistics (`memory_stats()`: bytes in use
    and peak, before and after the run; absent where the backend keeps none, e.g. CPU) and
    the run's seconds (compile-free; the values are zeros, so only memory is meaningful),
    or `run_error` when the run failed (e.g. out of memory)."""
    import jax
    import jax.numpy as jnp
    args_info, shardings = lowered.args_info, compiled.input_shardings

    def make(info, sh):
        return jax.jit(lambda: jnp.zeros(info.shape, info.dtype), out_shardings=sh)()
    args, kwargs = jax.tree.map(make, args_info, shardings,
                                is_leaf=lambda x: hasattr(x, "donated"))
    device = jax.devices()[0]
    before = device.memory_stats() or {}
    start = time.perf_counter()
    try:
        jax.block_until_ready(compiled(*args, **kwargs))
        out = {"run_s": round(time.perf_counter() - start, 3)}
    except Exception as e:  # noqa: BLE001 - e.g. out of memory: the plan's answer too.
        out = {"run_error": f"{type(e).__name__}: {str(e)[:500]}"}
    after = device.memory_stats() or {}
    for key in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit"):
        if key in after:
            out[f"device_{key}_before"], out[f"device_{key}_after"] = before.get(key), after[key]
    return out


def _optimizer():
    from rlvr_jax.train import state as state_lib
    return state_lib.make_optimizer(learning_rate=1e-6)


def run_in_subprocess(devices: int, timeout: float = 3600, **kwargs) -> Dict[str, Any]:
    """`plan(**kwargs)` in a fresh Python process that sees `devices` fake CPU devices."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={devices}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    code = ("import json, sys; from rlvr_jax.perf import memory_plan; "
            "print('RESULT ' + json.dumps(memory_plan.plan(**json.loads(sys.argv[1]))))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"plan failed ({devices} devices, {kwargs}):\n{proc.stderr[-3000:]}")


def _line(a: float, b: float, da: int, db: int, n: int) -> int:
    return int(round(b + (b - a) / (db - da) * (n - db)))


def extrapolate(shallow: Dict[str, Any], deeper: Dict[str, Any], n_layers: int) -> Dict[str, Any]:
    """Linear per-layer extrapolation of every byte field and every collective (bytes and
    count by kind and dtype; also one trip's of the data-dependent loops) from two compiled
    depths."""
    da, db = shallow["n_layers"], deeper["n_layers"]
    out = dict(deeper, n_layers=n_layers, extrapolated_from=[da, db])
    for key, value in deeper.items():
        if key.endswith("_bytes"):
            out[key] = _line(shallow[key], value, da, db, n_layers)
    for key in ("collectives", "loop_trip_collectives"):
        out[key] = _extrapolate_rows(shallow.get(key, ()), deeper.get(key, ()), da, db, n_layers)
    return out


def _extrapolate_rows(shallow, deeper, da: int, db: int, n_layers: int):
    rows = {}
    for which, run in ((0, shallow), (1, deeper)):
        for r in run:
            rows.setdefault((r["kind"], r["dtype"]), [None, None])[which] = r
    out = []
    for (kind, dtype), (a, b) in rows.items():
        a = a or {"bytes": 0, "count": 0}
        b = b or {"bytes": 0, "count": 0}
        row = {"kind": kind, "dtype": dtype,
               "bytes": max(0, _line(a["bytes"], b["bytes"], da, db, n_layers)),
               "count": max(0, _line(a["count"], b["count"], da, db, n_layers))}
        if a.get("dynamic_trips") or b.get("dynamic_trips"):
            row["dynamic_trips"] = True
        out.append(row)
    return sorted(out, key=lambda r: -r["bytes"])


def plan_deep(devices: int, n_layers_pair=(2, 4), **kwargs) -> Dict[str, Any]:
    """`plan` at the full depth of kwargs["preset"], from two shallow compiles (each in its
    own process) extrapolated per layer; the full depth itself when it is not deeper. A
    reward model must then be as deep as the policy (both shrink together)."""
    depth = model_config(kwargs["preset"]).n_layers
    if depth <= n_layers_pair[1]:
        return run_in_subprocess(devices, **kwargs)
    if kwargs.get("reward_model") and model_config(kwargs["reward_model"]).n_layers != depth:
        raise ValueError(f"reward_model: {kwargs['reward_model']} is not {depth} layers deep "
                         f"like {kwargs['preset']}: the per-layer extrapolation needs one "
                         "depth (compile the full depth instead)")
    a, b = (run_in_subprocess(devices, n_layers=n, **kwargs) for n in n_layers_pair)
    return extrapolate(a, b, depth)


def verdicts(peak_bytes: int, headroom: float = 0.15) -> Dict[str, Dict[str, Any]]:
    """Per accelerator of `ACCELERATORS`: usable GiB, the peak's share of it, and whether it
    fits with at least `headroom` of the usable memory left."""
    out = {}
    for name, (gib, fraction) in ACCELERATORS.items():
        usable = gib * fraction
        share = peak_bytes / GIB / usable
        out[name] = {"usable_gib": round(usable, 1), "used_fraction": round(share, 3),
                     "fits": share <= 1.0, "fits_with_headroom": share <= 1.0 - headroom}
    return out


def summary(r: Dict[str, Any]) -> Dict[str, Any]:
    """The plan's headline: `peak_gib_per_device`, its parts (`gib_per_device`), the
    verdicts and the collectives."""
    parts = {name: round(r.get(key, 0) / GIB, 3) for name, key in (
        ("params", "params_bytes"), ("trainable", "trainable_bytes"),
        ("optimizer", "opt_state_bytes"), ("reference", "ref_params_bytes"),
        ("value", "value_params_bytes"), ("reward_model", "reward_params_bytes"),
        ("arguments", "argument_size_in_bytes"),
        ("temporaries", "temp_size_in_bytes"))}
    return {"preset": r["preset"], "devices": r["devices"], "rules": r["rules"],
            "mesh": r["mesh"], "n_layers": r["n_layers"], "program": r.get("program"),
            "lora_rank": r.get("lora_rank", 0), "quantize_base": r.get("quantize_base", "none"),
            "reward_model": r.get("reward_model", ""),
            "extrapolated_from": r.get("extrapolated_from"),
            "peak_gib_per_device": round(r["peak_bytes"] / GIB, 2), "gib_per_device": parts,
            "verdicts": verdicts(r["peak_bytes"]), "collectives": r["collectives"],
            "loop_trip_collectives": r.get("loop_trip_collectives", [])}


def format_row(r: Dict[str, Any]) -> str:
    """One markdown table row, GiB per device."""
    g = lambda k: f"{r.get(k, 0) / GIB:.1f}"  # noqa: E731
    depth = (f"{r['n_layers']} (from {r['extrapolated_from'][0]}+{r['extrapolated_from'][1]})"
             if "extrapolated_from" in r else str(r["n_layers"]))
    mesh = "×".join(f"{k[0]}{v}" for k, v in r["mesh"].items() if v > 1)
    return (f"| {r['preset']} | {depth} | {r['devices']} | {r['rules']} ({mesh}) | "
            f"{g('params_bytes')} | {g('opt_state_bytes')} | {g('ref_params_bytes')} | "
            f"{g('temp_size_in_bytes')} | {g('argument_size_in_bytes')} | {g('peak_bytes')} |")


TABLE_HEADER = ("| model | layers | devices | rules (mesh) | params | optimizer | reference | "
                "temp (XLA) | arguments (XLA) | peak |\n"
                "|---|---|---|---|---|---|---|---|---|---|")
