"""Episode statistics of a multi-turn rollout as `tool/...` and `episode/...` metrics."""
from typing import Dict

import jax
import jax.numpy as jnp

from rlvr_jax import sampling
from rlvr_jax.multiturn.rollout import Episodes
from rlvr_jax.numerics import masked_mean


def episode_metrics(rollout: sampling.Rollout, episodes: Episodes,
                    rewards: jax.Array) -> Dict[str, jax.Array]:
    """Scalar metrics of B episodes.

    Args:
      rollout: the multi-turn rollout (`loss_mask` set); episodes: its statistics;
      rewards: [B] float32 the episodes' rewards.

    Returns: episode/turns (mean model turns), tool/calls (mean calls per episode),
      tool/call_rate (episodes with >= 1 call), tool/error_rate (errors per call),
      episode/observation_fraction (observation tokens / all completion tokens), and
      reward/calls_0, reward/calls_1, reward/calls_2+ (mean reward of the episodes with that
      many calls; 0 when there is none) with episode/calls_{0,1,2+}_fraction; per turn k
      (`turn_metrics`) turn/k/fraction, turn/k/tokens, turn/k/env_reward, turn/k/error_rate.
    """
    calls = episodes.calls
    obs = jnp.sum(rollout.mask - rollout.loss_mask)
    out = {"episode/turns": jnp.mean(episodes.turns.astype(jnp.float32)),
           "tool/calls": jnp.mean(calls.astype(jnp.float32)),
           "tool/call_rate": jnp.mean((calls > 0).astype(jnp.float32)),
           "tool/error_rate": jnp.sum(episodes.errors) / jnp.maximum(jnp.sum(calls), 1),
           "episode/observation_fraction": obs / jnp.maximum(jnp.sum(rollout.mask), 1)}
    for name, rows in (("0", calls == 0), ("1", calls == 1), ("2+", calls >= 2)):
        out[f"reward/calls_{name}"] = masked_mean(rewards, rows)
        out[f"episode/calls_{name}_fraction"] = jnp.mean(rows.astype(jnp.float32))
    out.update(turn_metrics(rollout, episodes))
    return {k: jnp.asarray(v, jnp.float32) for k, v in out.items()}


def turn_metrics(rollout: sampling.Rollout, episodes: Episodes) -> Dict[str, jax.Array]:
    """Per model turn k < K (`env.max_turns`), over the episodes that reached turn k:
    turn/k/fraction (of all episodes), turn/k/tokens (the model's tokens in turn k),
    turn/k/env_reward (the environment's reward of turn k) and turn/k/error_rate (of the
    calls ending turn k, the tool errors; over the episodes reaching turn k)."""
    k = episodes.turn_reward.shape[1]
    ids = jnp.asarray(rollout.turn_ids)[..., None] == jnp.arange(k)[None, None, :]
    tokens = jnp.sum(ids & (rollout.loss_mask[..., None] > 0), axis=1)        # [B, K]
    reached = episodes.turns[:, None] > jnp.arange(k)[None, :]                # [B, K]
    out = {}
    for j in range(k):
        out[f"turn/{j}/fraction"] = jnp.mean(reached[:, j].astype(jnp.float32))
        out[f"turn/{j}/tokens"] = masked_mean(tokens[:, j].astype(jnp.float32), reached[:, j])
        out[f"turn/{j}/env_reward"] = masked_mean(episodes.turn_reward[:, j], reached[:, j])
        out[f"turn/{j}/error_rate"] = masked_mean(
            episodes.turn_error[:, j].astype(jnp.float32), reached[:, j])
    return out
