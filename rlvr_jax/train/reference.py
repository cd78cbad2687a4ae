"""The frozen reference model of the KL term: one builder for every reference.

    ref = reference_params(params, model_config)     # at the start of an RL run
"""
import jax
import jax.numpy as jnp


def reference_params(params, model_config):
    """The reference parameters: a copy of the policy's `params` (PLACEHOLDER: float32)."""
    del model_config
    return jax.tree.map(jnp.copy, params)
