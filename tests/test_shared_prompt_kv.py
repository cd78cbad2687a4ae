"""SamplingConfig.share_prompt_kv: each prompt's KV cache kept once for its G rows
(`models.decoding`, `decode_attention.Prefix`) against the cache that copies it G times."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling
from rlvr_jax.models import decode_attention, decoding
from rlvr_jax.sampling import SamplingConfig
from rlvr_jax.tree_rollouts import TreeConfig
from tests import numerics


def _prefix_inputs(cfg, pp=3, g=4, sp=12, s=20):
    """q [pp·g, H, Dh]; a prefix of pp groups × sp slots (group 1 left-padded by 5 slots,
    group 2 by 11: one real slot); the rows' own k, v [pp·g, Hkv, s, Dh], a masked slot in
    row 3; end 9."""
    rng = np.random.default_rng(0)
    f = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)  # noqa: E731
    hkv, dh = cfg.n_kv_heads, cfg.head_dim
    pmask = np.ones((pp, sp), np.int32)
    pmask[1, :5] = pmask[2, :11] = 0
    prefix = decode_attention.Prefix(f(pp, hkv, sp, dh), f(pp, hkv, sp, dh), jnp.asarray(pmask),
                                     jnp.asarray(np.argmax(pmask != 0, axis=1), jnp.int32))
    mask = np.ones((pp * g, s), np.int32)
    mask[3, 4] = 0
    return (f(pp * g, cfg.n_heads, dh), f(pp * g, hkv, s, dh), f(pp * g, hkv, s, dh),
            jnp.asarray(mask), jnp.zeros((pp * g,), jnp.int32), jnp.asarray(9, jnp.int32), prefix)


@pytest.mark.parametrize("impl", ["plain", "grouped", "interpret"])
def test_attention_over_a_shared_prefix_is_attention_over_the_copied_cache(tiny_config, impl):
    """Every path over (its group's prefix, its own slots) against "grouped" attention over
    each row's copy of the prefix concatenated with its slots: one softmax either way, in
    other orders (the two parts' sums combined at the end: as the kernel's split chunks), so
    the bound of test_decode_attention's comparison over the sp + s slots."""
    cfg = tiny_config
    q, k, v, mask, start, end, prefix = _prefix_inputs(cfg)
    g = q.shape[0] // prefix.k.shape[0]
    rep = lambda x: jnp.repeat(x, g, axis=0)  # noqa: E731
    sp, s, dh = prefix.mask.shape[1], mask.shape[1], cfg.head_dim
    want = decode_attention.decode_attention(
        q, jnp.concatenate([rep(prefix.k), k], axis=2), jnp.concatenate([rep(prefix.v), v], 2),
        jnp.concatenate([rep(prefix.mask), mask], axis=1), rep(prefix.start), sp + end, cfg,
        impl="grouped")
    got = decode_attention.decode_attention(q, k, v, mask, start, end, cfg, prefix=prefix,
                                            impl=impl, block=8)
    top = lambda *xs: max(float(jnp.max(jnp.abs(x))) for x in xs)  # noqa: E731
    magnitude = top(prefix.v, v) * (1.0 + top(q) * top(prefix.k, k) * dh ** 0.5)
    atol = numerics.reorder_atol(dh + 2 * (sp + s) + 4 + 2 * numerics.TRANSCENDENTAL_U,
                                 magnitude)
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


def _rollouts(params, cfg, sc, budgets=None, seed=3):
    """(shared, copied): the same rollout with and without share_prompt_kv."""
    p, tp = 4, 6
    prompts = np.random.default_rng(0).integers(1, cfg.vocab_size, (p, tp))
    mask = np.ones((p, tp), np.int32)
    mask[1, :3] = mask[3, :5] = 0  # Left padding: positions count the prefix's real slots.
    run = lambda c: sampling.jit_generate(  # noqa: E731
        params, jnp.asarray(prompts * mask, jnp.int32), jnp.asarray(mask),
        jax.random.PRNGKey(seed), model_config=cfg, sampling_config=c, budgets=budgets)
    return run(sc.replace(share_prompt_kv=True)), run(sc)


@pytest.mark.parametrize("case", ["phases_compaction", "tree", "kernel"])
def test_shared_prompt_kv_samples_what_the_copied_cache_samples(tiny_params, tiny_config,
                                                                case):
    """Left-padded prompts, G = 8: two cache phases and compaction to 16 then 8 rows (which
    gives each kept row its own copy of its prompt's KV), tree forks within a prompt (the
    prefix stays shared), or the kernel in interpret mode: the same tokens, mask and
    `finished` as the loop over the copied cache; log-probs within a forward's reordering
    bound (the attention's softmax summed in two parts)."""
    n, g = 16, 8
    budgets = jnp.asarray(np.random.default_rng(1).integers(1, n + 1, 4 * g), jnp.int32)
    sc = SamplingConfig(temperature=0.9, top_k=20, max_new_tokens=n, num_samples=g,
                        stop_token_ids=tuple(range(1, 128, 16)), cache_window=8,
                        compact_ratio=0.5)
    if case == "tree":
        sc = sc.replace(tree=TreeConfig(mode="depth", branches=2, max_forks=2, depths=(3, 9)))
    if case == "kernel":
        sc, budgets = sc.replace(attention_impl="interpret", compact_ratio=0.0), None
    shared, copied = _rollouts(tiny_params, tiny_config, sc, budgets)
    for name in ("tokens", "mask", "finished", "decode_steps", "fork_parent", "fork_at"):
        if getattr(copied, name) is not None:
            np.testing.assert_array_equal(getattr(shared, name), getattr(copied, name))
    numerics.assert_forward_close(shared.logprobs, copied.logprobs, tiny_config, 6 + n,
                                  extra=4 + numerics.TRANSCENDENTAL_U)
    if case == "phases_compaction":
        assert (np.asarray(copied.decode_steps) < n).any()  # Compaction ran.
    if case == "tree":
        assert (np.asarray(copied.fork_at) > 0).any()  # Rows forked.


def test_shared_cache_layout_and_row_moves(tiny_params, tiny_config):
    """The shared layout: the prefill's P rows kept once (nothing repeated), the rows' own
    slots empty from slot 0; growing keeps the prefix; rows moved within their groups keep
    it shared, rows moved across groups get their group's copy; a shared cache takes one
    token per call and is not shared again."""
    cfg = tiny_config
    prefill = decoding.init_cache(cfg, 2, 5)
    prefill["k"] = tuple(x + i for i, x in enumerate(prefill["k"]))
    prefill["mask"] = prefill["mask"].at[1].set(1)
    shared = decoding.resize_cache(prefill, 9, repeats=3, share=True)
    assert shared["k"][0].shape == (6, cfg.n_kv_heads, 4, cfg.head_dim)
    assert shared["prefix"]["k"][1] is prefill["k"][1] and int(shared["index"]) == 0
    assert decoding.prefix_slots(shared) == 5
    grown = decoding.resize_cache(shared, 12)
    assert grown["mask"].shape == (6, 7) and grown["prefix"] is shared["prefix"]
    index = jnp.asarray([0, 0, 2, 5], jnp.int32)
    across = decoding.take_rows(grown, index)
    np.testing.assert_array_equal(across["prefix"]["mask"],
                                  np.asarray(prefill["mask"])[[0, 0, 0, 1]])
    kept = decoding.take_rows(grown, jnp.asarray([0, 0, 1, 5, 5, 3], jnp.int32),
                              same_groups=True)
    assert kept["prefix"] is grown["prefix"]
    with pytest.raises(ValueError, match="shared prefix cannot be repeated"):
        decoding.resize_cache(shared, 12, repeats=2, share=True)
    prepared = decoding.prepare_params(tiny_params, cfg)
    with pytest.raises(ValueError, match="one token per row"):
        decoding.forward(prepared, jnp.ones((6, 2), jnp.int32), config=cfg, cache=shared)


def test_kernel_over_a_shared_prefix_runs_on_each_device_shard(tiny_config):
    """Under `sharding.activate` (fsdp_tp: rows and groups over fsdp = 4, KV heads over
    tensor = 2) the kernel (interpret mode) runs on each device's rows, groups and KV heads,
    with no collective in the program (a row's group lies on its device), and gives the
    unsharded values (only XLA's combination of the partial sums may round differently:
    exp weights, two sums over the chunks and a division, of values at most max|v|)."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    from rlvr_jax import sharding
    cfg = tiny_config
    q, k, v, mask, start, end, prefix = _prefix_inputs(cfg, pp=4, g=2)
    attend = jax.jit(lambda q, k, v, mask, start, end, prefix: decode_attention.decode_attention(
        q, k, v, mask, start, end, cfg, prefix=prefix, impl="interpret", block=8))
    want = attend(q, k, v, mask, start, end, prefix)
    mesh = sharding.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    with sharding.activate(mesh, sharding.get_rules("fsdp_tp")):
        place = lambda x, *spec: jax.device_put(x, NamedSharding(mesh, P(*spec)))  # noqa: E731
        args = (place(q, "fsdp", "tensor"), place(k, "fsdp", "tensor"),
                place(v, "fsdp", "tensor"), place(mask, "fsdp"), place(start, "fsdp"), end,
                decode_attention.Prefix(place(prefix.k, "fsdp", "tensor"),
                                        place(prefix.v, "fsdp", "tensor"),
                                        place(prefix.mask, "fsdp"), place(prefix.start, "fsdp")))
        text = attend.lower(*args).compile().as_text()
        got = attend(*args)
    assert not any(op in text for op in ("all-gather", "all-to-all", "all-reduce",
                                         "collective-permute"))
    chunks = 3 + 2  # The rows' 3 blocks of 8 slots, the prefix's 2 (one chunk each).
    np.testing.assert_allclose(got, want, rtol=0, atol=numerics.reorder_atol(
        chunks + chunks + 1 + numerics.TRANSCENDENTAL_U,
        max(float(jnp.max(jnp.abs(v))), float(jnp.max(jnp.abs(prefix.v))))))


def test_the_measuring_scripts_run(monkeypatch, capsys):
    """scripts/attention_cost.py and scripts/decode_step_time.py (docs/performance.md, issue 52
    §7) at the tiny shape: one JSON line each; the shared layout reads fewer valid K/V bytes
    (P·Tp + B·t slots against B·(Tp + t), G > 1); a bad --step is a usage error."""
    import json
    import os
    import runpy
    scripts = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts")
    shape = ["--preset", "tiny", "--prompts", "2", "--samples", "4", "--prompt-len", "8",
             "--new-tokens", "12", "--step", "5"]

    def run(name, *args):
        monkeypatch.setattr("sys.argv", [name, *shape, *args])
        runpy.run_path(os.path.join(scripts, name), run_name="__main__")
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    cost = run("attention_cost.py")
    assert cost["valid_kv_shared_mb"] < cost["valid_kv_copied_mb"]
    assert min(cost["copied_mb"], cost["shared_mb"], cost["rows_only_mb"]) > 0
    for layout in ("copied", "shared"):
        timed = run("decode_step_time.py", "--layout", layout, "--repeats", "1")
        assert timed["layout"] == layout and timed["rows"] == 8 and timed["wall_s"] > 0
    with pytest.raises(SystemExit):
        run("attention_cost.py", "--step", "12")
