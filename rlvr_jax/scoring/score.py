"""Scoring a rollout: verdicts from a verifier, the reward metrics, the shaped rewards.

Shapes: P' prompts, G samples each, B = P'·G sequences, N new tokens.
"""
from typing import Callable, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import distributed, sampling
from rlvr_jax.scoring.host import HostScorer
from rlvr_jax.scoring.shaping import rollout_shapers, shape

Metrics = Dict[str, jax.Array]


def is_correct(verdicts):
    """A completion is correct when its verifier reward is at least 1 (every path, every
    metric: `reward/correct`, eval pass@k)."""
    return verdicts >= 1.0


def reward_metrics(verdicts, components: Optional[Dict[str, np.ndarray]] = None) -> Metrics:
    """The verifier's metrics over all B sampled completions, before shaping and before
    dynamic sampling picks groups.

    reward/correct: the fraction of completions the verifier scores >= 1.
    reward/<name>: the mean (unweighted) value of each reward component [B] in
      `components` (a config with `reward.components`).
    """
    correct = is_correct(jnp.asarray(verdicts, jnp.float32)).astype(jnp.float32)
    metrics = {"reward/correct": jnp.mean(correct)}
    for name, values in (components or {}).items():
        metrics[f"reward/{name}"] = jnp.mean(jnp.asarray(values, jnp.float32))
    return metrics


def score(verdicts: jax.Array, rollout: sampling.Rollout, shapers, *, correct=None,
          components: Optional[Dict[str, np.ndarray]] = None) -> Tuple[jax.Array, Metrics]:
    """(rewards [B], metrics): the verdicts [B] shaped by `shapers` in order.

    correct: the [B] correctness verdicts `reward/correct` counts when the reward is a
      weighted sum of components (default: `verdicts`); components: {name: [B]} logged as
      `reward/<name>`.
    """
    metrics = reward_metrics(verdicts if correct is None else correct, components)
    rewards, shaping_metrics = shape(verdicts, rollout, shapers)
    metrics.update(shaping_metrics)
    return rewards, metrics


def score_on_device(rollout: sampling.Rollout, answers: jax.Array, *, verifier: Callable, rl,
                    max_new_tokens: int, shapers: Sequence = ()) -> Tuple[jax.Array, Metrics]:
    """Rewards [B] from a jittable token verifier, shaped as `rl` asks; jittable.

    Args:
      rollout: the sampler's output for B = P'·G sequences.
      answers: [P'] int32 reference answers (repeated over the G samples here).
      verifier: fn(tokens [B, N], mask [B, N], answers [B]) -> [B] float32.
      rl: the `RLConfig` (its shaping fields).
      shapers: the reward components' shapers (`Verifier.shapers`: weights, overlong),
        applied before `rl`'s.
    """
    g = rollout.tokens.shape[0] // answers.shape[0]
    # The model's own tokens are scored: a multi-turn rollout's observations never count.
    verdicts = verifier(rollout.tokens, rollout.model_mask, jnp.repeat(answers, g, axis=0))
    return score(verdicts, rollout, tuple(shapers) + rollout_shapers(rl, max_new_tokens))


def decode_completions(tokenizer, tokens, mask) -> list:
    """Completion texts [B] from sampler tokens [B, N] (up to the stop token). On several
    processes every process decodes all B rows (`distributed.to_host`, a collective)."""
    out = []
    for row, m in zip(*distributed.to_host((tokens, mask))):
        out.append(tokenizer.decode(row[np.asarray(m, bool)], stop_at_eos=True))
    return out


def verify_on_host(texts: Sequence[str], examples: Sequence, verify: Callable) -> np.ndarray:
    """Verdicts [B] float32 of a host verifier fn(text, example) -> float."""
    return np.array([verify(t, ex) for t, ex in zip(texts, examples)], np.float32)


def score_on_host(rollout: sampling.Rollout, texts: Sequence[str], examples: Sequence, *,
                  verify: Callable, rl, max_new_tokens: int, shapers: Sequence = ()
                  ) -> Tuple[jax.Array, Metrics]:
    """`score_on_device`'s twin for host verifiers: texts [B] and their examples [B] (each
    prompt's example repeated G times) → (rewards [B], metrics), shaped the same way.

    verify: fn(text, example) -> float (run in this process; a raising sample scores 0),
      or a `HostScorer` (in-process or a process pool; its components, e.g. a
      `rewards.components.HostReward`'s, are logged as `reward/<name>`, its "correct"
      entry is what `reward/correct` counts). Failures are counted in
      `reward/host_errors` and `reward/host_timeouts`.
    """
    rewards, metrics, _ = score_rows_on_host(rollout, texts, examples, verify=verify, rl=rl,
                                             max_new_tokens=max_new_tokens, shapers=shapers)
    return rewards, metrics


def score_rows_on_host(rollout: sampling.Rollout, texts: Sequence[str], examples: Sequence, *,
                       verify: Callable, rl, max_new_tokens: int, shapers: Sequence = ()
                       ) -> Tuple[jax.Array, Metrics, np.ndarray]:
    """`score_on_host`, plus which completions are correct: (rewards [B], metrics,
    correct [B] bool — what `reward/correct` counts, row by row)."""
    scorer = verify if isinstance(verify, HostScorer) else HostScorer(verify)
    verdicts, components, info = score_shared(scorer, texts, examples)
    correct = components.pop("correct", None)
    rewards, metrics = score(jnp.asarray(verdicts), rollout,
                             tuple(shapers) + rollout_shapers(rl, max_new_tokens),
                             correct=correct, components=components)
    metrics["reward/host_errors"] = jnp.asarray(info["errors"], jnp.float32)
    metrics["reward/host_timeouts"] = jnp.asarray(info["timeouts"], jnp.float32)
    rows = np.asarray(verdicts if correct is None else correct, np.float32)
    return rewards, metrics, np.asarray(is_correct(rows))


def score_shared(scorer: HostScorer, texts: Sequence[str], examples: Sequence):
    """`scorer(texts, examples)` with the rows shared out over the processes: each process
    scores its `distributed.my_rows(B)` and every process gets all B verdicts and
    components back (their error and timeout counts summed); one process scores all."""
    n = len(texts)
    if distributed.process_count() == 1:
        return scorer(texts, examples)
    mine = distributed.my_rows(n)
    verdicts, components, info = scorer(texts[mine], examples[mine])
    counts = {k: np.int32(info[k]) for k in ("errors", "timeouts")}
    verdicts, components, counts = distributed.gather_rows((verdicts, components, counts), n)
    return verdicts, components, dict(info, **{k: int(v) for k, v in counts.items()})
