"""Import and export Hugging Face checkpoints (Llama 3 / Qwen2 / Qwen3, safetensors).

    config, params = load_hf_checkpoint("/path/to/Qwen2.5-0.5B", dtype="bfloat16")
    save_hf_checkpoint(params, config, "/tmp/exported", dtype="bfloat16")

A Hugging Face directory holds `config.json` and either `model.safetensors` or
sharded files listed in `model.safetensors.index.json`. Both config styles are
read: published checkpoints (transformers 4) write `rope_theta` + `rope_scaling`,
transformers 5 writes a `rope_parameters` dict. Exports write the transformers-4
keys, which transformers 5 also reads.

Tensor layout. Hugging Face `nn.Linear` weights are [out, in]; ours are [in, ...]
with heads split out, and per-layer tensors stacked along a leading L axis:

    model.layers.{i}.self_attn.q_proj.weight [H*Dh, D]  <->  layers.attn.q_kernel [L, D, H, Dh]
    model.layers.{i}.self_attn.o_proj.weight [D, H*Dh]  <->  layers.attn.o_kernel [L, H, Dh, D]
    model.layers.{i}.mlp.down_proj.weight    [D, F]     <->  layers.mlp.down_kernel [L, F, D]
    lm_head.weight                            [V, D]     <->  lm_head [D, V]

Both use the rotate-half RoPE layout, so q/k need no permutation. Loaded
parameters are host numpy arrays; place them on devices with `jax.device_put`
(or the sharding helpers).
"""
import json
import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from rlvr_jax.models.config import ModelConfig

Params = Dict[str, Any]

_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}
# Reward models (`models.reward_model`): the same trunk with a `score` head.
REWARD_ARCHITECTURES = {
    "LlamaForSequenceClassification": "llama",
    "Qwen2ForSequenceClassification": "qwen2",
    "Qwen3ForSequenceClassification": "qwen3",
}
_MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
_HF_NAMES = {family: (arch, family) for arch, family in _ARCHITECTURES.items()}
# Defaults of the transformers config classes, for keys a config.json omits.
_DEFAULT_MAX_POSITIONS = {"llama": 2048, "qwen2": 32768, "qwen3": 32768}
_SINGLE_FILE = "model.safetensors"
_INDEX_FILE = "model.safetensors.index.json"
# Buffers some old checkpoints store; they carry no parameters.
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


# ----------------------------------------------------------------------------- config

def _family(cfg: Dict[str, Any]) -> str:
    archs = cfg.get("architectures") or []
    known = {**_ARCHITECTURES, **REWARD_ARCHITECTURES}
    for arch in archs:
        if arch in known:
            return known[arch]
    if archs:
        raise ValueError(f"unsupported architecture {archs}; supported: {sorted(known)}")
    model_type = cfg.get("model_type")
    if model_type in _MODEL_TYPES:
        return _MODEL_TYPES[model_type]
    raise ValueError(f"unsupported model_type {model_type!r} (no supported `architectures`); "
                     f"supported: {sorted(_MODEL_TYPES)}")


def _rope(cfg: Dict[str, Any]) -> Tuple[float, Optional[Tuple]]:
    """(rope_theta, rope_scaling tuple or None) from either config style."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and any(isinstance(v, dict) for v in params.values()):
        raise ValueError("per-layer-type rope_parameters are not supported")
    if params is not None:  # transformers 5: theta inside the dict.
        scaling = dict(params)
        theta = scaling.pop("rope_theta", cfg.get("rope_theta", 10000.0))
    else:  # transformers 4 / published checkpoints.
        theta = cfg.get("rope_theta", 10000.0)
        scaling = dict(cfg.get("rope_scaling") or {})
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if float(scaling.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))) != 1.0:
        raise ValueError("partial_rotary_factor != 1 is not supported")
    if rope_type in (None, "default"):
        return float(theta), None
    if rope_type != "llama3":
        raise ValueError(f"unsupported rope type {rope_type!r}; supported: 'default', 'llama3'")
    try:
        orig = scaling.get("original_max_position_embeddings", cfg.get("max_position_embeddings"))
        return float(theta), ("llama3", float(scaling["factor"]), float(scaling["low_freq_factor"]),
                              float(scaling["high_freq_factor"]), int(orig))
    except (KeyError, TypeError) as e:
        raise ValueError(f"llama3 rope scaling needs factor, low_freq_factor, high_freq_factor and "
                         f"original_max_position_embeddings; got {scaling}") from e


def _read_json(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path) as f:
        return json.load(f)


def config_from_hf(config: Union[Dict[str, Any], str, os.PathLike], *, dtype: str = "float32",
                   param_dtype: str = "float32") -> ModelConfig:
    """A `ModelConfig` from a Hugging Face config (dict, config.json path, or directory).

    Raises ValueError for architectures or options this model does not implement
    (sliding-window attention, o_proj/MLP biases, rope types other than default
    and llama3, activations other than SiLU).
    """
    if not isinstance(config, dict):
        path = os.fspath(config)
        config = _read_json(os.path.join(path, "config.json") if os.path.isdir(path) else path)
    cfg = config
    family = _family(cfg)
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"unsupported hidden_act {cfg['hidden_act']!r}; only 'silu'")
    if cfg.get("mlp_bias", False):
        raise ValueError("mlp_bias=True is not supported")
    if family in ("llama", "qwen3") and cfg.get("attention_bias", False):
        raise ValueError(f"attention_bias=True is not supported for {family} (o_proj bias)")
    if cfg.get("use_sliding_window", False):
        raise ValueError("sliding-window attention (use_sliding_window=True) is not supported")
    layer_types = cfg.get("layer_types") or []
    if any(t != "full_attention" for t in layer_types):
        raise ValueError(
            f"only full attention layers are supported, got {sorted(set(layer_types))}")
    rope_theta, rope_scaling = _rope(cfg)
    try:
        d_model, n_heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        head_dim = cfg.get("head_dim")
        if head_dim is None:  # Qwen3Config's own default is 128; the others derive it.
            head_dim = 128 if family == "qwen3" else d_model // n_heads
        return ModelConfig(
            family=family,
            vocab_size=int(cfg["vocab_size"]),
            d_model=d_model,
            n_layers=int(cfg["num_hidden_layers"]),
            n_heads=n_heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
            head_dim=int(head_dim),
            d_ff=int(cfg["intermediate_size"]),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            qkv_bias=family == "qwen2",
            qk_norm=family == "qwen3",
            tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            dtype=dtype,
            param_dtype=param_dtype,
            max_position_embeddings=int(cfg.get("max_position_embeddings",
                                                _DEFAULT_MAX_POSITIONS[family])),
        )
    except KeyError as e:
        raise ValueError(f"config is missing required key {e.args[0]!r}") from e


def config_to_hf(config: ModelConfig, *, dtype: str = "float32") -> Dict[str, Any]:
    """A transformers-4-style config dict (also read by transformers 5) for `config`."""
    expected = {"llama": (False, False), "qwen2": (True, False), "qwen3": (False, True)}
    if (config.qkv_bias, config.qk_norm) != expected[config.family]:
        raise ValueError(
            f"a {config.family} checkpoint needs qkv_bias={expected[config.family][0]} and "
            f"qk_norm={expected[config.family][1]}; got {config.qkv_bias}, {config.qk_norm}")
    arch, model_type = _HF_NAMES[config.family]
    scaling = None
    if config.rope_scaling is not None:
        _, factor, low, high, orig = config.rope_scaling
        scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low,
                   "high_freq_factor": high, "original_max_position_embeddings": orig}
    out = {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "intermediate_size": config.d_ff,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.norm_eps,
        "rope_theta": config.rope_theta,
        "rope_scaling": scaling,
        "tie_word_embeddings": config.tie_embeddings,
        "use_cache": True,
        "torch_dtype": dtype,
        "dtype": dtype,
    }
    if config.family in ("llama", "qwen3"):
        out["attention_bias"] = False
    if config.family == "llama":
        out["mlp_bias"] = False
    if config.family in ("qwen2", "qwen3"):
        out["use_sliding_window"] = False
    return out


# ----------------------------------------------------------------------------- tensor map

def _layer_specs(config: ModelConfig):
    """(our path under `layers`, HF suffix, HF shape, our per-layer shape, transposed)."""
    d, h, kv, dh, f = (config.d_model, config.n_heads, config.n_kv_heads, config.head_dim,
                       config.d_ff)
    specs = [
        (("input_norm", "scale"), "input_layernorm.weight", (d,), (d,), False),
        (("post_attn_norm", "scale"), "post_attention_layernorm.weight", (d,), (d,), False),
        (("attn", "q_kernel"), "self_attn.q_proj.weight", (h * dh, d), (d, h, dh), True),
        (("attn", "k_kernel"), "self_attn.k_proj.weight", (kv * dh, d), (d, kv, dh), True),
        (("attn", "v_kernel"), "self_attn.v_proj.weight", (kv * dh, d), (d, kv, dh), True),
        (("attn", "o_kernel"), "self_attn.o_proj.weight", (d, h * dh), (h, dh, d), True),
        (("mlp", "gate_kernel"), "mlp.gate_proj.weight", (f, d), (d, f), True),
        (("mlp", "up_kernel"), "mlp.up_proj.weight", (f, d), (d, f), True),
        (("mlp", "down_kernel"), "mlp.down_proj.weight", (d, f), (f, d), True),
    ]
    if config.qkv_bias:
        specs += [
            (("attn", "q_bias"), "self_attn.q_proj.bias", (h * dh,), (h, dh), False),
            (("attn", "k_bias"), "self_attn.k_proj.bias", (kv * dh,), (kv, dh), False),
            (("attn", "v_bias"), "self_attn.v_proj.bias", (kv * dh,), (kv, dh), False),
        ]
    if config.qk_norm:
        specs += [
            (("attn", "q_norm", "scale"), "self_attn.q_norm.weight", (dh,), (dh,), False),
            (("attn", "k_norm", "scale"), "self_attn.k_norm.weight", (dh,), (dh,), False),
        ]
    return specs


def _to_ours(w: np.ndarray, ours: Tuple[int, ...], transposed: bool) -> np.ndarray:
    return (w.T if transposed else w).reshape(ours)


def _to_hf(x: np.ndarray, hf: Tuple[int, ...], transposed: bool) -> np.ndarray:
    return x.reshape(hf[::-1]).T if transposed else x.reshape(hf)


def _set(tree: Dict[str, Any], path: Tuple[str, ...], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _get(tree: Dict[str, Any], path: Tuple[str, ...]):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            raise ValueError(f"params are missing {'.'.join(path)}")
        tree = tree[key]
    return np.asarray(tree)


class _Reader:
    """Lazily reads named tensors from one or more safetensors files."""

    def __init__(self, path: str):
        from safetensors import safe_open  # Imported here: only needed for checkpoints.
        self._open = safe_open
        single, index = os.path.join(path, _SINGLE_FILE), os.path.join(path, _INDEX_FILE)
        if os.path.isfile(index):
            weight_map = _read_json(index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise ValueError(f"{index} has no 'weight_map'")
            self.files = {name: os.path.join(path, file) for name, file in weight_map.items()}
            for file in sorted(set(self.files.values())):
                if not os.path.isfile(file):
                    raise FileNotFoundError(f"shard {file} listed in {index} does not exist")
        elif os.path.isfile(single):
            with safe_open(single, framework="numpy") as f:
                self.files = {name: single for name in f.keys()}
        else:
            raise FileNotFoundError(f"no {_SINGLE_FILE} or {_INDEX_FILE} in {path}")
        self._handles = {}

    def get(self, name: str) -> np.ndarray:
        file = self.files[name]
        if file not in self._handles:
            self._handles[file] = self._open(file, framework="numpy").__enter__()
        return self._handles[file].get_tensor(name)

    def get_slice(self, name: str):
        """A lazy view of tensor `name` (`safe_open(...).get_slice`): index it to read part."""
        file = self.files[name]
        if file not in self._handles:
            self._handles[file] = self._open(file, framework="numpy").__enter__()
        return self._handles[file].get_slice(name)

    def close(self):
        for handle in self._handles.values():
            handle.__exit__(None, None, None)
        self._handles.clear()


def params_from_hf(get_tensor, names, config: ModelConfig) -> Params:
    """Our params pytree from named HF tensors.

    Args:
      get_tensor: name -> numpy array.
      names: the set of tensor names available.
      config: the model's `ModelConfig`; params are cast to `config.param_dtype`.
    """
    names = set(names)
    pdt = config.storage_dtype
    used = set()

    def read(name, hf_shape):
        if name not in names:
            raise ValueError(f"checkpoint is missing tensor {name!r}")
        w = get_tensor(name)
        if tuple(w.shape) != tuple(hf_shape):
            raise ValueError(f"tensor {name!r} has shape {tuple(w.shape)}, expected "
                             f"{tuple(hf_shape)} for this config")
        used.add(name)
        return w

    v, d, n_layers = config.vocab_size, config.d_model, config.n_layers
    params: Params = {
        "embed": read("model.embed_tokens.weight", (v, d)).astype(pdt),
        "final_norm": {"scale": read("model.norm.weight", (d,)).astype(pdt)},
    }
    if not config.tie_embeddings:
        params["lm_head"] = np.ascontiguousarray(read("lm_head.weight", (v, d)).T.astype(pdt))
    elif "lm_head.weight" in names:
        used.add("lm_head.weight")  # Tied: a stored copy is redundant.
    for path, suffix, hf_shape, our_shape, transposed in _layer_specs(config):
        stacked = np.empty((n_layers,) + our_shape, pdt)
        for i in range(n_layers):
            w = read(f"model.layers.{i}.{suffix}", hf_shape)
            stacked[i] = _to_ours(w, our_shape, transposed).astype(pdt)
        _set(params, ("layers",) + path, stacked)
    unexpected = sorted(n for n in names - used if not n.endswith(_IGNORED_SUFFIXES))
    if unexpected:
        shown = ", ".join(unexpected[:8]) + (" ..." if len(unexpected) > 8 else "")
        raise ValueError(f"checkpoint has {len(unexpected)} tensors this {config.family} config "
                         f"does not use: {shown}")
    return params


def params_to_hf(params: Params, config: ModelConfig, *, dtype: str = "float32"
                 ) -> Dict[str, np.ndarray]:
    """Named HF tensors ({name: numpy array in `dtype`}) from our params pytree."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
    dt = np.dtype(dtype)
    out = {"model.embed_tokens.weight": _get(params, ("embed",)),
           "model.norm.weight": _get(params, ("final_norm", "scale"))}
    if not config.tie_embeddings:
        out["lm_head.weight"] = _get(params, ("lm_head",)).T
    for path, suffix, hf_shape, our_shape, transposed in _layer_specs(config):
        stacked = _get(params, ("layers",) + path)
        if stacked.shape != (config.n_layers,) + our_shape:
            raise ValueError(f"params layers.{'.'.join(path)} has shape {stacked.shape}, "
                             f"expected {(config.n_layers,) + our_shape}")
        for i in range(config.n_layers):
            out[f"model.layers.{i}.{suffix}"] = _to_hf(stacked[i], hf_shape, transposed)
    return {k: np.ascontiguousarray(w.astype(dt)) for k, w in out.items()}


# ----------------------------------------------------------------------------- files

def load_hf_checkpoint(path: Union[str, os.PathLike], *, dtype: str = "float32",
                       param_dtype: str = "float32") -> Tuple[ModelConfig, Params]:
    """Reads a local Hugging Face directory (config.json + safetensors, maybe sharded).

    Args:
      path: the directory.
      dtype: compute dtype of the returned config (e.g. "bfloat16").
      param_dtype: storage dtype of the returned parameters.

    Returns:
      (ModelConfig, params pytree of host numpy arrays).
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"not a directory: {path}")
    raw = _read_json(os.path.join(path, "config.json"))
    if set(raw.get("architectures") or ()) & set(REWARD_ARCHITECTURES):
        raise ValueError(f"{path} is a reward model ({raw['architectures'][0]}); load it with "
                         "rlvr_jax.models.reward_model.load_hf_reward_model")
    config = config_from_hf(raw, dtype=dtype, param_dtype=param_dtype)
    reader = _Reader(path)
    try:
        params = params_from_hf(reader.get, reader.files.keys(), config)
    finally:
        reader.close()
    return config, params


def save_hf_checkpoint(params: Params, config: ModelConfig, path: Union[str, os.PathLike], *,
                       dtype: str = "float32", max_shard_bytes: Optional[int] = None) -> None:
    """Writes `path/config.json` and safetensors that `transformers` loads.

    Args:
      params: our params pytree.
      config: its `ModelConfig`.
      path: output directory (created if needed).
      dtype: tensor dtype on disk: "float32", "bfloat16" or "float16".
      max_shard_bytes: if set and the tensors exceed it, write
        `model-0000k-of-0000n.safetensors` shards plus `model.safetensors.index.json`.
    """
    check_save_args(dtype, max_shard_bytes)
    hf_config = config_to_hf(config, dtype=dtype)
    write_hf_directory(path, hf_config, params_to_hf(params, config, dtype=dtype),
                       max_shard_bytes=max_shard_bytes)


def check_save_args(dtype: str, max_shard_bytes: Optional[int]) -> None:
    """Raises ValueError for an on-disk dtype or shard size an export cannot write."""
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"dtype must be float32, bfloat16 or float16, got {dtype!r}")
    if max_shard_bytes is not None and max_shard_bytes <= 0:
        raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")


def write_hf_directory(path: Union[str, os.PathLike], hf_config: Dict[str, Any],
                       tensors: Dict[str, np.ndarray], *,
                       max_shard_bytes: Optional[int] = None) -> None:
    """Writes `path/config.json` and the named tensors as safetensors (sharded with an index
    when they exceed `max_shard_bytes`), as ordinary files (`save_safetensors`)."""
    path = os.fspath(path)
    _write_tensors(path, hf_config, tensors, max_shard_bytes)


def save_safetensors(tensors: Dict[str, np.ndarray], path: str) -> None:
    """`safetensors.numpy.save_file` (metadata format "pt"), as an ordinary file: mode 0666
    less the umask (safetensors alone writes 0600, unreadable to a group's other users)."""
    from safetensors.numpy import save_file
    save_file(tensors, path, metadata={"format": "pt"})
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def _write_tensors(path: str, hf_config, tensors, max_shard_bytes) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=2, sort_keys=True)
    total = sum(w.nbytes for w in tensors.values())
    if max_shard_bytes is None or total <= max_shard_bytes:
        save_safetensors(tensors, os.path.join(path, _SINGLE_FILE))
        return
    shards, current, size = [], {}, 0
    for name, w in tensors.items():
        if current and size + w.nbytes > max_shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = w
        size += w.nbytes
    shards.append(current)
    weight_map = {}
    for k, shard in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_safetensors(shard, os.path.join(path, file))
        weight_map.update({name: file for name in shard})
    with open(os.path.join(path, _INDEX_FILE), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
