"""A decoder-only transformer (Llama 3 / Qwen2 / Qwen3) in Flax Linen, used purely.

The model is a pure function of an explicit parameter pytree:

    params = init_params(config, rng)
    logits, cache = forward(params, tokens, config=config, attention_mask=mask)

Layers are stacked with `nn.scan` (every per-layer parameter has a leading
`layers` axis). The scan is unrolled for models of up to 32 layers by default
(`ModelConfig.scan_unroll`: faster, and less memory on an H100) and kept rolled
above that, so compile time stays flat for deep models. Every parameter
carries logical axis names (`param_logical_axes`) which `rlvr_jax.sharding`
maps onto mesh axes.

One implementation of the layers. `Attention` takes an optional KV cache and `Block`
passes it through: the training forward scans `Block` over the stacked parameters, and
the cached forward (`forward(..., cache=init_cache(config, batch, max_len))`, run by
`rlvr_jax.models.decoding`) applies the same `Block` to each layer's parameters (sliced
and cast once per rollout) with that layer's cache `k`, `v`: [B, Hkv, S, Dh], which the
attention dots read in place, so a decode step copies neither weights nor cache. Every
architecture feature (GQA, RoPE and its scaling, QKV bias, q/k-norm, LoRA, a quantized
base) is written once, here. A cached call writes the new tokens' keys/values at slots
`[index, index + T)` (in place) and attends over the whole cache, causally by slot.
Left-padded prompts are fine: padding is excluded by the mask and does not advance RoPE
positions (the default position of a token is the number of real tokens before it in its
row).
"""
import functools
from typing import Any, Dict, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sharding
from rlvr_jax.models import attention as attention_lib
from rlvr_jax.models import lora as lora_lib
from rlvr_jax.models import quant
from rlvr_jax.models.config import ModelConfig

Params = Dict[str, Any]
Cache = Dict[str, jax.Array]

_NEG_INF = -1e30  # Finite, so fully masked rows give a uniform softmax, never NaN.


# ----------------------------------------------------------------------------- layers

def _param(module, name, init, shape, names, dtype):
    """The parameter `name` [*shape] (declared with logical axis `names` when initialising).
    An existing one is read directly: `module.param` would trace `init` once per read to
    check the shape (the cached forward applies each layer on its own, per compiled loop
    body: ~1/3 of its trace time); the shape is checked here instead."""
    if module.is_initializing() or not module.has_variable("params", name):
        return module.param(name, nn.with_logical_partitioning(init, names), shape, dtype)
    value = nn.meta.unbox(module.get_variable("params", name))
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"parameter {module.scope.path_text}/{name} has shape "
                         f"{tuple(value.shape)}, the model expects {tuple(shape)}")
    return value


def _kernel(module, target, init, shape, names, cfg: ModelConfig):
    """The `<target>_kernel` [*shape] in the compute dtype, cast on its shards
    (`sharding.cast_param`: a later gather moves compute-dtype bytes); dequantized on the fly
    when the tree holds it quantized (`models.quant`, QLoRA's frozen base)."""
    name = f"{target}_kernel"
    if module.has_variable("params", name + quant.CODES):
        return quant.dequantize(module.get_variable("params", name + quant.CODES),
                                module.get_variable("params", name + quant.SCALES), shape,
                                cfg.compute_dtype)
    w = _param(module, name, init, shape, names, cfg.storage_dtype)
    return sharding.cast_param(w, names, cfg.compute_dtype)  # Cast on the shards.


def _adapted(module, target, x, y, cfg: ModelConfig):
    """y + (alpha/r)·(x·A)·B when the tree holds an adapter of `target` (`models.lora`),
    else y. x: [..., *in] and y: [..., *out] in the compute dtype."""
    a_name = f"{target}_lora_a"
    if not cfg.lora_rank or not module.has_variable("params", a_name):
        return y
    return y + lora_lib.delta(x, module.get_variable("params", a_name),
                              module.get_variable("params", f"{target}_lora_b"),
                              lora_lib.scale(cfg))


class RMSNorm(nn.Module):
    """RMSNorm computed in float32: `x / sqrt(mean(x²) + eps) * scale`."""
    eps: float
    param_dtype: Any
    axis_name: str = "norm"

    @nn.compact
    def __call__(self, x):
        scale = _param(self, "scale", nn.initializers.ones, (x.shape[-1],), (self.axis_name,),
                       self.param_dtype)
        return rms_norm(x, scale, self.eps)


def rms_norm(x, scale, eps: float):
    """`x / sqrt(mean(x²) + eps) * scale` over the last axis, in float32; x's dtype out.
    x: [..., D], scale: [D] (any float dtype)."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)
    scale = scale.astype(jnp.float32).reshape((1,) * (x.ndim - 1) + (-1,))
    return (y * scale).astype(x.dtype)


def rope_frequencies(config: ModelConfig) -> np.ndarray:
    """Inverse frequencies [Dh/2] (float64), with Llama-3 scaling if configured."""
    dim = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    if config.rope_scaling is not None:
        _, factor, low_ff, high_ff, orig_max = config.rope_scaling
        low_wavelen = orig_max / low_ff
        high_wavelen = orig_max / high_ff
        wavelen = 2 * np.pi / inv_freq
        smooth = (orig_max / wavelen - low_ff) / (high_ff - low_ff)
        scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        medium = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        inv_freq = np.where(medium, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)
    return inv_freq


def apply_rope(x, positions, inv_freq):
    """Rotary embedding in the Hugging Face (rotate-half) layout.

    Args:
      x: [B, T, H, Dh].
      positions: [B, T] int32.
      inv_freq: [Dh/2] numpy array.
    """
    angles = positions.astype(jnp.float32)[:, :, None] * jnp.asarray(inv_freq, jnp.float32)[None, None, :]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    x32 = x.astype(jnp.float32)
    x1, x2 = jnp.split(x32, 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def attention_mask_from(q_segments, kv_segments, q_slots, kv_slots):
    """Boolean [B, 1, 1, Tq, Tk]: causal by slot, same non-zero segment."""
    causal = q_slots[:, :, None] >= kv_slots[:, None, :]
    same = (q_segments[:, :, None] == kv_segments[:, None, :]) & (kv_segments[:, None, :] != 0)
    return (causal & same)[:, None, None, :, :]


def grouped_attention(q, keys, values, mask, cfg: ModelConfig, *, kv_layout: str):
    """Softmax attention of q [B, T, H, Dh] over GQA keys / values, in the compute dtype.

    Args:
      q: [B, T, H, Dh] queries (RoPE applied).
      keys, values: [B, S, Hkv, Dh] (kv_layout "bsnk", the training forward) or
        [B, Hkv, S, Dh] ("bnsk", the decode cache, read in place).
      mask: boolean, broadcastable to [B, Hkv, H / Hkv, T, S].

    Returns: [B, T, H, Dh].
    """
    dt = cfg.compute_dtype
    batch, tq = q.shape[:2]
    groups = cfg.n_heads // cfg.n_kv_heads
    q = q.reshape(batch, tq, cfg.n_kv_heads, groups, cfg.head_dim)
    scores = jnp.einsum(f"btngk,{kv_layout}->bngts", q, keys.astype(dt),
                        preferred_element_type=jnp.float32)
    scores = scores * (cfg.head_dim ** -0.5)
    scores = jnp.where(mask, scores, _NEG_INF)
    probs = jax.nn.softmax(scores, axis=-1).astype(dt)
    out = jnp.einsum(f"bngts,{kv_layout}->btngk", probs, values.astype(dt))
    return out.reshape(batch, tq, cfg.n_heads, cfg.head_dim)


class Attention(nn.Module):
    """Grouped-query self-attention with RoPE, optional QKV bias and q/k RMSNorm; over the
    T tokens themselves (training) or over a KV cache they are written into (decoding)."""
    config: ModelConfig

    @nn.compact
    def __call__(self, x, positions, segments, slots, cache=None):
        """Attention of x [B, T, D] (positions: [B, T] int32).

        Without `cache`: causal self-attention within segments (segments, slots: [B, T]
        int32); returns [B, T, D]. With `cache` (a `decoding.LayerCache`: one layer's
        [B, Hkv, S, Dh] keys and values, what to attend; segments and slots unused): the T
        new keys / values are written into it and the queries attend over it
        (`LayerCache.attend`); returns ([B, T, D], the updated `LayerCache`)."""
        cfg = self.config
        dt, pdt = cfg.compute_dtype, cfg.storage_dtype
        init = nn.initializers.normal(stddev=0.02)

        def proj(name, heads, axis):
            w = _kernel(self, name, init, (cfg.d_model, heads, cfg.head_dim),
                        ("embed", axis, "kv"), cfg)
            y = _adapted(self, name, x, jnp.einsum("btd,dhk->bthk", x, w), cfg)
            if cfg.qkv_bias:
                b = _param(self, f"{name}_bias", nn.initializers.zeros, (heads, cfg.head_dim),
                           (axis, "kv"), pdt)
                y = y + sharding.cast_param(b, (axis, "kv"), dt)[None, None]
            return y

        q = nn.with_logical_constraint(proj("q", cfg.n_heads, "heads"),
                                       ("batch", "length", "heads", "kv"))
        keys = nn.with_logical_constraint(proj("k", cfg.n_kv_heads, "kv_heads"),
                                          ("batch", "length", "kv_heads", "kv"))
        values = nn.with_logical_constraint(proj("v", cfg.n_kv_heads, "kv_heads"),
                                            ("batch", "length", "kv_heads", "kv"))
        if cfg.qk_norm:
            q = RMSNorm(cfg.norm_eps, pdt, "kv", name="q_norm")(q)
            keys = RMSNorm(cfg.norm_eps, pdt, "kv", name="k_norm")(keys)
        inv_freq = rope_frequencies(cfg)
        q = apply_rope(q, positions, inv_freq)
        keys = apply_rope(keys, positions, inv_freq)

        implementation = attention_lib.resolve(cfg.attention)
        if cache is not None:  # Prefill / decode: the new tokens attend over the cache.
            out, cache = cache.attend(q, keys, values, cfg)
        elif implementation == "xla":
            mask = attention_mask_from(segments, segments, slots, slots)
            out = grouped_attention(q, keys, values, mask, cfg, kv_layout="bsnk")
        else:  # Fused: never materialises [T, T] (causal by slot = by index here).
            out = attention_lib.fused_attention(q.astype(dt), keys, values, segments,
                                                implementation=implementation)
        wo = _kernel(self, "o", init, (cfg.n_heads, cfg.head_dim, cfg.d_model),
                     ("heads", "kv", "embed"), cfg)
        out = _adapted(self, "o", out, jnp.einsum("bthk,hkd->btd", out, wo), cfg)
        return out if cache is None else (out, cache)


class MLP(nn.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""
    config: ModelConfig

    @nn.compact
    def __call__(self, x):
        cfg = self.config
        init = nn.initializers.normal(stddev=0.02)
        gate = _kernel(self, "gate", init, (cfg.d_model, cfg.d_ff), ("embed", "mlp"), cfg)
        up = _kernel(self, "up", init, (cfg.d_model, cfg.d_ff), ("embed", "mlp"), cfg)
        down = _kernel(self, "down", init, (cfg.d_ff, cfg.d_model), ("mlp", "embed"), cfg)
        # The matmuls see [B·T, D] rows (a free reshape): with [B, T, D] operands XLA's CPU
        # backend transposes the [B, T, F] gradients for the weight-gradient dots (the MLP's
        # forward + backward 1.6x slower on the peer bench's shapes).
        b, t, d = x.shape
        rows = x.reshape(b * t, d)
        h = nn.silu(_adapted(self, "gate", rows, rows @ gate, cfg)) * \
            _adapted(self, "up", rows, rows @ up, cfg)
        h = nn.with_logical_constraint(h.reshape(b, t, -1), ("batch", "length", "mlp"))
        h = h.reshape(b * t, -1)
        return _adapted(self, "down", h, h @ down, cfg).reshape(b, t, d)


class Block(nn.Module):
    """One pre-norm transformer layer: the `nn.scan` body of the training forward (carry:
    the residual stream [B, T, D]) and, applied to one layer's parameters with its
    `decoding.LayerCache`, a layer of the cached forward (`decoding.forward`)."""
    config: ModelConfig

    @nn.compact
    def __call__(self, x, positions, segments, slots, cache=None):
        """Returns (x [B, T, D], None), or with `cache` (x, the updated cache)."""
        cfg = self.config
        h = Attention(cfg, name="attn")(
            RMSNorm(cfg.norm_eps, cfg.storage_dtype, "embed", name="input_norm")(x),
            positions, segments, slots, cache)
        if cache is not None:
            h, cache = h
        x = x + h
        x = x + MLP(cfg, name="mlp")(
            RMSNorm(cfg.norm_eps, cfg.storage_dtype, "embed", name="post_attn_norm")(x))
        x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
        return x, cache


_REMAT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


class Transformer(nn.Module):
    """Embedding → L stacked blocks (scanned or unrolled) → final norm (→ LM head)."""
    config: ModelConfig

    def setup(self):
        cfg = self.config
        self.embed = self.param(
            "embed", nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02),
                                                  ("vocab", "embed")),
            (cfg.vocab_size, cfg.d_model), cfg.storage_dtype)
        if not cfg.tie_embeddings:
            self.lm_head = self.param(
                "lm_head", nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02),
                                                        ("embed", "vocab")),
                (cfg.d_model, cfg.vocab_size), cfg.storage_dtype)
        block = Block
        if cfg.remat != "none":
            block = nn.remat(Block, policy=_REMAT_POLICIES[cfg.remat], prevent_cse=False)
        self.layers = nn.scan(
            block, variable_axes={"params": 0}, split_rngs={"params": True},
            in_axes=(nn.broadcast, nn.broadcast, nn.broadcast),
            length=cfg.n_layers, unroll=cfg.layer_unroll,
            metadata_params={nn.PARTITION_NAME: "layers"},
        )(cfg, name="layers")
        self.final_norm = RMSNorm(cfg.norm_eps, cfg.storage_dtype, "embed")

    def head_matrix(self, dtype=None):
        """The [D, V] output projection (the transposed embedding when tied), cast to `dtype`
        on its shards when given."""
        return _head(self.embed, None if self.config.tie_embeddings else self.lm_head, dtype)

    def __call__(self, tokens, positions, segment_ids, return_hidden):
        cfg = self.config
        x = jnp.take(self.embed, tokens, axis=0).astype(cfg.compute_dtype)
        x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
        slots = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32)[None],
                                 tokens.shape)
        x, _ = self.layers(x, positions, segment_ids, slots)
        x = self.final_norm(x)
        if return_hidden:
            return x
        return jnp.einsum("btd,dv->btv", x, self.head_matrix(cfg.compute_dtype),
                          preferred_element_type=jnp.float32)


# ----------------------------------------------------------------------------- functions

def init_params(config: ModelConfig, rng: jax.Array) -> Params:
    """Random parameters (a plain pytree of arrays in `config.param_dtype`)."""
    tokens = jnp.zeros((1, 1), jnp.int32)
    variables = jax.jit(
        lambda r: Transformer(config).init(r, tokens, tokens, jnp.ones_like(tokens), False)
    )(rng)
    return nn.unbox(variables["params"])


def param_logical_axes(config: ModelConfig) -> Params:
    """A pytree like the params whose leaves are `PartitionSpec`s of logical axis names."""
    tokens = jnp.zeros((1, 1), jnp.int32)
    abstract = jax.eval_shape(
        lambda: Transformer(config).init(jax.random.PRNGKey(0), tokens, tokens,
                                         jnp.ones_like(tokens), False))
    return nn.get_partition_spec(abstract)["params"]


def default_positions(segment_ids: jax.Array, cache: Optional[Cache] = None) -> jax.Array:
    """RoPE positions [B, T]: the number of real tokens before each token in its row.

    Padding (segment 0) does not advance the position; with a cache, tokens
    already in it count. With packed segments (ids > 1) positions restart at 0
    in every segment.
    """
    real = (segment_ids != 0).astype(jnp.int32)
    before = jnp.cumsum(real, axis=1) - real
    if cache is not None:
        return before + jnp.sum(cache["mask"] != 0, axis=1, dtype=jnp.int32)[:, None]
    # A segment starts at a real token whose previous REAL token (padding holes skipped)
    # is of another segment, or that has none; positions count from there.
    t = jnp.arange(segment_ids.shape[1])[None]
    last_real = jax.lax.cummax(jnp.where(real > 0, t, -1), axis=1)
    prev_real = jnp.concatenate([jnp.full_like(last_real[:, :1], -1), last_real[:, :-1]], axis=1)
    prev_segment = jnp.take_along_axis(segment_ids, jnp.maximum(prev_real, 0), axis=1)
    starts = (real > 0) & ((prev_real < 0) | (prev_segment != segment_ids))
    first = jax.lax.cummax(jnp.where(starts, t, 0), axis=1)
    return before - jnp.take_along_axis(before, first, axis=1)


def forward(
    params: Params,
    tokens: jax.Array,
    positions: Optional[jax.Array] = None,
    *,
    config: ModelConfig,
    attention_mask: Optional[jax.Array] = None,
    segment_ids: Optional[jax.Array] = None,
    cache: Optional[Cache] = None,
    return_hidden: bool = False,
) -> Tuple[jax.Array, Optional[Cache]]:
    """Runs the transformer.

    Args:
      params: from `init_params` or the Hugging Face importer.
      tokens: [B, T] int32.
      positions: [B, T] int32 RoPE positions; default `default_positions`.
      config: the model's `ModelConfig` (static).
      attention_mask: [B, T], 1 for real tokens, 0 for padding (any padding
        side). Mutually exclusive with `segment_ids`.
      segment_ids: [B, T] int32 for packed sequences: tokens attend only within
        their own segment; 0 is padding. Not supported together with a cache.
      cache: optional KV cache from `init_cache`; the new tokens are written at
        `cache["index"]`.
      return_hidden: return the final-norm hidden states [B, T, D] (compute
        dtype) instead of float32 logits [B, T, V].

    Returns:
      (logits [B, T, V] float32 or hidden [B, T, D], new cache or None).
    """
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [B, T], got shape {tokens.shape}")
    if attention_mask is not None and segment_ids is not None:
        raise ValueError("pass attention_mask or segment_ids, not both")
    if segment_ids is not None and cache is not None:
        raise ValueError("packed segment_ids are not supported with a KV cache")
    if cache is not None and tokens.shape[0] != cache["mask"].shape[0]:
        raise ValueError(f"batch {tokens.shape[0]} does not match the cache's "
                         f"{cache['mask'].shape[0]}")
    if segment_ids is None:
        segment_ids = (jnp.ones(tokens.shape, jnp.int32) if attention_mask is None
                       else (attention_mask != 0).astype(jnp.int32))
    if positions is None:
        positions = default_positions(segment_ids, cache)
    if cache is not None:  # Prefill / decode: the byte-lean cached path (same math).
        from rlvr_jax.models import decoding
        return decoding.forward(decoding.prepare_params(params, config), tokens, config=config,
                                cache=cache, attention_mask=segment_ids, positions=positions,
                                return_hidden=return_hidden)
    out = Transformer(config).apply({"params": params}, tokens, positions, segment_ids,
                                    return_hidden)
    return out, None


def _head(embed, lm_head, dtype):
    if lm_head is not None:
        return lm_head if dtype is None else sharding.cast_param(lm_head, ("embed", "vocab"), dtype)
    return (embed if dtype is None else sharding.cast_param(embed, ("vocab", "embed"), dtype)).T


def head_matrix(params: Params, config: ModelConfig, dtype=None) -> jax.Array:
    """The [D, V] LM-head matrix (embedding.T when tied) in the parameter dtype, or cast to
    `dtype` on its shards (so an FSDP gather of it moves `dtype` bytes)."""
    return _head(params["embed"], None if config.tie_embeddings else params["lm_head"], dtype)


def init_cache(config: ModelConfig, batch: int, max_len: int, dtype=None) -> Cache:
    """An empty KV cache for `batch` rows and `max_len` slots (see `decoding.init_cache`).

    Returns: {"k", "v": tuple of L arrays [B, Hkv, S, Dh] (compute dtype unless `dtype`),
      "mask": [B, S] int32, "index": int32 scalar}.
    """
    from rlvr_jax.models import decoding
    return decoding.init_cache(config, batch, max_len, dtype)


@functools.partial(jax.jit, static_argnames=("config",))
def jit_forward(params, tokens, attention_mask, *, config):
    """`forward(...)` returning logits only; a jitted convenience for scripts and tests."""
    return forward(params, tokens, config=config, attention_mask=attention_mask)[0]
