"""Offline evaluation of a policy (the library behind `scripts/evaluate.py`).

    model_config, params = load_policy(preset="tiny", tokenizer=tok)
    data = task_data("arithmetic", split="test", num_prompts=200)
    report = evaluate_policy(params, model_config, tok, data, num_samples=8, ks=(1, 8), ...)

Every metric is a per-prompt score `[P]` averaged over prompts, reported with a percentile
bootstrap interval over prompts (`rlvr_jax.evaluation.bootstrap_ci`, statistic "mean"):
pass@k (unbiased, from N samples), maj@k, CoT-pass@k (tasks with step checks), mean@N, and
greedy pass@1 / CoT-pass@1 when greedy decoding is on. A training run's checkpoint is read
by `rlvr_jax.train.checkpoint.load_run` (training code; this room does not import it).
"""
import json
import os
import time
from typing import Dict, Optional, Sequence

import jax

from rlvr_jax import models
from rlvr_jax.evaluation import report
from rlvr_jax.evaluation.data import EvalData
from rlvr_jax.evaluation.decoding import encode_prompts, generate_texts


def load_params_dir(path: str):
    """(ModelConfig, params) from a directory written by `scripts/convert_checkpoint.py
    hf-to-orbax`: `params/` (orbax StandardCheckpointer) and `model_config.json`."""
    import orbax.checkpoint as ocp
    path = os.path.abspath(path)
    config_path = os.path.join(path, "model_config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found (expected a directory written by "
                                "scripts/convert_checkpoint.py hf-to-orbax)")
    with open(config_path) as f:
        fields = json.load(f)
    if fields.get("rope_scaling") is not None:
        fields["rope_scaling"] = tuple(fields["rope_scaling"])
    params = ocp.StandardCheckpointer().restore(os.path.join(path, "params"))
    return models.ModelConfig(**fields), params


def load_policy(*, tokenizer, hf_dir: str = "", params_dir: str = "", preset: str = "",
                dtype: str = "float32", seed: int = 0):
    """(ModelConfig, params) from exactly one of an HF directory, an orbax params directory
    or a preset (randomly initialised with `seed`; `tiny` takes the tokenizer's vocabulary)."""
    if sum(map(bool, (hf_dir, params_dir, preset))) != 1:
        raise ValueError("give exactly one of hf_dir, params_dir, preset")
    if hf_dir:
        from rlvr_jax.models import hf
        return hf.load_hf_checkpoint(hf_dir, dtype=dtype)
    if params_dir:
        config, params = load_params_dir(params_dir)
        return config.replace(dtype=dtype), params
    overrides = {"dtype": dtype}
    if preset == "tiny":
        overrides["vocab_size"] = tokenizer.vocab_size
    config = models.presets.get(preset, **overrides)
    params = models.init_params(config, jax.random.PRNGKey(seed))
    if config.vocab_size < tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {config.vocab_size} is smaller than the "
                         f"tokenizer's {tokenizer.vocab_size}")
    return config, params


def evaluate_policy(params, model_config, tokenizer, data: EvalData, *, num_samples: int = 8,
                    ks: Sequence[int] = (), greedy: bool = True, temperature: float = 1.0,
                    top_p: float = 1.0, max_new_tokens: int, batch_size: int = 32,
                    apply_chat_template: bool = False, seed: int = 0,
                    num_resamples: int = 2000, confidence: float = 0.95,
                    samples_out: str = "", env=None, tools=None,
                    cache_window: Optional[int] = None, sampler=None) -> Dict:
    """The whole evaluation; returns the JSON-ready report.

    Greedy decoding gives `greedy_pass@1` (and `greedy_cot_pass@1`); `num_samples` > 0
    sampled completions per prompt give pass@k, maj@k, CoT-pass@k for each k in `ks`
    (default 1 and N) and mean@N. Each metric is `{"value", "ci_low", "ci_high"}`.
    env: a multi-turn environment: the prompts are played as episodes with it (the
    examples' integer answers reach `env.reset`; a host environment plays with `tools` and
    the examples) and the model's tokens are scored; or `sampler`, a
    `rlvr_jax.sampler.Sampler` of that kind. cache_window: the sampler's
    `SamplingConfig.cache_window` (None: automatic).
    """
    tokens, mask = encode_prompts(data.examples, tokenizer, apply_chat_template=apply_chat_template)
    rng = jax.random.PRNGKey(seed)
    common = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, env=env,
                  answers=[ex.answer_value or 0 for ex in data.examples], tools=tools,
                  examples=data.examples, cache_window=cache_window, sampler=sampler)
    ci = dict(num_resamples=num_resamples, confidence=confidence, seed=seed)
    out = {"data": data.name, "num_prompts": len(data.examples), "num_samples": num_samples,
           "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens,
           "confidence": confidence, "metrics": {}, "time_s": {}}
    if greedy:
        t0 = time.perf_counter()
        texts = generate_texts(params, model_config, tokenizer, tokens, mask, rng,
                               num_samples=1, greedy=True, **common)
        out["time_s"]["greedy"] = time.perf_counter() - t0
        metrics = report.summarize(report.score(texts, data), ks=(1,), prefix="greedy_", **ci)
        out["metrics"].update({k: v for k, v in metrics.items()
                               if k in ("greedy_pass@1", "greedy_cot_pass@1")})
    if num_samples > 0:
        ks = sorted(set(ks)) if ks else sorted({1, num_samples})
        t0 = time.perf_counter()
        texts = generate_texts(params, model_config, tokenizer, tokens, mask,
                               jax.random.fold_in(rng, 1), num_samples=num_samples,
                               temperature=temperature, top_p=top_p, **common)
        out["time_s"]["sampled"] = time.perf_counter() - t0
        scores = report.score(texts, data)
        out["metrics"].update(report.summarize(scores, ks=ks, **ci))
        if samples_out:
            report.write_samples(samples_out, data, texts, scores)
    return out
