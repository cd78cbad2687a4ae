"""Fused self-attention kernels for the training forward, chosen by backend.

The plain path (`transformer.grouped_attention`) materialises float32 scores [B, H, T, T]:
the largest temporaries of the update. On an accelerator the training forward uses a kernel
that never does, with the same masking (causal by slot, within a segment):

- GPU: Pallas flash attention (`jax.experimental.pallas.ops.gpu.attention.mha`, Triton),
  causal with segment ids;
- TPU: splash attention (`jax.experimental.pallas.ops.tpu.splash_attention`), a causal mask
  and segment ids, skipping fully masked blocks;
- CPU: the plain XLA path.

`ModelConfig.attention` picks one ("auto": by backend, as above). Under a mesh
(`sharding.activate`) the kernel runs on each device's rows and heads (`shard_map`). An
explicit kernel on a backend it was not written for runs in Pallas interpret mode (slow;
tests use it on CPU).

Masking. Both kernels keep a token from attending another segment; padding (segment 0)
attends padding, where the plain path masks it fully. Padding outputs differ between paths
but never reach a real token (real tokens never attend padding) nor a loss (padding is never
scored). Rows are padded to the kernel's block with a segment id no token has.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from rlvr_jax import sharding
from rlvr_jax.models.config import ATTENTIONS as IMPLEMENTATIONS
_BY_BACKEND = {"gpu": "pallas_gpu", "cuda": "pallas_gpu", "tpu": "splash"}
_PAD_SEGMENT = -1


def resolve(implementation: str, backend: str = None) -> str:
    """The kernel `implementation` names; "auto": the backend's kernel (default backend:
    JAX's), "xla" on CPU."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"attention must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    if implementation != "auto":
        return implementation
    return _BY_BACKEND.get(backend or jax.default_backend(), "xla")


def _pad_rows(block: int, q, k, v, segments):
    """Pads the T axis up to a multiple of `block` (segment id `_PAD_SEGMENT`)."""
    t = q.shape[1]
    extra = -t % block
    if not extra:
        return q, k, v, segments
    pad = lambda x: jnp.pad(x, ((0, 0), (0, extra)) + ((0, 0),) * (x.ndim - 2))  # noqa: E731
    return pad(q), pad(k), pad(v), jnp.pad(segments, ((0, 0), (0, extra)),
                                           constant_values=_PAD_SEGMENT)


def _pallas_gpu(q, k, v, segments, *, block: int, interpret: bool):
    from jax.experimental.pallas.ops.gpu import attention as gpu_attention
    sizes = gpu_attention.BlockSizes(block_q=block, block_k=block, block_q_dkv=block,
                                     block_kv_dkv=block, block_q_dq=block, block_kv_dq=block)
    return gpu_attention.mha(q, k, v, segments, sm_scale=q.shape[-1] ** -0.5, causal=True,
                             block_sizes=sizes, interpret=interpret)


def _splash(q, k, v, segments, *, block: int, interpret: bool):
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as splash, splash_attention_mask as masks)
    heads, t = q.shape[2], q.shape[1]
    sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block,
                              block_q_dkv=block, block_kv_dkv=block,
                              block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
    kernel = splash.make_splash_mha(
        masks.MultiHeadMask([masks.CausalMask((t, t)) for _ in range(heads)]),
        block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    scale = jnp.asarray(q.shape[-1] ** -0.5, q.dtype)  # Splash does not scale the scores.

    def one(q1, k1, v1, s1):  # [T, H, Dh] -> the kernel's [H, T, Dh]
        out = kernel((q1 * scale).swapaxes(0, 1), k1.swapaxes(0, 1), v1.swapaxes(0, 1),
                     segment_ids=splash.SegmentIds(q=s1, kv=s1))
        return out.swapaxes(0, 1)
    return jax.vmap(one)(q, k, v, segments)


_KERNELS = {"pallas_gpu": (_pallas_gpu, 64), "splash": (_splash, 128)}


def fused_attention(q, keys, values, segments, *, implementation: str, block: int = None,
                    interpret: bool = None):
    """Causal self-attention within segments through a fused kernel, in q's dtype.

    Args:
      q: [B, T, H, Dh] queries (RoPE applied); keys, values: [B, T, Hkv, Dh] (GQA: each
        key/value head serves H / Hkv query heads).
      segments: [B, T] int32 segment ids (0: padding).
      implementation: "pallas_gpu" or "splash".
      block: the kernel's tile along T (default 64 on GPU, 128 on TPU); T is padded up to it.
      interpret: Pallas interpret mode (default: when not on the kernel's backend).

    Returns: [B, T, H, Dh].
    """
    kernel, default_block = _KERNELS[implementation]
    block = block or default_block
    if interpret is None:
        interpret = _BY_BACKEND.get(jax.default_backend()) != implementation
    groups = q.shape[2] // keys.shape[2]
    keys, values = (jnp.repeat(x.astype(q.dtype), groups, axis=2) for x in (keys, values))
    t = q.shape[1]

    def local(q, keys, values, segments):
        padded = _pad_rows(block, q, keys, values, segments)
        return kernel(*padded, block=block, interpret=interpret)[:, :t]
    return _per_device(local, q, keys, values, segments.astype(jnp.int32))


def _per_device(fn, q, keys, values, segments):
    """fn([b, T, h, Dh] x3, [b, T]) on each device's rows and heads, split as the activations'
    logical constraints split them under the mesh and rules of the enclosing
    `sharding.activate` (XLA's SPMD partitioner does not split a Pallas call: it would
    gather the sharded activations around it); on the whole arrays without a mesh."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return fn(q, keys, values, segments)
    spec = sharding.logical_to_mesh_spec(P("batch", "length", "heads", "kv"),
                                         nn.get_logical_axis_rules(), q.shape, mesh)
    rows, _, heads, _ = tuple(spec) + (None,) * (4 - len(spec))
    spec = P(rows, None, heads, None)  # A kernel takes whole rows and whole head vectors.
    return jax.shard_map(fn, in_specs=(spec, spec, spec, P(rows, None)), out_specs=spec,
                         check_vma=False)(q, keys, values, segments)
