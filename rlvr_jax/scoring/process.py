"""Process (step) rewards on the host: each task step checker's verdict on the token that
ends its step.

    steps, metrics = step_rewards_on_host(texts, examples, rollout.tokens, rollout.mask,
                                          step_scores=verifier.step_scores,
                                          tokenizer=tokenizer)
    # steps.values [B, N] float32 (the step's 0/1 verdict at its last token), steps.ends [B, N]

A task's `step_scores(text, example)` gives [(end_char, score), ...] for the reasoning chunks
before the answer (`rlvr_jax.tasks`); `scoring.spans` maps each end offset to the token that
holds the step's last character. Two steps ending in the same token keep the lower score.
With `verify` (outcome-gated process rewards) the steps of a completion whose final answer
the verifier rejects score 0. The estimators that use them are in
`rlvr_jax.advantages.process`; the update adds them as `rl.process_weight` asks.
"""
from typing import Callable, Dict, Optional, Sequence, Tuple

import flax.struct
import jax
import numpy as np

from rlvr_jax.scoring.spans import completion_ids, token_of_offsets


@flax.struct.dataclass
class StepRewards:
    """Per-step rewards of a rollout.

    Attributes:
      values: [B, N] float32, the reward of each step at the token that ends it, else 0.
      ends: [B, N] bool, True at the tokens that end a step.
    """
    values: jax.Array
    ends: jax.Array


def place_steps(tokenizer, tokens, mask, steps: Sequence[Tuple[int, float]]
                ) -> Tuple[np.ndarray, np.ndarray]:
    """(values [N], ends [N]) of one row: each (end_char, score) at its token."""
    n = np.asarray(tokens).shape[0]
    values, ends = np.zeros((n,), np.float32), np.zeros((n,), bool)
    ids = completion_ids(tokens, mask)
    for (_, score), t in zip(steps, token_of_offsets(tokenizer, ids, [c for c, _ in steps])):
        values[t] = min(values[t], score) if ends[t] else score
        ends[t] = True
    return values, ends


def step_rewards_on_host(texts: Sequence[str], examples: Sequence, tokens, mask, *,
                         step_scores: Callable, tokenizer, verify: Optional[Callable] = None
                         ) -> Tuple[StepRewards, Dict[str, float]]:
    """Step rewards [B, N] of B decoded completions and their examples (each prompt's example
    repeated G times), with metrics.

    Args:
      texts: [B] completion texts (`scoring.decode_completions`); examples: [B].
      tokens, mask: [B, N] the rollout's completion tokens and mask.
      step_scores: fn(text, example) -> [(end_char, score), ...] or None (no steps).
      verify: outcome gate: fn(text, example) -> float; a completion with verdict < 1 gets
        step rewards 0 (None: no gate). A raising checker gives that row no steps.

    Returns:
      (StepRewards, metrics): process/step_accuracy (mean step score before the gate),
      process/steps_per_completion, process/all_steps_correct (fraction of completions with
      >= 1 step, all right).
    """
    tokens, mask = np.asarray(tokens), np.asarray(mask)
    values, ends = np.zeros(tokens.shape, np.float32), np.zeros(tokens.shape, bool)
    scores, perfect = [], 0
    for b, (text, example) in enumerate(zip(texts, examples)):
        try:
            steps = step_scores(text, example) or []
        except Exception:  # noqa: BLE001 - a failing checker is "no steps", like a 0 reward
            steps = []
        scores.extend(s for _, s in steps)
        perfect += bool(steps) and all(s >= 1.0 for _, s in steps)
        if steps and verify is not None and float(verify(text, example)) < 1.0:
            steps = [(c, 0.0) for c, _ in steps]
        values[b], ends[b] = place_steps(tokenizer, tokens[b], mask[b], steps)
    n = max(len(texts), 1)
    metrics = {"process/step_accuracy": float(np.mean(scores)) if scores else 0.0,
               "process/steps_per_completion": len(scores) / n,
               "process/all_steps_correct": perfect / n}
    return StepRewards(values=values, ends=ends), metrics
