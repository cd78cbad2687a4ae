"""Meshes, logical-axis rules and placement on 8 fake CPU devices."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from rlvr_jax import models, sharding

from tests import numerics

# Per preset: a mesh that uses every one of its axes on 8 devices.
LAYOUTS = {
    "dp": {"data": -1, "fsdp": 1, "tensor": 1},
    "fsdp": {"data": 2, "fsdp": -1, "tensor": 1},
    "fsdp_tp": {"data": 1, "fsdp": 4, "tensor": 2},
}


@pytest.fixture(scope="module")
def cfg():
    # Every sharded dim divisible by 8, so nothing silently falls back to replication.
    return models.presets.get("tiny", d_model=64, d_ff=128, n_heads=8, n_kv_heads=8,
                              vocab_size=128)


@pytest.fixture(scope="module")
def params(cfg):
    return models.init_params(cfg, jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def specs(cfg):
    return models.param_logical_axes(cfg)


@pytest.fixture(scope="module")
def batch():
    tokens = np.asarray(jax.random.randint(jax.random.PRNGKey(1), (8, 12), 0, 128), np.int32)
    mask = np.ones_like(tokens)
    mask[:3, :4] = 0  # Some left padding.
    return tokens, mask


def _live_axes(entry, mesh):
    """The mesh axes of size > 1 in one PartitionSpec entry."""
    names = () if entry is None else (entry,) if isinstance(entry, str) else entry
    return tuple(n for n in names if mesh.shape[n] > 1)


def _placed(name, params, specs):
    mesh = sharding.make_mesh(LAYOUTS[name])
    rules = sharding.get_rules(name)
    return mesh, rules, sharding.shard_params(params, specs, mesh, rules)


# ----------------------------------------------------------------------------- meshes

def test_make_mesh_resolves_minus_one_and_uses_auto_axes():
    mesh = sharding.make_mesh({"data": 2, "fsdp": -1, "tensor": 2})
    assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert mesh.axis_names == sharding.MESH_AXES
    assert all(t == AxisType.Auto for t in mesh.axis_types)
    assert sorted(d.id for d in mesh.devices.flat) == sorted(d.id for d in jax.devices())
    # Missing fields take the defaults (fsdp=-1).
    assert dict(sharding.make_mesh({}).shape) == {"data": 1, "fsdp": 8, "tensor": 1}
    assert dict(sharding.make_mesh(devices=jax.devices()[:2]).shape)["fsdp"] == 2


@pytest.mark.parametrize("sizes, match", [
    ({"data": -1, "fsdp": -1}, "at most one"),
    ({"data": 3, "fsdp": -1}, "not divisible"),
    ({"data": 2, "fsdp": 2, "tensor": 1}, "multiply to 4"),
    ({"data": 0}, "positive"),
    ({"dcn_data": 2}, "Number of slices"),  # One process, no slices: no DCN granules.
])
def test_make_mesh_rejects_bad_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        sharding.make_mesh(sizes)


def test_rules_presets_and_validation():
    with pytest.raises(ValueError, match="unknown rules preset"):
        sharding.get_rules("zero3")
    with pytest.raises(ValueError, match="not one of"):
        sharding.get_rules([("batch", "pipeline")])
    custom = sharding.get_rules([("batch", ["data", "fsdp"]), ("embed", "tensor")])
    assert custom == (("batch", ("data", "fsdp")), ("embed", "tensor"))
    mesh = sharding.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    with pytest.raises(ValueError, match="tensor"):
        sharding.check_mesh_uses_rules(mesh, sharding.get_rules("fsdp"))
    sharding.check_mesh_uses_rules(mesh, sharding.get_rules("fsdp_tp"))
    assert sharding.batch_spec(sharding.get_rules("fsdp_tp"), 2) == P(("data", "fsdp"))


def test_logical_to_mesh_spec_drops_axes_that_do_not_divide():
    mesh = sharding.make_mesh({"data": 1, "fsdp": 2, "tensor": 4})
    rules = sharding.get_rules("fsdp_tp")
    spec = P("layers", "embed", "kv_heads", "kv")
    assert sharding.logical_to_mesh_spec(spec, rules) == P(None, "fsdp", "tensor")
    # 2 KV heads cannot be split 4 ways: that dim is replicated, embed stays on fsdp.
    fitted = sharding.logical_to_mesh_spec(spec, rules, (2, 64, 2, 16), mesh)
    assert fitted == P(None, "fsdp")
    # A tuple of mesh axes keeps its longest dividing prefix.
    rules_dp = sharding.get_rules("dp")
    mesh_dp = sharding.make_mesh({"data": 2, "fsdp": 4, "tensor": 1})
    assert sharding.logical_to_mesh_spec(P("batch"), rules_dp, (4,), mesh_dp) == P("data")
    assert sharding.logical_to_mesh_spec(P("batch"), rules_dp, (16,), mesh_dp) == P(
        ("data", "fsdp", "tensor"))


# ----------------------------------------------------------------------------- forward

@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_sharded_forward_matches_single_device(name, cfg, params, specs, batch):
    tokens, mask = batch
    mesh, rules, placed = _placed(name, params, specs)
    global_batch = sharding.make_global_batch({"tokens": tokens, "mask": mask}, mesh,
                                              rules=rules)

    def logits_fn(p, b):
        return models.forward(p, b["tokens"], config=cfg, attention_mask=b["mask"])[0]

    with sharding.activate(mesh, rules):
        fn = jax.jit(logits_fn)
        hlo = fn.lower(placed, global_batch).as_text()
        sharded = fn(placed, global_batch)
    # The models' logical activation constraints took effect inside `activate`.
    assert "sharding_constraint" in hlo
    assert "sharding_constraint" not in jax.jit(logits_fn).lower(params, global_batch).as_text()
    # The batch is split over the batch mesh axes (and so are the logits).
    assert global_batch["tokens"].sharding.spec == sharding.batch_spec(rules, 2)
    assert _live_axes(sharded.sharding.spec[0], mesh) == _live_axes(
        sharding.batch_spec(rules)[0], mesh)
    reference = models.jit_forward(params, jnp.asarray(tokens), jnp.asarray(mask), config=cfg)
    numerics.assert_forward_close(sharded, reference, cfg, tokens.shape[1])


# ----------------------------------------------------------------------------- params

@pytest.mark.parametrize("name", ["fsdp", "fsdp_tp"])
def test_large_params_sufficiently_sharded(name, params, specs):
    mesh, _, placed = _placed(name, params, specs)
    shards = mesh.shape["fsdp"] * mesh.shape["tensor"]  # `data` replicates parameters.
    assert shards == (4 if name == "fsdp" else 8)
    # Every leaf of >= 4 KiB (the embedding and all kernels) is split `shards` ways.
    sharding.assert_sufficiently_sharded(placed, shards, min_bytes=4096)
    big = [x for x in jax.tree.leaves(placed) if x.nbytes >= 4096]
    assert len(big) == 8  # embed + 7 stacked kernels per layer.
    total = sum(x.nbytes for x in jax.tree.leaves(placed))
    per_device = sum(sharding.per_device_bytes(x) for x in jax.tree.leaves(placed))
    assert per_device < total / shards * 1.1


def test_dp_replicates_and_check_catches_it(params, specs):
    _, _, placed = _placed("dp", params, specs)
    for leaf in jax.tree.leaves(placed):
        assert sharding.per_device_bytes(leaf) == leaf.nbytes
    with pytest.raises(AssertionError, match="insufficiently sharded"):
        sharding.assert_sufficiently_sharded(placed, 8)


def test_sharded_init_matches_init_params(cfg, params, specs):
    mesh = sharding.make_mesh(LAYOUTS["fsdp_tp"])
    rules = sharding.get_rules("fsdp_tp")
    born = sharding.sharded_init(lambda rng: models.init_params(cfg, rng), specs, mesh, rules,
                                 jax.random.PRNGKey(0))
    sharding.assert_sufficiently_sharded(born, 8, min_bytes=4096)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)),
                 born, params)


# ----------------------------------------------------------------------------- optimizer

@pytest.mark.parametrize("name", ["fsdp", "fsdp_tp"])
def test_adam_state_follows_param_sharding(name, params, specs):
    mesh, rules, placed = _placed(name, params, specs)
    optimizer = optax.adamw(1e-3, weight_decay=0.1)
    shardings = sharding.optimizer_state_sharding(optimizer, placed, specs, mesh, rules)
    adam = shardings[0]
    param_shardings = jax.tree.map(lambda x: x.sharding, placed)
    for moment in (adam.mu, adam.nu):
        assert jax.tree.structure(moment) == jax.tree.structure(param_shardings)
        for got, want in zip(jax.tree.leaves(moment), jax.tree.leaves(param_shardings)):
            assert got.is_equivalent_to(want, 4)
    assert adam.count.spec == P()
    state = sharding.shard_optimizer_state(optimizer.init(params), optimizer, params, specs,
                                           mesh, rules)
    shards = mesh.shape["fsdp"] * mesh.shape["tensor"]
    sharding.assert_sufficiently_sharded(state[0].mu, shards, min_bytes=4096)


def test_sharded_adam_step_matches_unsharded(cfg, params, specs, batch):
    tokens, mask = batch
    name = "fsdp_tp"
    mesh, rules, placed = _placed(name, params, specs)
    lr, eps = 1e-2, 1e-8
    optimizer = optax.adam(lr, eps=eps)
    state_shardings = sharding.optimizer_state_sharding(optimizer, placed, specs, mesh, rules)
    param_shardings = jax.tree.map(lambda x: x.sharding, placed)

    def step(p, s, t, m):
        def loss(p):
            logits = models.forward(p, t, config=cfg, attention_mask=m)[0]
            return jnp.mean(jax.nn.logsumexp(logits, axis=-1) * m)
        grads = jax.grad(loss)(p)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, grads

    global_batch = sharding.make_global_batch((tokens, mask), mesh, rules=rules)
    with sharding.activate(mesh, rules):
        new_p, new_s, grads = jax.jit(step, out_shardings=(param_shardings, state_shardings,
                                                           param_shardings))(
            placed, jax.device_put(optimizer.init(params), state_shardings), *global_batch)
    ref_p, ref_s, ref_grads = jax.jit(step)(params, optimizer.init(params), tokens, mask)
    # The gradients are the same sums in another order (sharded partial sums + all-reduce).
    numerics.assert_trees_reorder_close(
        grads, ref_grads, numerics.gradient_chain(cfg, tokens.shape[1], tokens.size))
    # Adam's first step is lr·g/(|g| + eps): an entry with |g| near eps can turn a last-bit
    # gradient difference into a step of up to lr, so the parameters are bounded per entry by
    # the gradients each side used (numerics.adam_first_step_atol derives it).
    numerics.assert_adam_first_step_close(new_p, ref_p, grads, ref_grads, lr=lr, eps=eps)
    # The moments are (1 − b1)·g and (1 − b2)·g²: elementwise in the gradients each side used,
    # within their roundings (the float32 constant and the product; for nu also the square);
    # below float32's normal range a result may be flushed to zero (XLA's CPU runtime flushes
    # subnormals), an error below the smallest normal number.
    sub = float(np.finfo(np.float32).tiny)
    for got, g in zip(jax.tree.leaves(new_s[0].mu), jax.tree.leaves(grads)):
        np.testing.assert_allclose(np.asarray(got), (1 - 0.9) * np.asarray(g, np.float64),
                                   rtol=numerics.gamma(2), atol=sub)
    for got, g in zip(jax.tree.leaves(new_s[0].nu), jax.tree.leaves(grads)):
        np.testing.assert_allclose(np.asarray(got), (1 - 0.999) * np.asarray(g, np.float64) ** 2,
                                   rtol=numerics.gamma(3), atol=sub)
    sharding.assert_sufficiently_sharded(new_s[0].nu, 8, min_bytes=4096)


# ----------------------------------------------------------------------------- activations, batches

def test_constrain_applies_inside_activate_only():
    mesh = sharding.make_mesh(LAYOUTS["fsdp_tp"])
    rules = sharding.get_rules("fsdp_tp")
    x = jnp.arange(8 * 4 * 16, dtype=jnp.float32).reshape(8, 4, 16)
    fn = jax.jit(lambda x: sharding.constrain(x * 2, ("batch", "length", "mlp")))
    with sharding.activate(mesh, rules):
        y = fn(x)
    assert y.sharding.is_equivalent_to(NamedSharding(mesh, P("fsdp", None, "tensor")), 3)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * 2)
    # Explicit mesh and rules work without the context.
    z = jax.jit(lambda x: sharding.constrain(x, ("batch", None, None), mesh=mesh,
                                             rules=rules))(x)
    assert z.sharding.is_equivalent_to(NamedSharding(mesh, P("fsdp")), 3)
    # No mesh, no rules: a no-op.
    assert "sharding_constraint" not in fn.lower(x).as_text()
    with pytest.raises(ValueError, match="rules"):
        sharding.constrain(x, ("batch",), mesh=mesh)


def test_make_global_batch_single_process():
    mesh = sharding.make_mesh({"data": 2, "fsdp": 4, "tensor": 1})
    local = {"tokens": np.arange(16 * 5).reshape(16, 5), "reward": np.arange(16.0)}
    rows = sharding.process_batch_rows(16, mesh)
    assert (rows.start, rows.stop) == (0, 16)
    out = sharding.make_global_batch(local, mesh)
    assert out["tokens"].shape == (16, 5)
    assert out["tokens"].sharding.spec == P(("data", "fsdp"))
    assert out["tokens"].addressable_shards[0].data.shape == (2, 5)
    np.testing.assert_array_equal(np.asarray(out["reward"]), local["reward"])
    same = sharding.make_global_batch(local, mesh, same_on_all_processes=True)
    np.testing.assert_array_equal(np.asarray(same["tokens"]), local["tokens"])
    assert same["tokens"].sharding == out["tokens"].sharding
    replicated = sharding.make_global_batch(local, mesh, P())
    assert replicated["tokens"].addressable_shards[0].data.shape == (16, 5)
    with pytest.raises(ValueError, match="not divisible by 8"):
        sharding.make_global_batch({"x": np.zeros((12, 3))}, mesh)
    with pytest.raises(ValueError, match="leading batch"):
        sharding.make_global_batch({"x": np.float32(1.0)}, mesh, P())


def test_sharded_kv_cache_prefill_matches_single_device(cfg, params, specs, batch):
    tokens, mask = batch
    mesh, rules, placed = _placed("fsdp_tp", params, specs)
    cache = models.init_cache(cfg, tokens.shape[0], 16)
    cache_specs = sharding.cache_logical_axes(cfg)
    assert jax.tree.structure(cache_specs) == jax.tree.structure(cache)
    sharded_cache = sharding.shard_params(cache, cache_specs, mesh, rules)
    # k/v of every layer [B, Hkv, S, Dh]: batch over fsdp (data=1), KV heads over tensor.
    for k in sharded_cache["k"]:
        assert k.sharding.spec == P(("data", "fsdp"), "tensor")
    global_batch = sharding.make_global_batch((tokens, mask), mesh, rules=rules)

    def prefill(p, c, t, m):
        logits, new_cache = models.forward(p, t, config=cfg, attention_mask=m, cache=c)
        return logits[:, -1], new_cache["k"]

    with sharding.activate(mesh, rules):
        logits, k = jax.jit(prefill)(placed, sharded_cache, *global_batch)
    ref_logits, ref_k = jax.jit(prefill)(params, cache, tokens, mask)
    numerics.assert_forward_close(logits, ref_logits, cfg, tokens.shape[1])
    numerics.assert_forward_close(k, ref_k, cfg, tokens.shape[1])
