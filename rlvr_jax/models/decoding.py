"""The cached (prefill / decode) forward pass, laid out so a decode step moves few bytes.

The training forward (`transformer.forward` without a cache) scans one Flax block over the
stacked `[L, ...]` parameters. On the decode path that layout costs bytes: every step copies
each layer's weights out of the stacked arrays and each layer's K/V into the transposed
layout the attention dots want. This module runs the same math (same parameter tree, same
operations in the same order) as plain functions with:

  * weights sliced out of the stacked arrays and cast to the compute dtype ONCE
    (`prepare_params`, outside the decode loop); the decode step reads them in place;
  * the layers unrolled in Python (T = 1 steps are small; no scan carry);
  * a per-layer KV cache in the layout the attention dots read in place:
    `k[l], v[l]: [B, Hkv, S, Dh]` (batch and KV-head dims first, as the batched dots need).

    prepared = prepare_params(params, config)          # once per rollout
    cache = init_cache(config, batch, max_len)
    logits, cache = forward(prepared, tokens, config=config, cache=cache,
                            attention_mask=mask)       # prefill (T = Tp) or decode (T = 1)

Cache: `{"k": (L × [B, Hkv, S, Dh]), "v": (same), "mask": [B, S] int32 (1 where a real
token was written), "index": int32 scalar (next slot to write, shared by all rows)}`. A call
writes its T new tokens at slots `[index, index + T)` (one in-place `dynamic_update_slice`
per layer and K/V) and attends over the whole cache, causally by slot.
"""
from typing import Any, Dict, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlvr_jax.models import decode_attention
from rlvr_jax.models.config import ModelConfig

Cache = Dict[str, Any]
Prepared = Dict[str, Any]

CACHE_AXES = ("batch", "kv_heads", "length", "kv")  # Logical axes of one layer's k or v.


def cast_weights(params: Dict[str, Any], dtype) -> Dict[str, Any]:
    """`params` with every floating leaf but the norm scales ("scale") in `dtype`, the
    values the forward reads (it casts kernels, biases, the embedding and the LM head to the
    compute dtype and reads norm scales in float32). Cast where the leaves live: a re-layout
    after it (`sampler.decode_layout`) moves `dtype` bytes. LoRA adapters and a quantized
    base's block scales stay as they are (`prepare_params` merges and dequantizes them)."""
    from rlvr_jax.models import lora, quant
    keep = (lora.ADAPTER_A, lora.ADAPTER_B, quant.SCALES)

    def leaf(path, w):
        name = getattr(path[-1], "key", "")
        floating = jnp.issubdtype(w.dtype, jnp.floating)
        return w if name == "scale" or name.endswith(keep) or not floating else w.astype(dtype)
    return jax.tree_util.tree_map_with_path(leaf, params)


def prepare_params(params: Dict[str, Any], config: ModelConfig,
                   merge_adapters: bool = True) -> Prepared:
    """The parameters as the cached forward reads them (call once per rollout).

    Returns {"embed": [V, D] (storage dtype, for the lookup), "head": [V, D] when tied
    else [D, V] (compute dtype), "final_norm": [D], "layers": tuple of L per-layer dicts
    (the stacked tree's leaves indexed at l; kernels and biases in the compute dtype, norm
    scales as stored)}. Costs one copy of the layer weights (in the compute dtype), made
    outside the decode loop, so that no decode step slices the stacked arrays. A quantized
    base (`models.quant`) is dequantized into that copy; LoRA adapters (`models.lora`) are
    merged into it (W + (alpha/r)·A·B of the compute-dtype W, A, B, summed in float32: free,
    the copy is made anyway), or with `merge_adapters=False` kept beside it and applied
    unmerged in every step (slower at the 0.5B shape, on CPU and on a GPU: docs/lora.md).
    """
    from rlvr_jax.models import lora, quant
    dt = config.compute_dtype
    shapes = {t: sum(lora.io_shapes(config, t), ()) for t in lora.TARGETS}

    def layer(i):
        def leaf(path, w):
            w = w[i]
            name = getattr(path[-1], "key", "")
            keep = name == "scale" or name.endswith(quant.CODES) or name.endswith(quant.SCALES)
            return w if keep else w.astype(dt)
        tree = jax.tree_util.tree_map_with_path(leaf, params["layers"])
        for name in ("attn", "mlp"):
            module = quant.dequantize_module(tree[name], shapes, dt)
            if config.lora_rank and merge_adapters:
                module = lora.merge_module(module, lora.scale(config), dt)
            tree[name] = module
        return tree

    head = params["embed"] if config.tie_embeddings else params["lm_head"]
    return {"embed": params["embed"], "head": head.astype(dt),
            "final_norm": params["final_norm"]["scale"],
            "layers": tuple(layer(i) for i in range(config.n_layers))}


def init_cache(config: ModelConfig, batch: int, max_len: int, dtype=None) -> Cache:
    """An empty KV cache for `batch` rows and `max_len` slots.

    Returns {"k", "v": tuple of L arrays [B, Hkv, S, Dh] (compute dtype unless `dtype`),
    "mask": [B, S] int32, "index": int32 scalar}.
    """
    if batch <= 0 or max_len <= 0:
        raise ValueError(f"batch and max_len must be positive, got {batch}, {max_len}")
    dtype = config.compute_dtype if dtype is None else jnp.dtype(dtype)
    shape = (batch, config.n_kv_heads, max_len, config.head_dim)
    empty = tuple(jnp.zeros(shape, dtype) for _ in range(config.n_layers))
    return {"k": empty, "v": tuple(jnp.zeros(shape, dtype) for _ in range(config.n_layers)),
            "mask": jnp.zeros((batch, max_len), jnp.int32), "index": jnp.zeros((), jnp.int32)}


def resize_cache(cache: Cache, size: int, repeats: int = 1) -> Cache:
    """Repeats every row `repeats` times (row r → rows r·G … r·G + G − 1) and pads the
    slot axis with empty slots up to `size`. k, v: [B, Hkv, S, Dh] → [B·G, Hkv, size, Dh]."""
    extra = size - cache["mask"].shape[1]
    if extra < 0:
        raise ValueError(f"cannot shrink a cache of {cache['mask'].shape[1]} slots to {size}")

    def kv(x):
        x = jnp.repeat(x, repeats, axis=0) if repeats > 1 else x
        return jnp.pad(x, ((0, 0), (0, 0), (0, extra), (0, 0))) if extra else x

    mask = jnp.repeat(cache["mask"], repeats, axis=0) if repeats > 1 else cache["mask"]
    return {"k": tuple(kv(x) for x in cache["k"]), "v": tuple(kv(x) for x in cache["v"]),
            "mask": jnp.pad(mask, ((0, 0), (0, extra))) if extra else mask,
            "index": cache["index"]}


def _rms_norm(x, scale, eps):
    """As `transformer.RMSNorm`: float32 statistics, output in x's dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)
    scale = scale.astype(jnp.float32).reshape((1,) * (x.ndim - 1) + (-1,))
    return (y * scale).astype(x.dtype)


def _attention(lp, x, positions, k_cache, v_cache, mask, index, cfg: ModelConfig, impl):
    """One layer's attention over its cache; returns (out [B, T, D], new k, new v). A decode
    step (T = 1, `mask` = (cache mask [B, S], first valid slot [B])) runs `decode_attention`
    with `impl`; otherwise (`impl` "grouped") `mask` is the [B, 1, 1, T, S] attention mask
    of `transformer.grouped_attention`."""
    from rlvr_jax.models import transformer  # The shared RoPE helpers.

    def proj(name, axis):
        y = _adapted(lp, name, x, jnp.einsum("btd,dhk->bthk", x, lp[f"{name}_kernel"]), cfg)
        if cfg.qkv_bias:
            y = y + lp[f"{name}_bias"][None, None]
        return nn.with_logical_constraint(y, ("batch", "length", axis, "kv"))

    q, k, v = proj("q", "heads"), proj("k", "kv_heads"), proj("v", "kv_heads")
    if cfg.qk_norm:
        q = _rms_norm(q, lp["q_norm"]["scale"], cfg.norm_eps)
        k = _rms_norm(k, lp["k_norm"]["scale"], cfg.norm_eps)
    inv_freq = transformer.rope_frequencies(cfg)
    q = transformer.apply_rope(q, positions, inv_freq)
    k = transformer.apply_rope(k, positions, inv_freq)

    zero = jnp.zeros((), jnp.int32)

    def write(cache, new):  # [B, T, Hkv, Dh] → slots [index, index + T) of [B, Hkv, S, Dh].
        new = jnp.swapaxes(new, 1, 2).astype(cache.dtype)
        out = jax.lax.dynamic_update_slice(cache, new, (zero, zero, index, zero))
        return nn.with_logical_constraint(out, CACHE_AXES)

    k_cache, v_cache = write(k_cache, k), write(v_cache, v)
    if impl != "grouped":
        kv_mask, start = mask
        out = decode_attention.decode_attention(q[:, 0], k_cache, v_cache, kv_mask, start,
                                                index + 1, cfg, impl=impl)[:, None]
    else:
        out = transformer.grouped_attention(q, k_cache, v_cache, mask, cfg, kv_layout="bnsk")
    return (_adapted(lp, "o", out, jnp.einsum("bthk,hkd->btd", out, lp["o_kernel"]), cfg),
            k_cache, v_cache)


def _adapted(module, target, x, y, cfg: ModelConfig):
    """y plus the unmerged adapter of `target` when `module` still holds one
    (`prepare_params(..., merge_adapters=False)`), else y."""
    if not cfg.lora_rank or f"{target}_lora_a" not in module:
        return y
    from rlvr_jax.models import lora
    return y + lora.delta(x, module[f"{target}_lora_a"], module[f"{target}_lora_b"],
                          lora.scale(cfg))


def _block(lp, x, positions, k_cache, v_cache, mask, index, cfg: ModelConfig, impl):
    """One pre-norm layer (as `transformer.Block`); returns (x, new k, new v)."""
    h, k_cache, v_cache = _attention(lp["attn"], _rms_norm(x, lp["input_norm"]["scale"],
                                                           cfg.norm_eps),
                                     positions, k_cache, v_cache, mask, index, cfg, impl)
    x = x + h
    m = lp["mlp"]
    y = _rms_norm(x, lp["post_attn_norm"]["scale"], cfg.norm_eps)
    h = nn.silu(_adapted(m, "gate", y, y @ m["gate_kernel"], cfg)) * \
        _adapted(m, "up", y, y @ m["up_kernel"], cfg)
    h = nn.with_logical_constraint(h, ("batch", "length", "mlp"))
    x = x + _adapted(m, "down", h, h @ m["down_kernel"], cfg)
    return nn.with_logical_constraint(x, ("batch", "length", "embed")), k_cache, v_cache


_EMBED_UNROLL = 8  # Rows copied per loop iteration (fewer host-side iterations).


def _embed(table: jax.Array, tokens: jax.Array) -> jax.Array:
    """The rows of table [V, D] at tokens [B, T] -> [B, T, D]. A decode step (T = 1) on CPU
    copies its B rows in a loop of dynamic slices (same values): XLA's CPU cost model charges
    a gather fused into its consumer as a read of the whole table (`rlvr_jax.perf.decode_cost`:
    the whole [V, D] embedding per step), a loop of slices for the rows it reads."""
    if tokens.shape[1] != 1 or jax.default_backend() != "cpu":
        return jnp.take(table, tokens, axis=0)
    ids = tokens[:, 0]

    def copy_row(r, out):
        row = jax.lax.dynamic_slice_in_dim(table, ids[r], 1, axis=0)
        return jax.lax.dynamic_update_slice_in_dim(out, row, r, axis=0)

    rows = jnp.zeros((ids.shape[0], table.shape[1]), table.dtype)
    unroll = _EMBED_UNROLL if ids.shape[0] % _EMBED_UNROLL == 0 else 1
    return jax.lax.fori_loop(0, ids.shape[0], copy_row, rows, unroll=unroll)[:, None]


def logits_from_hidden(prepared: Prepared, hidden: jax.Array, config: ModelConfig) -> jax.Array:
    """float32 logits [..., V] from final-norm hidden states [..., D] (the LM head)."""
    spec = "...d,vd->...v" if config.tie_embeddings else "...d,dv->...v"
    return jnp.einsum(spec, hidden.astype(config.compute_dtype), prepared["head"],
                      preferred_element_type=jnp.float32)


def forward(
    prepared: Prepared,
    tokens: jax.Array,
    *,
    config: ModelConfig,
    cache: Cache,
    attention_mask: Optional[jax.Array] = None,
    positions: Optional[jax.Array] = None,
    return_hidden: bool = False,
    attention_impl: Optional[str] = None,
) -> Tuple[jax.Array, Cache]:
    """Runs T new tokens against the cache (prefill: T = Tp; decode: T = 1).

    Args:
      prepared: from `prepare_params`.
      tokens: [B, T] int32.
      config: the model's `ModelConfig` (static).
      cache: from `init_cache` (or a previous call); tokens are written at `cache["index"]`.
      attention_mask: [B, T], 1 for real tokens, 0 for padding (never attended to, does
        not advance RoPE positions). Default: all real.
      positions: [B, T] RoPE positions; default `transformer.default_positions`.
      return_hidden: return the final-norm hidden states [B, T, D] instead of logits.
      attention_impl: a decode step's (T = 1) attention, one of `decode_attention.IMPLS`
        ("grouped", "plain", "pallas": the kernel over the valid slots only, "interpret":
        it in Pallas interpret mode, for CPU tests) or None (`decode_attention.default_impl`:
        "plain" on CPU). Prefill (T > 1) always runs "grouped".

    Returns:
      (logits [B, T, V] float32 or hidden [B, T, D], the updated cache).
    """
    from rlvr_jax.models import transformer
    cfg = config
    segment_ids = (jnp.ones(tokens.shape, jnp.int32) if attention_mask is None
                   else (attention_mask != 0).astype(jnp.int32))
    if positions is None:
        positions = transformer.default_positions(segment_ids, cache)
    index = cache["index"]
    kv_mask = jax.lax.dynamic_update_slice_in_dim(
        cache["mask"], segment_ids.astype(cache["mask"].dtype), index, axis=1)
    t = tokens.shape[1]
    q_slots = jnp.broadcast_to((index + jnp.arange(t, dtype=jnp.int32))[None], tokens.shape)
    kv_slots = jnp.broadcast_to(jnp.arange(kv_mask.shape[1], dtype=jnp.int32)[None],
                                kv_mask.shape)
    impl = decode_attention.default_impl() if attention_impl is None else attention_impl
    decode_attention.check_impl(impl)
    if t == 1 and impl != "grouped":  # Valid: the cache mask from the row's first slot.
        mask = (kv_mask, jnp.argmax(kv_mask != 0, axis=1).astype(jnp.int32))
    else:
        impl, mask = "grouped", transformer.attention_mask_from(segment_ids, kv_mask, q_slots,
                                                                  kv_slots)

    x = _embed(prepared["embed"], tokens).astype(cfg.compute_dtype)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    ks, vs = [], []
    for lp, k_cache, v_cache in zip(prepared["layers"], cache["k"], cache["v"]):
        x, k_cache, v_cache = _block(lp, x, positions, k_cache, v_cache, mask, index, cfg, impl)
        ks.append(k_cache)
        vs.append(v_cache)
    x = _rms_norm(x, prepared["final_norm"], cfg.norm_eps)
    new_cache = {"k": tuple(ks), "v": tuple(vs), "mask": kv_mask, "index": index + t}
    if return_hidden:
        return x, new_cache
    return logits_from_hidden(prepared, x, cfg), new_cache
