"""A value model: the policy's trunk with a scalar head, for PPO with GAE."""
from typing import Any, Dict, Optional

import jax
import jax.numpy as jnp

from rlvr_jax.models import transformer
from rlvr_jax.models.config import ModelConfig


def init_value_params(config: ModelConfig, rng: jax.Array,
                      policy_params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Value-model parameters: {"trunk": transformer params, "value_head": {"kernel", "bias"}}.

    With `policy_params`, the trunk starts as a copy of the policy (as in
    PPO for LLMs) and only the head is new; the LM head weights are dropped.
    The head starts at zero, so initial values are 0.
    """
    trunk = policy_params if policy_params is not None else transformer.init_params(config, rng)
    trunk = {k: v for k, v in trunk.items() if k != "lm_head"}
    trunk = jax.tree.map(jnp.array, trunk)  # A copy: the value trunk trains separately.
    head = {"kernel": jnp.zeros((config.d_model,), config.storage_dtype),
            "bias": jnp.zeros((), config.storage_dtype)}
    return {"trunk": trunk, "value_head": head}


def trunk_hidden(trunk: Dict[str, Any], tokens: jax.Array, attention_mask: Optional[jax.Array],
                 *, config: ModelConfig, segment_ids: Optional[jax.Array] = None,
                 positions: Optional[jax.Array] = None) -> jax.Array:
    """Final hidden states [B, T, D] of a head-less trunk (the policy's transformer without
    its LM head), shared by the value and reward models (packed rows: `segment_ids` and
    `positions` as in `transformer.forward`, attention_mask None)."""
    hidden, _ = transformer.forward(trunk, tokens, positions,
                                    config=config.replace(tie_embeddings=True),
                                    attention_mask=attention_mask, segment_ids=segment_ids,
                                    return_hidden=True)
    return hidden


def trunk_logical_axes(config: ModelConfig) -> Dict[str, Any]:
    """Logical axis names of a head-less trunk's parameters."""
    return transformer.param_logical_axes(config.replace(tie_embeddings=True))


def value_forward(params: Dict[str, Any], tokens: jax.Array,
                  attention_mask: Optional[jax.Array], *, config: ModelConfig,
                  segment_ids: Optional[jax.Array] = None,
                  positions: Optional[jax.Array] = None) -> jax.Array:
    """Per-token values [B, T] float32 (the value of the state after token t); packed rows
    through `segment_ids` / `positions` (see `trunk_hidden`)."""
    hidden = trunk_hidden(params["trunk"], tokens, attention_mask, config=config,
                          segment_ids=segment_ids, positions=positions)
    head = params["value_head"]
    values = jnp.einsum("btd,d->bt", hidden.astype(jnp.float32), head["kernel"].astype(jnp.float32))
    return values + head["bias"].astype(jnp.float32)


def value_logical_axes(config: ModelConfig) -> Dict[str, Any]:
    """Logical axis names of the value parameters (for sharding)."""
    from jax.sharding import PartitionSpec as P
    return {"trunk": trunk_logical_axes(config), "value_head": {"kernel": P("embed"), "bias": P()}}
