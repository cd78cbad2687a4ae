"""LoRA adapters trained by the project, exported in PEFT's format, loaded by `peft`.

A tiny Qwen2 base (QKV bias, GQA) written as a Hugging Face directory; rank-4 adapters on all
seven projections trained by three RL updates (`step.make_update_fn`: gradients and AdamW
state over the adapters only); exported (`models.peft_format`) and loaded with
`PeftModel.from_pretrained`. Its logits must equal the project's forward with the adapters
and the merged export's (`lora.merge`, written by `hf.save_hf_checkpoint`).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import sampling
from rlvr_jax.models import hf, lora, peft_format, presets, transformer
from rlvr_jax.train import state as state_lib
from rlvr_jax.train import step as step_lib

from tests import numerics

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

R, ALPHA = 4, 8.0
P, G, TP, N = 2, 2, 6, 6


def _config():
    """A 2-layer Qwen2 (QKV bias, GQA 2:1), narrow enough that the float32 bound on two
    forwards' difference is under the issue's 1e-4 (see the test)."""
    return presets.get("tiny", dtype="float32").replace(
        d_model=32, d_ff=64, n_heads=2, n_kv_heads=1, head_dim=16, qkv_bias=True,
        lora_rank=R, lora_alpha=ALPHA, lora_targets=lora.TARGETS)


def _rollout(cfg):
    """B = P·G hand-built rows of random tokens (full length), prompts all real."""
    rng = np.random.default_rng(0)
    b = P * G
    return sampling.Rollout(
        tokens=jnp.asarray(rng.integers(4, cfg.vocab_size, (b, N)), jnp.int32),
        mask=jnp.ones((b, N), jnp.int32),
        logprobs=jnp.full((b, N), -np.log(cfg.vocab_size), jnp.float32),
        lengths=jnp.full((b,), N, jnp.int32), finished=jnp.zeros((b,), bool),
        prompt_tokens=jnp.asarray(rng.integers(4, cfg.vocab_size, (b, TP)), jnp.int32),
        prompt_mask=jnp.ones((b, TP), jnp.int32))


def _trained(cfg, base):
    """Adapters after 3 GRPO updates of base + fresh adapters; the base must not move."""
    tx = state_lib.make_optimizer(learning_rate=3e-2, max_grad_norm=None)
    fresh = lora.init_adapters(cfg, jax.random.PRNGKey(1))
    params = jax.tree.map(jnp.copy, lora.attach(base, fresh))  # A copy: the state is donated.
    state = state_lib.create_train_state(params, tx, jax.random.PRNGKey(2))
    mu = optax.tree_utils.tree_get(state.opt_state, "mu")  # AdamW state: the adapters' only.
    assert jax.tree.structure(mu) == jax.tree.structure(lora.split(params)[0])
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(1,))
    update = step_lib.make_update_fn(cfg, sc, step_lib.RLConfig(num_prompts=P), tx)
    rewards = jnp.asarray([1.0, 0.0, 0.0, 1.0], jnp.float32)
    for _ in range(3):
        state, metrics = update(state, _rollout(cfg), rewards)
    assert float(metrics["train/update_norm"]) > 0
    adapters, frozen = lora.split(state.params)
    for got, want in zip(jax.tree.leaves(frozen), jax.tree.leaves(base)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))  # Frozen, bitwise.
    assert float(jnp.max(jnp.abs(adapters["layers"]["attn"]["q_lora_b"]))) > 0
    return adapters


def test_peft_loads_the_trained_adapter_with_equal_logits(tmp_path):
    cfg = _config()
    base = transformer.init_params(cfg, jax.random.PRNGKey(0))
    base["embed"] = base["embed"] * 0.5  # Logits ≤ ~0.4: the bound below is relative to them.
    hf.save_hf_checkpoint(base, cfg, tmp_path / "base", dtype="float32")
    adapters = _trained(cfg, base)
    peft_format.save_peft(adapters, cfg, str(tmp_path / "adapter"),
                          base_model=str(tmp_path / "base"))
    merged = lora.merge(lora.attach(base, adapters), cfg)
    hf.save_hf_checkpoint(merged, cfg, tmp_path / "merged", dtype="float32")

    # model.lora.init_from reads back exactly what was written.
    back = peft_format.load_peft(str(tmp_path / "adapter"), cfg)
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(adapters)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

    tokens = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 6)).astype(np.int64)
    ours = np.asarray(transformer.jit_forward(lora.attach(base, adapters),
                                              jnp.asarray(tokens, jnp.int32), None, config=cfg))
    load = transformers.AutoModelForCausalLM.from_pretrained
    model = peft.PeftModel.from_pretrained(load(tmp_path / "base", dtype=torch.float32),
                                           str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        theirs = model(torch.tensor(tokens)).logits.numpy()
        merged_logits = load(tmp_path / "merged", dtype=torch.float32).eval()(
            torch.tensor(tokens)).logits.numpy()
    # Two float32 forwards in different orders (numerics.parity_atol), plus the adapters'
    # reductions on the longest chain of each layer, which runs through one of q/k/v, then o,
    # gate or up, and down: x·A (the projection's input width), ·B (r terms) and the add.
    # The merged side sums r + 1 terms per weight instead (within the same bound).
    per_layer = (2 * cfg.d_model + cfg.n_heads * cfg.head_dim + cfg.d_ff) + 4 * (R + 1)
    atol = numerics.parity_atol(cfg, tokens.shape[1], ours, extra=cfg.n_layers * per_layer)
    assert atol <= 1e-4  # The bound: this model's worst case is within it.
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=atol)
    np.testing.assert_allclose(merged_logits, theirs, rtol=0, atol=atol)
    # The adapter matters: without it the logits differ by far more than the bound.
    assert np.max(np.abs(np.asarray(transformer.jit_forward(
        base, jnp.asarray(tokens, jnp.int32), None, config=cfg)) - ours)) > 100 * atol
