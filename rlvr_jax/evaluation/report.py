"""Per-prompt scoring and its aggregation, for the `Evaluator`.

`score` turns completion texts [P][N] into per-sample arrays, `per_prompt_metrics` into
per-prompt metrics `[P]`, and `with_ci` / `summarize` average them over prompts with a
percentile bootstrap interval (`metrics.bootstrap_ci`, statistic "mean").
"""
import json
from typing import Dict, Sequence

import jax
import numpy as np

from rlvr_jax.evaluation import metrics
from rlvr_jax.evaluation.data import EvalData
from rlvr_jax.scoring import is_correct


def _answer_ids(texts, answer_key) -> np.ndarray:
    """[P, N] int32 ids of the extracted answers, numbered per prompt; -1: no answer."""
    ids = np.full((len(texts), len(texts[0]) if texts else 0), -1, np.int32)
    for p, ts in enumerate(texts):
        seen: dict = {}
        for j, t in enumerate(ts):
            key = answer_key(t)
            if key is not None:
                ids[p, j] = seen.setdefault(key, len(seen))
    return ids


def score(texts: Sequence[Sequence[str]], data: EvalData) -> Dict[str, np.ndarray]:
    """`correct` [P, N] bool, `answer_ids` [P, N] int32 (-1: no answer; ids per prompt) and,
    when the data has step checks, `steps` [P, N] bool."""
    if len(texts) != len(data.examples):
        raise ValueError(f"{len(texts)} completion groups for {len(data.examples)} examples")
    correct = np.array([[is_correct(data.verify(t, ex)) for t in ts]
                        for ts, ex in zip(texts, data.examples)], bool)
    out = {"correct": correct, "answer_ids": _answer_ids(texts, data.answer_key)}
    if data.check_steps is not None:
        out["steps"] = np.array([[bool(data.check_steps(t, ex)) for t in ts]
                                 for ts, ex in zip(texts, data.examples)], bool)
    return out


def per_prompt_metrics(scores: Dict[str, np.ndarray], ks: Sequence[int]) -> Dict[str, np.ndarray]:
    """`{name: [P]}`: mean@N, then pass@k, maj@k (and CoT-pass@k with steps) for each k."""
    correct = scores["correct"]
    n = correct.shape[1]
    bad = [k for k in ks if not 1 <= k <= n]
    if bad:
        raise ValueError(f"k must be in [1, N={n}] (the number of samples); got {bad}")
    out = {f"mean@{n}": np.mean(correct, axis=1)}
    for k in ks:
        out[f"pass@{k}"] = metrics.pass_at_k_from_samples(correct, k=k)
        out[f"maj@{k}"] = metrics.maj_at_k(scores["answer_ids"], correct, k=k)
        if "steps" in scores:
            out[f"cot_pass@{k}"] = metrics.cot_pass_at_k(correct, scores["steps"], k=k)
    return out


def with_ci(per_prompt, key, *, num_resamples: int, confidence: float = 0.95
            ) -> Dict[str, float]:
    """`{"value", "ci_low", "ci_high"}`: the mean over prompts and its bootstrap interval."""
    point, low, high = metrics.bootstrap_ci(key, np.asarray(per_prompt, np.float32),
                                            statistic="mean", num_resamples=num_resamples,
                                            confidence=confidence)
    return {"value": float(point), "ci_low": float(low), "ci_high": float(high)}


def summarize(scores: Dict[str, np.ndarray], *, ks: Sequence[int], prefix: str = "",
              seed: int = 0, num_resamples: int = 2000, confidence: float = 0.95
              ) -> Dict[str, Dict[str, float]]:
    """`{name: {"value", "ci_low", "ci_high"}}` for pass@k, maj@k, CoT-pass@k (each k in `ks`)
    and mean@N, from `score`'s arrays (names prefixed with `prefix`, e.g. "greedy_")."""
    key = jax.random.PRNGKey(seed)
    per_prompt = per_prompt_metrics(scores, ks)
    return {prefix + name: with_ci(v, jax.random.fold_in(key, i), num_resamples=num_resamples,
                                   confidence=confidence)
            for i, (name, v) in enumerate(per_prompt.items())}


def write_samples(path: str, data: EvalData, texts, scores) -> None:
    """One JSON line per prompt: prompt, reference answer, completions, correctness."""
    with open(path, "w", encoding="utf-8") as f:
        for p, (ex, ts) in enumerate(zip(data.examples, texts)):
            f.write(json.dumps({"prompt": ex.prompt, "answer": ex.answer, "completions": list(ts),
                                "correct": scores["correct"][p].tolist()}) + "\n")
