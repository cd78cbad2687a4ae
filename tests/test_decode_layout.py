"""Re-laying the parameters out for decoding (FSDP training layout → replicated, or
tensor-parallel) changes where the weights live during sampling, not what is sampled."""
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling, sharding
from rlvr_jax.models import init_params, param_logical_axes, presets
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import step as step_lib
from tests import numerics


def test_decode_layout_samples_the_same_completions():
    config = presets.get("tiny", n_heads=8, n_kv_heads=8, d_model=64, d_ff=128, vocab_size=128)
    mesh = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    fsdp = sharding.get_rules("fsdp")
    specs = param_logical_axes(config)
    params = sharding.shard_params(init_params(config, jax.random.PRNGKey(0)), specs, mesh, fsdp)
    assert params["embed"].sharding.spec != jax.sharding.PartitionSpec()  # Really sharded.
    replicated = sharding.logical_to_mesh_sharding(specs, mesh, sharding.get_rules("dp"), params)
    sc = sampling.SamplingConfig(temperature=0.8, max_new_tokens=6, num_samples=2)
    batch = {"prompt_tokens": jnp.asarray(np.random.default_rng(0).integers(1, 128, (8, 5)),
                                          jnp.int32),
             "prompt_mask": jnp.ones((8, 5), jnp.int32)}
    batch = sharding.make_global_batch(batch, mesh, rules=fsdp, same_on_all_processes=True)
    rng = jax.random.PRNGKey(1)
    with sharding.activate(mesh, fsdp):
        plain = step_lib.make_sample_fn(config, sc)(params, batch, rng)
        relaid = step_lib.make_sample_fn(config, sc, decode_shardings=replicated)(
            params, batch, rng)
        # Tensor-parallel ("tp": MLP and vocabulary split 8 ways, the rollout's activations
        # under those rules): the same sums in another order, so the reorder bound.
        tp = sharding.get_rules("tp")
        tensor_parallel = jax.jit(Sampler(
            config, sc, decode_rules=tp, decode_shardings=sharding.logical_to_mesh_sharding(
                specs, mesh, tp, params)).trace)(params, batch, rng)[0]
    for other in (relaid, tensor_parallel):
        np.testing.assert_array_equal(plain.tokens, other.tokens)
        numerics.assert_forward_close(plain.logprobs, other.logprobs, config, 5 + 6)
    assert params["embed"].sharding.spec != jax.sharding.PartitionSpec()  # Inputs untouched.
