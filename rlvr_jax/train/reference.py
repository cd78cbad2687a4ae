"""The frozen models of an RL step (the KL term's reference; a frozen reward model, PRM or
judge): their weights in the compute dtype, on the devices or (the reference) in host memory.

    ref = reference_params(params, model_config)                       # bf16 on the devices
    ref = reference_params(params, model_config, memory="pinned_host") # in host memory
    rm = frozen_scorer_params(rm_params, rm_config)                    # a frozen scorer, bf16
    ...inside the step: to_device_memory(state.ref_params) for the reference's scoring pass

Why the compute dtype: the forward casts every kernel, bias, embedding and LM head to the
compute dtype before it uses it (norm scales are read in float32), so a reference stored
that way computes bit for bit the policy's logits at step 0 and costs half the bytes of a
float32 copy in a bf16 model. Host memory ("pinned_host") keeps the reference off the
devices for the whole update (the step's memory peak); `to_device_memory` copies it in for its one
scoring pass (the whole tree: per-layer streaming is not implemented). Where the backend has
no "pinned_host" memory, `reference_params` raises a one-line error.
"""
from typing import Any, Optional

import jax
import jax.numpy as jnp

from rlvr_jax.models import decoding

MEMORIES = ("device", "pinned_host")


def compute_dtype_copy(params: Any, dtype: Any) -> Any:
    """A copy of `params` with every floating leaf but the norm scales in `dtype`
    (`decoding.cast_weights`), never an alias of `params`: the RL step donates its state."""
    cast = decoding.cast_weights(params, dtype)
    return jax.tree.map(lambda w, c: jnp.copy(w) if c is w else c, params, cast)


def frozen_scorer_params(params: Any, model_config) -> Any:
    """A frozen scoring model's parameters as a run holds them: a judge's LM tree, or a reward
    model's / PRM's {"trunk", "score"} trunk, in `model_config.compute_dtype`
    (`decoding.cast_weights`: kernels, biases, embedding, LM head), norm scales and the
    score head [D, K] as stored. The forward casts exactly those leaves to the compute dtype
    before it uses them, and reads the norm scales and the score head in float32, so the
    scores are the stored model's (bit for bit where XLA keeps the cast) at half the bytes
    of a float32 copy in a bf16 model. Not for a learned scorer (the implicit PRM's φ)."""
    dtype = jnp.dtype(model_config.compute_dtype)
    if dtype == jnp.dtype(model_config.storage_dtype):
        return params
    if isinstance(params, dict) and set(params) == {"trunk", "score"}:
        return dict(params, trunk=decoding.cast_weights(params["trunk"], dtype))
    return decoding.cast_weights(params, dtype)


def reference_params(params: Any, model_config, memory: Optional[str] = None) -> Any:
    """The reference model of `params` (the policy at the start of RL): a compute-dtype
    copy (`compute_dtype_copy`), laid out as `params` are, in device memory or, with
    memory="pinned_host", in host memory.

    Args:
      params: the policy's parameter pytree (placed arrays, or ShapeDtypeStructs under
        `jax.eval_shape`).
      model_config: the policy's `ModelConfig` (its `compute_dtype`).
      memory: None / "device", or "pinned_host".
    """
    memory = memory or "device"
    if memory not in MEMORIES:
        raise ValueError(f"reference memory must be one of {MEMORIES}, got {memory!r}")
    ref = compute_dtype_copy(params, jnp.dtype(model_config.compute_dtype))
    if memory == "device":
        return ref
    return jax.tree.map(lambda x: jax.device_put(x, _host(x)), ref)


def _host(x):
    kinds = {m.kind for d in x.sharding.device_set for m in d.addressable_memories()}
    if "pinned_host" not in kinds:
        raise ValueError(f"this backend has no 'pinned_host' memory (has {sorted(kinds)}); "
                         "keep the reference on the devices")
    return x.sharding.with_memory_kind("pinned_host")


def to_device_memory(tree: Any) -> Any:
    """Inside a jitted step: `tree` (e.g. `state.ref_params`) in device memory; a no-op for
    arrays already there, a host → device copy for those in "pinned_host"."""
    if tree is None:
        return None
    return jax.tree.map(lambda x: jax.device_put(x, jax.memory.Space.Device), tree)
