"""The state tests/test_distributed.py checkpoints across process counts: the tiny model's
parameters and an Adam state after one update (distinct, non-trivial values), placed on a
mesh under the given rules. Every process builds the same values (fixed seeds)."""
import jax
import optax

from rlvr_jax import models, sharding


def make_state(cfg, mesh, rules) -> dict:
    """{"params", "opt_state"} placed on `mesh` (born sharded: `sharding.sharded_init`)."""
    specs = models.param_logical_axes(cfg)
    tx = optax.adam(1e-2)

    def init(key):
        params = models.init_params(cfg, key)
        grads = jax.tree.map(lambda p: p * 0.5 + 1.0, params)
        updates, opt_state = tx.update(grads, tx.init(params), params)
        return {"params": optax.apply_updates(params, updates), "opt_state": opt_state}

    abstract = jax.eval_shape(init, jax.random.PRNGKey(3))
    shardings = {"params": sharding.logical_to_mesh_sharding(specs, mesh, rules,
                                                             abstract["params"]),
                 "opt_state": sharding.optimizer_state_sharding(tx, abstract["params"], specs,
                                                                mesh, rules)}
    return jax.jit(init, out_shardings=shardings)(jax.random.PRNGKey(3))
