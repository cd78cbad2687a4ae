"""Majority-vote pseudo-rewards for label-free RL (TTRL: Zuo et al. 2025, "Test-Time RL").

For each prompt the G sampled answers vote; the most common answer (up to
equivalence) becomes the pseudo-label and every sample that agrees with it gets
reward 1. Known to collapse onto confident wrong answers without some real labels;
``min_share`` withholds the pseudo-label when the vote is too split.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from rlvr_jax.rewards.math import answers_equivalent


def majority_vote_rewards(answers: Sequence[Sequence[str | None]], *,
                          equivalent: Callable[[str, str], bool] = answers_equivalent,
                          min_share: float = 0.0) -> tuple[np.ndarray, dict]:
    """Rewards ``float32[P, G]``: 1 where a sample's answer equals its group's majority.

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
