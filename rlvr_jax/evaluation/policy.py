"""A policy to evaluate, outside a training run (`scripts/evaluate.py`): a Hugging Face
directory, an orbax params directory or a randomly initialised preset.

    model_config, params = load_policy(preset="tiny", tokenizer=tok)

A training run's checkpoint is read by `rlvr_jax.train.checkpoint.load_run` (training code;
this room does not import it).
"""
import json
import os

import jax

from rlvr_jax import models


def load_params_dir(path: str):
    """(ModelConfig, params) from a directory written by `scripts/convert_checkpoint.py
    hf-to-orbax`: `params/` (orbax StandardCheckpointer) and `model_config.json`."""
    import orbax.checkpoint as ocp
    path = os.path.abspath(path)
    config_path = os.path.join(path, "model_config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found (expected a directory written by "
                                "scripts/convert_checkpoint.py hf-to-orbax)")
    with open(config_path) as f:
        fields = json.load(f)
    if fields.get("rope_scaling") is not None:
        fields["rope_scaling"] = tuple(fields["rope_scaling"])
    params = ocp.StandardCheckpointer().restore(os.path.join(path, "params"))
    return models.ModelConfig(**fields), params


def load_policy(*, tokenizer, hf_dir: str = "", params_dir: str = "", preset: str = "",
                dtype: str = "float32", seed: int = 0):
    """(ModelConfig, params) from exactly one of an HF directory, an orbax params directory
    or a preset (randomly initialised with `seed`; `tiny` takes the tokenizer's vocabulary)."""
    if sum(map(bool, (hf_dir, params_dir, preset))) != 1:
        raise ValueError("give exactly one of hf_dir, params_dir, preset")
    if hf_dir:
        from rlvr_jax.models import hf
        return hf.load_hf_checkpoint(hf_dir, dtype=dtype)
    if params_dir:
        config, params = load_params_dir(params_dir)
        return config.replace(dtype=dtype), params
    overrides = {"dtype": dtype}
    if preset == "tiny":
        overrides["vocab_size"] = tokenizer.vocab_size
    config = models.presets.get(preset, **overrides)
    params = models.init_params(config, jax.random.PRNGKey(seed))
    if config.vocab_size < tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {config.vocab_size} is smaller than the "
                         f"tokenizer's {tokenizer.vocab_size}")
    return config, params
