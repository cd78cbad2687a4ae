"""Reward shaping: a short list of pure functions applied in order to the verifier's rewards.

A shaper is `fn(rewards [B], rollout) -> (rewards [B], metrics)`: pure, jittable, and the
same on the on-device and the host path (it sees the rollout, never text). Constants from
the config are bound with `functools.partial`; `rollout_shapers(rl, N)` lists the ones a
config asks for. Shaping runs before the update selects groups, so dynamic sampling sees
the shaped rewards.

`kl_in_reward` is the one shaping that needs the policy: it takes the per-token
KL(π_old‖π_ref) that the update computes from its reference log-probs.
"""
import functools
from typing import Callable, Dict, Sequence, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.rewards.length import overlong_penalty_jnp

Metrics = Dict[str, jax.Array]
Shaper = Callable[..., Tuple[jax.Array, Metrics]]


def overlong(rewards: jax.Array, rollout, *, max_length: int, buffer: int,
             coef: float) -> Tuple[jax.Array, Metrics]:
    """DAPO soft overlong punishment: r + coef · R_len(length) (`rewards.length`)."""
    penalty = coef * overlong_penalty_jnp(rollout.lengths, max_length=max_length,
                                          buffer_length=buffer)
    return rewards + penalty, {"reward/overlong": jnp.mean(penalty)}


def weighted(rewards: jax.Array, rollout, *, name: str, weight: float
             ) -> Tuple[jax.Array, Metrics]:
    """weight · r, logging the unweighted mean as `reward/<name>` (an on-device component
    of `reward.components`, e.g. the token verifier with a weight)."""
    del rollout
    return weight * rewards, {f"reward/{name}": jnp.mean(rewards)}


def rollout_shapers(rl, max_new_tokens: int) -> Tuple[Shaper, ...]:
    """The shapers `rl` (an `RLConfig`, or anything with its fields) asks for, in order."""
    shapers = []
    if rl.overlong_buffer > 0:
        shapers.append(functools.partial(overlong, max_length=max_new_tokens,
                                         buffer=rl.overlong_buffer, coef=rl.overlong_penalty))
    return tuple(shapers)


def shape(rewards: jax.Array, rollout, shapers: Sequence[Shaper]
          ) -> Tuple[jax.Array, Metrics]:
    """Applies `shapers` in order; their metrics merged."""
    metrics: Metrics = {}
    for shaper in shapers:
        rewards, m = shaper(rewards, rollout)
        metrics.update(m)
    return rewards, metrics


def kl_in_reward(rewards: jax.Array, kl_tok: jax.Array, mask: jax.Array, row_valid: jax.Array,
                 kl_coef, *, per_token: bool) -> Tuple[jax.Array, Metrics]:
    """The stop-gradient KL(π_old‖π_ref) penalty in the reward (PPO/RLHF style).

    Sequence-level estimators get r − β·Σ_t KL_t; token-level ones that take it per token
    (`per_token`) keep r (the estimator subtracts β·KL_t).

    Args:
      rewards: [P, G]; kl_tok: [B, N] per-token KL (B = P·G); mask: [B, N];
      row_valid: [B] rows of valid groups; kl_coef: β (a scalar, maybe traced).

    Returns:
      (rewards [P, G], metrics incl. the observed per-token KL `kl/reward_kl`).
    """
    seq_kl = jnp.sum(kl_tok, axis=1)
    lengths = jnp.maximum(jnp.sum(mask, axis=1), 1).astype(jnp.float32)
    n_rows = jnp.maximum(jnp.sum(row_valid.astype(jnp.float32)), 1.0)
    observed = jnp.sum(jnp.where(row_valid, seq_kl / lengths, 0.0)) / n_rows
    if not per_token:
        rewards = rewards - kl_coef * seq_kl.reshape(rewards.shape)
    metrics = {"reward/kl_penalty": -kl_coef * jnp.sum(seq_kl) / n_rows,
               "kl/reward_kl": observed, "kl/coef": jnp.asarray(kl_coef, jnp.float32)}
    return rewards, metrics
