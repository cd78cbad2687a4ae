"""LoRA adapters as pure functions over the parameter pytree (PEFT's conventions).

An adapter of a projection `y = x · W` (W: in-dims × out-dims) is a pair of leaves beside the
kernel in the stacked parameter tree, `<name>_lora_a` [L, *in, r] and `<name>_lora_b`
[L, r, *out], and the projection becomes

    y = x · W + (alpha / r) · (x · A) · B        (PEFT: lora_alpha / r, no dropout)

The forward applies an adapter wherever its leaves are present (`transformer.py`,
`decoding.py`): the same `ModelConfig` runs the base (adapters detached: the reference
policy, "adapters off") and the policy (adapters attached). `init_adapters` draws A as PEFT
does (kaiming-uniform, a = √5: U(±1/√fan_in)) and B = 0, so a fresh adapter changes nothing.

    adapters = init_adapters(config, rng)          # {"layers": {"attn": {...}, "mlp": {...}}}
    params = attach(base, adapters)                # one tree; forward(params, ...) as usual
    adapters, base = split(params)                 # trainable / frozen
    merged = merge(params, config)                 # W + (alpha/r)·A·B, adapters gone

Targets: q, k, v, o (attention) and gate, up, down (MLP); their Hugging Face modules are
`self_attn.{q,k,v,o}_proj` and `mlp.{gate,up,down}_proj`.
"""
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from rlvr_jax.models.config import ModelConfig

Params = Dict[str, Any]

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
MODULE = {"q": "attn", "k": "attn", "v": "attn", "o": "attn",
          "gate": "mlp", "up": "mlp", "down": "mlp"}
HF_MODULE = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
             "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
             "down": "mlp.down_proj"}
ADAPTER_A, ADAPTER_B = "_lora_a", "_lora_b"  # Leaf-name suffixes of A and B.


def parse_targets(text: str) -> Tuple[str, ...]:
    """("q", "v", ...) from "q,v" (in `TARGETS` order; "" or "all": all seven)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or names == ["all"]:
        return TARGETS
    bad = [t for t in names if t not in TARGETS]
    if bad:
        raise ValueError(f"LoRA targets must be from {','.join(TARGETS)}; got {bad}")
    return tuple(t for t in TARGETS if t in names)


def scale(config: ModelConfig) -> float:
    """alpha / r of `config` (PEFT's `scaling`)."""
    return config.lora_alpha / config.lora_rank


def io_shapes(config: ModelConfig, target: str) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """(in-dims, out-dims) of the kernel of `target` (one layer)."""
    d, f, dh = config.d_model, config.d_ff, config.head_dim
    return {"q": ((d,), (config.n_heads, dh)), "k": ((d,), (config.n_kv_heads, dh)),
            "v": ((d,), (config.n_kv_heads, dh)), "o": ((config.n_heads, dh), (d,)),
            "gate": ((d,), (f,)), "up": ((d,), (f,)), "down": ((f,), (d,))}[target]


_IO_AXES = {"q": (("embed",), ("heads", "kv")), "k": (("embed",), ("kv_heads", "kv")),
            "v": (("embed",), ("kv_heads", "kv")), "o": (("heads", "kv"), ("embed",)),
            "gate": (("embed",), ("mlp",)), "up": (("embed",), ("mlp",)),
            "down": (("mlp",), ("embed",))}


def tree_of(config: ModelConfig, leaf) -> Params:
    out: Params = {}
    for t in config.lora_targets:
        a, b = leaf(t)
        out.setdefault(MODULE[t], {}).update({t + ADAPTER_A: a, t + ADAPTER_B: b})
    return {"layers": out}


def init_adapters(config: ModelConfig, rng: jax.Array) -> Params:
    """Fresh adapters of `config.lora_targets` (rank `config.lora_rank`), in the storage
    dtype: A [L, *in, r] ~ U(±1/√fan_in) (PEFT's kaiming-uniform, a = √5), B [L, r, *out] = 0."""
    if not config.lora_rank:
        raise ValueError("init_adapters needs config.lora_rank > 0")
    keys = dict(zip(config.lora_targets, jax.random.split(rng, len(config.lora_targets))))
    r, n, dtype = config.lora_rank, config.n_layers, config.storage_dtype

    def leaf(t):
        ins, outs = io_shapes(config, t)
        fan_in = 1
        for s in ins:
            fan_in *= s
        bound = fan_in ** -0.5
        a = jax.random.uniform(keys[t], (n,) + ins + (r,), jnp.float32, -bound, bound)
        return a.astype(dtype), jnp.zeros((n, r) + outs, dtype)
    return tree_of(config, leaf)


def logical_axes(config: ModelConfig) -> Params:
    """`PartitionSpec`s of the adapters' logical axes: A ("layers", *in, "lora"), B
    ("layers", "lora", *out). "lora" (the rank) has no rule, so it is never split; the
    in/out dims follow their kernel's (e.g. "embed" over fsdp)."""
    def leaf(t):
        ins, outs = _IO_AXES[t]
        return P("layers", *ins, "lora"), P("layers", "lora", *outs)
    return tree_of(config, leaf)


def _partition(tree: Params, keep) -> Params:
    """The sub-dict of `tree` whose leaves' names satisfy `keep(name)` (empty dicts pruned)."""
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            sub = _partition(v, keep)
            if sub:
                out[k] = sub
        elif keep(k):
            out[k] = v
    return out


def _adapter_name(name: str) -> bool:
    return name.endswith(ADAPTER_A) or name.endswith(ADAPTER_B)


def split(params: Params) -> Tuple[Params, Params]:
    """(adapters, base) of a parameter tree: adapters {} when it has none."""
    return (_partition(params, _adapter_name),
            _partition(params, lambda k: not _adapter_name(k)))


def attach(base: Params, adapters: Params) -> Params:
    """One tree: `base` with the leaves of `adapters` added (nested dicts merged)."""
    out = dict(base)
    for k, v in adapters.items():
        out[k] = attach(out.get(k, {}), v) if isinstance(v, dict) else v
    return out


def has_adapters(params: Optional[Params]) -> bool:
    return bool(params) and bool(split(params)[0])


def base_of(params: Params) -> Params:
    """`params` with the adapters off (detached): the frozen base, no copy."""
    return split(params)[1]


def delta(x: jax.Array, a: jax.Array, b: jax.Array, s: float) -> jax.Array:
    """s · (x · A) · B in x's dtype: x [..., *in], a [*in, r], b [r, *out] -> [..., *out]."""
    n_in = a.ndim - 1
    h = jnp.tensordot(x, a.astype(x.dtype), axes=n_in)
    return (s * jnp.tensordot(h, b.astype(x.dtype), axes=1)).astype(x.dtype)


def merge_module(module: Params, s: float, dtype) -> Params:
    """One module's dict (kernels with any leading (layer) dims) with every adapter folded in:
    `<t>_kernel` = W + s·A·B computed in float32 and cast to `dtype`; adapter leaves dropped.
    Kernels without an adapter are left as they are."""
    out = {k: v for k, v in module.items() if not _adapter_name(k)}
    for k in module:
        if not k.endswith(ADAPTER_A):
            continue
        t = k[:-len(ADAPTER_A)]
        a, b = module[t + ADAPTER_A].astype(jnp.float32), module[t + ADAPTER_B].astype(jnp.float32)
        lead = a.ndim + b.ndim - module[t + "_kernel"].ndim - 2  # W [*lead, *in, *out].
        ab = _batched(lambda a_, b_: jnp.tensordot(a_, b_, axes=1), lead)(a, b)
        w = out[t + "_kernel"]
        out[t + "_kernel"] = (w.astype(jnp.float32) + s * ab).astype(dtype)
    return out


def _batched(fn, lead: int):
    for _ in range(lead):
        fn = jax.vmap(fn)
    return fn


def merge(params: Params, config: ModelConfig, dtype=None) -> Params:
    """`params` with every adapter folded into its kernel (W + (alpha/r)·A·B, float32 math)
    and stored in `dtype` (default the kernel's own): the merged model, adapters gone."""
    if not has_adapters(params):
        return params
    s = scale(config)
    layers = {}
    for name, module in params["layers"].items():
        if isinstance(module, dict) and any(_adapter_name(k) for k in module):
            kdt = dtype or next(v.dtype for k, v in module.items() if k.endswith("_kernel"))
            layers[name] = merge_module(module, s, kdt)
        else:
            layers[name] = module
    return dict(params, layers=layers)


def specs_like(base_specs: Params, params: Params, config: ModelConfig) -> Params:
    """The logical specs of `params` (a policy tree, or a part of one such as the adapters
    alone): `base_specs` with a quantized base's leaves (`models.quant`) and the adapters'
    axes where `params` has them, pruned to the keys of `params`."""
    from rlvr_jax.models import quant
    specs = base_specs
    if quant.is_quantized(params):
        specs = dict(specs, layers={k: quant.logical_axes(v) if k in ("attn", "mlp") else v
                                    for k, v in specs["layers"].items()})
    if config.lora_rank:
        specs = attach(specs, logical_axes(config))
    return _prune_like(specs, params)


def _prune_like(specs: Params, tree: Params) -> Params:
    return {k: _prune_like(specs[k], v) if isinstance(v, dict) else specs[k]
            for k, v in tree.items()}


def num_params(config: ModelConfig) -> int:
    """Adapter parameters of `config` (all layers)."""
    total = 0
    for t in config.lora_targets:
        ins, outs = io_shapes(config, t)
        n_in, n_out = 1, 1
        for s in ins:
            n_in *= s
        for s in outs:
            n_out *= s
        total += config.lora_rank * (n_in + n_out)
    return total * config.n_layers


def targets_of(adapters: Params) -> Tuple[str, ...]:
    """The targets an adapter tree holds, in `TARGETS` order."""
    names = {k[:-len(ADAPTER_A)] for module in adapters.get("layers", {}).values()
             for k in module if k.endswith(ADAPTER_A)}
    return tuple(t for t in TARGETS if t in names)

