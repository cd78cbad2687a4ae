"""LoRA adapters in PEFT's on-disk format (`adapter_config.json` + `adapter_model.safetensors`).

PEFT names a Llama / Qwen2 / Qwen3 adapter's tensors
`base_model.model.model.layers.{i}.{module}.lora_A.weight` [r, in] and `...lora_B.weight`
[out, r] (module: `self_attn.q_proj`, ..., `mlp.down_proj`), with in / out the flattened
dims of the Hugging Face `nn.Linear` (`models/hf.py`'s layout). Ours (`models.lora`) are the
stacked A [L, *in, r] and B [L, r, *out]: A = lora_A.T, B = lora_B.T, reshaped.
"""
import json
import os
from typing import Any, Dict, Tuple

import numpy as np

from rlvr_jax.models import lora
from rlvr_jax.models.config import ModelConfig

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"


def _name(i: int, target: str, which: str) -> str:
    return f"base_model.model.model.layers.{i}.{lora.HF_MODULE[target]}.lora_{which}.weight"


def adapter_config(config: ModelConfig, base_model: str = "") -> Dict[str, Any]:
    """PEFT's `LoraConfig` fields of `config`'s adapters (no dropout, no bias, no rsLoRA)."""
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": config.lora_rank,
            "lora_alpha": config.lora_alpha, "lora_dropout": 0.0, "bias": "none",
            "target_modules": [lora.HF_MODULE[t].split(".")[-1] for t in config.lora_targets],
            "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
            "init_lora_weights": True, "inference_mode": True, "modules_to_save": None,
            "layers_to_transform": None, "base_model_name_or_path": base_model}


def to_peft_tensors(adapters, config: ModelConfig, dtype: str = "float32"
                    ) -> Dict[str, np.ndarray]:
    """{PEFT tensor name: array} of a stacked adapter tree."""
    out = {}
    for t in lora.targets_of(adapters):
        module = adapters["layers"][lora.MODULE[t]]
        a = np.asarray(module[t + "_lora_a"], np.float32)
        b = np.asarray(module[t + "_lora_b"], np.float32)
        for i in range(config.n_layers):
            out[_name(i, t, "A")] = np.ascontiguousarray(
                a[i].reshape(-1, config.lora_rank).T.astype(dtype))
            out[_name(i, t, "B")] = np.ascontiguousarray(
                b[i].reshape(config.lora_rank, -1).T.astype(dtype))
    return out


def save_peft(adapters, config: ModelConfig, out_dir: str, *, base_model: str = "",
              dtype: str = "float32") -> None:
    """Writes `out_dir/adapter_config.json` and `out_dir/adapter_model.safetensors`."""
    from rlvr_jax.models import hf
    os.makedirs(out_dir, exist_ok=True)
    hf.save_safetensors(to_peft_tensors(adapters, config, dtype), os.path.join(out_dir, WEIGHTS))
    with open(os.path.join(out_dir, CONFIG), "w") as f:
        json.dump(adapter_config(config, base_model), f, indent=2)


def read_config(path: str) -> Tuple[int, float, Tuple[str, ...]]:
    """(r, lora_alpha, our targets) of a PEFT adapter directory; unsupported options
    (rsLoRA, DoRA, biases, extra modules, a layer subset, other targets) raise ValueError."""
    file = os.path.join(path, CONFIG)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{path}: no {CONFIG} (not a PEFT adapter directory)")
    with open(file) as f:
        c = json.load(f)
    if c.get("peft_type", "LORA") != "LORA" or c.get("use_rslora") or c.get("use_dora") or \
            c.get("bias", "none") != "none" or c.get("modules_to_save") or \
            c.get("layers_to_transform") is not None:
        raise ValueError(f"{file}: only plain LoRA adapters (no rsLoRA, DoRA, bias, "
                         "modules_to_save or layers_to_transform) can be imported")
    modules = c["target_modules"]
    modules = [modules] if isinstance(modules, str) else list(modules)
    by_hf = {lora.HF_MODULE[t].split(".")[-1]: t for t in lora.TARGETS}
    bad = [m for m in modules if m not in by_hf]
    if bad:
        raise ValueError(f"{file}: target_modules {bad} are not among {sorted(by_hf)}")
    targets = tuple(t for t in lora.TARGETS if lora.HF_MODULE[t].split(".")[-1] in modules)
    return int(c["r"]), float(c["lora_alpha"]), targets


def load_peft(path: str, config: ModelConfig):
    """The stacked adapter tree of a PEFT directory, for `config` (whose lora_rank, alpha and
    targets must be the directory's: a mismatch raises ValueError naming both)."""
    from safetensors.numpy import load_file
    r, alpha, targets = read_config(path)
    if (r, alpha, targets) != (config.lora_rank, config.lora_alpha, config.lora_targets):
        raise ValueError(f"{path}: r={r}, lora_alpha={alpha}, targets={','.join(targets)} but "
                         f"model.lora has rank={config.lora_rank}, alpha={config.lora_alpha}, "
                         f"targets={','.join(config.lora_targets)}")
    tensors = load_file(os.path.join(path, WEIGHTS))
    tensors = {k.replace(".lora_A.default.", ".lora_A.").replace(".lora_B.default.", ".lora_B."):
               v for k, v in tensors.items()}

    def leaf(t):
        ins, outs = lora.io_shapes(config, t)
        try:
            a = np.stack([tensors[_name(i, t, "A")].T.reshape(ins + (r,))
                          for i in range(config.n_layers)])
            b = np.stack([tensors[_name(i, t, "B")].T.reshape((r,) + outs)
                          for i in range(config.n_layers)])
        except KeyError as e:
            raise ValueError(f"{path}: {WEIGHTS} lacks {e.args[0]}") from None
        except ValueError as e:
            raise ValueError(f"{path}: an adapter of {lora.HF_MODULE[t]} does not fit the "
                             f"model ({e})") from None
        return a.astype(config.storage_dtype), b.astype(config.storage_dtype)
    return lora.tree_of(config, leaf)
