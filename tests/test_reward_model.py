"""Reward models (`*ForSequenceClassification`): score parity with transformers (torch, CPU,
float32) for left- and right-padded batches, export → transformers reload, errors."""
import json
import os

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlvr_jax.models import hf, reward_model  # noqa: E402
from tests import numerics
from tests.reference.hf_models import perturbed_hf_model

pytestmark = pytest.mark.parity

PAD = 0  # The pad id of the test models; real tokens are drawn from 1..127.
_SHAPES = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16, pad_token_id=PAD)
_FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForSequenceClassification",
              dict(rope_theta=1e6, rms_norm_eps=1e-6, num_labels=1)),
    "qwen3": ("Qwen3Config", "Qwen3ForSequenceClassification",
              dict(rope_theta=1e6, rms_norm_eps=1e-6, num_labels=2)),
    "llama": ("LlamaConfig", "LlamaForSequenceClassification",
              dict(rope_theta=10000.0, rms_norm_eps=1e-5, num_labels=1,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 32})),
}


def _hf_model(family, seed=0):
    """A tiny random reward model; every weight perturbed (norms and biases too)."""
    config_cls, model_cls, extra = _FAMILIES[family]
    return perturbed_hf_model(config_cls, model_cls, _SHAPES, extra, seed)


def _batch(side):
    """tokens [3, 12] and mask: a full row and rows padded by 4 and 7 on `side` (pad id
    under the padding, as a tokenizer writes it)."""
    tokens = np.random.default_rng(0).integers(1, 128, size=(3, 12)).astype(np.int32)
    mask = np.ones((3, 12), np.int32)
    for row, n in ((1, 4), (2, 7)):
        if side == "left":
            mask[row, :n] = 0
        else:
            mask[row, 12 - n:] = 0
    return np.where(mask == 1, tokens, PAD).astype(np.int32), mask


def _hf_scores(model, tokens, mask):
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    position_ids=torch.tensor(positions, dtype=torch.long))
    return out.logits.float().numpy()


_forward = reward_model.jit_reward_forward


def _tol(config, ref, tokens):
    """Ours vs transformers' scores (a D-term head on the trunk): numerics.parity_atol."""
    return numerics.parity_atol(config, tokens.shape[1], ref, extra=config.d_model)


@pytest.fixture(scope="module")
def hf_models():
    return {family: _hf_model(family) for family in _FAMILIES}


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_scores_match_transformers_both_paddings_and_export_round_trip(family, hf_models,
                                                                       tmp_path):
    model = hf_models[family]
    model.save_pretrained(tmp_path / "hf")
    config, params = reward_model.load_hf_reward_model(tmp_path / "hf")
    assert config.family == family
    assert reward_model.num_labels(params) == model.config.num_labels
    assert "lm_head" not in params["trunk"]
    batches = {side: _batch(side) for side in ("left", "right")}
    refs = {}
    for side, (tokens, mask) in batches.items():
        refs[side] = _hf_scores(model, tokens, mask)
        ours = np.asarray(_forward(params, tokens, mask, config=config))
        assert ours.shape == refs[side].shape == (3, model.config.num_labels)
        assert np.abs(refs[side]).max() > 0.05  # Not a comparison of near-zero scores.
        assert np.max(np.abs(ours - refs[side])) <= _tol(config, refs[side], tokens), side
    # The same sequence scores the same (ours) whichever side it is padded on.
    repadded = _unpad_repad(*batches["left"])
    np.testing.assert_allclose(np.asarray(_forward(params, *repadded, config=config))[1:],
                               refs["left"][1:], atol=_tol(config, refs["left"], repadded[0]))

    reward_model.save_hf_reward_model(params, config, tmp_path / "export", pad_token_id=PAD)
    saved = json.loads((tmp_path / "export" / "config.json").read_text())
    assert saved["architectures"] == [type(model).__name__]
    assert saved["pad_token_id"] == PAD
    reloaded = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "export").eval()
    assert type(reloaded) is type(model)
    for side, (tokens, mask) in batches.items():
        # The same torch program on the exported float32 weights: bit for bit.
        assert np.max(np.abs(_hf_scores(reloaded, tokens, mask) - refs[side])) == 0.0
    config2, params2 = reward_model.load_hf_reward_model(tmp_path / "export")
    assert config2 == config
    np.testing.assert_array_equal(params2["score"]["kernel"], params["score"]["kernel"])


def _unpad_repad(tokens, mask):
    """The left-padded batch re-padded on the right."""
    out_t, out_m = np.full_like(tokens, PAD), np.zeros_like(mask)
    for i in range(tokens.shape[0]):
        real = tokens[i][mask[i] == 1]
        out_t[i, :len(real)], out_m[i, :len(real)] = real, 1
    return out_t, out_m


def test_prompt_left_padded_then_completion_right_padded(hf_models, tmp_path):
    """The RL layout (left-padded prompt, right-padded completion): the score equals that of
    the same real tokens packed without padding."""
    model = hf_models["qwen2"]
    config, params = reward_model.load_hf_reward_model(_save(model, tmp_path))
    tokens, mask = _batch("left")
    inner = np.concatenate([tokens, tokens[::-1]], axis=1)
    inner_mask = np.concatenate([mask, np.array([[1] * 12, [1] * 5 + [0] * 7,
                                                 [1] * 9 + [0] * 3], np.int32)], axis=1)
    packed, packed_mask = _unpad_repad(inner, inner_mask)
    ours = np.asarray(_forward(params, inner, inner_mask, config=config))
    want = _hf_scores(model, packed, packed_mask)
    np.testing.assert_allclose(ours, want, atol=_tol(config, want, inner))


def _save(model, tmp_path):
    path = tmp_path / "hf"
    model.save_pretrained(path)
    return path


def test_sharded_bfloat16_export_and_causal_lm_loader_refuses(hf_models, tmp_path):
    model = hf_models["llama"]
    config, params = reward_model.load_hf_reward_model(_save(model, tmp_path))
    reward_model.save_hf_reward_model(params, config, tmp_path / "bf16", dtype="bfloat16",
                                      pad_token_id=PAD, max_shard_bytes=40_000)
    index = json.loads((tmp_path / "bf16" / "model.safetensors.index.json").read_text())
    assert "score.weight" in index["weight_map"]
    _, params2 = reward_model.load_hf_reward_model(tmp_path / "bf16")
    expected = params["score"]["kernel"].astype("bfloat16").astype(np.float32)
    np.testing.assert_array_equal(params2["score"]["kernel"], expected)
    with pytest.raises(ValueError, match="is a reward model.*load_hf_reward_model"):
        hf.load_hf_checkpoint(tmp_path / "bf16")


def test_errors_name_what_is_wrong(hf_models, tmp_path):
    from safetensors.numpy import load_file, save_file
    path = tmp_path / "rm"
    hf_models["qwen2"].save_pretrained(path)
    tensors = load_file(path / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if k != "score.weight"},
              path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing tensor 'score.weight'"):
        reward_model.load_hf_reward_model(path)
    save_file(dict(tensors, **{"score.weight": np.zeros((1, 32), np.float32)}),
              path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"score.weight.*\(1, 32\)"):
        reward_model.load_hf_reward_model(path)
    causal = tmp_path / "causal"
    transformers.Qwen2ForCausalLM(hf_models["qwen2"].config).save_pretrained(causal)
    with pytest.raises(ValueError, match="not a reward model"):
        reward_model.load_hf_reward_model(causal)
    with pytest.raises(FileNotFoundError):
        reward_model.load_hf_reward_model(tmp_path / "nowhere")


def test_init_from_policy_and_logical_axes(tiny_config, tiny_params):
    params = reward_model.init_reward_params(tiny_config, jax.random.PRNGKey(1), num_labels=1,
                                             trunk_params=tiny_params)
    assert set(params) == {"trunk", "score"}
    assert params["score"]["kernel"].shape == (tiny_config.d_model, 1)
    np.testing.assert_array_equal(params["trunk"]["embed"], tiny_params["embed"])
    from jax.sharding import PartitionSpec as P
    axes = reward_model.reward_logical_axes(tiny_config)
    specs = jax.tree.leaves(axes, is_leaf=lambda x: isinstance(x, P))
    assert len(specs) == len(jax.tree.leaves(params))  # One spec per parameter.
    assert jax.tree.structure(jax.tree.map(lambda _: 0, axes, is_leaf=lambda x: isinstance(
        x, P))) == jax.tree.structure(jax.tree.map(lambda _: 0, params))
    assert axes["score"]["kernel"] == P("embed", None)


def test_train_reward_model_script_exports_what_transformers_scores(tok, tmp_path):
    """scripts/train_reward_model.py (a few steps): metrics.json and a directory that
    transformers loads as Qwen2ForSequenceClassification and scores as we do."""
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "train_reward_model", os.path.join(root, "scripts", "train_reward_model.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--out", str(tmp_path / "rm"), "--steps", "3", "--batch-pairs", "8",
                 "--eval-batches", "1"])
    metrics = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert metrics["pairs"] == 8.0 and 0.0 <= metrics["accuracy"] <= 1.0
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "rm").eval()
    assert type(model).__name__ == "Qwen2ForSequenceClassification"
    assert model.config.pad_token_id == tok.pad_id
    config, params = reward_model.load_hf_reward_model(tmp_path / "rm")
    rows = [tok.encode("12+34=", add_bos=True) + tok.encode(s, add_eos=True)
            for s in ("6 4 #### 46", "6 4 #### 47 7")]
    width = max(map(len, rows))
    tokens = np.array([r + [tok.pad_id] * (width - len(r)) for r in rows], np.int32)
    mask = np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], np.int32)
    want = _hf_scores(model, tokens, mask)
    np.testing.assert_allclose(np.asarray(_forward(params, tokens, mask, config=config)), want,
                               atol=_tol(config, want, tokens))
