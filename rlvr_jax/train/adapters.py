"""RL through LoRA adapters: the config's `model.lora.*`, the adapters attached for RL, the
trainable / frozen split the optimizer sees, and the base saved once beside the checkpoints.

A LoRA run (`model.lora.rank` > 0) trains the full weights in the warm-up (`sft.steps` > 0),
then attaches adapters (fresh, PEFT's init, or `model.lora.init_from`) to that base, stores
the base quantized if asked (`model.lora.quantize_base`), and trains only the adapters in RL:
the optimizer state holds only theirs (`state.split_trainable`) and the reference policy is
the base with the adapters off (`state.reference_of`), never a copy.

Checkpoints hold the adapters only. The base is written once, to `<workdir>/lora_base/`,
when the run created it (a fresh init) or trained it (a warm-up); a base that is an HF
checkpoint the run never changed is recorded by path and hash instead
(`<workdir>/lora_base.json`), checked again on resume and export.
"""
import hashlib
import json
import os
from typing import Any, Dict

import jax

from rlvr_jax.models import lora, peft_format, quant
from rlvr_jax.train.errors import ConfigError, user_input

BASE_DIR, BASE_JSON = "lora_base", "lora_base.json"


def lora_fields(config) -> Dict[str, Any]:
    """The ModelConfig fields of `config.model.lora` (none when absent: older configs)."""
    c = config.model.get("lora")
    if c is None or not c.get("rank", 0):
        return {}
    with user_input("model.lora.targets"):
        targets = lora.parse_targets(c.get("targets", ""))
    if c.rank < 0:
        raise ConfigError(f"model.lora.rank: must be >= 0, got {c.rank}")
    if c.get("quantize_base", "none") not in quant.KINDS:
        raise ConfigError(f"model.lora.quantize_base: one of {quant.KINDS}, got "
                          f"{c.quantize_base!r}")
    return {"lora_rank": int(c.rank), "lora_alpha": float(c.get("alpha", 0.0) or 2 * c.rank),
            "lora_targets": targets}


def enabled(config) -> bool:
    return bool(lora_fields(config))


def attach_for_rl(config, model_config, params, placer, rng):
    """`params` (the warmed-up base) with adapters attached and the base quantized as
    `config.model.lora` asks, placed; `params` unchanged without LoRA."""
    if not enabled(config):
        return params
    base = quant.quantize_params(params, config.model.lora.get("quantize_base", "none"))
    if config.model.lora.get("init_from"):
        with user_input("model.lora.init_from"):
            adapters = peft_format.load_peft(config.model.lora.init_from, model_config)
    else:
        adapters = lora.init_adapters(model_config, rng)
    return placer.params(lora.attach(base, adapters))


def full_weights(params, model_config):
    """Plain full-precision weights of a policy tree: a quantized base dequantized (in the
    storage dtype), adapters merged. (The value model starts from these.)"""
    if quant.is_quantized(params):
        shapes = {t: sum(lora.io_shapes(model_config, t), ()) for t in lora.TARGETS}
        layers = dict(params["layers"])
        for name in ("attn", "mlp"):
            layers[name] = quant.dequantize_module(layers[name], shapes,
                                                   model_config.storage_dtype)
        params = dict(params, layers=layers)
    return lora.merge(params, model_config)


# ----------------------------------------------------------------------------- the base, once

def _created_or_trained(config) -> bool:
    return config.sft.steps > 0 or not config.model.hf_checkpoint


def hf_hash(path: str) -> str:
    """blake2b over the config and weight files of an HF directory (names and contents)."""
    h = hashlib.blake2b()
    for name in sorted(os.listdir(path)):
        if name == "config.json" or name.endswith(".safetensors"):
            h.update(name.encode())
            file_hash = hashlib.blake2b()
            with open(os.path.join(path, name), "rb") as f:
                for chunk in iter(lambda: f.read(1 << 24), b""):
                    file_hash.update(chunk)
            h.update(file_hash.digest())
    return h.hexdigest()


def save_base(workdir: str, config, params) -> None:
    """Writes the frozen base of `params` once for the run (every process calls): the
    arrays to `<workdir>/lora_base/` when the run created or trained it, else the HF
    checkpoint's path and hash; `<workdir>/lora_base.json` says which."""
    if not enabled(config):
        return
    import orbax.checkpoint as ocp
    if _created_or_trained(config):
        record = {"source": "workdir", "path": BASE_DIR}
        target = os.path.join(os.path.abspath(workdir), BASE_DIR)
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(target, lora.base_of(params), force=True)
        checkpointer.wait_until_finished()
    else:
        path = os.path.abspath(config.model.hf_checkpoint)
        record = {"source": "hf", "path": path, "hash": hf_hash(path)}
    if jax.process_index() == 0:
        from rlvr_jax.train.workdir import write_json_atomic
        write_json_atomic(os.path.join(workdir, BASE_JSON), record)


def saved_params(params):
    """What a checkpoint holds of the policy: the adapters of a LoRA tree, else all of it."""
    adapters, _ = lora.split(params)
    return adapters or params


def restore_base(workdir: str, config, like):
    """The frozen base a LoRA run's checkpoints continue from, shaped (and sharded) like
    `lora.base_of(like)`: read from `<workdir>/lora_base/`, or `like`'s own base (the HF
    checkpoint, loaded again) after checking its hash. ConfigError when missing or changed."""
    base = lora.base_of(like)
    record_path = os.path.join(workdir, BASE_JSON)
    if not os.path.isfile(record_path):
        raise ConfigError(f"--workdir: {record_path} is missing: the LoRA run's frozen base "
                          "cannot be found; use a new --workdir")
    with open(record_path) as f:
        record = json.load(f)
    if record["source"] == "hf":
        if hf_hash(record["path"]) != record["hash"]:
            raise ConfigError(f"model.hf_checkpoint: {record['path']} changed since the run "
                              "started (its hash differs): the adapters were trained on "
                              "another base")
        return base
    return read_base(workdir, base)


def read_base(workdir: str, abstract):
    """`<workdir>/lora_base/` read into the shapes / shardings of `abstract` (None: as
    saved, on the first local device)."""
    import orbax.checkpoint as ocp
    target = os.path.join(os.path.abspath(workdir), BASE_DIR)
    checkpointer = ocp.StandardCheckpointer()
    if abstract is None:
        return checkpointer.restore(target)
    return checkpointer.restore(target, jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract))


def load_base(run_dir: str, config, model_config):
    """The frozen base of a finished or interrupted LoRA run, on the first local device (for
    evaluation and export): `<run_dir>/lora_base/`, or its HF checkpoint (hash checked,
    quantized again as the run stored it)."""
    with open(os.path.join(run_dir, BASE_JSON)) as f:
        record = json.load(f)
    if record["source"] == "workdir":
        return read_base(run_dir, None)
    if hf_hash(record["path"]) != record["hash"]:
        raise ValueError(f"{record['path']} changed since the run {run_dir} trained adapters "
                         "on it (its hash differs)")
    from rlvr_jax.models import hf
    _, params = hf.load_hf_checkpoint(record["path"], dtype=model_config.dtype,
                                      param_dtype=model_config.param_dtype)
    return quant.quantize_params(jax.tree.map(jax.numpy.asarray, params),
                                 config.model.lora.get("quantize_base", "none"))
