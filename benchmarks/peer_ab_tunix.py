"""A/B CPU benchmark: rlvr_jax (this project) vs google-tunix 0.1.7, same model, same process.

Workload (identical for both, float32, random weights; tunix gets a COPY of rlvr_jax's weights,
so both run the very same model - `check` verifies the logits agree):
  Qwen2-shaped decoder: vocab 8192, hidden 256, intermediate 1024, 4 layers, 4 heads, 2 KV heads,
  head_dim 64, QKV bias, tied embeddings, rope theta 1e6, RMSNorm eps 1e-6 (6.03M params).
  8 prompts x 4 samples = 32 sequences, prompt = 32 random ids, 128 new tokens, temperature 1,
  no stop token reachable (every row runs to full length).

Parts (each interleaves the implementations call by call: A, B, C, A, B, C, ...):
  check    versions + logits of the two models on the same tokens (max |diff|)
  sampler  ours jit_generate (+ host wrapper `sample` + device_get) vs tunix Sampler: the
           jitted prefill + decode functions called directly (device-only) and the public
           Sampler.__call__ (end-to-end: tokenize, prefill, decode, device_get, detokenize)
  grpo     ours one-program make_rl_step, ours split path (make_sample_fn -> host reward ->
           make_update_fn) vs tunix GRPOLearner global step (vanilla rollout, colocated);
           beta 0, one optimizer step per batch, 2 micro-batches of 16 sequences, no remat,
           same optimizer (clip_by_global_norm(1) + AdamW lr 1e-6, wd 0)
  cost     XLA cost_analysis() (flops, bytes accessed) of ONE decode-loop body of each
           implementation (donated state, as in the loop), + the optimized HLO saved to --hlo-dir.
           Both run their layers one by one in the decode step, so every layer is counted.
  decode   diagnostic: ms per decode step of each loop body called on its own (jitted, state
           donated), interleaved
  train    one optimizer step on a fixed 32-row rollout (2 micro-batches): ours update_fn
           with default settings (and, diagnostic, with the layer scan, `--remat` policies) vs tunix's
           own jitted train step called twice (grad-accum 2 via optax.MultiSteps)

Every timed call records wall time and process CPU time (all threads), since the 2-core
machine is shared: CPU seconds are less sensitive to being descheduled than wall seconds.

Compile: the first call of each is timed, and a jax.monitoring listener sums the trace /
lower / backend-compile durations that call caused.

Usage: python ab_bench.py {check|sampler|grpo|cost|decode|train|all} [--repeats 5]
                          [--out FILE.jsonl] [--hlo-dir DIR]   (all = check sampler grpo)
"""
import argparse
import collections
import dataclasses
import json
import math
import os
import platform
import statistics
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("part", choices=["check", "sampler", "grpo", "cost", "decode", "train",
                                 "all"])
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--runs", type=int, default=1,
               help="repeat each part this many times and summarise the ratios' spread")
p.add_argument("--out", default=None, help="append one JSON line per part to this file")
p.add_argument("--hlo-dir", default=None)
p.add_argument("--tag", default="")
p.add_argument("--remat", default="", help="train: also time these remat policies, e.g. full,dots")
p.add_argument("--grpo-impls", default="ours_one,ours_split,tunix")
p.add_argument("--share-prompt-kv", action="store_true",
               help="ours with SamplingConfig.share_prompt_kv (a prompt's KV once per group)")
args = p.parse_args()

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rlvr_jax import live_rows, sampling
from rlvr_jax.models import decoding, transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.train import state as state_lib
from rlvr_jax.train import step as step_lib

import tunix  # noqa: F401  (import side effects apply to both: measured in one process)
from tunix.generate import sampler as sampler_lib
from tunix.models.qwen2 import model as qwen2_lib

V, D, F, L, H, KV, DH = 8192, 256, 1024, 4, 4, 2, 64
P, G, TP, N = 8, 4, 32, 128
B = P * G
MICRO = 2
PAD_ID = V - 1        # tunix pad id (prompts never contain it)
NEVER_EOS = V         # outside the vocabulary: tunix never stops early
LR = 1e-6


def log(*a):
    print(*a, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ----------------------------------------------------------------------------- compile listener
COMPILE = collections.Counter()


def _listener(event, duration, **kw):
    if event.startswith("/jax/core/compile/") or event.startswith("/jax/compilation_cache/"):
        COMPILE[event.rsplit("/", 1)[-1]] += duration


jax.monitoring.register_event_duration_secs_listener(_listener)


def timed(fn):
    """(wall s, process CPU s, result) of fn() (fn blocks until its results are ready)."""
    c, t = time.process_time(), time.perf_counter()
    r = fn()
    return time.perf_counter() - t, time.process_time() - c, r


def run_interleaved(runners, repeats, label):
    """First call of each runner (compile), then `repeats` rounds A, B, C, A, B, C, ...

    A runner takes the round number and returns a dict of extra numbers (sub-timings, counts).
    """
    res = {"loadavg_start": loadavg(), "first_call": {}, "impls": list(runners)}
    for name, fn in runners.items():
        before = dict(COMPILE)
        wall, cpu, extra = timed(lambda: fn(0))
        phases = {k: round(v - before.get(k, 0.0), 3) for k, v in COMPILE.items()
                  if v - before.get(k, 0.0) > 0}
        res["first_call"][name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                                   "compile_phases_s": phases,
                                   "extra": {k: round(v, 4) if isinstance(v, float) else v
                                             for k, v in extra.items()}}
        log(f"[{label}] first call {name}: {wall:.2f}s wall, {phases}")
    wall_t, cpu_t, extras = (collections.defaultdict(list) for _ in range(3))
    for r in range(repeats):
        for name, fn in runners.items():
            wall, cpu, extra = timed(lambda: fn(r + 1))
            wall_t[name].append(wall)
            cpu_t[name].append(cpu)
            for k, v in extra.items():
                extras[f"{name}.{k}"].append(v)
        log(f"[{label}] round {r}: " + ", ".join(f"{k} {v[-1]:.3f}s/{cpu_t[k][-1]:.2f}cpu"
                                                  for k, v in wall_t.items())
            + f"  load {loadavg()}")
    res["wall_s"] = {k: [round(x, 4) for x in v] for k, v in wall_t.items()}
    res["cpu_s"] = {k: [round(x, 3) for x in v] for k, v in cpu_t.items()}
    res["median_wall_s"] = {k: round(med(v), 4) for k, v in wall_t.items()}
    res["median_cpu_s"] = {k: round(med(v), 3) for k, v in cpu_t.items()}
    res["extra_median"] = {k: (round(med(v), 4) if isinstance(v[0], float) else v[-1])
                           for k, v in extras.items()}
    for name in runners:
        fc = res["first_call"][name]
        fc["wall_minus_steady_median_s"] = round(fc["wall_s"] - res["median_wall_s"][name], 3)
    res["loadavg_end"] = loadavg()
    return res


def ratios(res, pairs):
    """{label: (median wall ratio, median cpu ratio)} for (label, numerator, denominator)."""
    out = {}
    for label, a, b in pairs:
        out[label] = {"wall": round(res["median_wall_s"][a] / res["median_wall_s"][b], 3),
                      "cpu": round(res["median_cpu_s"][a] / res["median_cpu_s"][b], 3)}
    return out


# ----------------------------------------------------------------------------- models
MC = ModelConfig(family="qwen2", vocab_size=V, d_model=D, n_layers=L, n_heads=H, n_kv_heads=KV,
                 head_dim=DH, d_ff=F, rope_theta=1e6, norm_eps=1e-6, qkv_bias=True,
                 tie_embeddings=True, dtype="float32", param_dtype="float32", remat="none")
TCFG = qwen2_lib.ModelConfig(num_layers=L, vocab_size=V, embed_dim=D, hidden_dim=F, num_heads=H,
                             head_dim=DH, num_kv_heads=KV, rope_theta=1_000_000, norm_eps=1e-6,
                             use_tied_embedding=True, dtype=jnp.float32,
                             param_dtype=jnp.float32,
                             remat_config=qwen2_lib.RematConfig.NONE)
SC = sampling.SamplingConfig(temperature=1.0, max_new_tokens=N, num_samples=G, pad_id=0,
                             stop_token_ids=(), share_prompt_kv=args.share_prompt_kv)
PARAMS = transformer.init_params(MC, jax.random.PRNGKey(0))


def copy_tree(t):
    return jax.tree.map(lambda x: jnp.array(x, copy=True), t)


def build_tunix_model(params):
    """tunix Qwen2 with a copy of rlvr_jax's weights (same model, separate buffers)."""
    model = qwen2_lib.Qwen2(dataclasses.replace(TCFG), rngs=nnx.Rngs(params=0))
    c = lambda x: jnp.array(x, copy=True)  # noqa: E731
    model.embedder.input_embedding.value = c(params["embed"])
    lay = params["layers"]
    for i, layer in enumerate(model.layers):
        a, m = lay["attn"], lay["mlp"]
        layer.attn.q_proj.w.value = c(a["q_kernel"][i])          # [D, H, Dh]
        layer.attn.k_proj.w.value = c(a["k_kernel"][i])          # [D, KV, Dh]
        layer.attn.v_proj.w.value = c(a["v_kernel"][i])
        layer.attn.o_proj.w.value = c(a["o_kernel"][i])          # [H, Dh, D]
        layer.attn.q_bias.value = c(a["q_bias"][i].reshape(-1))
        layer.attn.k_bias.value = c(a["k_bias"][i].reshape(-1))
        layer.attn.v_bias.value = c(a["v_bias"][i].reshape(-1))
        layer.mlp.gate_proj.kernel.value = c(m["gate_kernel"][i])  # [D, F]
        layer.mlp.up_proj.kernel.value = c(m["up_kernel"][i])
        layer.mlp.down_proj.kernel.value = c(m["down_kernel"][i])  # [F, D]
        layer.input_layernorm.w.value = c(lay["input_norm"]["scale"][i])
        layer.post_attention_layernorm.w.value = c(lay["post_attn_norm"]["scale"][i])
    model.final_norm.w.value = c(params["final_norm"]["scale"])
    return model


class IdTokenizer:
    """'Tokenizer' whose text is space-separated token ids (tunix's Sampler takes strings)."""

    def encode(self, text, **kw):
        return [int(t) for t in str(text).split()]

    def decode(self, ids, **kw):
        return " ".join(str(int(i)) for i in ids)

    def bos_id(self):
        return None

    def eos_id(self):
        return NEVER_EOS

    def pad_id(self):
        return PAD_ID


RNG = np.random.default_rng(0)
PROMPTS8 = RNG.integers(1, PAD_ID, size=(P, TP)).astype(np.int32)   # [8, 32]
PROMPTS32 = np.repeat(PROMPTS8, G, axis=0)                           # row p*G+g, as ours
PROMPT_STRS32 = [" ".join(map(str, r)) for r in PROMPTS32]
PROMPT_STRS8 = [" ".join(map(str, r)) for r in PROMPTS8]


def versions():
    import importlib.metadata as md
    v = {"python": platform.python_version()}
    for n in ["jax", "jaxlib", "flax", "optax", "numpy", "google-tunix", "rlvr_jax",
              "orbax-checkpoint", "google-metrax"]:
        try:
            v[n] = md.version(n)
        except md.PackageNotFoundError:
            pass
    v["devices"] = [str(d) for d in jax.devices()]
    v["cpu_count"] = os.cpu_count()
    return v


def med(xs):
    return statistics.median(xs) if xs else float("nan")


# ----------------------------------------------------------------------------- check
def part_check():
    tm = build_tunix_model(PARAMS)
    toks = jnp.asarray(RNG.integers(1, PAD_ID, size=(2, 24)), jnp.int32)
    ours = transformer.jit_forward(PARAMS, toks, jnp.ones_like(toks), config=MC)
    pos = jnp.broadcast_to(jnp.arange(24)[None], (2, 24))
    causal = jnp.tril(jnp.ones((24, 24), bool))[None].repeat(2, 0)
    theirs, _ = tm(toks, pos, None, causal)
    diff = float(jnp.max(jnp.abs(ours - theirs)))
    n_t = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(tm, nnx.Param)))
    n_o = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(PARAMS))
    res = {"max_abs_logit_diff": diff, "logit_scale": float(jnp.max(jnp.abs(ours))),
           "params_ours": n_o, "params_tunix": n_t}
    log("[check]", res)
    return res


# ----------------------------------------------------------------------------- sampler
def make_tunix_sampler(params=PARAMS):
    tm = build_tunix_model(params)
    cache = sampler_lib.CacheConfig(cache_size=TP + N, num_layers=L, num_kv_heads=KV, head_dim=DH)
    sampler = sampler_lib.Sampler(tm, IdTokenizer(), cache)
    sampler.eos_ids = jnp.array([NEVER_EOS])
    return sampler


def tunix_init_state(sampler, seed):
    return sampler.init_sample_state(jnp.asarray(PROMPTS32), total_sampling_steps=TP + N,
                                     include_logits=False, forbidden_token_ids=None,
                                     temperature=1.0, top_p=1.0, top_k=None,
                                     seed=jax.random.PRNGKey(seed), beam_size=None)


def part_sampler(repeats):
    sampler = make_tunix_sampler()
    ptoks, pmask = jnp.asarray(PROMPTS8), jnp.ones((P, TP), jnp.int32)
    e2e_kw = dict(max_generation_steps=N, max_prompt_length=TP, echo=False, temperature=1.0,
                  top_p=1.0, top_k=None, eos_tokens=[NEVER_EOS], pad_output=False)

    def ours_gen(seed):
        r = sampling.jit_generate(PARAMS, ptoks, pmask, jax.random.PRNGKey(seed),
                                  model_config=MC, sampling_config=SC)
        jax.block_until_ready(r)
        return {"tokens": int(jnp.sum(r.lengths))} if seed == 0 else {}

    def ours_host(seed):  # host wrapper (validate, bucket) + completion tokens to the host
        r = sampling.sample(PARAMS, PROMPTS8, np.ones((P, TP), np.int32),
                            jax.random.PRNGKey(seed), model_config=MC, sampling_config=SC)
        toks, lens = jax.device_get((r.tokens, r.lengths))
        return {"tokens": int(lens.sum())} if seed == 0 else {}

    def tunix_dev(seed):  # the sampler's own jitted prefill and decode-loop functions
        t0 = time.perf_counter()
        st = tunix_init_state(sampler, seed)  # eager ops (outside tunix's jitted functions)
        jax.block_until_ready(st.token_buffer)
        t1 = time.perf_counter()
        st = sampler._compiled_prefill_fn(sampler._flattened_transformer_state, st, None,
                                          echo=False)
        jax.block_until_ready(st.token_buffer)
        t2 = time.perf_counter()
        st = sampler._compiled_decode_fn(sampler._flattened_transformer_state, st)
        jax.block_until_ready(st.token_buffer)
        t3 = time.perf_counter()
        # token_buffer[:, TP:TP+N] holds the N new tokens of every row (no eos reachable)
        return {"init_s": t1 - t0, "prefill_s": t2 - t1, "decode_s": t3 - t2,
                "final_decoding_step": int(st.decoding_step), "tokens": B * N}

    def tunix_e2e(seed):
        o = sampler(PROMPT_STRS32, seed=seed, **e2e_kw)
        return {"tokens": sum(len(x) for x in o.tokens)} if seed == 0 else {}

    # ours first, then tunix's public call (which compiles its prefill and decode functions),
    # then the two paths that reuse those executables.
    runners = {"ours_jit_generate": ours_gen, "tunix_sampler_call": tunix_e2e,
               "tunix_device_only": tunix_dev, "ours_sample_host": ours_host}
    res = run_interleaved(runners, repeats, "sampler")
    # tunix device-only = prefill + decode (its jitted functions); init reported apart
    ex = res["extra_median"]
    res["tunix_device_prefill_plus_decode_median_s"] = round(
        ex["tunix_device_only.prefill_s"] + ex["tunix_device_only.decode_s"], 4)
    res["tokens_per_call"] = {k: v["extra"].get("tokens") for k, v in res["first_call"].items()}
    res["tok_per_s_wall"] = {k: round(B * N / v, 1) for k, v in res["median_wall_s"].items()}
    res["ratios_ours_over_tunix"] = ratios(res, [
        ("jit_generate / tunix device-only (init+prefill+decode)", "ours_jit_generate",
         "tunix_device_only"),
        ("jit_generate / tunix Sampler call", "ours_jit_generate", "tunix_sampler_call"),
        ("sample()+device_get / tunix Sampler call", "ours_sample_host", "tunix_sampler_call")])
    res["ratios_ours_over_tunix"]["jit_generate / tunix prefill+decode only (wall)"] = round(
        res["median_wall_s"]["ours_jit_generate"] /
        res["tunix_device_prefill_plus_decode_median_s"], 3)
    log("[sampler]", json.dumps(res, indent=1))
    return res


# ----------------------------------------------------------------------------- grpo
def make_tx():
    return state_lib.make_optimizer(learning_rate=LR)  # clip_by_global_norm(1) + AdamW, wd 0


def fresh_state(seed):
    return state_lib.create_train_state(copy_tree(PARAMS), make_tx(), jax.random.PRNGKey(seed))


def part_grpo(repeats, impls):
    rl = step_lib.RLConfig(num_prompts=P, microbatches=MICRO)
    tx = make_tx()
    batch = {"prompt_tokens": jnp.asarray(PROMPTS8), "prompt_mask": jnp.ones((P, TP), jnp.int32),
             "answers": jnp.zeros((P,), jnp.int32)}
    runners, checks = {}, {}

    if "ours_one" in impls:
        verifier = lambda tokens, mask, answers: (  # noqa: E731
            tokens[:, 0] % 2 == answers % 2).astype(jnp.float32)
        rl_step = step_lib.make_rl_step(MC, SC, rl, tx, verifier)
        h1 = {"st": fresh_state(1)}

        def ours_one(r):
            h1["st"], m = rl_step(h1["st"], batch)
            jax.block_until_ready((h1["st"].params, m))
            return {"valid_tokens": int(m["rollout/valid_tokens"])} if r == 0 else {}
        runners["ours_one_program"] = ours_one
        checks["ours_one_program"] = lambda: {"optimizer_steps": int(h1["st"].step)}

    if "ours_split" in impls:
        sample_fn = step_lib.make_sample_fn(MC, SC)
        update_fn = step_lib.make_update_fn(MC, SC, rl, tx)
        h2 = {"st": fresh_state(2)}
        sbatch = {k: batch[k] for k in ("prompt_tokens", "prompt_mask")}

        def ours_split(r):
            t0 = time.perf_counter()
            rollout = sample_fn(h2["st"].params, sbatch, jax.random.PRNGKey(100 + r))
            toks = np.asarray(rollout.tokens)  # a host verifier needs the tokens
            rewards = jnp.asarray((toks[:, 0] % 2 == 0).astype(np.float32))
            t1 = time.perf_counter()
            h2["st"], m = update_fn(h2["st"], rollout, rewards)
            jax.block_until_ready((h2["st"].params, m))
            t2 = time.perf_counter()
            return {"sample+host_reward_s": t1 - t0, "update_s": t2 - t1}
        runners["ours_split"] = ours_split
        checks["ours_split"] = lambda: {"optimizer_steps": int(h2["st"].step)}

    if "tunix" in impls:
        runners["tunix_grpo_learner"], checks["tunix_grpo_learner"] = make_tunix_grpo()

    res = run_interleaved(runners, repeats, "grpo")
    if "tunix_grpo_learner" in runners:
        res["ratios_ours_over_tunix"] = ratios(res, [
            (f"{k} / tunix GRPOLearner step", k, "tunix_grpo_learner")
            for k in runners if k.startswith("ours")])
        ex = res["extra_median"]
        if "ours_split" in runners:
            res["ratios_ours_over_tunix"]["ours split update / tunix train (step - rollout)"] = (
                round(ex["ours_split.update_s"] /
                      ex["tunix_grpo_learner.train(step-rollout)_s"], 3))
            res["ratios_ours_over_tunix"]["ours split sample / tunix rollout+reward+adv"] = (
                round(ex["ours_split.sample+host_reward_s"] /
                      ex["tunix_grpo_learner.rollout+reward+advantage_s"], 3))
    res["checks"] = {k: f() for k, f in checks.items()}
    log("[grpo]", json.dumps(res, indent=1))
    return res


def make_tunix_grpo():
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl.grpo import grpo_learner as grpo_lib
    from tunix.rl.rollout import base_rollout
    from tunix.sft import metrics_logger

    model = build_tunix_model(PARAMS)
    # Auto axis types (jax.make_mesh defaults to Explicit axes, which tunix 0.1.7 trips on).
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
    training_config = rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=make_tx(),
        eval_every_n_steps=10**9,
        max_steps=10**6,
        mini_batch_size=P,                 # one optimizer step per batch of 8 prompts
        train_micro_batch_size=P // MICRO,  # 4 prompts = 16 sequences -> grad-accum 2
        rollout_micro_batch_size=P,        # one rollout of all 32 sequences
        compute_logps_micro_batch_size=P,
        metrics_logging_options=metrics_logger.MetricsLoggerOptions(
            log_dir=tempfile.mkdtemp(prefix="tunix_metrics_")),
    )
    cluster_config = rl_cluster_lib.ClusterConfig(
        role_to_mesh={rl_cluster_lib.Role.ACTOR: mesh, rl_cluster_lib.Role.REFERENCE: mesh,
                      rl_cluster_lib.Role.ROLLOUT: mesh},
        rollout_engine="vanilla",
        offload_to_cpu=False,
        training_config=training_config,
        rollout_config=base_rollout.RolloutConfig(
            max_tokens_to_generate=N, max_prompt_length=TP, kv_cache_size=TP + N,
            temperature=1.0, top_p=1.0, top_k=None, eos_tokens=[NEVER_EOS]),
    )
    with mesh:
        rl_cluster = rl_cluster_lib.RLCluster(actor=model, tokenizer=IdTokenizer(),
                                              cluster_config=cluster_config)

    def parity_reward(prompts, completions, **kw):
        return [float(len(c) % 2) for c in completions]

    learner = grpo_lib.GRPOLearner(
        rl_cluster=rl_cluster,
        algo_config=grpo_lib.GRPOConfig(num_generations=G, num_iterations=1, beta=0.0,
                                        epsilon=0.2),
        reward_fns=parity_reward)

    gen_times, lens = [], []
    orig_gen = learner._generate_and_compute_advantage

    def timed_gen(*a, **k):  # rollout + detokenize + reward + advantage (host-synchronous)
        t = time.perf_counter()
        r = orig_gen(*a, **k)
        jax.block_until_ready(r.completion_ids)
        gen_times.append(time.perf_counter() - t)
        lens.append(int(np.asarray(r.completion_mask).sum()))
        return r

    learner._generate_and_compute_advantage = timed_gen

    # Drive the learner one global step at a time, exactly as RLLearner.train's loop body does
    # (train() itself runs to max_steps and then closes the cluster; we need to interleave).
    def batches():  # the same 8 prompts every step (as ours)
        while True:
            yield {"prompts": np.array(PROMPT_STRS8)}

    full = P
    mini = training_config.mini_batch_size
    micro = training_config.train_micro_batch_size
    learner._rollout_micro_batch_size = training_config.rollout_micro_batch_size
    learner._compute_logps_micro_batch_size = training_config.compute_logps_micro_batch_size
    service = math.lcm(learner._rollout_micro_batch_size, learner._compute_logps_micro_batch_size)
    grad_acc = training_config.get_with_default("gradient_accumulation_steps", 1)
    it = learner._create_micro_batch_iterator(iter(batches()), micro)
    params0 = [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))[:3]]
    n_gen_before = [0]

    def step(r):
        n_gen_before[0] = len(gen_times)
        t = time.perf_counter()
        with mesh:
            learner._run_global_step(full, mini, service, grad_acc, it, None, False)
            rl_cluster.global_steps += 1
            rl_cluster.buffer_metrics(rl_cluster.perf.export(), mode=rl_cluster_lib.Mode.TRAIN)
            rl_cluster.buffer_metrics(rl_cluster.perf_v2.export(),
                                      mode=rl_cluster_lib.Mode.TRAIN)
        jax.block_until_ready(nnx.state(rl_cluster.actor_trainer.model, nnx.Param))
        dt = time.perf_counter() - t
        g = gen_times[-1] if len(gen_times) > n_gen_before[0] else float("nan")
        return {"rollout+reward+advantage_s": g, "train(step-rollout)_s": dt - g}

    def check():
        p1 = [np.asarray(x) for x in
              jax.tree.leaves(nnx.state(rl_cluster.actor_trainer.model, nnx.Param))[:3]]
        return {"optimizer_steps": int(rl_cluster.actor_trainer.train_steps),
                "iter_steps": int(rl_cluster.actor_trainer.iter_steps),
                "grad_acc_steps": grad_acc,
                "rollouts": len(gen_times),
                "completion_tokens_per_rollout": lens[-1] if lens else None,
                "max_abs_param_change_first3": max(float(np.abs(a - b).max())
                                                   for a, b in zip(params0, p1))}
    step.ctx = {"learner": learner, "rl_cluster": rl_cluster, "mesh": mesh, "model": model,
                "grpo_lib": grpo_lib}
    return step, check


# ----------------------------------------------------------------------------- cost
def _cost(compiled):
    ca = compiled.cost_analysis()
    if isinstance(ca, list):
        ca = ca[0]
    return {k: float(v) for k, v in ca.items()
            if k in ("flops", "transcendentals", "bytes accessed", "bytes accessed output")}


T_MID = 64  # the decode step the diagnostic states are set at (shapes do not depend on it)


def ours_decode_state():
    """generate()'s while-loop state at step T_MID (cache of Tp + N - 1 slots, 32 rows)."""
    cache = decoding.init_cache(MC, B, TP + N - 1)
    cache["mask"] = cache["mask"].at[:, :TP + T_MID].set(1)
    cache["index"] = jnp.asarray(TP + T_MID - 1, jnp.int32)
    return live_rows.DecodeState(
        jnp.asarray(T_MID, jnp.int32), cache, jnp.ones((B,), jnp.int32), jnp.zeros((B,), bool),
        jnp.zeros((B, N), jnp.int32), jnp.zeros((B, N), jnp.float32),
        jnp.zeros((B, N), jnp.int32), jnp.arange(B, dtype=jnp.int32), None)


_PREPARED = {}


def prepared_params():
    """The parameters as the decode loop reads them (prepared once per rollout)."""
    if "p" not in _PREPARED:
        _PREPARED["p"] = jax.jit(lambda p: decoding.prepare_params(p, MC))(PARAMS)
    return _PREPARED["p"]


def make_ours_body():
    """`sampling.decode_step` (one iteration of generate's decode loop), jitted with the loop
    state donated (in the loop it is updated in place)."""
    step_key = jax.random.PRNGKey(0)
    return jax.jit(lambda prep, state: sampling.decode_step(
        prep, state, step_key, model_config=MC, sampling_config=SC), donate_argnums=(1,))


def make_tunix_body(sampler):
    """tunix Sampler._sample_step (the body of its decode while_loop), state donated."""
    return jax.jit(sampler._sample_step, donate_argnums=(1,))


def part_cost(hlo_dir):
    res = {}
    ours_c = make_ours_body().lower(prepared_params(), ours_decode_state()).compile()
    res["ours_decode_body (layer by layer: every layer counted)"] = _cost(ours_c)
    fwd = jax.jit(lambda p, tok, c: decoding.forward(
        p, tok[:, None], config=MC, cache=c, attention_mask=jnp.ones((B, 1), jnp.int32)),
        donate_argnums=(2,))
    res["ours_decode_forward_only"] = _cost(
        fwd.lower(prepared_params(), jnp.zeros((B,), jnp.int32), ours_decode_state()[1]).compile())

    sampler = make_tunix_sampler()
    st = tunix_init_state(sampler, 0)
    tun_c = make_tunix_body(sampler).lower(sampler._flattened_transformer_state, st).compile()
    res["tunix_decode_body"] = _cost(tun_c)
    tm = sampler.transformer
    tfwd = jax.jit(lambda tok, pos, c, m: tm(tok, pos, c, m), donate_argnums=(2,))
    res["tunix_decode_forward_only"] = _cost(tfwd.lower(
        jnp.zeros((B, 1), jnp.int32), jnp.zeros((B, 1), jnp.int32), st.cache,
        jnp.ones((B, 1, TP + N), bool)).compile())
    res["tunix_prefill_32_rows"] = _cost(sampler._compiled_prefill_fn.lower(
        sampler._flattened_transformer_state, st, None, echo=False).compile())

    # Minimum traffic of one decode step: every weight read once (the tied embedding once, as
    # the LM head; the 32 looked-up rows are negligible), the valid K/V of the cache, one new
    # K/V slot written, and the [B, V] float32 logits written and read once.
    w_bytes = sum(int(np.prod(x.shape)) * 4 for x in jax.tree.leaves(PARAMS))
    slot = L * 2 * KV * DH * 4 * B  # K and V of one cache slot, all layers, all rows
    logits = B * V * 4
    res["minimum_bytes"] = {
        "weights": w_bytes, "kv_one_slot_all_layers_rows": slot,
        "logits_write+read": 2 * logits,
        "min_at_step_64 (96 valid slots)": w_bytes + slot * (TP + T_MID) + slot + 2 * logits,
        "min_averaged_over_the_128_steps": int(w_bytes + slot * (TP + N / 2) + slot + 2 * logits),
        "reading_the_whole_160_slot_cache": w_bytes + slot * (TP + N) + slot + 2 * logits}
    res["flops_min_matmuls_per_step"] = 2 * B * MC.num_params(include_embedding=False)
    if hlo_dir:
        os.makedirs(hlo_dir, exist_ok=True)
        for name, c in [("ours_decode_body", ours_c), ("tunix_decode_body", tun_c)]:
            with open(os.path.join(hlo_dir, name + ".hlo.txt"), "w") as f:
                f.write(c.as_text())
    log("[cost]", json.dumps(res, indent=1))
    return res


# ----------------------------------------------------------------------------- decode diag
def part_decode(repeats, steps=16):
    """ms per decode step: each loop body called `steps` times in a row (state fed back)."""
    ours = make_ours_body()
    sampler = make_tunix_sampler()
    tun = make_tunix_body(sampler)
    tstate = sampler._flattened_transformer_state

    def run_ours(fn):
        def go(r):
            st = ours_decode_state()
            jax.block_until_ready(st)
            t = time.perf_counter()
            for _ in range(steps):
                st = fn(prepared_params(), st)
            jax.block_until_ready(st)
            return {"ms_per_step": (time.perf_counter() - t) / steps * 1e3}
        return go

    def run_tunix(r):
        st = tunix_init_state(sampler, r)
        jax.block_until_ready(st.token_buffer)
        t = time.perf_counter()
        for _ in range(steps):
            st = tun(tstate, st)
        jax.block_until_ready(st.token_buffer)
        return {"ms_per_step": (time.perf_counter() - t) / steps * 1e3}

    runners = {"ours_body": run_ours(ours), "tunix_body": run_tunix}
    res = run_interleaved(runners, repeats, "decode")
    res["steps_per_call"] = steps
    res["ratios"] = {
        "ours / tunix (ms per step)": round(res["extra_median"]["ours_body.ms_per_step"] /
                                            res["extra_median"]["tunix_body.ms_per_step"], 3)}
    log("[decode]", json.dumps(res, indent=1))
    return res


# ----------------------------------------------------------------------------- train diag
def part_train(repeats):
    """One optimizer step (2 micro-batches of 16 rows) on a fixed rollout, no sampling."""
    from rlvr_jax.perf import benchmarks
    rollout = benchmarks._fake_rollout(MC, P, G, TP, N, seed=5)
    rewards = (jnp.arange(B) % 2).astype(jnp.float32)
    tx = make_tx()
    runners = {}

    def ours_update(rl, scan_unroll=0, remat="none"):
        mc = MC.replace(remat=remat, scan_unroll=scan_unroll)
        update_fn = step_lib.make_update_fn(mc, SC, rl, tx)
        h = {"st": fresh_state(3)}

        def go(r):
            h["st"], m = update_fn(h["st"], rollout, rewards)
            jax.block_until_ready((h["st"].params, m))
            return {}
        return go

    runners["ours_update(defaults)"] = ours_update(
        step_lib.RLConfig(num_prompts=P, microbatches=MICRO))
    # tunix: its jitted train step, twice (optax.MultiSteps applies AdamW on the 2nd)
    tstep, _ = make_tunix_grpo()
    ctx = tstep.ctx
    trainer = ctx["rl_cluster"].actor_trainer
    with ctx["mesh"]:
        train_step, _ = trainer.jit_train_and_eval_step(False, cache_nnx_graph=True)
    pad = np.asarray(rollout.tokens) == PAD_ID
    comp = jnp.asarray(np.where(pad, 1, np.asarray(rollout.tokens)), jnp.int32)
    adv = jnp.asarray(np.where(np.arange(B) % 2, 1.0, -1.0), jnp.float32)
    examples = [ctx["grpo_lib"].TrainExample(
        prompt_ids=rollout.prompt_tokens[sl], prompt_mask=rollout.prompt_mask[sl] != 0,
        completion_ids=comp[sl], completion_mask=rollout.mask[sl] != 0,
        ref_per_token_logps=None, advantages=adv[sl], old_per_token_logps=None)
        for sl in (slice(0, B // 2), slice(B // 2, B))]

    def tunix_train(r):
        with ctx["mesh"]:
            outs = [train_step(ex) for ex in examples]
        jax.block_until_ready((outs, nnx.state(trainer.model, nnx.Param)))
        return {}
    runners["tunix_train_step_x2"] = tunix_train
    runners["ours_update(layer scan, diagnostic)"] = ours_update(
        step_lib.RLConfig(num_prompts=P, microbatches=MICRO), scan_unroll=1)
    for policy in args.remat.split(",") if args.remat else ():
        runners[f"ours_update(remat={policy}, diagnostic)"] = ours_update(
            step_lib.RLConfig(num_prompts=P, microbatches=MICRO), remat=policy)
    res = run_interleaved(runners, repeats, "train")
    res["ratios_over_tunix"] = ratios(res, [(k, k, "tunix_train_step_x2") for k in runners
                                            if k.startswith("ours")])
    log("[train]", json.dumps(res, indent=1))
    return res


def run_part(part):
    if part == "check":
        return part_check()
    if part == "sampler":
        return part_sampler(args.repeats)
    if part == "grpo":
        return part_grpo(args.repeats, args.grpo_impls.split(","))
    if part == "decode":
        return part_decode(args.repeats)
    if part == "train":
        return part_train(args.repeats)
    return part_cost(args.hlo_dir)


def spread(results):
    """{part: {ratio label: {wall/cpu: [min, median, max]}}} over the runs of each part."""
    out = {}
    for part, runs in results.items():
        for r in runs:
            for key in ("ratios_ours_over_tunix", "ratios_over_tunix", "ratios"):
                for label, v in (r.get(key) or {}).items():
                    for unit, x in (v if isinstance(v, dict) else {"wall": v}).items():
                        out.setdefault(part, {}).setdefault(label, {}).setdefault(
                            unit, []).append(x)
    return {part: {label: {u: [min(x), round(med(x), 3), max(x)] for u, x in units.items()}
                   for label, units in labels.items()} for part, labels in out.items()}


def main():
    out = {"tag": args.tag, "versions": versions(), "loadavg": loadavg(), "time": time.ctime()}
    log(json.dumps(out))
    parts = ["check", "sampler", "grpo"] if args.part == "all" else [args.part]
    results = collections.defaultdict(list)
    for _ in range(args.runs):
        for part in parts:
            t = time.perf_counter()
            r = run_part(part)
            results[part].append(r)
            rec = dict(out, part=part, wall_s=round(time.perf_counter() - t, 1), result=r)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec, default=str) + "\n")
    summary = spread(results)
    log("[summary: ratio ours/tunix, min / median / max over", args.runs, "runs]",
        json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(dict(out, part="summary", runs=args.runs, result=summary)) + "\n")


if __name__ == "__main__":
    main()
