"""Label-free reward components: no reference answer is read.

    config.reward.components = "majority"          # TTRL: agree with your group's majority
    config.reward.components = "self_certainty"    # the policy's confidence in its answer

- **majority** (TTRL, Zuo et al. 2025): the G completions of a prompt vote with their final
  answers, normalised by the verifier's own extraction (`Verifier.answer_key`: the task's
  canonical answer, or the math verifier's normalised boxed / final answer); a completion
  scores 1 when its answer is the group's most common one (ties: the first seen), 0 otherwise
  or without an answer (`majority_vote_rewards`). Logged: `reward/majority` and
  `reward/majority_share` (the majority's mean share of its group).
- **self_certainty**: `exp(mean_{t ∈ answer span} log π_old(y_t))`, the geometric-mean
  probability the sampling policy gave the tokens of the final answer (0 without an answer
  or with a blank one: measured, a policy learns to end with ``"#### "`` otherwise). The span starts after the last answer marker (`####`, `<answer>`, `\\boxed{`, else
  the whole completion); the log-probs are the sampler's (of logits / temperature).
  Self-certainty as KL(U‖π) over the full vocabulary (Zhao et al. 2025, "Learning to Reason
  without External Rewards") needs the logits and is not offered.

Both are host terms (`majority_term`, `self_certainty_term`; `scoring.terms`), added to the
verifier's reward before the device terms (over several processes every process votes on all the texts, and
the answer spans are found row-shared, `distributed.my_rows`); the verifier still decides
`reward/correct` (the true accuracy, where the data has answers).
"""
import operator
from typing import Callable, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import distributed
from rlvr_jax.rewards.math import answers_equivalent
from rlvr_jax.scoring.spans import completion_ids, token_of_offsets

Metrics = Dict[str, jax.Array]
ANSWER_MARKERS = ("####", "<answer>", "\\boxed{")


def majority_vote_rewards(answers: Sequence[Sequence[Optional[str]]], *,
                          equivalent: Callable[[str, str], bool] = answers_equivalent,
                          min_share: float = 0.0) -> tuple[np.ndarray, dict]:
    """Rewards ``float32[P, G]``: 1 where a sample's answer equals its group's majority
    (the pseudo-label of TTRL; `min_share` withholds it when the vote is too split).

    Args:
      answers: ``[P][G]`` extracted answers; ``None`` (no answer) never votes and gets 0.
      equivalent: equivalence of two answers (default: the math rule verifier).
      min_share: minimum fraction of the G samples the majority must hold; below it the
        group gets no pseudo-label (all rewards 0).

    Returns:
      rewards ``float32[P, G]`` and info: ``majority`` (list of P answers or None),
      ``share`` ``float32[P]`` (majority votes / G), ``has_label`` ``bool[P]``.
      Ties go to the answer that appeared first.
    """
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share must be in [0, 1], got {min_share}")
    groups = [list(g) for g in answers]
    if not groups:
        raise ValueError("answers is empty")
    g_size = len(groups[0])
    if g_size == 0 or any(len(g) != g_size for g in groups):
        raise ValueError("every group must have the same, non-zero number of samples")
    rewards = np.zeros((len(groups), g_size), np.float32)
    share = np.zeros((len(groups),), np.float32)
    has_label = np.zeros((len(groups),), bool)
    majority = []
    for p, group in enumerate(groups):
        clusters: list[list[int]] = []  # sample indices; clusters[k][0] is the representative
        for i, a in enumerate(group):
            if a is None:
                continue
            for c in clusters:
                if equivalent(a, group[c[0]]):
                    c.append(i)
                    break
            else:
                clusters.append([i])
        if not clusters:
            majority.append(None)
            continue
        best = max(clusters, key=len)  # first of the largest
        share[p] = len(best) / g_size
        if share[p] < min_share:
            majority.append(None)
            continue
        has_label[p] = True
        majority.append(group[best[0]])
        rewards[p, best] = 1.0
    return rewards, {"majority": majority, "share": share, "has_label": has_label}


def majority(texts: Sequence[str], answer_key: Callable, num_samples: int
             ) -> Tuple[np.ndarray, Dict[str, float]]:
    """(rewards float32 [B], metrics): 1 where a completion's answer (`answer_key(text)`, None:
    no answer) is its group's majority; groups are G = num_samples consecutive texts."""
    keys = []
    for text in texts:
        try:
            keys.append(answer_key(text))
        except Exception:  # noqa: BLE001 - an unreadable answer does not vote
            keys.append(None)
    groups = [keys[i:i + num_samples] for i in range(0, len(keys), num_samples)]
    rewards, info = majority_vote_rewards(groups, equivalent=operator.eq)
    return rewards.reshape(-1), {"reward/majority_share": float(np.mean(info["share"]))}


def answer_start(text: str) -> int:
    """The offset where the final answer begins: after the last answer marker, else 0."""
    best = -1
    for marker in ANSWER_MARKERS:
        i = text.rfind(marker)
        if i >= 0:
            best = max(best, i + len(marker))
    return max(best, 0)


def answer_span_mask(texts: Sequence[str], tokens, mask, tokenizer) -> np.ndarray:
    """[B, N] bool: the completion tokens that hold characters of the final answer (from
    `answer_start` to the end of the text, surrounding whitespace left out); all False for a
    blank answer (`"13 #### "` would otherwise be rewarded for a confident space). On several
    processes each finds the spans of its `distributed.my_rows(B)`, then all are gathered
    (collectives: every process calls it)."""
    tokens, mask = distributed.to_host((tokens, mask))
    rows = distributed.my_rows(len(texts))
    out = np.zeros((rows.stop - rows.start,) + tokens.shape[1:], bool)
    for i, b in enumerate(range(rows.start, rows.stop)):
        text = texts[b]
        start, end = answer_start(text), len(text.rstrip())
        start += len(text[start:]) - len(text[start:].lstrip())  # Skip the blanks before it.
        ids = completion_ids(tokens[b], mask[b])
        if start >= end or not ids:  # A blank answer holds no certainty (a hack otherwise).
            continue
        first, last = token_of_offsets(tokenizer, ids, [start + 1, end])
        out[i, first:last + 1] = True
    return distributed.gather_rows(out, len(texts))


def self_certainty(logprobs, span) -> jax.Array:
    """[B] `exp(Σ_t m·logp / Σ_t m)` over the span mask m [B, N]; 0 where m is empty."""
    m = jnp.asarray(span, jnp.float32)
    n = jnp.sum(m, axis=1)
    mean = jnp.sum(jnp.asarray(logprobs, jnp.float32) * m, axis=1) / jnp.maximum(n, 1.0)
    return jnp.where(n > 0, jnp.exp(mean), 0.0)


def _added(rewards, scores, metrics: Metrics, *, name: str, weight: float):
    """`rewards + weight · scores`, logging `reward/<name>` and `metrics`."""
    scores = jnp.asarray(scores, jnp.float32)
    out = {f"reward/{name}": jnp.mean(scores)}
    out.update({k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()})
    return rewards + weight * scores, out


def majority_term(setup, weight):
    """The host term adding weight · `majority` of the group's answers (`verifier.answer_key`);
    None when `reward.components` does not list it."""
    if weight is None:
        return None
    answer_key = setup.verifier.answer_key

    def fn(rewards, x):  # Groups of G = x.group_size consecutive rows.
        scores, metrics = majority(x.texts, answer_key, x.group_size)
        return _added(rewards, scores, metrics, name="majority", weight=weight)
    return fn


def self_certainty_term(setup, weight):
    """The host term adding weight · `self_certainty` of each answer span; None when
    `reward.components` does not list it."""
    if weight is None:
        return None
    tokenizer = setup.tokenizer

    def fn(rewards, x):
        span = answer_span_mask(x.texts, x.rollout.tokens, x.rollout.mask, tokenizer)
        logprobs = distributed.to_host(x.rollout.logprobs)  # Batch-sharded over processes.
        return _added(rewards, self_certainty(logprobs, span), {}, name="self_certainty",
                      weight=weight)
    return fn
