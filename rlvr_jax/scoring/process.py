"""Process (step) rewards on the host: each task step checker's verdict on the token that
ends its step.

    steps, metrics = step_rewards_on_host(texts, examples, rollout.tokens, rollout.mask,
                                          step_scores=verifier.step_scores,
                                          tokenizer=tokenizer)
    # steps.values [B, N] float32 (the step's 0/1 verdict at its last token), steps.ends [B, N]

A task's `step_scores(text, example)` gives [(end_char, score), ...] for the reasoning chunks
before the answer (`rlvr_jax.tasks`); `scoring.spans` maps each end offset to the token that
holds the step's last character. Two steps ending in the same token keep the lower score.
With `verdicts` (outcome-gated process rewards) the steps of a completion whose final
answer the verifier rejected score 0. The estimators that use them are in
`rlvr_jax.advantages.process`; the update adds them as `rl.process_weight` asks.
"""
from typing import Callable, Dict, Sequence, Tuple

import flax.struct
import jax
import numpy as np

from rlvr_jax import distributed
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
                         step_scores: Callable, tokenizer, verdicts=None
                         ) -> Tuple[StepRewards, Dict[str, float]]:
    """Step rewards [B, N] of B decoded completions and their examples (each prompt's example
    repeated G times), with metrics.

    Args:
      texts: [B] completion texts (`scoring.decode_completions`); examples: [B].
      tokens, mask: [B, N] the rollout's completion tokens and mask.
      step_scores: fn(text, example) -> [(end_char, score), ...] or None (no steps).
      verdicts: outcome gate: [B] the verifier's verdicts of the completions (the host
        stage's, `Inputs.verdicts`); a completion with verdict < 1 gets step rewards 0
        (None: no gate). A raising checker gives that row no steps.

    Returns:
      (StepRewards, metrics): process/step_accuracy (mean step score before the gate),
      process/steps_per_completion, process/all_steps_correct (fraction of completions with
      >= 1 step, all right).

    On several processes each checks its `distributed.my_rows(B)` and every process gets all
    rows and the metrics over all of them (collectives: every process calls it).
    """
    n = len(texts)
    tokens, mask = distributed.to_host((tokens, mask))  # Batch-sharded over processes.
    rows = distributed.my_rows(n)  # Rows are independent: each process checks its share.
    values = np.zeros((rows.stop - rows.start,) + tokens.shape[1:], np.float32)
    ends = np.zeros(values.shape, bool)
    total, count, perfect = 0.0, 0, 0
    for i, b in enumerate(range(rows.start, rows.stop)):
        try:
            steps = step_scores(texts[b], examples[b]) or []
        except Exception:  # noqa: BLE001 - a failing checker is "no steps", like a 0 reward
            steps = []
        total, count = total + sum(s for _, s in steps), count + len(steps)
        perfect += bool(steps) and all(s >= 1.0 for _, s in steps)
        if steps and verdicts is not None and float(verdicts[b]) < 1.0:
            steps = [(c, 0.0) for c, _ in steps]
        values[i], ends[i] = place_steps(tokenizer, tokens[b], mask[b], steps)
    values, ends, total, count, perfect = distributed.gather_rows(
        (values, ends, np.float32(total), np.int32(count), np.int32(perfect)), n)
    metrics = {"process/step_accuracy": float(total) / int(count) if count else 0.0,
               "process/steps_per_completion": int(count) / max(n, 1),
               "process/all_steps_correct": int(perfect) / max(n, 1)}
    return StepRewards(values=values, ends=ends), metrics


def process_term(setup, weight):
    """The per-step host term of `rl.process_weight > 0`: fn(rewards, x) -> (StepRewards,
    metrics) from the verifier's step checkers (gated by the host stage's verdicts,
    `x.verdicts`, with `rl.process_gate`); None without process rewards. With
    `rl.process_source = "learned"` the learned step scorers' rewards train instead, and
    with `rl.process_oracle_metrics` the checkers only measure (their steps reach the
    device terms as `Inputs.host_steps`, which the update ignores)."""
    del weight
    rl, verifier = setup.rl, setup.verifier
    if rl is None or not rl.process:
        return None
    learned = rl.process_source == "learned"
    if learned and not rl.process_oracle_metrics:
        return None
    if verifier.step_scores is None:
        raise ValueError("rl.process_weight: process rewards need a task with step checkers "
                         "(data.source=task)")

    def fn(rewards, x):
        del rewards
        return step_rewards_on_host(
            x.texts, x.examples, x.rollout.tokens, x.rollout.mask,
            step_scores=verifier.step_scores, tokenizer=setup.tokenizer,
            verdicts=x.verdicts if rl.process_gate else None)
    return fn
