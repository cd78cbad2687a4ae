"""Hugging Face import/export: logits parity with transformers (torch, CPU, float32)."""
import json
import os

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlvr_jax.models import hf, presets, transformer  # noqa: E402
from tests import numerics
from tests.reference.hf_models import perturbed_hf_model

pytestmark = pytest.mark.parity

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "hf_v4_config.json")
_SHAPES = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16)
# Each family with the options its published checkpoints use.
_FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(rope_theta=1e6, tie_word_embeddings=True, rms_norm_eps=1e-6)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(rope_theta=1e6, tie_word_embeddings=False, rms_norm_eps=1e-6)),
    # original_max_position_embeddings=32 puts the test positions' frequencies in all
    # three llama3 bands (scaled, smoothed, unscaled).
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(rope_theta=10000.0, tie_word_embeddings=False, rms_norm_eps=1e-5,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 32})),
}


def _hf_model(family, seed=0):
    """A tiny random transformers model; every weight (norms, biases too) perturbed."""
    config_cls, model_cls, extra = _FAMILIES[family]
    return perturbed_hf_model(config_cls, model_cls, _SHAPES, extra, seed)


def _batch():
    """tokens [2, 12] and mask: row 0 full, row 1 left-padded by 4 (garbage ids under padding)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 128, size=(2, 12)).astype(np.int32)
    mask = np.ones((2, 12), np.int32)
    mask[1, :4] = 0
    return tokens, mask


def _hf_logits(model, tokens, mask):
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    position_ids=torch.tensor(positions, dtype=torch.long))
    return out.logits.float().numpy()


def _our_logits(params, config, tokens, mask):
    return np.asarray(transformer.jit_forward(params, tokens, mask, config=config))


def _max_diff(a, b, mask):
    real = mask.astype(bool)
    return float(np.max(np.abs(a[real] - b[real])))


def _tol(config, ref, tokens):
    """Ours vs transformers' logits: the float32 bound of numerics.parity_atol."""
    return numerics.parity_atol(config, tokens.shape[1], ref)


@pytest.fixture(scope="module")
def hf_models():
    return {family: _hf_model(family) for family in _FAMILIES}


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_import_and_export_match_transformers(family, hf_models, tmp_path):
    model = hf_models[family]
    model.save_pretrained(tmp_path / "hf")
    config, params = hf.load_hf_checkpoint(tmp_path / "hf")
    assert config.family == family
    assert config.tie_embeddings == model.config.tie_word_embeddings
    assert (config.rope_scaling is not None) == (family == "llama")
    tokens, mask = _batch()
    ref = _hf_logits(model, tokens, mask)
    ours = _our_logits(params, config, tokens, mask)
    assert np.abs(ref).max() > 0.1  # The comparison is not between near-zero logits.
    assert _max_diff(ours, ref, mask) <= _tol(config, ref, tokens)

    hf.save_hf_checkpoint(params, config, tmp_path / "export")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export").eval()
    assert type(reloaded) is type(model)
    # The same torch program on the weights we exported: identical when the float32 weights
    # survived the round trip bit for bit.
    assert _max_diff(_hf_logits(reloaded, tokens, mask), ref, mask) == 0.0


def test_sharded_checkpoints_both_ways(hf_models, tmp_path):
    model = hf_models["llama"]
    model.save_pretrained(tmp_path / "hf", max_shard_size="40KB")
    assert (tmp_path / "hf" / "model.safetensors.index.json").exists()
    config, params = hf.load_hf_checkpoint(tmp_path / "hf")
    tokens, mask = _batch()
    ref = _hf_logits(model, tokens, mask)
    assert _max_diff(_our_logits(params, config, tokens, mask), ref, mask) <= _tol(config, ref,
                                                                                  tokens)

    hf.save_hf_checkpoint(params, config, tmp_path / "export", max_shard_bytes=40_000)
    index = json.loads((tmp_path / "export" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export").eval()
    assert _max_diff(_hf_logits(reloaded, tokens, mask), ref, mask) == 0.0  # Bit-exact weights.
    config2, params2 = hf.load_hf_checkpoint(tmp_path / "export")
    assert config2 == config
    np.testing.assert_array_equal(params2["layers"]["attn"]["q_kernel"],
                                  params["layers"]["attn"]["q_kernel"])


def test_bfloat16_checkpoint_and_dtypes(hf_models, tmp_path):
    model = hf_models["qwen3"]
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    model.to(torch.float32)
    config, params = hf.load_hf_checkpoint(tmp_path / "bf16", dtype="bfloat16",
                                           param_dtype="float32")
    assert config.dtype == "bfloat16" and params["embed"].dtype == np.float32
    expected = model.model.embed_tokens.weight.detach().to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(params["embed"], expected)
    hf.save_hf_checkpoint(params, config, tmp_path / "export", dtype="bfloat16")
    saved = json.loads((tmp_path / "export" / "config.json").read_text())
    assert saved["torch_dtype"] == saved["dtype"] == "bfloat16"
    _, params2 = hf.load_hf_checkpoint(tmp_path / "export", param_dtype="bfloat16")
    assert str(params2["embed"].dtype) == "bfloat16"
    np.testing.assert_array_equal(params2["embed"].astype(np.float32), expected)


def test_tied_checkpoint_with_stored_lm_head(hf_models, tmp_path):
    from safetensors.numpy import load_file, save_file
    hf_models["qwen2"].save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].copy()
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    config, params = hf.load_hf_checkpoint(tmp_path)
    assert config.tie_embeddings and "lm_head" not in params


def test_v4_config_fixture_matches_preset_and_transformers_rope():
    config = hf.config_from_hf(FIXTURE)
    assert config == presets.get("llama3.2-1b")
    # Our llama3 frequencies equal transformers' for the same config.
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    hf_config = transformers.LlamaConfig.from_dict(json.loads(open(FIXTURE).read()))
    inv_freq, _ = ROPE_INIT_FUNCTIONS["llama3"](hf_config, "cpu")
    np.testing.assert_allclose(transformer.rope_frequencies(config), inv_freq.double().numpy(),
                               rtol=1e-6)


def test_v5_rope_parameters_and_v4_style_parse_the_same():
    v4 = json.loads(open(FIXTURE).read())
    v5 = {k: v for k, v in v4.items() if k not in ("rope_theta", "rope_scaling")}
    v5["rope_parameters"] = dict(v4["rope_scaling"], rope_theta=v4["rope_theta"])
    assert hf.config_from_hf(v5) == hf.config_from_hf(v4)
    v4["rope_scaling"] = {"type": "default"}
    assert hf.config_from_hf(v4).rope_scaling is None
    qwen25 = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
              "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
              "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1000000.0,
              "rope_scaling": None, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
              "max_position_embeddings": 32768, "use_sliding_window": False,
              "sliding_window": 32768, "max_window_layers": 21}
    assert hf.config_from_hf(qwen25) == presets.get("qwen2.5-0.5b")
    assert hf.config_from_hf(qwen25, dtype="bfloat16").dtype == "bfloat16"


_DELETE = object()


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096},
     "unsupported architecture"),
    ({"architectures": ["GemmaForCausalLM"], "model_type": "gemma"}, "unsupported architecture"),
    ({"architectures": _DELETE, "model_type": "gemma2"}, "unsupported model_type"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "unsupported rope type"),
    ({"rope_scaling": _DELETE, "rope_parameters": {"rope_type": "dynamic", "rope_theta": 1.0}},
     "unsupported rope type"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"num_hidden_layers": _DELETE}, "num_hidden_layers"),
    ({"architectures": ["Qwen2ForCausalLM"], "use_sliding_window": True}, "sliding"),
])
def test_unsupported_configs_raise(change, message):
    cfg = json.loads(open(FIXTURE).read())
    cfg.update(change)
    cfg = {k: v for k, v in cfg.items() if v is not _DELETE}
    with pytest.raises(ValueError, match=message):
        hf.config_from_hf(cfg)


def test_missing_tensor_wrong_shape_and_missing_files(hf_models, tmp_path):
    from safetensors.numpy import load_file, save_file
    hf_models["qwen3"].save_pretrained(tmp_path)
    original = load_file(tmp_path / "model.safetensors")

    broken = dict(original)
    del broken["model.layers.1.self_attn.k_norm.weight"]
    save_file(broken, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing tensor 'model\.layers\.1\.self_attn\.k_norm"):
        hf.load_hf_checkpoint(tmp_path)

    broken = dict(original)
    broken["model.layers.0.mlp.down_proj.weight"] = np.zeros((64, 96), np.float32)
    save_file(broken, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"down_proj.*\(64, 96\), expected \(64, 128\)"):
        hf.load_hf_checkpoint(tmp_path)

    broken = dict(original, **{"model.layers.0.self_attn.o_proj.bias": np.zeros(64, np.float32)})
    save_file(broken, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="does not use: model.layers.0.self_attn.o_proj.bias"):
        hf.load_hf_checkpoint(tmp_path)

    os.remove(tmp_path / "model.safetensors")
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        hf.load_hf_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError):
        hf.load_hf_checkpoint(tmp_path / "nowhere")


def test_export_rejects_configs_transformers_cannot_express(tiny_config, tmp_path):
    # Both are rejected before the params are read.
    with pytest.raises(ValueError, match="qwen3 checkpoint needs"):
        hf.save_hf_checkpoint({}, tiny_config.replace(family="qwen3"), tmp_path)
    with pytest.raises(ValueError, match="dtype"):
        hf.save_hf_checkpoint({}, tiny_config, tmp_path, dtype="int8")
    assert not os.listdir(tmp_path)


def test_convert_script_round_trip(hf_models, tmp_path):
    import importlib.util
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts",
                          "convert_checkpoint.py")
    spec = importlib.util.spec_from_file_location("convert_checkpoint", script)
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    hf_models["qwen2"].save_pretrained(tmp_path / "hf")
    convert.main(["hf-to-orbax", str(tmp_path / "hf"), str(tmp_path / "orbax"),
                  "--dtype", "float32"])
    convert.main(["orbax-to-hf", str(tmp_path / "orbax"), str(tmp_path / "back"),
                  "--max-shard-bytes", "50000"])  # Default dtype: the params' own (exact).
    config, params = hf.load_hf_checkpoint(tmp_path / "hf")
    config2, params2 = hf.load_hf_checkpoint(tmp_path / "back")
    assert config2 == config
    a = dict(jax.tree_util.tree_leaves_with_path(params))
    b = dict(jax.tree_util.tree_leaves_with_path(params2))
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_padding_hole_in_a_row_matches_transformers(family, hf_models, tmp_path):
    """A row with padding in the MIDDLE (and on the left): our default positions count the
    real tokens before each token (`default_positions`' docstring), which is what
    transformers computes with position_ids = cumsum(mask) - 1 and the same mask."""
    model = hf_models[family]
    model.save_pretrained(tmp_path / "hf")
    config, params = hf.load_hf_checkpoint(tmp_path / "hf")
    tokens, mask = _batch()
    mask[0, 5:8] = 0                   # row 0: a hole of 3 in the middle
    mask[1, 7] = 0                     # row 1: left padding and a hole of 1
    positions = np.asarray(transformer.default_positions(mask))
    np.testing.assert_array_equal(positions[0][mask[0] > 0], np.arange(mask[0].sum()))
    np.testing.assert_array_equal(positions[1][mask[1] > 0], np.arange(mask[1].sum()))
    ref = _hf_logits(model, tokens, mask)
    assert _max_diff(_our_logits(params, config, tokens, mask), ref, mask) <= _tol(config, ref,
                                                                                  tokens)
