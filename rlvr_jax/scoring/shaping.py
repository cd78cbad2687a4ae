"""Shaping terms: the DAPO overlong penalty (a device term) and KL in the reward.

`overlong` is the term `fn(rewards [B], x) -> (rewards + coef · R_len(length), metrics)`
(`scoring.terms`), configured either as the `overlong` component (coef = its weight, buffer
N // 4) or by `rl.overlong_buffer` / `rl.overlong_penalty` (the same term; not both).

`kl_in_reward` is the one shaping that needs the policy: it takes the per-token
KL(π_old‖π_ref) that the update computes from its reference log-probs.
"""
import functools
from typing import Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.rewards.length import overlong_penalty_jnp

Metrics = Dict[str, jax.Array]


def overlong(rewards: jax.Array, x, *, max_length: int, buffer: int,
             coef: float) -> Tuple[jax.Array, Metrics]:
    """DAPO soft overlong punishment: r + coef · R_len(x.rollout.lengths) (`rewards.length`)."""
    penalty = coef * overlong_penalty_jnp(x.rollout.lengths, max_length=max_length,
                                          buffer_length=buffer)
    return rewards + penalty, {"reward/overlong": jnp.mean(penalty)}


def overlong_term(setup, weight):
    """The overlong term: the component (coef = `weight`, buffer N // 4) or `rl.overlong_*`
    (a buffer > 0); None when neither asks for it."""
    n, rl = setup.max_new_tokens, setup.rl
    buffer = 0 if rl is None else rl.overlong_buffer
    if weight is not None:
        if buffer > 0:
            raise ValueError("reward.components: 'overlong' and rl.overlong_buffer > 0 would "
                             "apply the DAPO penalty twice; use one of them")
        return functools.partial(overlong, max_length=n, buffer=max(1, n // 4), coef=weight)
    if buffer > 0:
        return functools.partial(overlong, max_length=n, buffer=buffer,
                                 coef=rl.overlong_penalty)
    return None


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
