"""Benchmarks that print one JSON object each (the library behind `scripts/benchmark.py`,
whose docstring has the reference commands).

Subcommands register themselves in `COMMANDS`; heavy imports (jax, the package)
happen inside each command so `--help` stays fast.
"""
import argparse
import json
import statistics
import time


def timed(fn, repeats, *, quartiles: bool = False):
    """Median wall time (s) of `fn()` over `repeats` runs, after one warm-up (compile) run;
    with `quartiles`, [median, 25th, 75th percentile]."""
    import jax
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    if quartiles:
        q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
        return [statistics.median(times), q1, q3]
    return statistics.median(times)


def sample_command(args):
    """Sampler throughput: prefill time, decode-step time and generated tokens/s; with
    `--lengths real`, rows end at drawn lengths (`rlvr_jax.workloads`) and it reports the
    useful fraction of the decode work and real tokens/s."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import cache_phases, live_rows, sampling, tree_rollouts
    from rlvr_jax.models import decode_attention, transformer

    real = args.lengths == "real"
    mc = _model_config(args.preset, args.dtype)
    sc = sampling.SamplingConfig(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, greedy=args.greedy,
        max_new_tokens=args.new_tokens, num_samples=args.samples, pad_id=0,
        stop_token_ids=() if args.force_length or real else (args.stop_token,),
        cache_window=_window_flag(args.cache_window),
        compact_ratio=None if args.compact_ratio < 0 else args.compact_ratio,
        attention_impl=args.decode_attention or None, share_prompt_kv=args.share_prompt_kv,
        tree=tree_rollouts.TreeConfig(
            mode=args.tree_mode, branches=args.tree_branches, max_forks=args.tree_max_forks,
            depths=tuple(args.tree_depths), every=args.tree_every,
            entropy_threshold=args.tree_entropy_threshold) if args.tree_mode else None)
    shape = (args.prompts, args.prompt_len)
    abstract = jax.eval_shape(lambda: transformer.init_params(mc, jax.random.PRNGKey(0)))
    ids = jax.ShapeDtypeStruct(shape, jnp.int32)
    rows = jax.ShapeDtypeStruct((args.prompts * args.samples,), jnp.int32) if real else None
    start = time.perf_counter()
    compiled = sampling.jit_generate.lower(abstract, ids, ids,
                                           jax.ShapeDtypeStruct((2,), jnp.uint32),
                                           model_config=mc, sampling_config=sc,
                                           budgets=rows).compile()
    out = {
        "benchmark": "sample", "preset": args.preset, "dtype": args.dtype,
        "prompts": args.prompts, "samples": args.samples, "sequences": args.prompts * args.samples,
        "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "lengths": args.lengths,
        "force_length": args.force_length, "cache_window": cache_phases.cache_window_of(sc),
        "decode_attention": sc.attention_impl or decode_attention.default_impl(),
        "share_prompt_kv": sc.share_prompt_kv,
        "batch_sizes": live_rows.sizes_of(args.prompts * args.samples, sc),
        "top_k": args.top_k, "top_p": args.top_p, "greedy": args.greedy,
        "compile_s": time.perf_counter() - start, **_device_info(),
    }
    if args.compile_only:
        return out
    params = transformer.init_params(mc, jax.random.PRNGKey(args.seed))
    tokens, mask, budgets = _sample_inputs(args, mc.vocab_size)

    run = lambda: compiled(params, tokens, mask, rng, budgets=budgets)  # noqa: E731
    rng = jax.random.PRNGKey(args.seed + 2)
    prefill = jax.jit(lambda p, t, m: transformer.forward(
        p, t, config=mc, attention_mask=m, return_hidden=True,
        cache=transformer.init_cache(mc, args.prompts, args.prompt_len + args.new_tokens - 1))[0])
    if args.profile_dir:
        jax.block_until_ready(run())
        with jax.profiler.trace(args.profile_dir):
            jax.block_until_ready(run())
    cpu_start = time.process_time()
    total_s = timed(run, args.repeats)
    cpu_s = (time.process_time() - cpu_start) / (args.repeats + 1)  # The warm-up run too.
    prefill_s = timed(lambda: prefill(params, tokens, mask), args.repeats)
    rollout = run()
    generated = int(jnp.sum(rollout.lengths))
    steps = max(int(jnp.max(rollout.decode_steps)) - 1, 1)
    out.update({
        "generated_tokens": generated,
        "tokens_per_s": generated / total_s,
        "total_s": total_s,
        "prefill_ms": 1e3 * prefill_s,
        "decode_step_ms": 1e3 * max(total_s - prefill_s, 0.0) / steps,
        "useful_fraction": float(live_rows.useful_fraction(rollout)),
        "cpu_s": cpu_s,  # Process CPU seconds per rollout: less sensitive to other load.
    })
    if sc.tree is not None:  # Tokens copied at forks; decoded = generated - shared.
        shared = int(tree_rollouts.shared_tokens(rollout))
        out.update(tree=args.tree_mode, shared_prefix_tokens=shared,
                   decoded_tokens=generated - shared)
    if real:  # Every token is real (no forced tail).
        out.update(real_tokens_per_s=generated / total_s, real_tokens_per_cpu_s=generated / cpu_s)
    return out


def _sample_inputs(args, vocab_size):
    """(prompt tokens [P, Tp], prompt mask [P, Tp], budgets [P·G] or None) of the sample
    benchmark: full random prompts, or with `--lengths real` left-padded prompts and
    completion budgets drawn by `rlvr_jax.workloads` (seed 0)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from rlvr_jax import workloads
    shape = (args.prompts, args.prompt_len)
    tokens = jax.random.randint(jax.random.PRNGKey(args.seed + 1), shape, 1, vocab_size)
    if args.lengths != "real":
        return tokens, jnp.ones(shape, jnp.int32), None
    prompt = workloads.prompt_lengths(args.prompts, args.prompt_len, seed=0)
    mask = (np.arange(args.prompt_len)[None] >= (args.prompt_len - prompt)[:, None])
    budgets = workloads.completion_lengths(args.prompts * args.samples, args.new_tokens, seed=0)
    return (jnp.where(mask, tokens, 0), jnp.asarray(mask, jnp.int32),
            jnp.asarray(budgets, jnp.int32))


def add_sample_parser(subparsers):
    p = subparsers.add_parser("sample", help=sample_command.__doc__)
    p.add_argument("--preset", default="tiny", help="a model preset, or 'bench' (the peer A/B model)")
    p.add_argument("--dtype", default="float32", help="compute and parameter dtype (bfloat16 on GPU)")
    p.add_argument("--prompts", type=int, default=4, help="P")
    p.add_argument("--samples", type=int, default=2, help="G, samples per prompt")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=16, help="N, max new tokens")
    p.add_argument("--force-length", action="store_true",
                   help="no stop tokens: every sequence generates exactly N tokens")
    p.add_argument("--lengths", choices=("stop", "real"), default="stop",
                   help="stop: rows end at --stop-token (or N); real: at drawn real lengths "
                        "(rlvr_jax.workloads: prompts and completions), no stop token")
    p.add_argument("--compact-ratio", type=float, default=-1.0,
                   help="SamplingConfig.compact_ratio (-1: automatic, 0: off)")
    p.add_argument("--decode-attention", default="",
                   help="SamplingConfig.attention_impl: '' (by backend), grouped, plain, pallas")
    p.add_argument("--share-prompt-kv", action="store_true",
                   help="SamplingConfig.share_prompt_kv: one copy of a prompt's KV per group")
    p.add_argument("--stop-token", type=int, default=0, help="stop token without --force-length")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--cache-window", type=int, default=-1,
                   help="SamplingConfig.cache_window (-1: automatic, 0: one phase)")
    p.add_argument("--tree-mode", default="", help="tree rollouts (SamplingConfig.tree): '' "
                   "(off) | depth | every | entropy; --tree-* as the sampling.tree.* keys")
    p.add_argument("--tree-branches", type=int, default=2)
    p.add_argument("--tree-max-forks", type=int, default=1)
    p.add_argument("--tree-depths", type=int, nargs="*", default=())
    p.add_argument("--tree-every", type=int, default=8)
    p.add_argument("--tree-entropy-threshold", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3, help="timed runs (median) after a warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-dir", default=None, help="write a jax.profiler trace here")
    p.add_argument("--compile-only", action="store_true",
                   help="only compile (abstract inputs, nothing allocated) and report compile_s")
    p.set_defaults(func=sample_command)


BENCH_SHAPE = dict(family="qwen2", vocab_size=8192, d_model=256, n_layers=4, n_heads=4,
                   n_kv_heads=2, head_dim=64, d_ff=1024, rope_theta=1e6, norm_eps=1e-6,
                   qkv_bias=True, tie_embeddings=True)  # The peer A/B bench model (6.03M params).


def decode_cost_command(args):
    """Bytes and flops of one decode step and of a whole rollout (XLA cost_analysis) against
    their byte minimum (`rlvr_jax.perf.decode_cost`)."""
    from rlvr_jax.perf import decode_cost
    mc = _model_config(args.preset, args.dtype)
    shape = (args.prompts, args.samples, args.prompt_len, args.new_tokens)
    out = {"benchmark": "decode_cost", "preset": args.preset, "dtype": args.dtype,
           "share_prompt_kv": args.share_prompt_kv}
    out.update(decode_cost.step_cost(mc, *shape, args.step, args.cache_slots,
                                     args.share_prompt_kv))
    out["rollout"] = decode_cost.rollout_cost(mc, *shape, _window_flag(args.cache_window),
                                              args.share_prompt_kv)
    out.update(_device_info())
    return out


def _window_flag(flag: int):
    """`--cache-window` as `SamplingConfig.cache_window` takes it (-1: automatic)."""
    from rlvr_jax import cache_phases
    try:
        return cache_phases.cache_window_setting(flag)
    except ValueError as e:
        raise ValueError(f"--cache-window {e}") from None


def _model_config(preset: str, dtype: str):
    """A `models.presets` shape, or "bench" (`BENCH_SHAPE`), in `dtype` (compute and storage)."""
    from rlvr_jax.models import presets
    from rlvr_jax.models.config import ModelConfig
    if preset == "bench":
        return ModelConfig(**BENCH_SHAPE, dtype=dtype, param_dtype=dtype)
    return presets.get(preset, dtype=dtype, param_dtype=dtype)


def add_decode_cost_parser(subparsers):
    p = subparsers.add_parser("decode_cost", help=decode_cost_command.__doc__)
    p.add_argument("--preset", default="bench", help="'bench' (the peer A/B model) or a preset")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--step", type=int, default=64, help="decode step the one-step state is at")
    p.add_argument("--cache-slots", type=int, default=None,
                   help="one-step cache size (default Tp + N - 1: the single-phase loop)")
    p.add_argument("--cache-window", type=int, default=-1,
                   help="the rollout's SamplingConfig.cache_window (-1: automatic, 0: one phase)")
    p.add_argument("--share-prompt-kv", action="store_true",
                   help="SamplingConfig.share_prompt_kv: one copy of a prompt's KV per group")
    p.set_defaults(func=decode_cost_command)


def _update_cost_command(args):
    """`train --compile-only`: padded fraction, FLOPs overhead and float32 vocab dots of the
    compiled update (`rlvr_jax.perf.update_cost`), one minibatch, one log-prob chunk; packed rows
    of Tp + N at real lengths unless `--pack-length` says otherwise."""
    import dataclasses
    from rlvr_jax.perf import update_cost
    mc, sc, rl = _update_configs(args)
    chunk = max(args.new_tokens, rl.pack_length)  # One log-prob chunk: no loop to miscount.
    rl = dataclasses.replace(rl, logprob_chunk=chunk,
                             microbatches=1 if not rl.pack_length else rl.microbatches)
    prompt, completion = update_cost.workload_lengths(
        args.lengths, args.prompts, args.samples, args.prompt_len, args.new_tokens)
    out = {"benchmark": "train", "compile_only": True, "lengths": args.lengths,
           "preset": args.preset, "dtype": args.dtype, "remat": args.remat,
           "sequences": args.prompts * args.samples, "prompt_len": args.prompt_len,
           "new_tokens": args.new_tokens, "pack_length": rl.pack_length,
           "pack_rows": rl.pack_rows, "microbatches": rl.microbatches, "logprob_chunk": chunk}
    out.update(update_cost.update_cost(mc, sc, rl, prompt_lens=prompt, completion_lens=completion,
                                       prompt_len=args.prompt_len))
    out.update(_device_info())
    return out


def _update_configs(args):
    """(model, sampling, update) configs of the `train` / `rl_step` flags."""
    from rlvr_jax import sampling
    from rlvr_jax.models import presets
    from rlvr_jax.train import step as step_lib
    mc = presets.get(args.preset, dtype=args.dtype, remat=args.remat,
                     scan_unroll=args.scan_unroll)
    sc = sampling.SamplingConfig(max_new_tokens=args.new_tokens, num_samples=args.samples,
                                 temperature=1.0)
    rl = step_lib.RLConfig(num_prompts=args.prompts, microbatches=args.microbatches,
                           logprob_chunk=args.logprob_chunk, pack_length=_pack_length(args),
                           pack_rows=args.pack_rows)
    return mc, sc, rl


def _pack_length(args) -> int:
    """`--pack-length`; by default Tp + N at `--lengths real` (packing pays), else 0."""
    if args.pack_length is not None:
        return args.pack_length
    real = getattr(args, "lengths", "forced") == "real"
    return args.prompt_len + args.new_tokens if real else 0


def _update_setup(args):
    import jax
    from rlvr_jax.models import transformer
    from rlvr_jax.train import state as state_lib

    mc, sc, rl = _update_configs(args)
    tx = state_lib.make_optimizer(learning_rate=1e-6)
    params = transformer.init_params(mc, jax.random.PRNGKey(args.seed))
    state = state_lib.create_train_state(params, tx, jax.random.PRNGKey(args.seed + 1))
    return mc, sc, rl, tx, state


def _device_info():
    import jax
    device = jax.devices()[0]
    return {"device_kind": device.device_kind, "platform": device.platform,
            "device_count": jax.device_count(), "jax_version": jax.__version__}


def train_command(args):
    """Policy update (forward + backward + AdamW) of B×(Tp+N) tokens: tokens/s and MFU
    (--compile-only: padded fraction, FLOPs overhead, float32 vocab dots; nothing runs)."""
    import jax.numpy as jnp
    from rlvr_jax.perf import update_cost
    from rlvr_jax.train import step as step_lib

    if args.compile_only:
        return _update_cost_command(args)
    mc, sc, rl, tx, state = _update_setup(args)
    update_fn = step_lib.make_update_fn(mc, sc, rl, tx)
    lengths = update_cost.workload_lengths(
        args.lengths, args.prompts, args.samples, args.prompt_len, args.new_tokens)
    rollout = update_cost.fake_rollout(mc, args.prompts, args.samples, args.prompt_len,
                                       args.new_tokens, args.seed, lengths)
    rewards = (jnp.arange(args.prompts * args.samples) % 2).astype(jnp.float32)
    holder = {"state": state}

    def run():
        holder["state"], metrics = update_fn(holder["state"], rollout, rewards)
        return metrics
    seconds = timed(run, args.repeats)
    context = args.prompt_len + args.new_tokens
    seq = sum(lengths)  # Real tokens per sequence; the model's FLOPs over their own lengths.
    tokens, flops = int(seq.sum()), update_cost.model_flops(mc, seq)
    out = {"benchmark": "train", "preset": args.preset, "dtype": args.dtype, "remat": args.remat,
           "layer_unroll": mc.layer_unroll, "lengths": args.lengths,
           "pack_length": rl.pack_length, "pack_rows": rl.pack_rows,
           "sequences": args.prompts * args.samples, "tokens_per_sequence": context,
           "microbatches": args.microbatches, "step_s": seconds, "tokens_per_s": tokens / seconds,
           "tflops_per_s": flops / seconds / 1e12, "matmul_params": mc.num_params(False)}
    for name, peak in (("mfu_vs_799", 799e12), ("mfu_vs_989", 989e12)):
        out[name] = flops / seconds / peak
    out.update(_device_info())
    return out


def rl_step_command(args):
    """A whole GRPO step (split path): sampling, scoring, update times and their sum."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax.train import step as step_lib

    mc, sc, rl, tx, state = _update_setup(args)
    sample_fn = step_lib.make_sample_fn(mc, sc)
    update_fn = step_lib.make_update_fn(mc, sc, rl, tx)
    # A stand-in verifier on device: reward 1 when a completion's first token is even.
    score = jax.jit(lambda tokens: (tokens[:, 0] % 2 == 0).astype(jnp.float32))
    batch = {"prompt_tokens": jax.random.randint(jax.random.PRNGKey(args.seed + 3),
                                                 (args.prompts, args.prompt_len), 1, mc.vocab_size),
             "prompt_mask": jnp.ones((args.prompts, args.prompt_len), jnp.int32)}
    holder = {"state": state}
    rng = jax.random.PRNGKey(args.seed + 4)
    sample_s = timed(lambda: sample_fn(holder["state"].params, batch, rng), args.repeats)
    rollout = sample_fn(holder["state"].params, batch, rng)
    score_s = timed(lambda: score(rollout.tokens), args.repeats)
    rewards = score(rollout.tokens)

    def run():
        holder["state"], metrics = update_fn(holder["state"], rollout, rewards)
        return metrics
    update_s = timed(run, args.repeats)
    generated = int(jnp.sum(rollout.lengths))
    out = {"benchmark": "rl_step", "preset": args.preset, "dtype": args.dtype,
           "prompts": args.prompts, "samples": args.samples, "prompt_len": args.prompt_len,
           "new_tokens": args.new_tokens, "generated_tokens": generated,
           "sampling_s": sample_s, "scoring_s": score_s, "update_s": update_s,
           "step_s": sample_s + score_s + update_s,
           "sampling_tokens_per_s": generated / sample_s}
    out.update(_device_info())
    return out


def _add_update_args(p, prompts, samples, prompt_len, new_tokens):
    p.add_argument("--preset", default="tiny")
    p.add_argument("--dtype", default="float32", help="compute dtype (bfloat16 on GPU)")
    p.add_argument("--remat", default="none", help="none | full | dots | dots_no_batch")
    p.add_argument("--scan-unroll", type=int, default=0,
                   help="ModelConfig.scan_unroll (0: auto, 1: scan, L: unrolled)")
    p.add_argument("--prompts", type=int, default=prompts, help="P")
    p.add_argument("--samples", type=int, default=samples, help="G")
    p.add_argument("--prompt-len", type=int, default=prompt_len)
    p.add_argument("--new-tokens", type=int, default=new_tokens)
    p.add_argument("--microbatches", type=int, default=1)
    p.add_argument("--logprob-chunk", type=int, default=128)
    p.add_argument("--pack-length", type=int, default=None,
                   help="RLConfig.pack_length: packed rows of this many tokens (0: left-padded; "
                        "default: Tp + N with --lengths real, else 0)")
    p.add_argument("--pack-rows", type=int, default=0,
                   help="RLConfig.pack_rows (0: the rows of one unpacked micro-batch)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)


def add_train_parser(subparsers):
    p = subparsers.add_parser("train", help=train_command.__doc__)
    _add_update_args(p, prompts=4, samples=2, prompt_len=8, new_tokens=16)
    p.add_argument("--lengths", default="forced", choices=("forced", "real"),
                   help="forced: every row full; real: rlvr_jax.workloads' length draws")
    p.add_argument("--compile-only", action="store_true",
                   help="compile from abstract inputs only; report padded_fraction, "
                        "flops_overhead and f32_vocab_dots (rlvr_jax.perf.update_cost)")
    p.set_defaults(func=train_command)


def add_rl_step_parser(subparsers):
    p = subparsers.add_parser("rl_step", help=rl_step_command.__doc__)
    _add_update_args(p, prompts=4, samples=2, prompt_len=8, new_tokens=16)
    p.set_defaults(func=rl_step_command)


def _scoring_workload(verifier: str, count: int, pairs_path: str):
    """(host fn(text, example), texts [count], examples [count]) of one verifier."""
    from rlvr_jax import scoring, tasks
    if verifier == "task":  # Countdown completions: half right, half with a wrong answer.
        task = tasks.get("countdown", max_number=9, max_target=30, ops=("+", "-", "*"))
        examples = task.generate(count, seed=0)
        texts = [ex.solution if i % 2 else ex.solution + "+1" for i, ex in enumerate(examples)]
        return task.verify, texts, examples
    with open(pairs_path, encoding="utf-8") as f:  # Audited answer pairs, right and wrong.
        pairs = [json.loads(line) for line in f if line.strip()]
    pairs = [pairs[i % len(pairs)] for i in range(count)]
    examples = [tasks.Example(prompt="", answer=p["reference"], solution="", task="math",
                              key=str(i), split="test") for i, p in enumerate(pairs)]
    texts = [f"So the final answer is $\\boxed{{{p['candidate']}}}$." for p in pairs]
    kind = "rule" if verifier == "math" else "math_verify"
    return scoring.math_verifier(kind).verify, texts, examples


def scoring_command(args):
    """Host scoring throughput (completions/s): in-process vs a RewardPool of n workers."""
    from rlvr_jax import scoring
    fn, texts, examples = _scoring_workload(args.verifier, args.count, args.pairs)
    preload = ("math_verify",) if args.verifier == "math_verify" else ()
    out = {"benchmark": "scoring", "verifier": args.verifier, "completions": args.count,
           "timeout_s": args.timeout_s}
    for workers in args.workers:
        start = time.perf_counter()
        scorer = scoring.HostScorer(fn, num_workers=workers, timeout_s=args.timeout_s,
                                    preload=preload)
        scorer(texts[:8], examples[:8])  # Workers up and warm (imports done).
        startup = time.perf_counter() - start
        times, errors = [], 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            _, _, info = scorer(texts, examples)
            times.append(time.perf_counter() - t0)
            errors += info["errors"] + info["timeouts"]
        scorer.close()
        key = "serial" if workers == 0 else f"pool{workers}"
        out[f"{key}_per_s"] = args.count / statistics.median(times)
        out[f"{key}_startup_s"] = startup
        out[f"{key}_failures"] = errors
    return out


def add_scoring_parser(subparsers):
    p = subparsers.add_parser("scoring", help=scoring_command.__doc__)
    p.add_argument("--verifier", default="task", choices=("task", "math", "math_verify"))
    p.add_argument("--count", type=int, default=1024, help="completions per timed call")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2],
                   help="0: in-process; n: a RewardPool of n processes")
    p.add_argument("--timeout-s", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pairs", default="tests/data/answer_pairs.jsonl",
                   help="reference/candidate pairs for the math verifiers")
    p.set_defaults(func=scoring_command)


COMMANDS = [add_sample_parser, add_train_parser, add_rl_step_parser, add_decode_cost_parser,
            add_scoring_parser]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    args = parser.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)
