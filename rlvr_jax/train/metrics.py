"""The metrics of one RL update that describe its rollout, rewards and advantages.

Every function returns a flat dict of float32/int32 scalars named "section/name".
Shapes: P groups of G samples, B = P·G rows, N new tokens.
"""
from typing import Dict

import jax
import jax.numpy as jnp

from rlvr_jax import advantages as adv_lib
from rlvr_jax import live_rows, sampling, tree_rollouts
from rlvr_jax.numerics import masked_mean, masked_stats

Metrics = Dict[str, jax.Array]


def rollout_metrics(rollout: sampling.Rollout, rewards: jax.Array, valid: jax.Array) -> Metrics:
    """Reward and length statistics over the valid groups.

    Args: rollout (B rows), rewards [P, G], valid [P].
    """
    metrics = {f"rollout/{k}": v for k, v in adv_lib.group_metrics(rewards, valid).items()}
    row_valid = jnp.repeat(valid, rewards.shape[1])
    n_valid = jnp.maximum(jnp.sum(row_valid), 1)
    lengths = jnp.sum(rollout.mask, axis=1)
    valid_tokens = jnp.sum(jnp.where(row_valid, lengths, 0))  # The tokens that are trained on.
    metrics.update({
        "rollout/valid_tokens": valid_tokens,
        "rollout/response_length": valid_tokens / n_valid,
        "rollout/response_length_max": jnp.max(lengths),
        "rollout/truncation_rate": jnp.mean((~rollout.finished).astype(jnp.float32)),
    })
    if rollout.decode_steps is not None:  # Completion tokens / decode row-steps run.
        metrics["rollout/useful_fraction"] = live_rows.useful_fraction(rollout)
    if rollout.fork_at is not None:  # Tree rollouts: tokens copied at forks vs decoded.
        shared = tree_rollouts.shared_tokens(rollout)
        metrics["rollout/shared_prefix_tokens"] = shared
        metrics["rollout/decoded_tokens"] = jnp.sum(rollout.lengths, dtype=jnp.int32) - shared
    return metrics


def length_by_correctness(rollout: sampling.Rollout, correct: jax.Array) -> Metrics:
    """rollout/response_length_correct and _incorrect: the mean completion length (tokens
    of `rollout.mask`, as rollout/response_length) of the B sampled completions the verifier
    accepts / rejects (`correct` [B] bool), before dynamic sampling picks groups (the rows
    of reward/correct). A batch with none of a kind logs 0 for it: reward/correct (their
    share) is then 0 or 1.
    """
    lengths = jnp.sum(rollout.mask, axis=1).astype(jnp.float32)
    out = {}
    for name, rows in (("correct", correct), ("incorrect", ~correct)):
        count = jnp.sum(rows.astype(jnp.float32))
        total = jnp.sum(jnp.where(rows, lengths, 0.0))
        out[f"rollout/response_length_{name}"] = total / jnp.maximum(count, 1.0)
    return out


def advantage_metrics(advantages: jax.Array, mask: jax.Array) -> Metrics:
    """advantages/{mean, abs_mean, min, max} over the entries `mask` keeps.

    Args: advantages [B] with mask = valid rows [B], or [B, N] with the token mask [B, N].
    """
    metrics = masked_stats(advantages, mask, "advantages/")
    metrics["advantages/abs_mean"] = masked_mean(jnp.abs(advantages), mask)
    return metrics
