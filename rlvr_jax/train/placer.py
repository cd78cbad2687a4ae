"""`Placer`: puts a run's params, optimizer states, RL states and batches on its mesh
(made by `train/build.py` from `config.mesh`; the sampler's mesh of `mesh.sampler_devices`
has its own)."""
import jax

from rlvr_jax import distributed, models, sharding
from rlvr_jax.models import lora
from rlvr_jax.train import state as state_lib


class Placer:
    """Puts params, states and batches on the mesh.

    A state is placed where the compiled steps return it, so that the second call of a
    step does not compile it again: on a one-device mesh everything is replicated (what
    XLA reports for a single device), and the state's scalars (step, rng, data position,
    β) are replicated on the mesh (`scalars`).
    """

    def __init__(self, mesh, rules, model_config):
        self.mesh, self.rules, self.model_config = mesh, rules, model_config
        self.specs = models.param_logical_axes(model_config)
        self.value_specs = models.value_logical_axes(model_config)
        self._replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def _place(self, tree, shard):
        """`tree` replicated on a one-device mesh (where XLA returns a step's outputs there),
        else `shard()`."""
        return jax.device_put(tree, self._replicated) if self.mesh.size == 1 else shard()

    def shardings(self, shapes, specs=None):
        """The shardings `params` gives a parameter pytree of `shapes` (ShapeDtypeStructs)."""
        if self.mesh.size == 1:
            return jax.tree.map(lambda _: self._replicated, shapes)
        return sharding.logical_to_mesh_sharding(
            self.specs if specs is None else specs, self.mesh, self.rules, shapes)

    def init(self, init_fn, *args, specs=None):
        """`init_fn(*args)` (a parameter pytree) run under jit with its outputs born placed
        as `params` places them (`sharding.sharded_init`): no device and no process ever
        holds the whole model. specs: its logical axes (default the policy's)."""
        specs = self.specs if specs is None else specs
        if self.mesh.size == 1:
            return jax.jit(init_fn, out_shardings=self._replicated)(*args)
        return sharding.sharded_init(init_fn, specs, self.mesh, self.rules, *args)

    def specs_of(self, params):
        """The logical specs of a policy tree (with LoRA adapters / a quantized base, or the
        adapters alone: `models.lora.specs_like`)."""
        return lora.specs_like(self.specs, params, self.model_config)

    def params(self, params):
        return self._place(params, lambda: sharding.shard_params(
            params, self.specs_of(params), self.mesh, self.rules))

    def opt_state(self, opt_state, tx, params):
        """`opt_state` of `tx` over the trainable part of `params` (`split_trainable`)."""
        trainable = state_lib.split_trainable(params)[0]
        return self._place(opt_state, lambda: sharding.shard_optimizer_state(
            opt_state, tx, trainable, self.specs_of(trainable), self.mesh, self.rules))

    def value_params(self, value_params):
        return self._place(value_params, lambda: sharding.shard_params(
            value_params, self.value_specs, self.mesh, self.rules))

    def value_opt_state(self, opt_state, tx, value_params):
        return self._place(opt_state, lambda: sharding.shard_optimizer_state(
            opt_state, tx, value_params, self.value_specs, self.mesh, self.rules))

    def replicated(self, x):
        """`x` (an array or None) replicated on the mesh."""
        return None if x is None else jax.device_put(x, self._replicated)

    def scalars(self, state: state_lib.TrainState) -> state_lib.TrainState:
        """`state` with its step, rng, data position and β replicated on the mesh."""
        put = self.replicated
        return state.replace(step=put(state.step), rng=put(state.rng),
                             data_position=put(state.data_position), kl_coef=put(state.kl_coef))

    def batch(self, batch, source: str = "the batch"):
        """A pytree of host arrays [B, ...] that every process's loader yields whole (same
        seed, same order), sharded over the mesh's batch axes; on several processes first
        checked to be the same everywhere (a ValueError naming `source` if not)."""
        distributed.check_same_on_all_processes(batch, source)
        return sharding.make_global_batch(batch, self.mesh, rules=self.rules,
                                          same_on_all_processes=True)
