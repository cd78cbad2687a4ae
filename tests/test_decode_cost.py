"""rlvr_jax.perf.decode_cost: the bytes of a decode step and of a rollout against their minimum."""
import jax
import jax.numpy as jnp
import pytest

from rlvr_jax import cache_phases, sampling
from rlvr_jax.perf import decode_cost


def test_fused_gather_overcount_is_the_table_minus_its_gathered_rows():
    """An embedding lookup fused with its consumer: the pinned CPU cost model charges the
    whole [V, D] table; the overcount is the table minus the rows gathered."""
    table = jax.ShapeDtypeStruct((4096, 64), jnp.float32)
    ids = jax.ShapeDtypeStruct((16, 1), jnp.int32)
    compiled = jax.jit(lambda t, i: jnp.sin(jnp.take(t, i, axis=0)).sum(-1)).lower(
        table, ids).compile()
    over = decode_cost.fused_gather_overcount(compiled.as_text())
    assert over == 4096 * 64 * 4 - 16 * 64 * 4
    charged = compiled.cost_analysis()
    charged = charged[0] if isinstance(charged, list) else charged
    assert charged["bytes accessed"] - over < 16 * 64 * 4 * 4  # Rows, ids, output: small.


def test_fused_gather_overcount_follows_a_convert_to_the_table():
    """The lookup in the compute dtype gathers from convert(table): still the table."""
    table = jax.ShapeDtypeStruct((4096, 64), jnp.float32)
    ids = jax.ShapeDtypeStruct((16, 1), jnp.int32)
    compiled = jax.jit(lambda t, i: jnp.sin(jnp.take(t.astype(jnp.bfloat16), i, axis=0))
                       .sum(-1)).lower(table, ids).compile()
    assert decode_cost.fused_gather_overcount(compiled.as_text()) == 4096 * 64 * 4 - 16 * 64 * 4
    assert decode_cost.cost_model_overcharges_fused_gathers()  # The pinned jaxlib's CPU model.


def test_no_gather_no_overcount():
    compiled = jax.jit(lambda x: jnp.sin(x) @ x.T).lower(
        jax.ShapeDtypeStruct((8, 8), jnp.float32)).compile()
    assert decode_cost.fused_gather_overcount(compiled.as_text()) == 0
    assert decode_cost.fused_gather_overcount("not HLO") == 0


def test_rollout_cost_sums_its_phases(tiny_config):
    """The automatic window at N = 128 gives four phases covering steps 1 … 127; fewer
    unfilled slots are read than with one phase over the whole cache."""
    kw = dict(prompts=2, samples=2, prompt_len=8, new_tokens=128)
    auto = decode_cost.rollout_cost(tiny_config, **kw)
    single = decode_cost.rollout_cost(tiny_config, cache_window=0, **kw)
    assert auto["cache_window"] == cache_phases.auto_cache_window(128) == 32
    assert [size for size, _ in auto["phases"]] == [40, 72, 104, 135]
    assert sum(steps for _, steps in auto["phases"]) == 127 == single["phases"][0][1]
    assert auto["minimum_bytes"] == pytest.approx(single["minimum_bytes"])
    assert auto["bytes_accessed"] < single["bytes_accessed"]
    assert 0 < single["resize_bytes"] < auto["resize_bytes"]  # One copy against four.
    for cost in (auto, single):
        assert cost["minimum_bytes"] < cost["bytes_gather_rows"] <= cost["bytes_accessed"]
        assert cost["ratio"] == pytest.approx(cost["bytes_accessed"] / cost["minimum_bytes"])
