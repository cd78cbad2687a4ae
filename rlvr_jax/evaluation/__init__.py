"""The evaluation room: held-out metrics of a policy, periodic (during training) and offline.

    data = evaluation.task_data("arithmetic", split="test", num_prompts=200)
    tokens, mask = evaluation.encode_prompts(data.examples, tok)
    evaluator = evaluation.Evaluator(sampler, tok, tokens, mask, data, batch_size=32)
    evaluator(params, rng)                          # the loop's eval/... metrics
    evaluator.report(params, num_samples=8, ks=(1, 8))   # scripts/evaluate.py's report

Modules: `metrics` (pure, jittable pass@k, maj@k, CoT-pass@k, mean@k, best@k, IQM,
bootstrap CIs — importable from here), `data` (held-out problems and their verifiers),
`decoding` (prompts → completion texts with a run's `Sampler`), `report` (per-prompt
scoring and aggregation), `evaluator` (`Evaluator`: the one evaluator, called by the
training loop, the lab and `scripts/evaluate.py`) and `policy` (`load_policy`: a policy
outside a training run).
Layering: builds on `rlvr_jax.sampler`, `scoring`, `sampling`, `models`, `tasks`, `data`; never imports
`rlvr_jax.train`. Only `metrics` is imported eagerly.
"""
import importlib

from rlvr_jax.evaluation.metrics import (best_at_k, bootstrap_ci, cot_pass_at_k, iqm, maj_at_k,
                                         mean_at_k, pass_at_k, pass_at_k_from_samples)

_LAZY = {
    "EvalData": "data", "task_data": "data", "jsonl_data": "data",
    "encode_prompts": "decoding", "generate_texts": "decoding", "eval_sampler": "decoding",
    "score": "report", "per_prompt_metrics": "report", "summarize": "report",
    "write_samples": "report",
    "Evaluator": "evaluator",
    "load_policy": "policy", "load_params_dir": "policy",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"rlvr_jax.evaluation.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rlvr_jax.evaluation' has no attribute {name!r}")


__all__ = ["pass_at_k", "pass_at_k_from_samples", "cot_pass_at_k", "mean_at_k", "best_at_k",
           "maj_at_k", "iqm", "bootstrap_ci", *_LAZY]
