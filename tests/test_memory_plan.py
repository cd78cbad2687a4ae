"""Tests for rlvr_jax.perf.memory_plan's bookkeeping.

Compiling the RL step itself (`memory_plan.plan`) takes over a minute on 2 CPU cores, so it is
exercised by `scripts/memory_plan.py` (docs/performance.md), not here.
"""
from rlvr_jax.perf import memory_plan


def test_per_device_bytes_follow_the_sharding():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    n = jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("fsdp",))
    shapes = {"a": jax.ShapeDtypeStruct((8 * n, 3), jnp.float32),
              "b": jax.ShapeDtypeStruct((5,), jnp.bfloat16)}
    shardings = {"a": NamedSharding(mesh, PartitionSpec("fsdp")),
                 "b": NamedSharding(mesh, PartitionSpec())}
    assert memory_plan._per_device_bytes(shapes, shardings) == 8 * 3 * 4 + 5 * 2


def test_extrapolate_is_linear_per_layer():
    a = {"n_layers": 2, "x_bytes": 100, "mesh": {"fsdp": 1}, "name": "m"}
    b = {"n_layers": 4, "x_bytes": 140, "mesh": {"fsdp": 1}, "name": "m"}
    out = memory_plan.extrapolate(a, b, 10)
    assert out["x_bytes"] == 260 and out["n_layers"] == 10
    assert out["extrapolated_from"] == [2, 4] and out["name"] == "m"
