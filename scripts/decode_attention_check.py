"""Decode attention on this machine's backend: every implementation against a float32
reference at one shape (max abs error, µs per call), then a short sampled rollout per
implementation against "grouped" (same tokens, log-prob difference). One JSON line each.

    python scripts/decode_attention_check.py --preset qwen2.5-0.5b --dtype bfloat16 \
        --rows 256 --slots 639 --impls grouped plain pallas [--sweep]

The shape: rows start at random slots in [0, 100) (left-padded prompts), every fourth row has
finished halfway (its later slots masked), all end at `--slots` (and at 2/3 of it). The
reference is the plain path in float32 with float32 matmuls on the same (rounded) inputs.
The rollout runs the model cut to `--rollout-layers` layers twice: in float32 with float32
matmuls (tokens must equal: the implementations differ by summation order only), and in
`--dtype` (agreement reported, not required: bf16 rounding may flip a near-tied draw).
"""
import argparse
import dataclasses
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling
from rlvr_jax.models import decode_attention, transformer
from rlvr_jax.perf import benchmarks


def _inputs(cfg, rows, slots, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((rows, cfg.n_heads, cfg.head_dim))
    k, v = (rng.standard_normal((rows, cfg.n_kv_heads, slots, cfg.head_dim)) for _ in range(2))
    start = rng.integers(0, min(100, slots // 2), rows)
    mask = np.ones((rows, slots), np.int32)
    for r in range(0, rows, 4):  # Finished halfway: fed padding since.
        mask[r, (start[r] + slots) // 2:] = 0
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return cast(q), cast(k), cast(v), jnp.asarray(mask), jnp.asarray(start, jnp.int32)


def _timed_us(fn, *args, repeats=20):
    return 1e6 * benchmarks.timed(lambda: fn(*args), repeats)


def op_check(cfg, args):
    """Max abs error against the float32 reference and µs per call of each implementation."""
    q, k, v, mask, start = _inputs(cfg, args.rows, args.slots, cfg.compute_dtype)
    f32 = dataclasses.replace(cfg, dtype="float32", param_dtype="float32")
    for end in (args.slots, 2 * args.slots // 3):
        end = jnp.asarray(end, jnp.int32)
        with jax.default_matmul_precision("highest"):
            ref = jax.jit(lambda *a: decode_attention.decode_attention(*a, f32, impl="plain"))(
                *(x.astype(jnp.float32) for x in (q, k, v)), mask, start, end)
        for impl in args.impls:
            try:
                fn = jax.jit(lambda *a, impl=impl: decode_attention.decode_attention(
                    *a, cfg, impl=impl))
                out = fn(q, k, v, mask, start, end)
                err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref)))
                line = dict(check="op", impl=impl, rows=args.rows, slots=args.slots,
                            end=int(end), max_abs_err=err,
                            us_per_call=_timed_us(fn, q, k, v, mask, start, end))
            except Exception as e:  # One failing implementation must not hide the others.
                line = dict(check="op", impl=impl, error=f"{type(e).__name__}: {e}"[:2000])
            print(json.dumps(line), flush=True)


def sweep(cfg, args):
    """µs per call of the kernel by slots per block, chunks per (row, KV head) and Triton
    warps (end at `--slots`)."""
    q, k, v, mask, start = _inputs(cfg, args.rows, args.slots, cfg.compute_dtype)
    end = jnp.asarray(args.slots, jnp.int32)
    for block, splits, warps in itertools.product((32, 64, 128), (1, 3, 5, 10), (4,)):
        try:
            fn = jax.jit(lambda *a, b=block, n=splits, w=warps: decode_attention.decode_attention(
                *a, cfg, impl=args.impls[-1], block=b, splits=n, warps=w))
            line = dict(check="sweep", block=block, splits=splits, warps=warps,
                        us_per_call=_timed_us(fn, q, k, v, mask, start, end))
        except Exception as e:
            line = dict(check="sweep", block=block, splits=splits, warps=warps,
                        error=f"{type(e).__name__}: {e}"[:500])
        print(json.dumps(line), flush=True)


def rollout_check(cfg, args):
    """Tokens and log-probs of a short rollout per implementation against "grouped"."""
    small = dataclasses.replace(cfg, n_layers=args.rollout_layers)
    p, tp = 4, min(128, args.slots // 2)
    rng = np.random.default_rng(1)
    lengths = rng.integers(tp // 4, tp + 1, p)
    prompt_mask = jnp.asarray(np.arange(tp)[None] >= (tp - lengths)[:, None], jnp.int32)
    prompts = jnp.where(prompt_mask != 0, jnp.asarray(
        rng.integers(1, cfg.vocab_size, (p, tp)), jnp.int32), 0)
    for label, mc in (("float32", dataclasses.replace(small, dtype="float32",
                                                      param_dtype="float32")),
                      (str(jnp.dtype(cfg.compute_dtype)), small)):
        params = transformer.init_params(mc, jax.random.PRNGKey(0))
        outs = {}
        for impl in ["grouped"] + [i for i in args.impls if i != "grouped"]:
            sc = sampling.SamplingConfig(temperature=1.0, max_new_tokens=args.rollout_tokens,
                                         num_samples=4, pad_id=0, stop_token_ids=(),
                                         attention_impl=impl)
            try:
                with jax.default_matmul_precision("highest" if label == "float32" else None):
                    outs[impl] = sampling.jit_generate(params, prompts, prompt_mask,
                                                       jax.random.PRNGKey(2), model_config=mc,
                                                       sampling_config=sc)
            except Exception as e:
                print(json.dumps(dict(check="rollout", dtype=label, impl=impl,
                                      error=f"{type(e).__name__}: {e}"[:2000])), flush=True)
                continue
            if impl == "grouped" or "grouped" not in outs:
                continue
            got, want = outs[impl], outs["grouped"]
            same = np.asarray(got.tokens) == np.asarray(want.tokens)
            # Log-probs compared up to the first step at which any row's token differs.
            upto = int(np.argmin(same.all(axis=0))) if not same.all() else same.shape[1]
            diff = float(np.max(np.abs(np.asarray(got.logprobs)[:, :upto]
                                       - np.asarray(want.logprobs)[:, :upto]))) if upto else None
            print(json.dumps(dict(check="rollout", dtype=label, impl=impl,
                                  layers=args.rollout_layers, tokens_equal=bool(same.all()),
                                  token_agreement=float(same.mean()),
                                  steps_before_first_difference=upto,
                                  logprob_max_abs_diff=diff)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="qwen2.5-0.5b")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--slots", type=int, default=639)
    parser.add_argument("--impls", nargs="+", default=["grouped", "plain", "pallas"])
    parser.add_argument("--rollout-layers", type=int, default=2)
    parser.add_argument("--rollout-tokens", type=int, default=32)
    parser.add_argument("--sweep", action="store_true",
                        help="also time the kernel (the last of --impls) by block, splits, warps")
    parser.add_argument("--sweep-only", action="store_true", help="only the sweep")
    args = parser.parse_args()
    for impl in args.impls:
        decode_attention.check_impl(impl)
    cfg = benchmarks._model_config(args.preset, args.dtype)
    print(json.dumps(dict(backend=jax.default_backend(), device=jax.devices()[0].device_kind,
                          jax=jax.__version__)), flush=True)
    if not args.sweep_only:
        op_check(cfg, args)
        rollout_check(cfg, args)
    if args.sweep or args.sweep_only:
        sweep(cfg, args)


if __name__ == "__main__":
    main()
