"""Bytes (XLA cost_analysis) of ONE layer's decode attention with the prompt's K/V copied to
each row or shared by its group (`SamplingConfig.share_prompt_kv`), at one decode step.

    python scripts/attention_cost.py --preset qwen2.5-0.5b --prompts 32 --samples 8 \
        --prompt-len 128 --new-tokens 512 --step 64

Prints one JSON line: MB per call of "copied" (the [B, Hkv, Tp + N - 1, Dh] cache), "shared"
(the [P, Hkv, Tp, Dh] prefix + [B, Hkv, N - 1, Dh] rows), "rows_only" (the rows' part alone,
as the unshared path computes it: its softmax max stays inside the fused dot), and the K/V
bytes each reads at least (valid slots only).
"""
import argparse
import json

import jax
import jax.numpy as jnp

from rlvr_jax.models import decode_attention, presets


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="qwen2.5-0.5b")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--impl", default="plain", choices=("plain", "grouped"),
                   help="the decode attention path (the CPU ones)")
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=512)
    p.add_argument("--step", type=int, default=64, help="completion slots written so far")
    args = p.parse_args()
    if not 1 <= args.step < args.new_tokens:
        p.error(f"--step must be in [1, --new-tokens), got {args.step}")
    mc = presets.get(args.preset, dtype=args.dtype)
    pp, tp, s = args.prompts, args.prompt_len, args.new_tokens - 1
    b, hkv, dh, dt = pp * args.samples, mc.n_kv_heads, mc.head_dim, mc.compute_dtype
    spec = jax.ShapeDtypeStruct
    q, ids = spec((b, mc.n_heads, dh), dt), spec((b,), jnp.int32)
    kv = lambda n, slots: spec((n, hkv, slots, dh), dt)  # noqa: E731
    mask = lambda n, slots: spec((n, slots), jnp.int32)  # noqa: E731

    def mb(fn, *shapes):
        cost = jax.jit(fn).lower(*shapes).compile().cost_analysis()
        return (cost[0] if isinstance(cost, list) else cost)["bytes accessed"] / 1e6

    attend = decode_attention.decode_attention
    copied = mb(lambda q, k, v, m, st: attend(q, k, v, m, st, tp + args.step, mc,
                                              impl=args.impl),
                q, kv(b, tp + s), kv(b, tp + s), mask(b, tp + s), ids)
    shared = mb(lambda q, k, v, m, st, pk, pv, pm, ps: attend(
        q, k, v, m, st, args.step, mc, impl=args.impl,
        prefix=decode_attention.Prefix(pk, pv, pm, ps)),
        q, kv(b, s), kv(b, s), mask(b, s), ids, kv(pp, tp), kv(pp, tp), mask(pp, tp),
        spec((pp,), jnp.int32))
    rows = mb(lambda q, k, v, m, st: attend(q, k, v, m, st, args.step, mc, impl=args.impl),
              q, kv(b, s), kv(b, s), mask(b, s), ids)
    slot = 2 * hkv * dh * jnp.dtype(dt).itemsize / 1e6  # K and V of one slot, MB.
    print(json.dumps({"preset": args.preset, "impl": args.impl, "rows": b, "step": args.step,
                      "copied_mb": copied, "shared_mb": shared, "rows_only_mb": rows,
                      "valid_kv_copied_mb": b * (tp + args.step) * slot,
                      "valid_kv_shared_mb": (pp * tp + b * args.step) * slot}))


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
