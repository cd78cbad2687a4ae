"""Offline evaluation of a policy (the library behind `scripts/evaluate.py`).

    model_config, params = load_policy(preset="tiny", tokenizer=tok)
    data = task_data("arithmetic", split="test", num_prompts=200)
    texts = generate_texts(params, model_config, tok, data.examples, num_samples=8, ...)
    report = summarize(score(texts, data), ks=(1, 8))

Every metric is a per-prompt score `[P]` averaged over prompts, reported with a percentile
bootstrap interval over prompts (`rlvr_jax.evaluation.bootstrap_ci`, statistic "mean"):
pass@k (unbiased, from N samples), maj@k, CoT-pass@k (tasks with step checks), mean@N, and
greedy pass@1 / CoT-pass@1 when greedy decoding is on.
"""
import dataclasses
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import jax
import numpy as np

from rlvr_jax import evaluation, models, sampling, tasks
from rlvr_jax.data import datasets
from rlvr_jax.tasks.base import split_answer
from rlvr_jax.train.evaluate import decode_completions


@dataclasses.dataclass
class EvalData:
    """Held-out problems with their scoring functions.

    Attributes:
      name: a label for the report ("arithmetic/test", a JSONL path).
      examples: P `rlvr_jax.tasks.Example`s.
      verify: fn(completion, example) -> reward; >= 1 counts as correct.
      answer_key: fn(completion) -> hashable answer or None (votes for maj@k).
      check_steps: optional fn(completion, example) -> bool (CoT-pass@k).
    """
    name: str
    examples: list
    verify: Callable
    answer_key: Callable
    check_steps: Optional[Callable] = None


# ----------------------------------------------------------------------------- models

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


def load_run(run_dir: str, *, tokenizer, step: Optional[int] = None):
    """(ModelConfig, params) of a training run's checkpoint (`scripts/train.py --workdir`).

    The model is rebuilt from `<run_dir>/config.json`; the policy parameters are read from
    `<run_dir>/checkpoints` (the latest complete step unless `step`)."""
    import ml_collections
    from rlvr_jax.train.checkpoint import Checkpointer
    from rlvr_jax.train.loop import build_model_config
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found (expected a scripts/train.py workdir)")
    with open(config_path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    model_config = build_model_config(config, tokenizer)
    ckpt = Checkpointer(os.path.join(run_dir, "checkpoints"))
    try:
        if ckpt.latest_step() is None:
            raise FileNotFoundError(f"no complete checkpoint in {run_dir}/checkpoints (train "
                                    "with --config.checkpoint.every=N)")
        params = ckpt.restore_params(step)
    finally:
        ckpt.close()
    return model_config, params


def load_policy(*, tokenizer, hf_dir: str = "", params_dir: str = "", preset: str = "",
                run_dir: str = "", dtype: str = "float32", seed: int = 0):
    """(ModelConfig, params) from exactly one of an HF directory, an orbax params directory,
    a training run's latest checkpoint, or a preset (randomly initialised with `seed`; `tiny`
    takes the tokenizer's vocabulary)."""
    if sum(map(bool, (hf_dir, params_dir, preset, run_dir))) != 1:
        raise ValueError("give exactly one of hf_dir, params_dir, run_dir, preset")
    if run_dir:
        config, params = load_run(run_dir, tokenizer=tokenizer)
        config = config.replace(dtype=dtype)
    elif hf_dir:
        from rlvr_jax.models import hf
        config, params = hf.load_hf_checkpoint(hf_dir, dtype=dtype)
    elif params_dir:
        config, params = load_params_dir(params_dir)
        config = config.replace(dtype=dtype)
    else:
        overrides = {"dtype": dtype}
        if preset == "tiny":
            overrides["vocab_size"] = tokenizer.vocab_size
        config = models.presets.get(preset, **overrides)
        params = models.init_params(config, jax.random.PRNGKey(seed))
    if config.vocab_size < tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {config.vocab_size} is smaller than the "
                         f"tokenizer's {tokenizer.vocab_size}")
    return config, params


# ----------------------------------------------------------------------------- data

def _tail_key(completion: str):
    parts = split_answer(completion)
    return None if parts is None or not parts[1].strip() else " ".join(parts[1].split())


def task_data(name: str, *, split: str = "test", num_prompts: int, seed: int = 1,
              **task_kwargs) -> EvalData:
    """The first `num_prompts` examples of a synthetic task's split (stream `seed`; the
    trainer evaluates on stream `config.seed + 1` of the test split)."""
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
    task = tasks.get(name, **task_kwargs)
    examples = task.generate(num_prompts, seed=seed, split=split)
    key = tasks.extract_int_answer if name == "arithmetic" else _tail_key
    return EvalData(f"{name}/{split}", examples, task.verify, key, task.check_steps)


def jsonl_data(path: str, *, prompt_field: str = "prompt", answer_field: str = "answer",
               num_prompts: int = 0, verifier: str = "rule") -> EvalData:
    """Math problems from a JSONL file (the first `num_prompts`, 0 = all), scored by the math
    verifier `verifier` ("rule", "math_verify" or "auto"); maj@k votes on normalised answers."""
    from rlvr_jax import rewards
    data = datasets.read_jsonl(path, prompt_field=prompt_field, answer_field=answer_field)
    examples = [data[i] for i in range(len(data))]
    if num_prompts:
        examples = examples[:num_prompts]
    reward = rewards.get_math_verifier(verifier)

    def answer_key(text):
        answer = rewards.extract_answer(text)
        return None if answer is None else rewards.normalize_answer(answer)

    return EvalData(path, examples, lambda text, ex: float(reward(text, ex.answer)), answer_key)


# ----------------------------------------------------------------------------- generation

def encode_prompts(examples: Sequence, tokenizer, *, apply_chat_template: bool = False):
    """(tokens [P, Tp] int32 left-padded, mask [P, Tp] int32) with BOS when the tokenizer has
    one; Tp is the longest prompt."""
    ids = []
    for ex in examples:
        text = ex.prompt
        if apply_chat_template:
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}])
        ids.append(tokenizer.encode(text, add_bos=tokenizer.bos_id is not None))
    tokens, lengths = tokenizer.pad_left(ids)
    width = tokens.shape[1]
    mask = (np.arange(width)[None, :] >= width - lengths[:, None]).astype(np.int32)
    return tokens, mask


def generate_texts(params, model_config, tokenizer, prompt_tokens, prompt_mask, rng, *,
                   num_samples: int, greedy: bool = False, temperature: float = 1.0,
                   top_p: float = 1.0, max_new_tokens: int, batch_size: int
                   ) -> List[List[str]]:
    """Completions `[P][num_samples]` (texts up to the stop token) from `rlvr_jax.sampling.sample`,
    `batch_size` prompts per call; the last batch is padded with copies of its last prompt
    (one compiled shape) and the copies are dropped."""
    config = sampling.SamplingConfig(greedy=greedy, temperature=temperature, top_p=top_p,
                                     max_new_tokens=max_new_tokens, num_samples=num_samples,
                                     stop_token_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id)
    p = len(prompt_tokens)
    out: List[List[str]] = []
    for i, start in enumerate(range(0, p, batch_size)):
        rows = np.minimum(np.arange(start, start + batch_size), p - 1)
        rollout = sampling.sample(params, prompt_tokens[rows], prompt_mask[rows],
                                  jax.random.fold_in(rng, i), model_config=model_config,
                                  sampling_config=config)
        texts = decode_completions(tokenizer, rollout.tokens, rollout.mask)
        keep = min(batch_size, p - start)
        out += [texts[j * num_samples:(j + 1) * num_samples] for j in range(keep)]
    return out


# ----------------------------------------------------------------------------- metrics

def score(texts: Sequence[Sequence[str]], data: EvalData) -> Dict[str, np.ndarray]:
    """`correct` [P, N] bool, `answer_ids` [P, N] int32 (-1: no answer; ids per prompt) and,
    when the data has step checks, `steps` [P, N] bool."""
    if len(texts) != len(data.examples):
        raise ValueError(f"{len(texts)} completion groups for {len(data.examples)} examples")
    correct = np.array([[data.verify(t, ex) >= 1.0 for t in ts]
                        for ts, ex in zip(texts, data.examples)], bool)
    ids = np.full(correct.shape, -1, np.int32)
    for p, ts in enumerate(texts):
        seen: dict = {}
        for j, t in enumerate(ts):
            key = data.answer_key(t)
            if key is not None:
                ids[p, j] = seen.setdefault(key, len(seen))
    out = {"correct": correct, "answer_ids": ids}
    if data.check_steps is not None:
        out["steps"] = np.array([[bool(data.check_steps(t, ex)) for t in ts]
                                 for ts, ex in zip(texts, data.examples)], bool)
    return out


def _with_ci(per_prompt, key, *, num_resamples: int, confidence: float) -> Dict[str, float]:
    point, low, high = evaluation.bootstrap_ci(key, np.asarray(per_prompt, np.float32),
                                               statistic="mean", num_resamples=num_resamples,
                                               confidence=confidence)
    return {"value": float(point), "ci_low": float(low), "ci_high": float(high)}


def summarize(scores: Dict[str, np.ndarray], *, ks: Sequence[int], prefix: str = "",
              seed: int = 0, num_resamples: int = 2000, confidence: float = 0.95
              ) -> Dict[str, Dict[str, float]]:
    """`{name: {"value", "ci_low", "ci_high"}}` for pass@k, maj@k, CoT-pass@k (each k in `ks`)
    and mean@N, from `score`'s arrays (names prefixed with `prefix`, e.g. "greedy_")."""
    correct = scores["correct"]
    n = correct.shape[1]
    bad = [k for k in ks if not 1 <= k <= n]
    if bad:
        raise ValueError(f"k must be in [1, N={n}] (the number of samples); got {bad}")
    key = jax.random.PRNGKey(seed)
    per_prompt = {f"mean@{n}": evaluation.mean_at_k(correct)}
    for k in ks:
        per_prompt[f"pass@{k}"] = evaluation.pass_at_k_from_samples(correct, k=k)
        per_prompt[f"maj@{k}"] = evaluation.maj_at_k(scores["answer_ids"], correct, k=k)
        if "steps" in scores:
            per_prompt[f"cot_pass@{k}"] = evaluation.cot_pass_at_k(correct, scores["steps"],
                                                                    k=k)
    return {prefix + name: _with_ci(v, jax.random.fold_in(key, i), num_resamples=num_resamples,
                                    confidence=confidence)
            for i, (name, v) in enumerate(per_prompt.items())}


def write_samples(path: str, data: EvalData, texts, scores) -> None:
    """One JSON line per prompt: prompt, reference answer, completions, correctness."""
    with open(path, "w", encoding="utf-8") as f:
        for p, (ex, ts) in enumerate(zip(data.examples, texts)):
            f.write(json.dumps({"prompt": ex.prompt, "answer": ex.answer, "completions": list(ts),
                                "correct": scores["correct"][p].tolist()}) + "\n")


def evaluate_policy(params, model_config, tokenizer, data: EvalData, *, num_samples: int = 8,
                    ks: Sequence[int] = (), greedy: bool = True, temperature: float = 1.0,
                    top_p: float = 1.0, max_new_tokens: int, batch_size: int = 32,
                    apply_chat_template: bool = False, seed: int = 0,
                    num_resamples: int = 2000, confidence: float = 0.95,
                    samples_out: str = "") -> Dict:
    """The whole evaluation; returns the JSON-ready report.

    Greedy decoding gives `greedy_pass@1` (and `greedy_cot_pass@1`); `num_samples` > 0
    sampled completions per prompt give pass@k, maj@k, CoT-pass@k for each k in `ks`
    (default 1 and N) and mean@N. Each metric is `{"value", "ci_low", "ci_high"}`.
    """
    import time
    tokens, mask = encode_prompts(data.examples, tokenizer, apply_chat_template=apply_chat_template)
    rng = jax.random.PRNGKey(seed)
    common = dict(max_new_tokens=max_new_tokens, batch_size=batch_size)
    ci = dict(num_resamples=num_resamples, confidence=confidence, seed=seed)
    report = {"data": data.name, "num_prompts": len(data.examples), "num_samples": num_samples,
              "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens,
              "confidence": confidence, "metrics": {}, "time_s": {}}
    if greedy:
        t0 = time.perf_counter()
        texts = generate_texts(params, model_config, tokenizer, tokens, mask, rng,
                               num_samples=1, greedy=True, **common)
        report["time_s"]["greedy"] = time.perf_counter() - t0
        metrics = summarize(score(texts, data), ks=(1,), prefix="greedy_", **ci)
        report["metrics"].update({k: v for k, v in metrics.items()
                                  if k in ("greedy_pass@1", "greedy_cot_pass@1")})
    if num_samples > 0:
        ks = sorted(set(ks)) if ks else sorted({1, num_samples})
        t0 = time.perf_counter()
        texts = generate_texts(params, model_config, tokenizer, tokens, mask,
                               jax.random.fold_in(rng, 1), num_samples=num_samples,
                               temperature=temperature, top_p=top_p, **common)
        report["time_s"]["sampled"] = time.perf_counter() - t0
        scores = score(texts, data)
        report["metrics"].update(summarize(scores, ks=ks, **ci))
        if samples_out:
            write_samples(samples_out, data, texts, scores)
    return report
