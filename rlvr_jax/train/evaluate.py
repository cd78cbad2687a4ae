"""Held-out evaluation: greedy pass@1 (and sampled pass@k / maj@k / CoT-pass@k) on a split."""
from typing import Callable, Dict, Optional, Sequence

import jax
import numpy as np

from rlvr_jax import evaluation, sampling
from rlvr_jax.models import ModelConfig
from rlvr_jax.train.step import make_sample_fn


def decode_completions(tokenizer, tokens: np.ndarray, mask: np.ndarray) -> list:
    """Completion texts [B] from sampler tokens [B, N] (up to the stop token)."""
    out = []
    for row, m in zip(np.asarray(tokens), np.asarray(mask)):
        out.append(tokenizer.decode(row[np.asarray(m, bool)], stop_at_eos=True))
    return out


class Evaluator:
    """Scores a policy on a fixed set of held-out prompts.

    Args:
      model_config: the policy's config.
      tokenizer: for stop tokens and decoding.
      prompt_tokens, prompt_mask: [E, Tp] left-padded held-out prompts.
      examples: the E examples (references for `verify`).
      verify: fn(completion_text, example) -> reward in [0, 1] (1 = correct).
      check_steps: optional fn(completion_text, example) -> bool for CoT-pass@k.
      answer_key: optional fn(completion_text) -> hashable answer, for maj@k.
      max_new_tokens: completion budget.
      batch_size: prompts per compiled call (E must be a multiple of it; the
        caller pads).
      k: > 1 adds sampled pass@k, maj@k and CoT-pass@k at `temperature`.
    """

    def __init__(self, model_config: ModelConfig, tokenizer, prompt_tokens, prompt_mask,
                 examples: Sequence, verify: Callable, *, check_steps: Optional[Callable] = None,
                 answer_key: Optional[Callable] = None, max_new_tokens: int, batch_size: int,
                 k: int = 1, temperature: float = 1.0):
        if len(examples) != len(prompt_tokens) or len(examples) % batch_size:
            raise ValueError(f"{len(examples)} eval prompts must be a multiple of the eval "
                             f"batch size {batch_size}")
        self.tokenizer, self.examples = tokenizer, list(examples)
        self.prompt_tokens, self.prompt_mask = np.asarray(prompt_tokens), np.asarray(prompt_mask)
        self.verify, self.check_steps, self.answer_key = verify, check_steps, answer_key
        self.batch_size, self.k = batch_size, k
        stop = (tokenizer.eos_id,)
        greedy = sampling.SamplingConfig(greedy=True, max_new_tokens=max_new_tokens,
                                         stop_token_ids=stop, num_samples=1,
                                         pad_id=tokenizer.pad_id)
        self._greedy = make_sample_fn(model_config, greedy)
        self._sampled = None
        if k > 1:
            sampled = sampling.SamplingConfig(temperature=temperature,
                                              max_new_tokens=max_new_tokens,
                                              stop_token_ids=stop, num_samples=k,
                                              pad_id=tokenizer.pad_id)
            self._sampled = make_sample_fn(model_config, sampled)

    def _run(self, fn, params, rng, group: int):
        texts = []
        for i, start in enumerate(range(0, len(self.examples), self.batch_size)):
            sl = slice(start, start + self.batch_size)
            batch = {"prompt_tokens": self.prompt_tokens[sl], "prompt_mask": self.prompt_mask[sl]}
            rollout = fn(params, batch, jax.random.fold_in(rng, i))
            texts += decode_completions(self.tokenizer, rollout.tokens, rollout.mask)
        return [texts[p * group:(p + 1) * group] for p in range(len(self.examples))]

    def __call__(self, params, rng) -> Dict[str, float]:
        """Metrics named `eval/...` (floats) and the per-prompt greedy correctness."""
        greedy = self._run(self._greedy, params, rng, 1)
        correct = np.array([self.verify(t[0], ex) >= 1.0 for t, ex in zip(greedy, self.examples)],
                           np.float32)
        point, low, high = evaluation.bootstrap_ci(jax.random.PRNGKey(0), correct,
                                                   statistic="mean", num_resamples=1000)
        out = {"eval/pass@1": float(point), "eval/pass@1_ci_low": float(low),
               "eval/pass@1_ci_high": float(high), "eval/num_prompts": float(len(correct))}
        if self.check_steps is not None:
            cot = [bool(c) and self.check_steps(t[0], ex)
                   for c, t, ex in zip(correct, greedy, self.examples)]
            out["eval/cot_pass@1"] = float(np.mean(cot))
        if self._sampled is not None:
            samples = self._run(self._sampled, params, jax.random.fold_in(rng, 10**6), self.k)
            right = np.array([[self.verify(t, ex) >= 1.0 for t in ts]
                              for ts, ex in zip(samples, self.examples)], bool)
            k = self.k
            out[f"eval/pass@{k}"] = float(np.mean(evaluation.pass_at_k_from_samples(right, k=k)))
            out[f"eval/mean@{k}"] = float(np.mean(right))
            if self.check_steps is not None:
                steps = np.array([[self.check_steps(t, ex) for t in ts]
                                  for ts, ex in zip(samples, self.examples)], bool)
                out[f"eval/cot_pass@{k}"] = float(np.mean(
                    evaluation.cot_pass_at_k(right, steps, k=k)))
            if self.answer_key is not None:
                ids = np.full(right.shape, -1, np.int32)
                for p, ts in enumerate(samples):
                    seen = {}
                    for j, t in enumerate(ts):
                        key = self.answer_key(t)
                        if key is not None:
                            ids[p, j] = seen.setdefault(key, len(seen))
                out[f"eval/maj@{k}"] = float(np.mean(evaluation.maj_at_k(ids, right, k=k)))
        return out

