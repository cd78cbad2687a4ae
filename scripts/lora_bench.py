"""LoRA / QLoRA measurements at a real model's shape (random weights), printed as JSON.

    python scripts/lora_bench.py decode [--preset qwen2.5-0.5b] [--rank 16] [--batch 8]
        The sampler's two ways to use adapters: merged once per rollout into the decode copy
        of the weights (`decoding.prepare_params`, the default) vs applied unmerged in every
        decode step: seconds for the preparation and per decode step (min and median of
        --reps interleaved runs), and the sum for rollouts of 16, 64, 256 steps.
    python scripts/lora_bench.py rollout [--preset qwen2.5-0.5b] [--rank 16] [--rows 256]
        [--prompts 32] [--prompt-len 128] [--new-tokens 512] [--dtype bfloat16] [--reps 3]
        [--modes merged,unmerged,base] [--compile-only]
        Whole rollouts (`sampling.generate`, every row forced to --new-tokens) of base +
        adapters, merged once per rollout (the sampler's default) vs unmerged (applied in
        every decode step: `prepare_params(..., merge_adapters=False)`), and of the base
        alone (the floor): compile seconds, median rollout seconds and tokens/s, interleaved
        (one cache phase, no row compaction: one loop body to compile per mode).
    python scripts/lora_bench.py decode_cost [--preset qwen2.5-0.5b] [--rank 16] [--batch 8]
        The same two ways by XLA's cost analysis (GFLOPs, GB accessed), from shapes only.
    python scripts/lora_bench.py quant [--preset qwen2.5-0.5b]
        Log-prob deviation of an int8 / nf4 base (`models.quant`) from the float32 base:
        max and mean |Δ log p| of the sampled-like tokens over a random batch.
    python scripts/lora_bench.py memory [--preset qwen2.5-7b] [--rank 16] [--devices 8]
        Bytes of trainable parameters + AdamW state (float32 mu, nu), total and per device
        (fully sharded), full fine-tuning vs LoRA (all seven targets), and the frozen base
        as stored (param dtype, int8, nf4).
"""
import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax import sampling  # noqa: E402
from rlvr_jax.models import decoding, lora, presets, quant, transformer  # noqa: E402


def _config(args, rank=None):
    rank = args.rank if rank is None else rank
    return presets.get(args.preset, dtype="float32", param_dtype="float32").replace(
        lora_rank=rank, lora_alpha=2.0 * rank, lora_targets=lora.TARGETS if rank else ())


def _params(cfg):
    base = jax.jit(lambda k: transformer.init_params(cfg, k))(jax.random.PRNGKey(0))
    adapters = lora.init_adapters(cfg, jax.random.PRNGKey(1))
    adapters = jax.tree.map(lambda x: x + 0.01, adapters)  # B ≠ 0: a trained adapter.
    return lora.attach(base, adapters)


def decode(args) -> dict:
    cfg = _config(args)
    params = _params(cfg)
    out = {"preset": args.preset, "rank": args.rank, "batch": args.batch,
           "cache_len": args.cache_len, "reps": args.reps, "backend": jax.default_backend(),
           "load_average_1min": os.getloadavg()[0]}
    tokens = jnp.ones((args.batch, 1), jnp.int32)
    cache = decoding.init_cache(cfg, args.batch, args.cache_len)
    cache["mask"] = cache["mask"].at[:, :args.cache_len // 2].set(1)
    cache["index"] = jnp.asarray(args.cache_len // 2, jnp.int32)
    step = jax.jit(lambda pp, c: decoding.forward(pp, tokens, config=cfg, cache=c)[0])
    preps = {key: jax.jit(lambda p, m=merge: decoding.prepare_params(p, cfg, merge_adapters=m))
             for key, merge in (("merged", True), ("unmerged", False))}
    times = {f"{k}_{w}": [] for k in preps for w in ("prepare", "step")}
    for key, prep in preps.items():
        jax.block_until_ready(prep(params))  # Compile (the output dropped: memory).
    for _ in range(args.reps):  # Interleaved, so that a load change hits both alike.
        for key, prep in preps.items():
            times[f"{key}_prepare"].append(_once(prep, params))
    prepared = {key: prep(params) for key, prep in preps.items()}
    del params
    for key in preps:
        jax.block_until_ready(step(prepared[key], cache))  # Compile.
    for _ in range(args.reps):
        for key in preps:
            times[f"{key}_step"].append(_once(step, prepared[key], cache))
    for name, ts in times.items():
        out[f"{name}_s_min"], out[f"{name}_s_median"] = min(ts), statistics.median(ts)
    for n in (16, 64, 256):
        for key in preps:
            out[f"rollout_{n}_steps_{key}_s"] = (out[f"{key}_prepare_s_min"]
                                                 + n * out[f"{key}_step_s_min"])
    return out


@contextlib.contextmanager
def _unmerged():
    """While tracing: the sampler's `prepare_params` keeps the adapters unmerged."""
    merged = decoding.prepare_params
    decoding.prepare_params = functools.partial(merged, merge_adapters=False)
    try:
        yield
    finally:
        decoding.prepare_params = merged


def rollout(args) -> dict:
    """Whole rollouts with adapters merged / unmerged / the base alone (see the docstring).
    Programs are compiled from abstract shapes (so that a `--compile-only` run in another
    process fills the persistent compilation cache for this one)."""
    cfg = presets.get(args.preset, dtype=args.dtype, param_dtype="float32").replace(
        lora_rank=args.rank, lora_alpha=2.0 * args.rank, lora_targets=lora.TARGETS)
    if args.rows % args.prompts:
        raise SystemExit(f"--rows {args.rows} is not a multiple of --prompts {args.prompts}")
    # One cache phase and no row compaction: every row runs to --new-tokens (compaction
    # cannot help), and each phase / batch size is one more loop body to compile (minutes
    # at this shape); both modes decode alike, so the comparison is unchanged.
    sc = sampling.SamplingConfig(temperature=1.0, max_new_tokens=args.new_tokens,
                                 num_samples=args.rows // args.prompts, stop_token_ids=(),
                                 pad_id=0, cache_window=0, compact_ratio=0)
    modes = args.modes.split(",")
    abstract = jax.eval_shape(lambda: _params(cfg))
    ids = jax.ShapeDtypeStruct((args.prompts, args.prompt_len), jnp.int32)
    key_shape = jax.eval_shape(lambda: jax.random.PRNGKey(0))
    out = {"preset": args.preset, "dtype": args.dtype, "rank": args.rank, "rows": args.rows,
           "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "reps": args.reps,
           "backend": jax.default_backend(), "device": jax.devices()[0].device_kind}
    compiled = {}
    for key in modes:
        fn = jax.jit(lambda p_, t, m, r: sampling.generate(
            p_, t, m, r, model_config=cfg, sampling_config=sc).tokens)
        p_abs = lora.base_of(abstract) if key == "base" else abstract
        start = time.perf_counter()
        with _unmerged() if key == "unmerged" else contextlib.nullcontext():
            compiled[key] = fn.lower(p_abs, ids, ids, key_shape).compile()
        out[f"{key}_compile_s"] = round(time.perf_counter() - start, 2)
        print(f"{key}: compiled in {out[f'{key}_compile_s']} s", file=sys.stderr, flush=True)
    if args.compile_only:
        return out
    params = _params(cfg)
    every = {"merged": params, "unmerged": params, "base": lora.base_of(params)}
    tokens = jax.random.randint(jax.random.PRNGKey(3), ids.shape, 1, cfg.vocab_size)
    mask = jnp.ones(ids.shape, jnp.int32)
    for key in modes:
        jax.block_until_ready(compiled[key](every[key], tokens, mask, jax.random.PRNGKey(4)))
    times = {key: [] for key in modes}
    for i in range(args.reps):  # Interleaved, so that a load change hits all alike.
        for key in modes:
            times[key].append(_once(compiled[key], every[key], tokens, mask,
                                    jax.random.PRNGKey(5 + i)))
    for key, ts in times.items():
        out[f"{key}_rollout_s"] = statistics.median(ts)
        out[f"{key}_tokens_per_s"] = args.rows * args.new_tokens / statistics.median(ts)
    if {"merged", "unmerged"} <= set(modes):
        out["unmerged_over_merged"] = out["unmerged_rollout_s"] / out["merged_rollout_s"]
    return out


def decode_cost(args) -> dict:
    """XLA's cost analysis (flops, bytes accessed) of one decode step and of the preparation,
    merged vs unmerged: compiled from abstract shapes, no weights made, machine-independent."""
    cfg = _config(args)
    params = jax.eval_shape(lambda: lora.attach(
        transformer.init_params(cfg, jax.random.PRNGKey(0)),
        lora.init_adapters(cfg, jax.random.PRNGKey(1))))
    tokens = jnp.ones((args.batch, 1), jnp.int32)
    cache = jax.eval_shape(lambda: decoding.init_cache(cfg, args.batch, args.cache_len))
    out = {"preset": args.preset, "rank": args.rank, "batch": args.batch,
           "cache_len": args.cache_len}
    for key, merge in (("merged", True), ("unmerged", False)):
        prep = lambda p, m=merge: decoding.prepare_params(p, cfg, merge_adapters=m)  # noqa
        prepared = jax.eval_shape(prep, params)
        step = lambda pp, c: decoding.forward(pp, tokens, config=cfg, cache=c)[0]  # noqa
        for what, fn, arg in (("prepare", prep, (params,)), ("step", step, (prepared, cache))):
            cost = jax.jit(fn).lower(*arg).compile().cost_analysis()
            cost = cost[0] if isinstance(cost, (list, tuple)) else cost
            out[f"{key}_{what}_gflops"] = cost.get("flops", 0.0) / 1e9
            out[f"{key}_{what}_gbytes"] = cost.get("bytes accessed", 0.0) / 1e9
    return out


def _once(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def quant_deviation(args) -> dict:
    cfg = _config(args, rank=0)
    base = jax.jit(lambda k: transformer.init_params(cfg, k))(jax.random.PRNGKey(0))
    tokens = jax.random.randint(jax.random.PRNGKey(2), (args.batch, args.length), 0,
                                cfg.vocab_size)

    @jax.jit
    def logp(p):
        logits = transformer.forward(p, tokens, config=cfg)[0][:, :-1]
        lp = jax.nn.log_softmax(logits, axis=-1)
        return jnp.take_along_axis(lp, tokens[:, 1:, None], -1)[..., 0]

    want = np.asarray(logp(base), np.float64)
    out = {"preset": args.preset, "batch": args.batch, "length": args.length,
           "mean_abs_logp": float(np.mean(np.abs(want)))}
    for kind in ("int8", "nf4"):
        got = np.asarray(logp(quant.quantize_params(base, kind)), np.float64)
        diff = np.abs(got - want)
        out[kind] = {"max_abs_dlogp": float(diff.max()), "mean_abs_dlogp": float(diff.mean()),
                     "mean_dlogp": float(np.mean(got - want))}
    return out


def memory(args) -> dict:
    cfg = presets.get(args.preset).replace(lora_rank=args.rank, lora_alpha=2.0 * args.rank,
                                           lora_targets=lora.TARGETS)
    full = cfg.num_params()
    adapters = lora.num_params(cfg)
    layer_kernels = cfg.n_layers * (cfg.d_model * cfg.head_dim * 2 * (cfg.n_heads + cfg.n_kv_heads)
                                    + 3 * cfg.d_model * cfg.d_ff)
    pbytes = jnp.dtype(args.param_dtype).itemsize

    def state(n):  # Parameters + AdamW mu and nu, all in param_dtype (optax: mu_dtype None).
        return {"trainable_params": n, "trainable_bytes": n * pbytes,
                "adamw_state_bytes": n * 2 * pbytes,
                "per_device_bytes": n * 3 * pbytes / args.devices}
    base = {kind: int(layer_kernels * quant.bytes_per_param(kind, pbytes)
                      + (full - layer_kernels) * pbytes) for kind in quant.KINDS}
    return {"preset": args.preset, "param_dtype": args.param_dtype, "devices": args.devices,
            "rank": args.rank, "full_finetune": state(full), "lora": state(adapters),
            "frozen_base_bytes": base, "full_reference_copy_bytes": full * pbytes,
            "lora_reference_copy_bytes": 0}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("decode", "rollout", "decode_cost", "quant", "memory"))
    parser.add_argument("--preset", default=None)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--cache-len", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--param-dtype", default="bfloat16")
    parser.add_argument("--rows", type=int, default=256, help="rollout: B = P * G rows")
    parser.add_argument("--prompts", type=int, default=32, help="rollout: P")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--dtype", default="bfloat16", help="rollout: compute dtype")
    parser.add_argument("--modes", default="merged,unmerged,base",
                        help="rollout: which of merged,unmerged,base to time")
    parser.add_argument("--compile-only", action="store_true",
                        help="rollout: compile the programs (e.g. into the persistent "
                        "compilation cache) and stop")
    args = parser.parse_args(argv)
    if args.preset is None:
        args.preset = "qwen2.5-7b" if args.what == "memory" else "qwen2.5-0.5b"
    fn = {"decode": decode, "rollout": rollout, "decode_cost": decode_cost,
          "quant": quant_deviation, "memory": memory}[args.what]
    print(json.dumps(fn(args), indent=1))


if __name__ == "__main__":
    main()
