"""Import a Hugging Face checkpoint straight into sharded `jax.Array`s, slice by slice.

    params = load_hf_params_sharded(path, config, shardings)   # shardings: a params pytree

Each device's shard of each parameter is read from the safetensors files with
`safe_open(...).get_slice`: only the rows and columns it holds (for a per-layer tensor,
only its layers; for a tensor whose HF dimension our layout splits into heads, whole heads
along that dimension), so a process never holds more than its devices' shards plus one
tensor's slice in host memory. The values are exactly `hf.load_hf_checkpoint`'s (the same
layout conversion, `hf._layer_specs`, the same casts to `config.param_dtype`).
"""
import math
from typing import Any, Sequence, Tuple

import jax
import numpy as np

from rlvr_jax.models import hf
from rlvr_jax.models.config import ModelConfig


def _groups(dims: Sequence[int], ours: Sequence[int]) -> list:
    """Our dims grouped by the HF dim (of sizes `dims`, in our order) each comes from."""
    groups, i = [], 0
    for n in dims:
        start, size = i, 1
        while size < n or i == start:
            size, i = size * ours[i], i + 1
        if size != n:
            raise ValueError(f"our shape {tuple(ours)} does not split HF dims {tuple(dims)}")
        groups.append(list(range(start, i)))
    groups[-1] += list(range(i, len(ours)))  # Trailing size-1 dims.
    return groups


def _read(get_slice, name: str, hf_shape, ours, transposed: bool, index, dtype) -> np.ndarray:
    """Our `ours`-shaped tensor's block `index` (slices) of HF tensor `name`, read sliced."""
    dims = tuple(hf_shape[::-1]) if transposed else tuple(hf_shape)
    groups = _groups(dims, ours)
    spans, block, inner = [], [], []
    for g in groups:
        start, stop, _ = index[g[0]].indices(ours[g[0]])
        rest = math.prod(ours[j] for j in g[1:])
        spans.append(slice(start * rest, stop * rest))
        block += [stop - start] + [ours[j] for j in g[1:]]
        inner += [slice(None)] + [index[j] for j in g[1:]]
    w = get_slice(name)[tuple(spans[::-1] if transposed else spans)]
    w = (w.T if transposed else w).reshape(block)
    return np.ascontiguousarray(w[tuple(inner)]).astype(dtype)


def _leaf(sharding, shape, fn) -> jax.Array:
    return jax.make_array_from_callback(
        tuple(shape), sharding, lambda index: fn(tuple(index) + (slice(None),) * (
            len(shape) - len(index))))


def _check(reader, config: ModelConfig, extra=None) -> None:
    """ValueError for a missing, misshapen or unexpected tensor (before anything is read).
    extra: {name: shape} of tensors beside the decoder's (a reward model's score head)."""
    v, d = config.vocab_size, config.d_model
    need = {"model.embed_tokens.weight": (v, d), "model.norm.weight": (d,), **(extra or {})}
    if not config.tie_embeddings:
        need["lm_head.weight"] = (v, d)
    for _, suffix, hf_shape, _, _ in hf._layer_specs(config):
        for i in range(config.n_layers):
            need[f"model.layers.{i}.{suffix}"] = hf_shape
    for name, shape in need.items():
        if name not in reader.files:
            raise ValueError(f"checkpoint is missing tensor {name!r}")
        got = tuple(reader.get_slice(name).get_shape())
        if got != tuple(shape):
            raise ValueError(f"tensor {name!r} has shape {got}, expected {tuple(shape)} for "
                             "this config")
    unexpected = sorted(n for n in set(reader.files) - set(need) - {"lm_head.weight"}
                        if not n.endswith(hf._IGNORED_SUFFIXES))
    if unexpected:
        raise ValueError(f"checkpoint has {len(unexpected)} tensors this {config.family} "
                         f"config does not use: {', '.join(unexpected[:8])}")


def load_hf_params_sharded(path: str, config: ModelConfig, shardings: Any) -> Any:
    """The parameters of the HF directory `path` as `jax.Array`s placed by `shardings` (a
    pytree of `jax.sharding.Sharding`s shaped like `models.init_params(config, ...)`),
    each process reading only its devices' slices. Raises ValueError like
    `hf.params_from_hf` for a checkpoint that does not fit `config`."""
    reader = hf._Reader(path)
    try:
        _check(reader, config)
        return _build(reader.get_slice, config, shardings)
    finally:
        reader.close()


def load_hf_reward_params_sharded(path: str, config: ModelConfig, num_labels: int,
                                  shardings: Any) -> Any:
    """A reward model's {"trunk", "score": {"kernel": [D, K]}} (`models.reward_model`) of
    the `*ForSequenceClassification` directory `path` as `jax.Array`s placed by
    `shardings`, each process reading only its devices' slices; `config` and `num_labels`
    from `reward_model.read_reward_config`. Values exactly `load_hf_reward_model`'s."""
    trunk_config, d = config.replace(tie_embeddings=True), config.d_model
    reader = hf._Reader(path)
    try:
        _check(reader, trunk_config, extra={"score.weight": (num_labels, d)})
        kernel = _leaf(shardings["score"]["kernel"], (d, num_labels), lambda index: _read(
            reader.get_slice, "score.weight", (num_labels, d), (d, num_labels), True, index,
            config.storage_dtype))
        return {"trunk": _build(reader.get_slice, trunk_config, shardings["trunk"]),
                "score": {"kernel": kernel}}
    finally:
        reader.close()


def _build(get_slice, config: ModelConfig, shardings: Any) -> Any:
    v, d, n_layers, pdt = config.vocab_size, config.d_model, config.n_layers, \
        config.storage_dtype

    def plain(name, hf_shape, ours, transposed):
        return lambda index: _read(get_slice, name, hf_shape, ours, transposed, index, pdt)

    params = {"embed": _leaf(shardings["embed"], (v, d),
                             plain("model.embed_tokens.weight", (v, d), (v, d), False)),
              "final_norm": {"scale": _leaf(shardings["final_norm"]["scale"], (d,),
                                            plain("model.norm.weight", (d,), (d,), False))}}
    if not config.tie_embeddings:
        params["lm_head"] = _leaf(shardings["lm_head"], (d, v),
                                  plain("lm_head.weight", (v, d), (d, v), True))
    for path, suffix, hf_shape, ours, transposed in hf._layer_specs(config):
        def stacked(index, suffix=suffix, hf_shape=hf_shape, ours=ours, transposed=transposed):
            layers = range(*index[0].indices(n_layers))
            return np.stack([_read(get_slice, f"model.layers.{i}.{suffix}", hf_shape, ours,
                                   transposed, index[1:], pdt) for i in layers])
        target = shardings["layers"]
        for key in path:
            target = target[key]
        hf._set(params, ("layers",) + path,
                _leaf(target, (n_layers,) + tuple(ours), stacked))
    return params


def shapes(config: ModelConfig) -> Tuple:
    """`jax.ShapeDtypeStruct`s of `config`'s parameters (for their shardings)."""
    from rlvr_jax.models import transformer
    return jax.eval_shape(lambda: transformer.init_params(config, jax.random.PRNGKey(0)))
