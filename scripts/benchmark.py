"""Benchmarks that print one JSON object each.

    python scripts/benchmark.py sample --preset qwen2.5-0.5b --dtype bfloat16 \
        --prompts 32 --samples 8 --prompt-len 128 --new-tokens 512 --force-length

Subcommands register themselves in `COMMANDS`; heavy imports (jax, the package)
happen inside each command so `--help` stays fast.
"""
import argparse
import json
import statistics
import time


def _timed(fn, repeats):
    """Median wall time (s) of `fn()` over `repeats` runs, after one warm-up (compile) run."""
    import jax
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sample_command(args):
    """Sampler throughput: prefill time, decode-step time and generated tokens/s."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import sampling
    from rlvr_jax.models import presets, transformer

    mc = presets.get(args.preset, dtype=args.dtype, param_dtype=args.dtype)
    sc = sampling.SamplingConfig(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, greedy=args.greedy,
        max_new_tokens=args.new_tokens, num_samples=args.samples, pad_id=0,
        stop_token_ids=() if args.force_length else (args.stop_token,),
        cache_window=args.cache_window)
    params = transformer.init_params(mc, jax.random.PRNGKey(args.seed))
    shape = (args.prompts, args.prompt_len)
    tokens = jax.random.randint(jax.random.PRNGKey(args.seed + 1), shape, 1, mc.vocab_size)
    mask = jnp.ones(shape, jnp.int32)
    rng = jax.random.PRNGKey(args.seed + 2)

    run = lambda: sampling.jit_generate(params, tokens, mask, rng, model_config=mc,  # noqa: E731
                                        sampling_config=sc)
    prefill = jax.jit(lambda p, t, m: transformer.forward(
        p, t, config=mc, attention_mask=m, return_hidden=True,
        cache=transformer.init_cache(mc, args.prompts, args.prompt_len + args.new_tokens - 1))[0])
    if args.profile_dir:
        jax.block_until_ready(run())
        with jax.profiler.trace(args.profile_dir):
            jax.block_until_ready(run())
    total_s = _timed(run, args.repeats)
    prefill_s = _timed(lambda: prefill(params, tokens, mask), args.repeats)
    generated = int(jnp.sum(run().lengths))
    steps = max(args.new_tokens - 1, 1)
    device = jax.devices()[0]
    return {
        "benchmark": "sample", "preset": args.preset, "dtype": args.dtype,
        "prompts": args.prompts, "samples": args.samples, "sequences": args.prompts * args.samples,
        "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
        "force_length": args.force_length, "cache_window": args.cache_window,
        "top_k": args.top_k, "top_p": args.top_p, "greedy": args.greedy,
        "generated_tokens": generated,
        "tokens_per_s": generated / total_s,
        "total_s": total_s,
        "prefill_ms": 1e3 * prefill_s,
        "decode_step_ms": 1e3 * max(total_s - prefill_s, 0.0) / steps,
        "device_kind": device.device_kind, "platform": device.platform,
        "device_count": jax.device_count(), "jax_version": jax.__version__,
    }


def add_sample_parser(subparsers):
    p = subparsers.add_parser("sample", help=sample_command.__doc__)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--dtype", default="float32", help="compute and parameter dtype (bfloat16 on GPU)")
    p.add_argument("--prompts", type=int, default=4, help="P")
    p.add_argument("--samples", type=int, default=2, help="G, samples per prompt")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=16, help="N, max new tokens")
    p.add_argument("--force-length", action="store_true",
                   help="no stop tokens: every sequence generates exactly N tokens")
    p.add_argument("--stop-token", type=int, default=0, help="stop token without --force-length")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--cache-window", type=int, default=0, help="SamplingConfig.cache_window")
    p.add_argument("--repeats", type=int, default=3, help="timed runs (median) after a warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-dir", default=None, help="write a jax.profiler trace here")
    p.set_defaults(func=sample_command)


COMMANDS = [add_sample_parser]  # Add `train` / `rl_step` parsers here.


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    args = parser.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)


if __name__ == "__main__":
    main()
