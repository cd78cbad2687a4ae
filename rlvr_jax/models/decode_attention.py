"""Decode attention over the valid slots only: flash-decoding in Pallas, or the plain path.

One decode step (T = 1) attends each row's H query heads to its KV cache `[B, Hkv, S, Dh]`.
Row b's valid slots lie in [start_b, end): its left-padded prompt begins at slot start_b and
every row has written up to the shared cache index (`end`); inside that range the cache mask
drops the slots a finished row was fed padding into. Three implementations:

  * "grouped": the training forward's `transformer.grouped_attention` over all S slots
    (scores [B, Hkv, G, 1, S]; XLA's CPU backend transposes them around the softmax);
  * "plain": the same math over all S slots laid out for one decode token: scores
    [B, Hkv, S, G] straight out of the dot, masked by an additive [B, S] bias, the softmax's
    max and exp along S in place (XLA CPU fuses dot, bias, max and exp: the scores are never
    written) and its normalisation applied to the [B, Hkv, G, Dh] output (a qwen2.5-0.5b
    rollout of 256 rows × 512 tokens by the CPU cost model: 1.70× -> 1.48× its byte minimum
    with 4 phases; docs/performance.md, issue 52);
  * "pallas": the kernel below; "interpret": it in Pallas interpret mode (CPU tests).

The Pallas kernel (`impl="pallas"`) runs one program per (row, KV head) that
walks only the blocks of `block` slots overlapping [start_b, end), with an online softmax
(float32 running max, sum and output), so a step reads about the valid K/V whatever the
cache's capacity; the program serves the H / Hkv query heads of its group (GQA) from one read
of the group's K/V. It is written for Pallas' Triton backend (GPU): power-of-two tensors, the
group's G query heads padded to >= 16 rows for Triton's dots (outside the kernel), slot blocks
a power of two <= S. Under a mesh it runs on each device's rows and KV heads (a shard_map
over the cache's batch and KV-head axes).

    out = decode_attention(q, k, v, mask, start, end, config, impl="pallas", interpret=True)

A shared prefix (`Prefix`: the sampler's prompt KV, one copy per prompt for its G samples,
`decoding.resize_cache`) is a second set of slots attended with the row's own: each path
computes the prefix's part with a group's B/Pp rows' queries as one batch of its dots (the
prefix K/V read once per group, not once per row) and the rows' part, then combines their
unnormalised softmax sums (`_combine`, flash-decoding's combine of split chunks).

`default_impl`: "plain" on CPU, the kernel on GPUs (`KERNEL_ON_GPU`), "grouped"
elsewhere (docs/performance.md, issue 52, has its GPU checks: scripts/gpu_52.sh).
"""
import functools
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt
from jax.sharding import PartitionSpec as P

from rlvr_jax.models.config import ModelConfig

CACHE_AXES = ("batch", "kv_heads", "length", "kv")  # Logical axes of one layer's k or v.

_NEG_INF = -1e30  # Finite: a block with no valid slot must not turn the running max into NaN.
# Kernel programs to aim for (B · Hkv · splits): JAX's own GPU decode kernel
# (jax.experimental.pallas.ops.gpu.decode_attention) at the qwen2.5-0.5b decode shape on an
# H200 was fastest with 5 chunks of 2 blocks of 64 slots for 256 rows × 2 KV heads, 2560
# programs: 41.9 µs per layer, 71.3 µs unsplit (docs/performance.md, issue 52).
_PROGRAMS = 2560


# The kernel as the default on GPUs: an H200 run (scripts/gpu_52.sh, docs/performance.md,
# issue 52) found it as accurate as "grouped" (same bf16 error; float32 rollout tokens equal)
# and faster (qwen2.5-0.5b sampler: +19% tokens/s at 256 rows, +16% at 64). Under a mesh it
# runs on each device's rows and KV heads (`_per_device`: no gather of the cache).
KERNEL_ON_GPU = True


def default_impl(backend: Optional[str] = None) -> str:
    """The implementation `impl=None` stands for on `backend` (default: JAX's): "plain" on
    CPU; on GPUs (one or several) "pallas" if `KERNEL_ON_GPU`; else "grouped"."""
    backend = backend or jax.default_backend()
    if backend == "cpu":
        return "plain"
    return "pallas" if KERNEL_ON_GPU and backend in ("gpu", "cuda") else "grouped"


IMPLS = ("grouped", "plain", "pallas", "interpret")


def check_impl(impl: Optional[str]) -> None:
    """Raises ValueError unless `impl` is None or one of `IMPLS` (a decode step's attention:
    the plain path, the Pallas kernel, or the kernel in interpret mode)."""
    if impl is not None and impl not in IMPLS:
        raise ValueError(f"attention_impl must be None or one of {IMPLS}, got {impl!r}")


class Prefix(NamedTuple):
    """Slots shared by groups of consecutive rows (a prompt's KV, read once for its G
    samples): k, v [Pp, Hkv, Sp, Dh]; mask [Pp, Sp] (nonzero: a real token); start [Pp]
    int32, the first real slot. Row b's group is b // (B / Pp); all Sp slots are written."""
    k: jax.Array
    v: jax.Array
    mask: jax.Array
    start: jax.Array


def decode_attention(q, k_cache, v_cache, mask, start, end, config: ModelConfig, *,
                     prefix: Optional[Prefix] = None, impl: Optional[str] = None,
                     block: int = 64, warps: int = 4, splits: Optional[int] = None,
                     interpret: bool = False):
    """Attention of one new token per row over its valid cache slots (and its group's
    `prefix`, if given: one softmax over both).

    Args:
      q: [B, H, Dh] queries (RoPE applied).
      k_cache, v_cache: [B, Hkv, S, Dh].
      mask: [B, S], nonzero where a slot holds a real token.
      start: [B] int32, the row's first valid slot; end: int32 scalar, one past the last
        written slot (slots >= end are never read).
      config: the model's config (heads, head_dim, compute dtype).
      prefix: a `Prefix` of Pp groups (Pp divides B), attended before the row's own slots;
        its K/V are read once per group (the group's queries are one batch of the dots).
      impl: one of `IMPLS`, or None (`default_impl()`); with a prefix, "grouped" runs the
        plain path's math (there is no training-forward equivalent of a shared prefix).
      block: slots per kernel block (a power of two; capped at S).
      warps: Triton warps per kernel program (GPU).
      splits: kernel programs per (row, KV head), each over a chunk of whole blocks (None:
        enough for about `_PROGRAMS` programs in all; capped at the number of blocks).
      interpret: run the Pallas kernel in interpret mode (CPU tests).

    Returns: [B, H, Dh] in the compute dtype.
    """
    impl = default_impl() if impl is None else impl
    check_impl(impl)
    if impl in ("pallas", "interpret"):
        if block < 1 or block & (block - 1):
            raise ValueError(f"decode_attention: block must be a power of two, got {block}")
        kernel = functools.partial(_pallas, cfg=config, block=block, warps=warps,
                                   splits=splits, interpret=interpret or impl == "interpret")
        parts = _per_device(kernel, q, k_cache, v_cache, mask, start, end)
        if prefix is not None:
            shared = _per_device(kernel, _group_queries(q, prefix), prefix.k, prefix.v,
                                 prefix.mask, prefix.start, prefix.mask.shape[1])
            parts = _with_prefix_parts(parts, shared, q.shape[0])
        return _combine(parts, config.compute_dtype)
    slots = jnp.arange(k_cache.shape[2], dtype=jnp.int32)[None]
    valid = (mask != 0) & (slots >= start[:, None]) & (slots < end)
    if prefix is not None:
        parts = _plain_parts(q, k_cache, v_cache, valid, config)
        shared = _plain_parts(_group_queries(q, prefix), prefix.k, prefix.v,
                              prefix.mask != 0, config)
        return _combine(_with_prefix_parts(parts, shared, q.shape[0]), config.compute_dtype)
    if impl == "plain":
        return plain(q, k_cache, v_cache, valid, config)
    from rlvr_jax.models import transformer
    out = transformer.grouped_attention(q[:, None], k_cache, v_cache,
                                        valid[:, None, None, None, :], config, kv_layout="bnsk")
    return out[:, 0]


def _group_queries(q, prefix: Prefix):
    """q [B, H, Dh] as its Pp groups' queries [Pp, Hkv · (B/Pp) · G, Dh]: KV head n of group
    p serves the G query heads of each of the group's B/Pp rows (one batch of the dots)."""
    b, h, dh = q.shape
    pp, hkv = prefix.k.shape[:2]
    x = q.reshape(pp, b // pp, hkv, h // hkv, dh).transpose(0, 2, 1, 3, 4)
    return x.reshape(pp, hkv * (b // pp) * (h // hkv), dh)


def _with_prefix_parts(parts, shared, b: int):
    """The row parts (each [B, Hkv, splits, G, ...]) and the prefix's ([Pp, Hkv, splits',
    (B/Pp)·G, ...]) as one set of parts [B, Hkv, splits + splits', G, ...]."""
    def to_rows(x):
        pp, hkv, sp, m, w = x.shape
        g = m // (b // pp)
        x = x.reshape(pp, hkv, sp, b // pp, g, w).transpose(0, 3, 1, 2, 4, 5)
        return x.reshape(b, hkv, sp, g, w)
    return tuple(jnp.concatenate([x, to_rows(y)], axis=2) for x, y in zip(parts, shared))


def _combine(parts, dtype):
    """Softmax-weighted sums over several chunks of slots -> [B, H, Dh] in `dtype`.

    parts: (acc [B, Hkv, C, G, Dh], top [B, Hkv, C, G, 1], total [B, Hkv, C, G, 1]) float32,
    each chunk's unnormalised output, running max and sum. A chunk weighs exp(top - max over
    chunks) (0 for a chunk with no valid slot unless no chunk has one: then the output is 0)."""
    acc, top, total = parts
    weight = jnp.exp(top - jnp.max(top, axis=2, keepdims=True))
    out = (jnp.sum(weight * acc, axis=2)
           / jnp.maximum(jnp.sum(weight * total, axis=2), 1e-30))  # [B, Hkv, G, Dh]
    b, hkv, g, dh = out.shape
    return out.astype(dtype).reshape(b, hkv * g, dh)


def plain(q, k_cache, v_cache, valid, cfg: ModelConfig):
    """The "plain" decode attention: q [B, H, Dh] over k/v [B, Hkv, S, Dh] where valid
    [B, S] (bool); returns [B, H, Dh] in the compute dtype. Rows with no valid slot get a
    uniform average (as `transformer.grouped_attention`)."""
    acc, _, total = _plain_parts(q, k_cache, v_cache, valid, cfg)
    b, h, dh = q.shape
    return (acc[:, :, 0] / total[:, :, 0]).astype(cfg.compute_dtype).reshape(b, h, dh)


def _plain_parts(q, k_cache, v_cache, valid, cfg: ModelConfig):
    """The plain path's softmax over all S slots as one chunk (`_combine`'s parts): q
    [n, H', Dh] (H' = Hkv · G' query heads) over k/v [n, Hkv, S, Dh] where valid [n, S] ->
    (acc [n, Hkv, 1, G', Dh], top [n, Hkv, 1, G', 1], total [n, Hkv, 1, G', 1]) float32."""
    dt = cfg.compute_dtype
    b, h, dh = q.shape
    hkv = k_cache.shape[1]
    qg = (q.astype(jnp.float32) * dh ** -0.5).astype(dt).reshape(b, hkv, h // hkv, dh)
    # Masked slots by an additive [B, 1, S, 1] bias (0 or -1e30, shared by the heads): the
    # same values as a select (s + 0 = s; s - 1e30 rounds to -1e30 for |s| < 1e22), which XLA
    # fuses into the dot's output instead of a separate pass over the scores.
    bias = jnp.where(valid, 0.0, _NEG_INF).astype(jnp.float32)
    # Tied to this layer's queries, the bias is this layer's own array: XLA cannot merge the
    # L layers' (identical) broadcasts of it into one [B, Hkv, S, G] array that every layer
    # would then read; each layer's dot fusion broadcasts the [B, S] bias itself.
    bias, qg = jax.lax.optimization_barrier((bias, qg))
    scores = jnp.einsum("bnsk,bngk->bnsg", k_cache.astype(dt), qg,
                        preferred_element_type=jnp.float32)
    scores = scores + bias[:, None, :, None]
    top = jnp.max(scores, axis=2, keepdims=True)
    weights = jnp.exp(scores - top)
    total = jnp.sum(weights, axis=2)  # [B, Hkv, G]
    out = jnp.einsum("bnsg,bnsk->bngk", weights.astype(dt), v_cache.astype(dt),
                     preferred_element_type=jnp.float32)
    return out[:, :, None], top[..., None], total[:, :, None, :, None]


def _per_device(fn, q, k_cache, v_cache, mask, start, end):
    """fn(q [b, h, Dh], k, v [b, hkv, S, Dh], mask [b, S], start [b], end) -> arrays [b, hkv,
    ...] (`_pallas`' parts) on each device's rows and KV heads, split as the cache's logical
    axes (`CACHE_AXES`) split them under the mesh and rules of the enclosing
    `sharding.activate` (XLA's SPMD partitioner does not split a Pallas call: it would gather
    the whole cache onto every device); on the whole arrays without a mesh. The query heads
    split with the KV heads: head i serves KV head i // G, so a contiguous share of the H heads
    is the same share of the Hkv groups."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return fn(q, k_cache, v_cache, mask, start, end)
    from rlvr_jax import sharding
    spec = sharding.logical_to_mesh_spec(P(*CACHE_AXES), nn.get_logical_axis_rules(),
                                         k_cache.shape, mesh)
    rows, heads = (tuple(spec) + (None, None))[:2]
    cache = P(rows, heads, None, None)  # A program reads whole slot ranges and head vectors.
    return jax.shard_map(fn, in_specs=(P(rows, heads, None), cache, cache, P(rows, None),
                                       P(rows), P()),
                         out_specs=P(rows, heads), check_vma=False)(
        q, k_cache, v_cache, mask, start, jnp.asarray(end, jnp.int32))


def _pallas(q, k_cache, v_cache, mask, start, end, *, cfg, block, warps, splits, interpret):
    """The kernel's call, in shapes Triton lowers: the G query heads of a KV group padded to
    a power of two >= 16 (Triton tensors are powers of two; its dots take >= 16 rows),
    blocks of a power-of-two number of slots; per-row start and end as scalars. The slots
    are cut into `splits` chunks of whole blocks, one program each (flash-decoding's split
    K: more programs than the B · Hkv (row, KV head) pairs alone). Returns their parts
    (acc [B, Hkv, splits, G, Dh], top and total [B, Hkv, splits, G, 1], float32) for
    `_combine`."""
    b, h, dh = q.shape
    hkv, s = k_cache.shape[1], k_cache.shape[2]
    g, dt = h // hkv, cfg.compute_dtype
    gp = max(16, pl.next_power_of_2(g))
    block = min(block, 1 << (s.bit_length() - 1))  # A power of two <= S.
    blocks = pl.cdiv(s, block)
    splits = pl.cdiv(_PROGRAMS, b * hkv) if splits is None else splits
    per = pl.cdiv(blocks, min(max(splits, 1), blocks))  # Blocks per chunk.
    splits = pl.cdiv(blocks, per)
    # Scaled as the plain path scales (float32, then the compute dtype); padded rows are 0.
    qg = (q.astype(jnp.float32) * dh ** -0.5).astype(dt).reshape(b, hkv, g, dh)
    qg = jnp.pad(qg, ((0, 0), (0, 0), (0, gp - g), (0, 0)))
    ends = jnp.broadcast_to(jnp.asarray(end, jnp.int32), (b,))
    precision = jax.lax.Precision.HIGHEST if dt == jnp.float32 else None  # Not TF32.
    kernel = functools.partial(_kernel, block=block, chunk=per * block, slots=s, dtype=dt,
                               precision=precision)
    row = pl.BlockSpec((None,), lambda i, n, j: (i,))
    kv_spec = pl.BlockSpec((None, None, s, dh), lambda i, n, j: (i, n, 0, 0))
    part = lambda width: pl.BlockSpec((None, None, None, gp, width),  # noqa: E731
                                      lambda i, n, j: (i, n, j, 0, 0))
    acc, top, total = pl.pallas_call(
        kernel,
        grid=(b, hkv, splits),
        in_specs=[row, row, pl.BlockSpec((None, None, gp, dh), lambda i, n, j: (i, n, 0, 0)),
                  kv_spec, kv_spec, pl.BlockSpec((None, s), lambda i, n, j: (i, 0))],
        out_specs=[part(dh), part(1), part(1)],
        out_shape=[jax.ShapeDtypeStruct((b, hkv, splits, gp, w), jnp.float32)
                   for w in (dh, 1, 1)],
        compiler_params=plt.CompilerParams(num_warps=warps, num_stages=2),  # Triton, on GPU.
        interpret=interpret, name="decode_attention",
    )(start.astype(jnp.int32), ends, qg, k_cache, v_cache, mask.astype(jnp.int32))
    return acc[:, :, :, :g], top[:, :, :, :g], total[:, :, :, :g]


def _kernel(start_ref, end_ref, q_ref, k_ref, v_ref, mask_ref, acc_ref, top_ref, total_ref, *,
            block, chunk, slots, dtype, precision):
    """One (row, KV head, chunk): q [Gp, Dh] (scaled) against the blocks of K/V [S, Dh] that
    overlap [start, end) within the chunk's slots; the last block is shifted back to end at
    S (its slots before the block's nominal start, already seen, are masked). Scores and the
    online softmax in float32, the weights cast to the compute dtype for the PV dot (as the
    plain path). Writes the chunk's unnormalised output, running max and sum."""
    first = pl.program_id(2) * chunk
    lo = jnp.maximum(start_ref[()], first)
    hi = jnp.minimum(end_ref[()], first + chunk)
    q = q_ref[...].astype(dtype)
    gp, dh = q.shape

    def body(i, carry):
        m, l, acc = carry
        nominal = i * block
        base = jnp.minimum(nominal, slots - block)
        k = k_ref[pl.ds(base, block), :].astype(dtype)
        v = v_ref[pl.ds(base, block), :].astype(dtype)
        slot = base + jax.lax.broadcasted_iota(jnp.int32, (1, block), 1)
        valid = ((mask_ref[pl.ds(base, block)][None] != 0) & (slot >= nominal)
                 & (slot >= lo) & (slot < hi))
        scores = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), precision=precision,
                                     preferred_element_type=jnp.float32)
        scores = jnp.where(valid, scores, _NEG_INF)
        m_new = jnp.maximum(m, jnp.max(scores, axis=1, keepdims=True))
        p = jnp.where(valid, jnp.exp(scores - m_new), 0.0)
        alpha = jnp.exp(m - m_new)
        pv = jax.lax.dot_general(p.astype(dtype), v, (((1,), (0,)), ((), ())),
                                 precision=precision, preferred_element_type=jnp.float32)
        return m_new, l * alpha + jnp.sum(p, axis=1, keepdims=True), acc * alpha + pv

    init = (jnp.full((gp, 1), _NEG_INF, jnp.float32), jnp.zeros((gp, 1), jnp.float32),
            jnp.zeros((gp, dh), jnp.float32))
    m, l, acc = jax.lax.fori_loop(lo // block, pl.cdiv(hi, block), body, init)
    acc_ref[...] = acc
    top_ref[...] = m
    total_ref[...] = l
