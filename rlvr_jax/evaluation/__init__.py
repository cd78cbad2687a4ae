"""The evaluation room: held-out metrics of a policy, periodic (during training) and offline.

    data = evaluation.task_data("arithmetic", split="test", num_prompts=200)
    texts = evaluation.generate_texts(params, model_config, tok, tokens, mask, rng, ...)
    report = evaluation.summarize(evaluation.score(texts, data), ks=(1, 8))
    evaluator = evaluation.Evaluator(model_config, tok, tokens, mask, data, ...)  # periodic

Modules: `metrics` (pure, jittable pass@k, maj@k, CoT-pass@k, mean@k, best@k, IQM,
bootstrap CIs — importable from here), `data` (held-out problems and their verifiers),
`decoding` (prompts → completion texts), `report` (per-prompt scoring and aggregation,
shared by both evaluators), `periodic` (`Evaluator`, called by the training loop) and
`offline` (`evaluate_policy`, `load_policy`: the library behind `scripts/evaluate.py`).
Layering: builds on `rlvr_jax.scoring`, `sampling`, `models`, `tasks`, `data`; never imports
`rlvr_jax.train`. Only `metrics` is imported eagerly.
"""
import importlib

from rlvr_jax.evaluation.metrics import (best_at_k, bootstrap_ci, cot_pass_at_k, iqm, maj_at_k,
                                         mean_at_k, pass_at_k, pass_at_k_from_samples)

_LAZY = {
    "EvalData": "data", "task_data": "data", "jsonl_data": "data",
    "encode_prompts": "decoding", "generate_texts": "decoding",
    "score": "report", "per_prompt_metrics": "report", "summarize": "report",
    "write_samples": "report",
    "Evaluator": "periodic",
    "evaluate_policy": "offline", "load_policy": "offline", "load_params_dir": "offline",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"rlvr_jax.evaluation.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rlvr_jax.evaluation' has no attribute {name!r}")


__all__ = ["pass_at_k", "pass_at_k_from_samples", "cot_pass_at_k", "mean_at_k", "best_at_k",
           "maj_at_k", "iqm", "bootstrap_ci", *_LAZY]
