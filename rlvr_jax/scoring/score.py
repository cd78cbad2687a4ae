"""What every scoring path shares: correctness, the reward metrics, decoding, row sharing.

Shapes: P' prompts, G samples each, B = P'·G sequences, N new tokens.
"""
from typing import Dict, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import distributed
from rlvr_jax.scoring.host import HostScorer

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


def decode_completions(tokenizer, tokens, mask) -> list:
    """Completion texts [B] from sampler tokens [B, N] (up to the stop token). On several
    processes every process decodes all B rows (`distributed.to_host`, a collective)."""
    out = []
    for row, m in zip(*distributed.to_host((tokens, mask))):
        out.append(tokenizer.decode(row[np.asarray(m, bool)], stop_at_eos=True))
    return out


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
