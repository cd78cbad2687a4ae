"""rlvr_jax.models.decode_attention: the Pallas flash-decoding kernel (interpret mode on CPU)
and the plain decode path against the training forward's grouped attention, alone and inside
the sampler."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from rlvr_jax import sampling
from rlvr_jax.models import decode_attention
from tests import numerics


def _inputs(cfg, b=3, s=20):
    """q [b, H, Dh], k, v [b, Hkv, s, Dh], mask [b, s], start [b], end: rows starting at
    slots 0, 5, 13, 0, 5, 13, ..., all ending at 17 of 20 slots, a masked slot inside row
    1's range."""
    dh = cfg.head_dim
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((b, cfg.n_heads, dh)), jnp.float32)
    k, v = (jnp.asarray(rng.standard_normal((b, cfg.n_kv_heads, s, dh)), jnp.float32)
            for _ in range(2))
    mask = np.ones((b, s), np.int32)
    mask[1, 9] = 0
    start = jnp.asarray(np.resize([0, 5, 13], b), jnp.int32)
    return q, k, v, jnp.asarray(mask), start, jnp.asarray(17, jnp.int32)


def test_kernel_and_plain_path_match_grouped_attention_over_valid_slots(tiny_config):
    """Rows starting at slots 0, 5 and 13, all ending at 17 of 20 slots, a masked slot inside
    row 1's range; blocks of 8 (the last one shifted back to end at slot 20), one kernel program
    per block or one for all three (split K or not). Both sides are
    float32 sums in different orders of the same softmax-weighted values: the scores' dot
    (head_dim terms), the softmax's sum and the weighted sum (<= S terms each) and an exp;
    the scores' error scales the weights, hence the magnitude max|v| · (1 + max|score|)."""
    cfg = tiny_config
    s, dh = 20, cfg.head_dim
    args = (*_inputs(cfg), cfg)
    q, k, v = args[:3]
    grouped = decode_attention.decode_attention(*args, impl="grouped")
    plain = decode_attention.decode_attention(*args, impl="plain")
    kernel = decode_attention.decode_attention(*args, impl="pallas", block=8, interpret=True)
    whole = decode_attention.decode_attention(*args, impl="interpret", block=8, splits=1)
    scores = np.abs(np.asarray(q)).max() * np.abs(np.asarray(k)).max() * dh ** 0.5
    magnitude = float(np.abs(np.asarray(v)).max()) * (1.0 + scores)
    atol = numerics.reorder_atol(dh + 2 * s + 2 + numerics.TRANSCENDENTAL_U, magnitude)
    np.testing.assert_allclose(plain, grouped, rtol=0, atol=atol)
    np.testing.assert_allclose(kernel, grouped, rtol=0, atol=atol)  # 3 chunks of 1 block.
    np.testing.assert_allclose(whole, grouped, rtol=0, atol=atol)  # 1 chunk of 3 blocks.
    with pytest.raises(ValueError, match="attention_impl"):
        sampling.SamplingConfig(attention_impl="flash")
    # Defaults by backend: the kernel on GPUs (under a mesh per device: the test below).
    assert [decode_attention.default_impl(b) for b in ("cpu", "tpu", "gpu")] == \
        ["plain", "grouped", "pallas"]


def test_kernel_runs_on_each_device_shard_of_the_cache_under_a_mesh(tiny_config):
    """Under `sharding.activate` (fsdp_tp: rows over fsdp = 4, KV heads over tensor = 2) the
    kernel (interpret mode) runs on each device's rows and KV heads: no all-gather (nor any
    other collective) in the program, and the unsharded kernel's values. Each device runs the
    same kernel programs on the same rows and heads; only XLA's combination of the 3 chunks'
    partial sums may round differently: exp weights, two 3-term sums and a division, of
    values at most max|v| (the output is a convex combination of v)."""
    from jax.sharding import NamedSharding

    from rlvr_jax import sharding
    cfg = tiny_config
    q, k, v, mask, start, end = _inputs(cfg, b=8)
    attend = jax.jit(lambda *a: decode_attention.decode_attention(*a, cfg, impl="interpret",
                                                                  block=8))
    want = attend(q, k, v, mask, start, end)
    mesh = sharding.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    with sharding.activate(mesh, sharding.get_rules("fsdp_tp")):
        place = lambda x, *spec: jax.device_put(x, NamedSharding(mesh, P(*spec)))  # noqa: E731
        args = (place(q, "fsdp", "tensor"), place(k, "fsdp", "tensor"),
                place(v, "fsdp", "tensor"), place(mask, "fsdp"), place(start, "fsdp"), end)
        text = attend.lower(*args).compile().as_text()
        got = attend(*args)
    assert not any(op in text for op in ("all-gather", "all-to-all", "all-reduce",
                                         "collective-permute"))
    assert got.sharding.spec[:2] == ("fsdp", "tensor")
    np.testing.assert_allclose(got, want, rtol=0, atol=numerics.reorder_atol(
        3 + 3 + 1 + numerics.TRANSCENDENTAL_U, float(jnp.max(jnp.abs(v)))))


@pytest.mark.parametrize("impl", ["interpret", "plain"])
def test_decode_attention_samples_what_grouped_attention_samples(tiny_params, tiny_config,
                                                                 impl):
    """A rollout whose decode steps run the kernel (interpret mode) or the plain path against
    one on the training forward's grouped attention: same tokens, log-probs within a
    forward's reordering bound."""
    prompts = jnp.asarray([[0, 0, 11, 12, 13, 14], [21, 22, 23, 24, 25, 26]], jnp.int32)
    mask = (prompts != 0).astype(jnp.int32)
    sc = sampling.SamplingConfig(temperature=0.8, max_new_tokens=6, num_samples=2,
                                 attention_impl=impl)
    run = lambda c: sampling.jit_generate(tiny_params, prompts, mask,  # noqa: E731
                                          jax.random.PRNGKey(5), model_config=tiny_config,
                                          sampling_config=c)
    got, want = run(sc), run(sc.replace(attention_impl="grouped"))
    np.testing.assert_array_equal(got.tokens, want.tokens)
    numerics.assert_forward_close(got.logprobs, want.logprobs, tiny_config, 6 + 6)


def test_kernel_lowers_for_triton_at_the_qwen_shape(tiny_config):
    """The kernel's GPU lowering (Pallas -> Triton IR, done on this CPU): Triton takes only
    power-of-two tensors and dots of >= 16 rows, and qwen2.5-0.5b has 7 query heads per KV head
    and 128 + 512 - 1 = 639 cache slots. Compiling the IR needs a GPU (scripts/gpu_52.sh)."""
    cfg = tiny_config.replace(n_heads=14, n_kv_heads=2, head_dim=64, dtype="bfloat16")
    b, s = 4, 639
    args = (jax.ShapeDtypeStruct((b, cfg.n_heads, cfg.head_dim), jnp.bfloat16),
            *[jax.ShapeDtypeStruct((b, cfg.n_kv_heads, s, cfg.head_dim), jnp.bfloat16)] * 2,
            jax.ShapeDtypeStruct((b, s), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.int32),
            jax.ShapeDtypeStruct((), jnp.int32))
    fn = jax.jit(lambda *a: decode_attention.decode_attention(*a, cfg, impl="pallas"))
    text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    assert "xla.gpu.triton" in text and 'name = "decode_attention"' in text
