"""A frozen base stored quantized (QLoRA): int8 or NF4 codes with blockwise absmax scales.

`quantize_params(params, kind)` replaces every layer kernel `<t>_kernel` [L, *in, *out] of
the stacked tree by two leaves:

  `<t>_kernel_codes`  int8 [L, n] (kind "int8") or uint8 [L, n / 2] (kind "nf4": two 4-bit
                      codes a byte, low nibble first), n = the kernel's elements per layer;
  `<t>_kernel_scales` float32 [L, n / 64]: the absmax of each block of 64 consecutive
                      elements (bitsandbytes' blockwise layout, without double quantisation).

The forward dequantizes a layer's kernel on the fly in the compute dtype (`dequantize`:
code · absmax / 127 for int8, NF4_TABLE[code] · absmax for nf4), so the base costs
1 + 4/64 bytes (int8) or 0.5 + 4/64 bytes (nf4) per parameter instead of 2 or 4.
Embeddings, norms and biases stay as they are. Quantisation error per element: at most
absmax / 254 (int8: round to the nearest of 255 levels) or half the widest gap of the NF4
table times absmax (nf4).
"""
from typing import Any, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np

Params = Dict[str, Any]

KINDS = ("none", "int8", "nf4")
BLOCK = 64
CODES, SCALES = "_codes", "_scales"
# QLoRA's NormalFloat4 levels (Dettmers et al. 2023, bitsandbytes' NF4 table).
NF4_TABLE = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], np.float32)


def quantize(w: jax.Array, kind: str, lead: int = 1) -> Tuple[jax.Array, jax.Array]:
    """(codes, scales) of w [*lead, *kernel] (see the module docstring); float32 math."""
    lead_shape = w.shape[:lead]
    n = int(np.prod(w.shape[lead:]))
    if n % BLOCK:
        raise ValueError(f"quantize: {n} elements per layer is not a multiple of {BLOCK}")
    blocks = w.astype(jnp.float32).reshape(lead_shape + (n // BLOCK, BLOCK))
    absmax = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True)
    unit = blocks / jnp.where(absmax > 0, absmax, 1.0)
    if kind == "int8":
        codes = jnp.round(unit * 127).astype(jnp.int8).reshape(lead_shape + (n,))
    elif kind == "nf4":
        # The nearest level: how many midpoints between levels lie below (a binary search,
        # no [..., 16] temporary).
        mid = jnp.asarray((NF4_TABLE[1:] + NF4_TABLE[:-1]) / 2)
        idx = jnp.searchsorted(mid, unit.reshape(-1), side="left").reshape(unit.shape)
        pairs = idx.astype(jnp.uint8).reshape(lead_shape + (n // 2, 2))
        codes = pairs[..., 0] | (pairs[..., 1] << 4)
    else:
        raise ValueError(f"quantize: kind must be int8 or nf4, got {kind!r}")
    return codes, absmax[..., 0]


def dequantize(codes: jax.Array, scales: jax.Array, shape: Tuple[int, ...], dtype) -> jax.Array:
    """The kernel [*lead, *shape] in `dtype` from `quantize`'s codes [*lead, n or n/2] and
    scales [*lead, n/64] (int8 codes: kind int8; uint8: nf4)."""
    lead = codes.shape[:-1]
    if codes.dtype == jnp.uint8:
        low, high = codes & 0xF, codes >> 4
        idx = jnp.stack([low, high], axis=-1).reshape(lead + (-1,))
        unit = jnp.take(jnp.asarray(NF4_TABLE), idx.astype(jnp.int32))
    else:
        unit = codes.astype(jnp.float32) / 127.0
    blocks = unit.reshape(lead + (-1, BLOCK)) * scales[..., None]
    return blocks.reshape(lead + tuple(shape)).astype(dtype)


def quantize_params(params: Params, kind: str) -> Params:
    """`params` with every layer kernel (`layers.attn.*_kernel`, `layers.mlp.*_kernel`)
    stored quantized (`kind` "int8" / "nf4"; "none": unchanged)."""
    if kind not in KINDS:
        raise ValueError(f"model.lora.quantize_base must be one of {KINDS}, got {kind!r}")
    if kind == "none":
        return params
    layers = {}
    for name, module in params["layers"].items():
        if not isinstance(module, dict) or name not in ("attn", "mlp"):
            layers[name] = module
            continue
        out = {}
        for k, v in module.items():
            if k.endswith("_kernel"):
                out[k + CODES], out[k + SCALES] = quantize(v, kind)
            else:
                out[k] = v
        layers[name] = out
    return dict(params, layers=layers)


def is_quantized(params: Params) -> bool:
    return any(k.endswith(CODES) for m in params.get("layers", {}).values()
               if isinstance(m, dict) for k in m)


def dequantize_module(module: Params, shapes: Dict[str, Tuple[int, ...]], dtype) -> Params:
    """One module dict (leading dims as stored) with its quantized kernels dequantized into
    `<t>_kernel` in `dtype`; `shapes[t]`: one kernel's shape (no leading dims)."""
    out = {k: v for k, v in module.items() if not (k.endswith(CODES) or k.endswith(SCALES))}
    for k, codes in module.items():
        if k.endswith(CODES):
            name = k[:-len(CODES)]
            out[name] = dequantize(codes, module[name + SCALES], shapes[name[:-len("_kernel")]],
                                   dtype)
    return out


def logical_axes(module_axes: Params) -> Params:
    """Logical specs of a quantized module: codes and scales ("layers", "embed") (their
    flat axis is split like an embedding row where the rules split "embed")."""
    from jax.sharding import PartitionSpec as P
    out = {}
    for k, v in module_axes.items():
        if k.endswith("_kernel"):
            out[k + CODES] = out[k + SCALES] = P("layers", "embed")
        else:
            out[k] = v
    return out


def bytes_per_param(kind: str, param_bytes: int) -> float:
    """Storage bytes per base kernel parameter under `kind`."""
    return {"none": float(param_bytes), "int8": 1 + 4 / BLOCK, "nf4": 0.5 + 4 / BLOCK}[kind]

