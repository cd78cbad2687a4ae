"""The cached (prefill / decode) forward pass, laid out so a decode step moves few bytes.

The layers are `transformer.Block`'s (one implementation for training and decoding; the
block's attention takes a `LayerCache`). What this module adds is the layout of a decode
step: the training forward scans the block over the stacked `[L, ...]` parameters, which on
the decode path would copy each layer's weights out of the stacked arrays and each layer's
K/V into the layout the attention dots want, every step. Here:

  * weights sliced out of the stacked arrays and cast to the compute dtype ONCE
    (`prepare_params`, outside the decode loop); the decode step reads them in place;
  * the layers unrolled in Python (T = 1 steps are small; no scan carry), `Block` applied to
    each layer's slice;
  * a per-layer KV cache in the layout the attention dots read in place:
    `k[l], v[l]: [B, Hkv, S, Dh]` (batch and KV-head dims first, as the batched dots need);
  * a decode step's attention over the valid slots (`decode_attention`), and on CPU its
    embedding rows copied by a loop of slices (`_embed`).

    prepared = prepare_params(params, config)          # once per rollout
    cache = init_cache(config, batch, max_len)
    logits, cache = forward(prepared, tokens, config=config, cache=cache,
                            attention_mask=mask)       # prefill (T = Tp) or decode (T = 1)

Cache: `{"k": (L × [B, Hkv, S, Dh]), "v": (same), "mask": [B, S] int32 (1 where a real
token was written), "index": int32 scalar (next slot to write, shared by all rows)}`. A call
writes its T new tokens at slots `[index, index + T)` (one in-place `dynamic_update_slice`
per layer and K/V) and attends over the whole cache, causally by slot.

A cache may hold a shared prefix (`SamplingConfig.share_prompt_kv`): `resize_cache(
prefill_cache, size, repeats=G, share=True)` keeps the P prompts' K/V once, as `"prefix":
{"k", "v": (L × [P, Hkv, Tp, Dh]), "mask": [P, Tp]}`, and gives the B = P·G rows slots of
their own for the new tokens only (slot 0: the first completion token's). Row b attends to
prompt b // G's prefix and its own slots (`decode_attention.Prefix`): a decode step reads
each prompt's K/V once, not G times, and no prompt is copied G times. Such a cache takes
one token per row per call; `take_rows` gives rows moved out of their group their own copy.
"""
from typing import Any, Dict, NamedTuple, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlvr_jax import numerics
from rlvr_jax.models import decode_attention
from rlvr_jax.models.config import ModelConfig

Cache = Dict[str, Any]
Prepared = Dict[str, Any]


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


def prefix_slots(cache: Cache) -> int:
    """The slots of the cache's shared prefix (0 without one)."""
    return cache["prefix"]["mask"].shape[1] if "prefix" in cache else 0


def resize_cache(cache: Cache, size: int, repeats: int = 1, share: bool = False) -> Cache:
    """The cache's rows repeated `repeats` times (row r -> rows r·G … r·G + G − 1) and grown
    to `size` slots in all (a shared prefix's included) by empty slots.

    share (with repeats = G > 1): the P rows (every slot written: a prefill's cache) become
    the shared prefix of the B = P·G rows, nothing copied, and the rows get `size - S` empty
    slots of their own, the slot index 0: k, v [P, Hkv, S, Dh] -> prefix [P, Hkv, S, Dh] +
    rows [P·G, Hkv, size - S, Dh]. Otherwise k, v [P, Hkv, S, Dh] -> [P·G, Hkv, size, Dh]."""
    slots = prefix_slots(cache) + cache["mask"].shape[1]
    if size < slots + (repeats > 1 and share):
        raise ValueError(f"cannot shrink a cache of {slots} slots to {size}")
    if repeats > 1 and "prefix" in cache:
        raise ValueError("the rows of a cache with a shared prefix cannot be repeated")
    if repeats > 1 and share:
        empty = init_cache_like(cache, cache["mask"].shape[0] * repeats, size - slots)
        return dict(empty, prefix={"k": cache["k"], "v": cache["v"], "mask": cache["mask"]})
    extra = size - slots

    def grow(x, axis):  # The slot axis: 2 of k / v, 1 of the mask.
        x = jnp.repeat(x, repeats, axis=0) if repeats > 1 else x
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, extra)
        return jnp.pad(x, pad) if extra else x
    return dict(cache, k=tuple(grow(x, 2) for x in cache["k"]),
                v=tuple(grow(x, 2) for x in cache["v"]), mask=grow(cache["mask"], 1))


def init_cache_like(cache: Cache, batch: int, slots: int) -> Cache:
    """An empty cache (no prefix) of `batch` rows and `slots` slots, dtypes and per-layer
    shapes as `cache`'s."""
    kv = lambda x: jnp.zeros((batch, x.shape[1], slots, x.shape[3]), x.dtype)  # noqa: E731
    return {"k": tuple(kv(x) for x in cache["k"]), "v": tuple(kv(x) for x in cache["v"]),
            "mask": jnp.zeros((batch, slots), jnp.int32), "index": jnp.zeros((), jnp.int32)}


def take_rows(cache: Cache, index: jax.Array, same_groups: bool = False) -> Cache:
    """The cache's rows at index [b'] (k, v: [b, Hkv, S, Dh] -> [b', Hkv, S, Dh]; mask [b, S]
    -> [b', S]; the slot index unchanged). A shared prefix stays shared when every row is
    taken from its own group (`same_groups`, e.g. a tree fork within a prompt); otherwise
    each taken row gets its own copy of its group's prefix ([b', Hkv, Tp, Dh])."""
    take = lambda x: jnp.take(x, index, axis=0)  # noqa: E731
    out = {"k": tuple(take(x) for x in cache["k"]), "v": tuple(take(x) for x in cache["v"]),
           "mask": take(cache["mask"]), "index": cache["index"]}
    if "prefix" in cache:
        group = index // (cache["mask"].shape[0] // cache["prefix"]["mask"].shape[0])
        out["prefix"] = cache["prefix"] if same_groups else jax.tree.map(
            lambda x: jnp.take(x, group, axis=0), cache["prefix"])
    return out


class LayerCache(NamedTuple):
    """One layer's view of the cache, as `transformer.Attention` takes it.

    k, v: [B, Hkv, S, Dh]; index: int32 scalar, the slot of the first new token;
    attend_mask and impl, what the new tokens see: for a decode step (T = 1) with a
    `decode_attention` implementation, ((cache mask [B, S] with the new slot, each row's
    first valid slot [B]), that impl); otherwise (the [B, 1, 1, T, S] boolean mask of
    `transformer.grouped_attention`, "grouped"). prefix: this layer's shared prefix
    (`decode_attention.Prefix`, decode steps only) or None."""
    k: jax.Array
    v: jax.Array
    index: jax.Array
    attend_mask: Any
    impl: str
    prefix: Optional[decode_attention.Prefix] = None

    def attend(self, q, k, v, cfg: ModelConfig):
        """Writes the new keys / values k, v [B, T, Hkv, Dh] at slots [index, index + T)
        (in place) and attends q [B, T, H, Dh] over the cache; returns ([B, T, H, Dh], the
        updated `LayerCache`)."""
        from rlvr_jax.models import transformer
        k_cache, v_cache = _write(self.k, k, self.index), _write(self.v, v, self.index)
        if self.impl == "grouped":
            out = transformer.grouped_attention(q, k_cache, v_cache, self.attend_mask, cfg,
                                                kv_layout="bnsk")
        else:
            kv_mask, start = self.attend_mask
            out = decode_attention.decode_attention(q[:, 0], k_cache, v_cache, kv_mask, start,
                                                    self.index + 1, cfg, prefix=self.prefix,
                                                    impl=self.impl)[:, None]
        return out, self._replace(k=k_cache, v=v_cache)


def _write(cache, new, index):
    """new [B, T, Hkv, Dh] into slots [index, index + T) of cache [B, Hkv, S, Dh]."""
    zero = jnp.zeros((), jnp.int32)
    new = jnp.swapaxes(new, 1, 2).astype(cache.dtype)
    out = jax.lax.dynamic_update_slice(cache, new, (zero, zero, index, zero))
    return nn.with_logical_constraint(out, decode_attention.CACHE_AXES)


def _embed(table: jax.Array, tokens: jax.Array) -> jax.Array:
    """The rows of table [V, D] at tokens [B, T] -> [B, T, D]; a decode step (T = 1) on one
    CPU device copies its B rows (`numerics.copy_rows`: XLA's CPU cost model charges a fused
    gather as a read of the whole [V, D] table), otherwise a gather (XLA partitions it when
    the vocabulary is split over devices)."""
    if tokens.shape[1] == 1 and numerics.copies_rows():
        return numerics.copy_rows(table, tokens[:, 0])[:, None]
    return jnp.take(table, tokens, axis=0)


def _prefix_tokens(cache: Cache):
    """[B, 1] int32: the real tokens of each row's shared prefix (0 without one)."""
    if "prefix" not in cache:
        return 0
    real = jnp.sum(cache["prefix"]["mask"] != 0, axis=1, dtype=jnp.int32)
    return jnp.repeat(real, cache["mask"].shape[0] // real.shape[0])[:, None]


def _what_to_attend(segment_ids, kv_mask, index, attention_impl, shared: bool):
    """(impl, attend mask) of a `LayerCache` for T new tokens (segment_ids [B, T]) over the
    cache mask kv_mask [B, S] they were written into at `index`: a decode step (T = 1) with
    a `decode_attention` impl (or over a `shared` prefix) attends the cache mask from each
    row's first slot; otherwise "grouped" with the causal-by-slot mask [B, 1, 1, T, S]."""
    from rlvr_jax.models import transformer
    impl = decode_attention.default_impl() if attention_impl is None else attention_impl
    decode_attention.check_impl(impl)
    if segment_ids.shape[1] == 1 and (impl != "grouped" or shared):
        impl = "plain" if impl == "grouped" else impl  # No grouped form over a prefix.
        return impl, (kv_mask, jnp.argmax(kv_mask != 0, axis=1).astype(jnp.int32))
    q_slots = index + jnp.arange(segment_ids.shape[1], dtype=jnp.int32)[None]
    kv_slots = jnp.arange(kv_mask.shape[1], dtype=jnp.int32)[None]
    return "grouped", transformer.attention_mask_from(
        segment_ids, kv_mask, jnp.broadcast_to(q_slots, segment_ids.shape),
        jnp.broadcast_to(kv_slots, kv_mask.shape))


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
      cache: from `init_cache` or `resize_cache` (or a previous call); tokens are written
        at `cache["index"]`. With a shared prefix, T must be 1.
      attention_mask: [B, T], 1 for real tokens, 0 for padding (never attended to, does
        not advance RoPE positions). Default: all real.
      positions: [B, T] RoPE positions; default `transformer.default_positions` (the
        prefix's real tokens counted).
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
    shared = cache.get("prefix")
    t = tokens.shape[1]
    if shared is not None and t != 1:
        raise ValueError(f"a cache with a shared prefix takes one token per row, got {t}")
    if positions is None:
        positions = transformer.default_positions(segment_ids, cache) + _prefix_tokens(cache)
    index = cache["index"]
    kv_mask = jax.lax.dynamic_update_slice_in_dim(
        cache["mask"], segment_ids.astype(cache["mask"].dtype), index, axis=1)
    impl, mask = _what_to_attend(segment_ids, kv_mask, index, attention_impl,
                                 shared is not None)
    prefixes = [None] * cfg.n_layers
    if shared is not None:
        start = jnp.argmax(shared["mask"] != 0, axis=1).astype(jnp.int32)
        prefixes = [decode_attention.Prefix(k, v, shared["mask"], start)
                    for k, v in zip(shared["k"], shared["v"])]
    x = _embed(prepared["embed"], tokens).astype(cfg.compute_dtype)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    block, ks, vs = transformer.Block(cfg), [], []
    for lp, k_cache, v_cache, prefix in zip(prepared["layers"], cache["k"], cache["v"],
                                            prefixes):
        x, layer = block.apply({"params": lp}, x, positions, None, None,
                               LayerCache(k_cache, v_cache, index, mask, impl, prefix))
        ks.append(layer.k)
        vs.append(layer.v)
    x = transformer.rms_norm(x, prepared["final_norm"], cfg.norm_eps)
    new_cache = dict(cache, k=tuple(ks), v=tuple(vs), mask=kv_mask, index=index + t)
    if return_hidden:
        return x, new_cache
    return logits_from_hidden(prepared, x, cfg), new_cache
