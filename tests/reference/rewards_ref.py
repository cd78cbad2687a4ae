"""NumPy references and test-only helpers of `rlvr_jax.rewards` and the label-free votes
(issue 50: the packages keep what runs; these are used by the tests only)."""
from typing import Mapping, Sequence

import numpy as np

from rlvr_jax.rewards.length import _check
from rlvr_jax.rewards.math import extract_answer
from rlvr_jax.scoring.label_free import majority_vote_rewards


def overlong_penalty_np(lengths, *, max_length: int, buffer_length: int) -> np.ndarray:
    """NumPy reference of `rewards.overlong_penalty_jnp` for host arrays ``[B]``."""
    _check(max_length, buffer_length)
    lengths = np.asarray(lengths, np.float64)
    if (lengths < 0).any():
        raise ValueError("lengths must be >= 0")
    start = float(max_length - buffer_length)
    return np.clip((start - lengths) / float(buffer_length), -1.0, 0.0).astype(np.float32)


def combine_components(components: Mapping[str, np.ndarray], weights: Mapping[str, float]
                       ) -> tuple[np.ndarray, dict]:
    """Weighted sum of component arrays ``[B]`` (numpy or jax) → ``(total [B], metrics)``.

    Every component in ``weights`` must be present (extra components are only reported).
    Metrics: ``reward/<name>/mean`` for each component and ``reward/total/mean``.
    """
    missing = [k for k in weights if k not in components]
    if missing:
        raise ValueError(f"components missing for weights {missing}; have {sorted(components)}")
    if not weights:
        raise ValueError("weights is empty")
    shapes = {k: tuple(np.shape(v)) for k, v in components.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"components have different shapes: {shapes}")
    total = sum(weights[k] * components[k] for k in weights)
    metrics = {f"reward/{k}/mean": float(np.mean(np.asarray(v))) for k, v in components.items()}
    metrics["reward/total/mean"] = float(np.mean(np.asarray(total)))
    return total, metrics


def majority_vote_from_completions(completions: Sequence[Sequence[str]], *,
                                   min_share: float = 0.0) -> tuple[np.ndarray, dict]:
    """`scoring.label_free.majority_vote_rewards` on the final answers extracted from
    ``[P][G]`` completions."""
    answers = [[extract_answer(c) for c in group] for group in completions]
    return majority_vote_rewards(answers, min_share=min_share)
