"""LoRA adapters and a quantized base as functions of the parameter tree (`models.lora`,
`models.quant`), their sharding, the trainable split and the config keys."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from rlvr_jax import sharding
from rlvr_jax.models import decoding, lora, presets, quant, transformer
from rlvr_jax.train import adapters as adapters_lib
from rlvr_jax.train import state as state_lib
from rlvr_jax.train.config import default_config
from rlvr_jax.train.errors import ConfigError

from tests import numerics

R = 4
T = 8


@pytest.fixture(scope="module")
def cfg():
    return presets.get("tiny", dtype="float32").replace(
        qkv_bias=True, lora_rank=R, lora_alpha=2.0 * R, lora_targets=lora.TARGETS)


@pytest.fixture(scope="module")
def base(cfg):
    return transformer.init_params(cfg, jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def trained(cfg):
    """Adapters as after training: A as initialised, B non-zero."""
    fresh = lora.init_adapters(cfg, jax.random.PRNGKey(1))
    return jax.tree_util.tree_map_with_path(
        lambda path, x: x if path[-1].key.endswith("_a") else
        0.05 * jax.random.normal(jax.random.PRNGKey(2), x.shape, x.dtype), fresh)


@pytest.fixture(scope="module")
def tokens(cfg):
    return jax.random.randint(jax.random.PRNGKey(3), (2, T), 0, cfg.vocab_size)


def _logits(params, tokens, cfg):
    return np.asarray(transformer.jit_forward(params, tokens, None, config=cfg))


def _extra(cfg):
    """The adapters' reductions on the longest chain of a layer (one of q/k/v, o, gate/up,
    down: the projection's input width, r, the add) and the merge's (r + 1 per weight)."""
    return cfg.n_layers * (2 * cfg.d_model + cfg.n_heads * cfg.head_dim + cfg.d_ff + 8 * (R + 1))


def test_peft_init_shapes_and_a_fresh_adapter_changes_nothing(cfg, base, tokens):
    fresh = lora.init_adapters(cfg, jax.random.PRNGKey(1))
    assert lora.targets_of(fresh) == lora.TARGETS
    assert sum(x.size for x in jax.tree.leaves(fresh)) == lora.num_params(cfg)
    attn = fresh["layers"]["attn"]
    assert attn["q_lora_a"].shape == (cfg.n_layers, cfg.d_model, R)
    assert attn["o_lora_a"].shape == (cfg.n_layers, cfg.n_heads, cfg.head_dim, R)
    assert attn["k_lora_b"].shape == (cfg.n_layers, R, cfg.n_kv_heads, cfg.head_dim)
    for module in fresh["layers"].values():
        for name, x in module.items():
            if name.endswith("_b"):
                assert not np.any(np.asarray(x))  # B = 0 ...
            else:  # ... A ~ U(±1/√fan_in) (PEFT's kaiming_uniform, a = √5).
                fan_in = int(np.prod(x.shape[1:-1]))
                assert np.max(np.abs(np.asarray(x))) <= fan_in ** -0.5 and np.std(x) > 0
    # x·W + s·(x·A)·0 = x·W exactly: the policy starts as the base, bitwise.
    np.testing.assert_array_equal(_logits(lora.attach(base, fresh), tokens, cfg),
                                  _logits(base, tokens, cfg))


def test_unmerged_merged_and_decode_forwards_agree(cfg, base, trained, tokens):
    params = lora.attach(base, trained)
    want = _logits(params, tokens, cfg)
    assert np.max(np.abs(want - _logits(base, tokens, cfg))) > 1e-3  # The adapter acts.
    numerics.assert_forward_close(_logits(lora.merge(params, cfg), tokens, cfg), want, cfg, T,
                                  extra=_extra(cfg))
    for merge in (True, False):  # The sampler's two ways (docs/lora.md: merged is faster).
        prepared = decoding.prepare_params(params, cfg, merge_adapters=merge)
        assert any("lora" in k for k in prepared["layers"][0]["attn"]) != merge
        got, _ = decoding.forward(prepared, tokens, config=cfg,
                                  cache=decoding.init_cache(cfg, 2, T))
        numerics.assert_forward_close(got, want, cfg, T, extra=_extra(cfg))


def test_split_attach_and_the_trainable_part(cfg, base, trained):
    params = lora.attach(base, trained)
    got_adapters, got_base = lora.split(params)
    assert jax.tree.structure(got_adapters) == jax.tree.structure(trained)
    assert jax.tree.structure(got_base) == jax.tree.structure(base)
    assert lora.split(base) == ({}, base) and not lora.has_adapters(base)
    assert state_lib.split_trainable(base) == (base, None)
    train, frozen = state_lib.split_trainable(params)
    assert jax.tree.structure(state_lib.join_trainable(train, frozen)) == \
        jax.tree.structure(params)
    state = state_lib.TrainState(step=0, params=params, opt_state=None, rng=None)
    assert state_lib.reference_of(state) is not None
    assert jax.tree.structure(state_lib.reference_of(state)) == jax.tree.structure(base)
    with pytest.raises(ValueError, match="reference"):
        state_lib.reference_of(state.replace(params=base))


def test_adapter_and_quantized_specs_and_fsdp_placement(cfg, base, trained):
    """Adapters follow their kernel's dims (A's in-dim "embed" over fsdp) and never split the
    rank; a quantized base's flat codes take "embed"; specs fit any part of the tree."""
    specs = transformer.param_logical_axes(cfg)
    params = lora.attach(quant.quantize_params(base, "nf4"), trained)
    full = lora.specs_like(specs, params, cfg)
    is_spec = lambda x: isinstance(x, P)  # noqa: E731
    assert jax.tree.structure(full, is_leaf=is_spec) == jax.tree.structure(params)
    only = lora.specs_like(specs, trained, cfg)
    assert jax.tree.structure(only, is_leaf=is_spec) == jax.tree.structure(trained)
    assert only["layers"]["attn"]["q_lora_a"] == P("layers", "embed", "lora")
    assert only["layers"]["mlp"]["down_lora_b"] == P("layers", "lora", "embed")
    mesh = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    placed = sharding.shard_params(params, full, mesh, sharding.get_rules("fsdp"))
    a = placed["layers"]["attn"]["q_lora_a"]
    assert a.sharding.spec == P(None, "fsdp")  # [L, D, r]: D over fsdp, r whole.
    assert placed["layers"]["mlp"]["up_kernel_codes"].sharding.spec == P(None, "fsdp")


@pytest.mark.parametrize("kind", ["int8", "nf4"])
def test_quantized_base_error_bound_and_forwards(cfg, base, trained, tokens, kind):
    w = np.asarray(base["layers"]["mlp"]["up_kernel"], np.float64)
    codes, scales = quant.quantize(jnp.asarray(w, jnp.float32), kind)
    back = np.asarray(quant.dequantize(codes, scales, w.shape[1:], jnp.float32), np.float64)
    absmax = np.repeat(np.asarray(scales, np.float64), quant.BLOCK, axis=-1).reshape(w.shape)
    # Rounding to the nearest level: half a step (int8: 1/127 of absmax; nf4: the widest gap
    # of the table), plus float32 rounding of the division and the product (a few u).
    step = 1 / 127 if kind == "int8" else np.max(np.diff(quant.NF4_TABLE))
    assert np.all(np.abs(back - w) <= absmax * (step / 2 + 4 * numerics.U32))
    assert codes.dtype == (jnp.int8 if kind == "int8" else jnp.uint8)
    assert codes.size == w.size // (1 if kind == "int8" else 2)
    # The forwards dequantize on the fly: the same as running on the dequantized weights.
    params = lora.attach(quant.quantize_params(base, kind), trained)
    dense = lora.attach(adapters_lib.full_weights(quant.quantize_params(base, kind), cfg),
                        trained)
    want = _logits(dense, tokens, cfg)
    numerics.assert_forward_close(_logits(params, tokens, cfg), want, cfg, T)
    got, _ = decoding.forward(decoding.prepare_params(params, cfg), tokens, config=cfg,
                              cache=decoding.init_cache(cfg, 2, T))
    numerics.assert_forward_close(got, want, cfg, T, extra=_extra(cfg))


def test_config_keys():
    config = default_config()
    assert adapters_lib.lora_fields(config) == {}
    config.model.lora.rank = 8
    config.model.lora.targets = "v,q"
    assert adapters_lib.lora_fields(config) == {"lora_rank": 8, "lora_alpha": 16.0,
                                                "lora_targets": ("q", "v")}
    config.model.lora.targets = "q,wq"
    with pytest.raises(ConfigError, match="model.lora.targets"):
        adapters_lib.lora_fields(config)
    config.model.lora.targets = "all"
    config.model.lora.quantize_base = "int4"
    with pytest.raises(ConfigError, match="model.lora.quantize_base"):
        adapters_lib.lora_fields(config)


def test_init_from_a_peft_directory(cfg, base, trained, tmp_path):
    from rlvr_jax.models import peft_format
    from rlvr_jax.train import build
    from rlvr_jax.train import placer as placer_lib
    peft_format.save_peft(trained, cfg, str(tmp_path / "adapter"))
    config = default_config()
    config.mesh.num_devices = 1
    config.model.lora.rank = R
    config.model.lora.init_from = str(tmp_path / "adapter")
    config.model.lora.quantize_base = "int8"
    placer = placer_lib.Placer(*build.build_mesh(config), cfg)
    params = adapters_lib.attach_for_rl(config, cfg, base, placer, jax.random.PRNGKey(0))
    assert quant.is_quantized(params)
    for got, want in zip(jax.tree.leaves(lora.split(params)[0]), jax.tree.leaves(trained)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ConfigError, match="model.lora.init_from.*r=4.*rank=2"):
        adapters_lib.attach_for_rl(config, cfg.replace(lora_rank=2), base, placer,
                                   jax.random.PRNGKey(0))
