"""A frozen language model read from a path: a generative judge (`train/judges.py`) or a
distillation teacher (`train/distill.py`).

    config = lm_config(path, vocab_size, dtype="float32", param_dtype="float32", what="...")
    params = lm_params(path, config, placer)   # born sharded like the policy's

`path` is a `scripts/train.py` run directory (its config.json and newest intact checkpoint)
or a local Hugging Face `*ForCausalLM` directory. The model must embed the policy
tokenizer's ids (it reads the sampled tokens as they are); another size is fine. Parameters
are read born sharded by the run's `Placer` (each device reads its own slices), except a
LoRA run's, which are read whole (`checkpoint.load_run` attaches its adapters to its base)
and then placed.
"""
import json
import os
from types import SimpleNamespace

import jax
import ml_collections

from rlvr_jax import sharding
from rlvr_jax.models import hf, hf_slices, lora, transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.train import build
from rlvr_jax.train.checkpoint import Checkpointer, checked_step, load_run


def is_run_dir(path: str) -> bool:
    """True when `path` holds a training run (config.json and checkpoints/)."""
    return os.path.isdir(os.path.join(path, "checkpoints"))


def lm_config(path: str, vocab_size: int, *, dtype: str, param_dtype: str,
              what: str = "the model") -> ModelConfig:
    """The `ModelConfig` of the LM at `path` (its config.json only) in `dtype` /
    `param_dtype`. Raises FileNotFoundError / ValueError (one line, naming `what`) for no
    config.json, a reward model, or a model embedding fewer than `vocab_size` ids."""
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        raise FileNotFoundError(f"{config_file} not found (a scripts/train.py run directory or "
                                "a local Hugging Face *ForCausalLM directory)")
    with open(config_file) as f:
        raw = json.load(f)
    if is_run_dir(path):
        tokenizer = SimpleNamespace(vocab_size=vocab_size)
        config = build.build_model_config(ml_collections.ConfigDict(raw), tokenizer)
        config = config.replace(dtype=dtype, param_dtype=param_dtype)
    elif set(raw.get("architectures") or ()) & set(hf.REWARD_ARCHITECTURES):
        raise ValueError(f"{path} is a reward model ({raw['architectures'][0]}), not an LM: "
                         "use reward.components=reward_model")
    else:
        config = hf.config_from_hf(raw, dtype=dtype, param_dtype=param_dtype)
    if config.vocab_size < vocab_size:
        raise ValueError(f"{what} at {path} embeds {config.vocab_size} ids but the tokenizer "
                         f"has {vocab_size}: it must share the policy's tokenizer")
    return config


def lm_params(path: str, config: ModelConfig, placer):
    """The frozen parameters of `lm_config(path, ...)`'s model, placed by `placer` (the
    policy's layout rules): born sharded, or, for a LoRA run, read whole then placed."""
    if config.lora_rank:
        _, params = load_run(path, tokenizer=SimpleNamespace(vocab_size=config.vocab_size))
        if placer.mesh.size == 1:
            return jax.tree.map(placer.replicated, params)
        specs = lora.specs_like(transformer.param_logical_axes(config), params, config)
        return sharding.shard_params(params, specs, placer.mesh, placer.rules)
    shapes = hf_slices.shapes(config)
    placed = placer.shardings(shapes, transformer.param_logical_axes(config))
    if not is_run_dir(path):
        return hf_slices.load_hf_params_sharded(path, config, placed)
    directory = os.path.join(path, "checkpoints")
    abstract = jax.tree.map(lambda s, p: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=p),
                            shapes, placed)
    ckpt = Checkpointer(directory)
    try:
        return ckpt.restore_params(checked_step(directory), abstract)
    finally:
        ckpt.close()
