"""Reward models: Hugging Face `*ForSequenceClassification` checkpoints (Llama 3, Qwen2, Qwen3).

    config, params = load_hf_reward_model("/path/to/Skywork-Reward-...")   # host arrays
    params = hf_slices.load_hf_reward_params_sharded(path, config, k, shardings)  # sharded
    scores = reward_forward(params, tokens, attention_mask, config=config)  # [B, K] float32
    save_hf_reward_model(params, config, "/tmp/rm", pad_token_id=tok.pad_id)

A reward model is the policy's decoder trunk (no LM head) with a linear `score` head
without bias; the score of a sequence is the head applied to the final-norm hidden state of
its last token. Parameters: {"trunk": transformer params without "lm_head",
"score": {"kernel": [D, K]}} (K = num_labels, 1 for a scalar reward model), like
`models.value`'s {"trunk", "value_head"}.

    score.weight [K, D]  <->  score.kernel [D, K]     (the trunk: see `models.hf`)

Which token is pooled. transformers takes the rightmost token whose id is not
`config.pad_token_id` (any padding side); we take the rightmost token whose attention mask
is 1. The two agree whenever the pad id does not occur among the real tokens. They differ
when it does, most often when a tokenizer's pad token is its EOS and the scored text ends
with that EOS: transformers then scores the token before it, we score the EOS itself.
"""
import functools
import os
from typing import Any, Dict, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax.models import hf, transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.models.value import trunk_hidden, trunk_logical_axes

Params = Dict[str, Any]
_SCORE = "score.weight"
_ARCH = {family: arch for arch, family in hf.REWARD_ARCHITECTURES.items()}


def init_reward_params(config: ModelConfig, rng: jax.Array, *, num_labels: int = 1,
                       trunk_params: Optional[Params] = None) -> Params:
    """Reward-model parameters {"trunk", "score": {"kernel": [D, num_labels]}}.

    With `trunk_params` (e.g. a policy's parameters) the trunk starts as a copy of them (the
    LM head dropped); the head is normal(0, 0.02), as transformers initialises it.
    """
    trunk_rng, head_rng = jax.random.split(rng)
    trunk = (trunk_params if trunk_params is not None
             else transformer.init_params(config.replace(tie_embeddings=True), trunk_rng))
    trunk = jax.tree.map(jnp.array, {k: v for k, v in trunk.items() if k != "lm_head"})
    kernel = 0.02 * jax.random.normal(head_rng, (config.d_model, num_labels), jnp.float32)
    return {"trunk": trunk, "score": {"kernel": kernel.astype(config.storage_dtype)}}


def last_token_index(attention_mask: jax.Array) -> jax.Array:
    """[B] int32 column of the rightmost token with mask 1 in each row of [B, T] (0 if none)."""
    cols = jnp.arange(attention_mask.shape[1], dtype=jnp.int32)[None, :]
    return jnp.max(jnp.where(attention_mask != 0, cols, 0), axis=1)


def reward_forward(params: Params, tokens: jax.Array, attention_mask: jax.Array, *,
                   config: ModelConfig) -> jax.Array:
    """Scores [B, K] float32 of sequences tokens [B, T] (int32) under attention_mask [B, T].

    Any padding (left, right, or inside, e.g. a left-padded prompt followed by a
    right-padded completion) is excluded by the mask and does not advance RoPE positions;
    the score is the head applied to the last real token's hidden state.
    """
    hidden = trunk_hidden(params["trunk"], tokens, attention_mask, config=config)
    last = last_token_index(attention_mask)
    pooled = jnp.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]  # [B, D]
    return jnp.einsum("bd,dk->bk", pooled.astype(jnp.float32),
                      params["score"]["kernel"].astype(jnp.float32))


def token_scores(params: Params, tokens: jax.Array, attention_mask: jax.Array, *,
                 config: ModelConfig) -> jax.Array:
    """Per-position scores [B, T, K] float32: the `score` head on every position's hidden
    state (a process reward model reads the positions that end a step; `reward_forward`
    is this at the last real token). Padding as in `reward_forward`."""
    hidden = trunk_hidden(params["trunk"], tokens, attention_mask, config=config)
    return jnp.einsum("btd,dk->btk", hidden.astype(jnp.float32),
                      params["score"]["kernel"].astype(jnp.float32))


def reward_logical_axes(config: ModelConfig) -> Params:
    """Logical axis names of the reward-model parameters (for `rlvr_jax.sharding`)."""
    from jax.sharding import PartitionSpec as P
    return {"trunk": trunk_logical_axes(config), "score": {"kernel": P("embed", None)}}


def num_labels(params: Params) -> int:
    """K, the number of scores per sequence."""
    return int(np.shape(params["score"]["kernel"])[1])


# ----------------------------------------------------------------------------- files

def read_reward_config(path: Union[str, os.PathLike], *, dtype: str = "float32",
                       param_dtype: str = "float32") -> Tuple[ModelConfig, int]:
    """(ModelConfig of the trunk, K = num_labels) of a local `*ForSequenceClassification`
    directory, from its config.json and the header of its score tensor (no weight is read).
    Raises like `load_hf_reward_model`."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"not a directory: {path}")
    raw = hf._read_json(os.path.join(path, "config.json"))
    archs = raw.get("architectures") or []
    if not set(archs) & set(hf.REWARD_ARCHITECTURES):
        raise ValueError(f"{path} is not a reward model: architectures {archs}; supported: "
                         f"{sorted(hf.REWARD_ARCHITECTURES)}")
    config = hf.config_from_hf(raw, dtype=dtype, param_dtype=param_dtype)
    reader = hf._Reader(path)
    try:
        if _SCORE not in reader.files:
            raise ValueError(f"checkpoint is missing tensor {_SCORE!r}")
        shape = tuple(reader.get_slice(_SCORE).get_shape())
    finally:
        reader.close()
    if len(shape) != 2 or shape[1] != config.d_model:
        raise ValueError(f"tensor {_SCORE!r} has shape {shape}, expected "
                         f"(num_labels, {config.d_model})")
    labels = raw.get("id2label")
    if labels and len(labels) != shape[0]:
        raise ValueError(f"config.json has {len(labels)} labels but {_SCORE!r} scores "
                         f"{shape[0]}")
    return config, shape[0]


def load_hf_reward_model(path: Union[str, os.PathLike], *, dtype: str = "float32",
                         param_dtype: str = "float32") -> Tuple[ModelConfig, Params]:
    """Reads a local `*ForSequenceClassification` directory (config.json + safetensors)
    whole, on the host (`hf_slices.load_hf_reward_params_sharded` reads it sliced).

    Args:
      path: the directory (single or sharded safetensors).
      dtype: compute dtype of the returned config; param_dtype: of the parameters.

    Returns:
      (ModelConfig of the trunk, {"trunk", "score": {"kernel": [D, K]}} host numpy arrays).
    """
    config, _ = read_reward_config(path, dtype=dtype, param_dtype=param_dtype)
    reader = hf._Reader(os.fspath(path))
    try:
        score = reader.get(_SCORE)
        names = set(reader.files) - {_SCORE}
        trunk = hf.params_from_hf(reader.get, names, config.replace(tie_embeddings=True))
    finally:
        reader.close()
    kernel = np.ascontiguousarray(score.T.astype(config.storage_dtype))
    return config, {"trunk": trunk, "score": {"kernel": kernel}}


def reward_param_shapes(config: ModelConfig, num_labels: int) -> Params:
    """`jax.ShapeDtypeStruct`s of `init_reward_params(config, ..., num_labels=num_labels)`."""
    return jax.eval_shape(lambda: init_reward_params(config, jax.random.PRNGKey(0),
                                                     num_labels=num_labels))


def reward_config_to_hf(config: ModelConfig, *, num_labels: int = 1,
                        pad_token_id: Optional[int] = None, dtype: str = "float32"
                        ) -> Dict[str, Any]:
    """The config.json dict of a `*ForSequenceClassification` model of `config`'s trunk."""
    out = hf.config_to_hf(config, dtype=dtype)
    out["architectures"] = [_ARCH[config.family]]
    out["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
    out["label2id"] = {f"LABEL_{i}": i for i in range(num_labels)}
    if pad_token_id is not None:  # transformers needs it to score batches of > 1 row.
        out["pad_token_id"] = int(pad_token_id)
    return out


def save_hf_reward_model(params: Params, config: ModelConfig, path: Union[str, os.PathLike], *,
                         pad_token_id: Optional[int] = None, dtype: str = "float32",
                         max_shard_bytes: Optional[int] = None) -> None:
    """Writes a directory that `transformers.AutoModelForSequenceClassification` loads.

    Args:
      params: {"trunk", "score": {"kernel": [D, K]}}.
      config: the trunk's `ModelConfig`.
      path: output directory (created if needed).
      pad_token_id: written to config.json (transformers pools by it; needed for batches).
      dtype: "float32", "bfloat16" or "float16" on disk.
      max_shard_bytes: shard the safetensors above this size (see `hf.save_hf_checkpoint`).
    """
    hf.check_save_args(dtype, max_shard_bytes)
    kernel = np.asarray(params["score"]["kernel"])
    if kernel.ndim != 2 or kernel.shape[0] != config.d_model:
        raise ValueError(f"params score.kernel has shape {kernel.shape}, expected "
                         f"({config.d_model}, num_labels)")
    trunk_config = config.replace(tie_embeddings=True)
    tensors = hf.params_to_hf(params["trunk"], trunk_config, dtype=dtype)
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
    tensors[_SCORE] = np.ascontiguousarray(kernel.T.astype(np.dtype(dtype)))
    hf_config = reward_config_to_hf(config, num_labels=kernel.shape[1],
                                    pad_token_id=pad_token_id, dtype=dtype)
    hf.write_hf_directory(path, hf_config, tensors, max_shard_bytes=max_shard_bytes)


@functools.partial(jax.jit, static_argnames=("config",))
def jit_reward_forward(params: Params, tokens: jax.Array, attention_mask: jax.Array, *,
                       config: ModelConfig) -> jax.Array:
    """`reward_forward` jitted: scores [B, K] float32 (a convenience for scripts and tests)."""
    return reward_forward(params, tokens, attention_mask, config=config)
