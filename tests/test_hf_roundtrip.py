"""Hugging Face → train (warm-up + RL) → Hugging Face: transformers loads the trained model."""
import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlvr_jax.models import hf, transformer  # noqa: E402
from rlvr_jax.train import run  # noqa: E402
from rlvr_jax.train.config import arithmetic_config  # noqa: E402
from tests import numerics  # noqa: E402

pytestmark = pytest.mark.parity


def test_hf_checkpoint_trains_and_exports_back(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    torch.manual_seed(0)
    hf_config = transformers.Qwen2Config(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    transformers.Qwen2ForCausalLM(hf_config).save_pretrained(tmp_path / "base")

    config = arithmetic_config("grpo")
    config.model.hf_checkpoint = str(tmp_path / "base")
    config.rl.kl_coef = 0.0
    config.sft.steps = 3
    config.rl.steps = 1
    config.rl.num_prompts = 4
    config.rl.num_samples = 2
    config.eval.num_prompts = 8
    config.eval.batch_size = 8
    summary = run(config, str(tmp_path / "work"), progress=False)
    params = jax.device_get(summary["state"].params)

    model_config, initial = hf.load_hf_checkpoint(tmp_path / "base")
    changed = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), params, initial)
    assert max(jax.tree.leaves(changed)) > 1e-4, "training should change the weights"

    hf.save_hf_checkpoint(params, model_config, tmp_path / "trained")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "trained").eval()
    tokens = np.random.default_rng(0).integers(1, 128, (2, 9)).astype(np.int32)
    with torch.no_grad():
        theirs = reloaded(input_ids=torch.tensor(tokens, dtype=torch.long)).logits.numpy()
    ours = np.asarray(transformer.jit_forward(params, tokens, np.ones_like(tokens),
                                              config=model_config))
    np.testing.assert_allclose(ours, theirs, atol=numerics.parity_atol(model_config, 9, theirs))
