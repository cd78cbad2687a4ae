"""The one evaluator: a policy's held-out metrics on a fixed set of prompts, decoded with a
run's `Sampler`. The training loop calls it (`eval/...` metrics), the lab asks it for
sampled pass@k per prompt (`sampled`), `scripts/evaluate.py` for its report with intervals (`report`)."""
import time
from typing import Dict, Optional, Sequence

import jax
import numpy as np

from rlvr_jax.evaluation import report as report_lib
from rlvr_jax.evaluation.data import EvalData
from rlvr_jax.evaluation.decoding import generate_texts
from rlvr_jax.sampler import Sampler


class Evaluator:
    """Scores a policy on a fixed set of held-out prompts.

    Args:
      sampler: the run's `rlvr_jax.sampler.Sampler`: its rollout kind (plain, or episodes
        with its environment, the examples' integer answers reaching `env.reset`; the
        model's own tokens are scored) and decoding settings (completion length, stop
        tokens, ...); evaluation changes only what `decoding.eval_sampler` names.
      tokenizer: for decoding the completions.
      prompt_tokens, prompt_mask: [E, Tp] left-padded held-out prompts.
      data: the E examples and their verifiers (`EvalData`).
      batch_size: prompts per compiled call (the last batch is padded).
      k: > 1 adds sampled pass@k, mean@k, maj@k and CoT-pass@k at `temperature` to the
        periodic metrics.
      buckets: plain sampling's prompt-length buckets (None: decoded at width Tp).
    """

    def __init__(self, sampler: Sampler, tokenizer, prompt_tokens, prompt_mask,
                 data: EvalData, *, batch_size: int, k: int = 1, temperature: float = 1.0,
                 buckets: Optional[Sequence[int]] = None):
        if len(data.examples) != len(prompt_tokens):
            raise ValueError(f"{len(prompt_tokens)} prompts for {len(data.examples)} examples")
        self.sampler, self.tokenizer, self.data = sampler, tokenizer, data
        self.prompt_tokens, self.prompt_mask = np.asarray(prompt_tokens), np.asarray(prompt_mask)
        self.batch_size, self.k, self.temperature, self.buckets = batch_size, k, temperature, buckets
        self.answers = np.array([ex.answer_value or 0 for ex in data.examples], np.int32)

    def texts(self, params, rng, *, num_samples: int, greedy: bool,
              temperature: Optional[float] = None, top_p: float = 1.0,
              batch_size: Optional[int] = None):
        """Completion texts [E][num_samples] (`decoding.generate_texts`)."""
        return generate_texts(params, self.sampler, self.tokenizer, self.prompt_tokens,
                              self.prompt_mask, rng, num_samples=num_samples, greedy=greedy,
                              temperature=temperature or self.temperature, top_p=top_p,
                              batch_size=batch_size or self.batch_size, answers=self.answers,
                              examples=self.data.examples, buckets=self.buckets)

    def _scores(self, params, rng, **kw):
        return report_lib.score(self.texts(params, rng, **kw), self.data)

    def sampled(self, params, rng, *, num_samples: int, ks, temperature: float,
                batch_size: Optional[int] = None) -> Dict[str, np.ndarray]:
        """{name: [E]}: pass@k, maj@k, CoT-pass@k (each k in `ks`) and mean@n of each
        held-out prompt from `num_samples` samples per prompt at `temperature`
        (`report.per_prompt_metrics`; the lab averages them and keeps them per prompt),
        `batch_size` prompts per call (default the evaluator's)."""
        scores = self._scores(params, rng, num_samples=num_samples, greedy=False,
                              temperature=temperature, batch_size=batch_size)
        return report_lib.per_prompt_metrics(scores, ks=ks)

    def __call__(self, params, rng) -> Dict[str, float]:
        """Metrics named `eval/...` (floats): greedy pass@1 with its 95% bootstrap interval
        over prompts, CoT-pass@1; with k > 1 the means over prompts of pass@k, mean@k,
        CoT-pass@k and maj@k (`report.per_prompt_metrics`)."""
        greedy = self._scores(params, rng, num_samples=1, greedy=True)
        correct = greedy["correct"][:, 0]
        ci = report_lib.with_ci(correct, jax.random.PRNGKey(0), num_resamples=1000)
        out = {"eval/pass@1": ci["value"], "eval/pass@1_ci_low": ci["ci_low"],
               "eval/pass@1_ci_high": ci["ci_high"], "eval/num_prompts": float(len(correct))}
        if "steps" in greedy:
            out["eval/cot_pass@1"] = float(np.mean(correct & greedy["steps"][:, 0]))
        if self.k > 1:
            k = self.k
            sampled = self._scores(params, jax.random.fold_in(rng, 10**6), num_samples=k,
                                   greedy=False)
            per_prompt = report_lib.per_prompt_metrics(sampled, ks=(k,))
            for name in (f"pass@{k}", f"mean@{k}", f"cot_pass@{k}", f"maj@{k}"):
                if name in per_prompt:
                    out[f"eval/{name}"] = float(np.mean(per_prompt[name]))
        return out

    def report(self, params, *, num_samples: int = 8, ks: Sequence[int] = (),
               greedy: bool = True, temperature: float = 1.0, top_p: float = 1.0,
               seed: int = 0, num_resamples: int = 2000, confidence: float = 0.95,
               samples_out: str = "") -> Dict:
        """The JSON-ready report of `scripts/evaluate.py`: every metric a per-prompt score
        averaged over prompts, `{"value", "ci_low", "ci_high"}` with a percentile bootstrap
        interval over prompts (`report.summarize`). Greedy decoding gives `greedy_pass@1`
        (and `greedy_cot_pass@1`); `num_samples` > 0 sampled completions per prompt give
        pass@k, maj@k, CoT-pass@k for each k in `ks` (default 1 and N) and mean@N, their
        texts written to `samples_out` (JSONL) when given. Keys: PRNGKey(seed) greedy,
        its fold_in 1 sampled."""
        rng = jax.random.PRNGKey(seed)
        ci = dict(num_resamples=num_resamples, confidence=confidence, seed=seed)
        out = {"data": self.data.name, "num_prompts": len(self.data.examples),
               "num_samples": num_samples, "temperature": temperature, "top_p": top_p,
               "max_new_tokens": self.sampler.sampling_config.max_new_tokens,
               "confidence": confidence, "metrics": {}, "time_s": {}}
        if greedy:
            t0 = time.perf_counter()
            scores = self._scores(params, rng, num_samples=1, greedy=True)
            out["time_s"]["greedy"] = time.perf_counter() - t0
            metrics = report_lib.summarize(scores, ks=(1,), prefix="greedy_", **ci)
            out["metrics"].update({k: v for k, v in metrics.items()
                                   if k in ("greedy_pass@1", "greedy_cot_pass@1")})
        if num_samples > 0:
            ks = sorted(set(ks)) if ks else sorted({1, num_samples})
            t0 = time.perf_counter()
            texts = self.texts(params, jax.random.fold_in(rng, 1), num_samples=num_samples,
                               greedy=False, temperature=temperature, top_p=top_p)
            out["time_s"]["sampled"] = time.perf_counter() - t0
            scores = report_lib.score(texts, self.data)
            out["metrics"].update(report_lib.summarize(scores, ks=ks, **ci))
            if samples_out:
                report_lib.write_samples(samples_out, self.data, texts, scores)
        return out
