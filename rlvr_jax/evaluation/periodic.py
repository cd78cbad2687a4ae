"""The evaluator the training loop calls: greedy pass@1 (and sampled pass@k / maj@k /
CoT-pass@k) on a fixed set of held-out prompts, as `eval/...` metrics."""
from typing import Dict, Optional

import jax
import numpy as np

from rlvr_jax.evaluation import report
from rlvr_jax.evaluation.data import EvalData
from rlvr_jax.evaluation.decoding import generate_texts
from rlvr_jax.models import ModelConfig


class Evaluator:
    """Scores a policy on a fixed set of held-out prompts.

    Args:
      model_config: the policy's config.
      tokenizer: for stop tokens and decoding.
      prompt_tokens, prompt_mask: [E, Tp] left-padded held-out prompts (decoded at this
        width, no bucketing).
      data: the E examples and their verifiers (`EvalData`).
      max_new_tokens: completion budget.
      batch_size: prompts per compiled call (E must be a multiple of it; the caller pads).
      k: > 1 adds sampled pass@k, mean@k, maj@k and CoT-pass@k at `temperature`.
      sampler: the run's `rlvr_jax.sampler.Sampler` (its rollout kind: plain, or episodes
        with its environment, the examples' integer answers reaching `env.reset`; the
        model's own tokens are scored); or env, tools: a multi-turn environment (and a host
        one's `multiturn.HostTools`) to make one; neither: plain sampling.
      cache_window: the sampler's `SamplingConfig.cache_window` (None: automatic; a
        `sampler` keeps its own).
    """

    def __init__(self, model_config: ModelConfig, tokenizer, prompt_tokens, prompt_mask,
                 data: EvalData, *, max_new_tokens: int, batch_size: int, k: int = 1,
                 temperature: float = 1.0, env=None, tools=None,
                 cache_window: Optional[int] = None, sampler=None):
        if len(data.examples) != len(prompt_tokens) or len(data.examples) % batch_size:
            raise ValueError(f"{len(data.examples)} eval prompts must be a multiple of the "
                             f"eval batch size {batch_size}")
        self.model_config, self.tokenizer, self.data = model_config, tokenizer, data
        self.prompt_tokens, self.prompt_mask = np.asarray(prompt_tokens), np.asarray(prompt_mask)
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.k, self.temperature, self.env, self.tools = k, temperature, env, tools
        self.sampler = sampler
        self.cache_window = cache_window if sampler is None else \
            sampler.sampling_config.cache_window
        self.answers = np.array([ex.answer_value or 0 for ex in data.examples], np.int32)

    def _scores(self, params, rng, *, num_samples: int, greedy: bool,
                temperature: Optional[float] = None, batch_size: Optional[int] = None):
        texts = generate_texts(params, self.model_config, self.tokenizer, self.prompt_tokens,
                               self.prompt_mask, rng, num_samples=num_samples, greedy=greedy,
                               temperature=1.0 if greedy else (temperature or self.temperature),
                               max_new_tokens=self.max_new_tokens,
                               batch_size=batch_size or self.batch_size, buckets=None,
                               env=self.env, answers=self.answers, tools=self.tools,
                               examples=self.data.examples, cache_window=self.cache_window,
                               sampler=self.sampler)
        return report.score(texts, self.data)

    def sampled(self, params, rng, *, num_samples: int, ks, temperature: float,
                batch_size: Optional[int] = None) -> Dict[str, float]:
        """The means over the held-out prompts of pass@k, maj@k, CoT-pass@k (each k in
        `ks`) and mean@n from `num_samples` samples per prompt at `temperature`
        (`report.per_prompt_metrics`), `batch_size` prompts per call (default the
        evaluator's)."""
        scores = self._scores(params, rng, num_samples=num_samples, greedy=False,
                              temperature=temperature, batch_size=batch_size)
        per_prompt = report.per_prompt_metrics(scores, ks=ks)
        return {k: float(np.mean(v)) for k, v in per_prompt.items()}

    def __call__(self, params, rng) -> Dict[str, float]:
        """Metrics named `eval/...` (floats): greedy pass@1 with its 95% bootstrap interval
        over prompts, CoT-pass@1; with k > 1 the means over prompts of pass@k, mean@k,
        CoT-pass@k and maj@k (`report.per_prompt_metrics`)."""
        greedy = self._scores(params, rng, num_samples=1, greedy=True)
        correct = greedy["correct"][:, 0]
        ci = report.with_ci(correct, jax.random.PRNGKey(0), num_resamples=1000)
        out = {"eval/pass@1": ci["value"], "eval/pass@1_ci_low": ci["ci_low"],
               "eval/pass@1_ci_high": ci["ci_high"], "eval/num_prompts": float(len(correct))}
        if "steps" in greedy:
            out["eval/cot_pass@1"] = float(np.mean(correct & greedy["steps"][:, 0]))
        if self.k > 1:
            k = self.k
            sampled = self._scores(params, jax.random.fold_in(rng, 10**6), num_samples=k,
                                   greedy=False)
            per_prompt = report.per_prompt_metrics(sampled, ks=(k,))
            for name in (f"pass@{k}", f"mean@{k}", f"cot_pass@{k}", f"maj@{k}"):
                if name in per_prompt:
                    out[f"eval/{name}"] = float(np.mean(per_prompt[name]))
        return out
