"""The fused attention kernels (`rlvr_jax.models.attention`) against the plain XLA path, in
Pallas interpret mode on CPU: forward and gradients, causal within packed segments, GQA.

Tolerances. Both sides compute, in float32, softmax(q·kᵀ/√Dh)·v over the same unmasked keys:
the scores' dot (Dh terms), the softmax's sum and the weighted sum of values (≤ T' terms each,
T' the row padded to the kernel's block), and the exps — plus, in the kernels' online
softmax, one rescaling exp and multiplication per key block. Masked keys contribute exact
zeros on both sides. The outputs are bounded by max|v| (a convex combination); gradients
mirror the chain once more and sum over the T query positions.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax.models import attention, transformer
from rlvr_jax.models.config import ModelConfig

from tests import numerics

B, T, H, HKV, DH = 2, 40, 4, 2, 16
CFG = ModelConfig(n_heads=H, n_kv_heads=HKV, head_dim=DH, dtype="float32")
# Row 0: three packed segments then padding; row 1: left padding then one sequence.
SEGMENTS = np.array([[1] * 12 + [2] * 15 + [3] * 9 + [0] * 4,
                     [0] * 7 + [1] * 33], np.int32)
BLOCKS = {"pallas_gpu": 16, "splash": 128}


def _inputs():
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.random.normal(keys[0], (B, T, H, DH))
    k, v = (jax.random.normal(kk, (B, T, HKV, DH)) for kk in keys[1:3])
    w = jax.random.normal(keys[3], (B, T, H, DH)) * (SEGMENTS != 0)[:, :, None, None]
    return q, k, v, w


def _plain(q, k, v):
    seg = jnp.asarray(SEGMENTS)
    slots = jnp.broadcast_to(jnp.arange(T)[None], (B, T))
    mask = transformer.attention_mask_from(seg, seg, slots, slots)
    return transformer.grouped_attention(q, k, v, mask, CFG, kv_layout="bsnk")


def _chain(block):
    padded = -(-T // block) * block
    blocks = padded // block
    return DH + 2 * padded + (2 + 2 * blocks) * numerics.TRANSCENDENTAL_U


def test_auto_picks_by_backend():
    assert [attention.resolve("auto", b) for b in ("cpu", "gpu", "tpu")] == [
        "xla", "pallas_gpu", "splash"]
    assert attention.resolve("splash", "cpu") == "splash"
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(attention="flash")


@pytest.mark.parametrize("implementation", ["pallas_gpu", "splash"])
def test_kernel_forward_and_gradients_match_the_plain_path(implementation):
    q, k, v, w = _inputs()
    block = BLOCKS[implementation]
    fused = lambda q, k, v: attention.fused_attention(  # noqa: E731
        q, k, v, jnp.asarray(SEGMENTS), implementation=implementation, block=block,
        interpret=True)
    real = SEGMENTS != 0
    got, want = fused(q, k, v), _plain(q, k, v)
    magnitude = float(jnp.max(jnp.abs(v)))
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], rtol=0,
                               atol=numerics.reorder_atol(_chain(block), magnitude))
    # Gradients of Σ w·out over the real positions (padding outputs differ by design). Term
    # sizes: dv sums p·w (≤ |w|); dp = w·v (Dh terms), ds = p·(dp − Σ p·dp) ≤ 2·Dh·|w||v|, and
    # dq, dk sum ds·k/√Dh, ds·q/√Dh: each term ≤ 2·Dh·|w||v|·max(|q|, |k|).
    size = 2 * DH * float(jnp.max(jnp.abs(w))) * magnitude * max(
        float(jnp.max(jnp.abs(q))), float(jnp.max(jnp.abs(k))), 1.0)
    loss = lambda f: lambda q, k, v: jnp.sum(w * f(q, k, v))  # noqa: E731
    g_got = jax.grad(loss(fused), (0, 1, 2))(q, k, v)
    g_want = jax.grad(loss(_plain), (0, 1, 2))(q, k, v)
    for a, b in zip(g_got, g_want):
        mask = real[:, :, None, None]
        np.testing.assert_allclose(np.asarray(a) * mask, np.asarray(b) * mask, rtol=0,
                                   atol=numerics.reorder_atol(2 * _chain(block) + T, size))


def test_kernel_runs_on_each_device_shard_under_a_mesh():
    """Under `sharding.activate` (rows over fsdp, heads over tensor) the kernel runs on each
    device's rows and heads: no collective in the program, and the plain path's values."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    from rlvr_jax import sharding
    mesh = sharding.make_mesh({"data": 1, "fsdp": 2, "tensor": 4})
    q, k, v, _ = _inputs()
    fused = jax.jit(lambda q, k, v, s: attention.fused_attention(
        q, k, v, s, implementation="pallas_gpu", block=BLOCKS["pallas_gpu"], interpret=True))
    with sharding.activate(mesh, sharding.get_rules("fsdp_tp")):
        place = lambda x, *spec: jax.device_put(x, NamedSharding(mesh, P(*spec)))  # noqa: E731
        # 2 KV heads do not split over tensor = 4: replicated there, as `fsdp_tp` fits them.
        args = (place(q, "fsdp", None, "tensor"), place(k, "fsdp"), place(v, "fsdp"),
                jax.device_put(jnp.asarray(SEGMENTS), NamedSharding(mesh, P("fsdp", None))))
        text = fused.lower(*args).compile().as_text()
        got = fused(*args)
    assert not any(op in text for op in ("all-gather", "all-to-all", "all-reduce"))
    real = SEGMENTS != 0
    np.testing.assert_allclose(
        np.asarray(got)[real], np.asarray(_plain(q, k, v))[real], rtol=0,
        atol=numerics.reorder_atol(_chain(BLOCKS["pallas_gpu"]), float(jnp.max(jnp.abs(v)))))


def test_model_forward_with_a_kernel_matches_the_plain_path(params, model_config):
    """The tiny model's packed forward (segments restart positions) through the Pallas GPU
    kernel in interpret mode: hidden states of real tokens as the plain path's."""
    seg = jnp.asarray(SEGMENTS)
    tokens = jax.random.randint(jax.random.PRNGKey(5), (B, T), 1,
                                model_config.vocab_size) * (seg != 0)
    positions = transformer.default_positions(seg)
    hidden = {impl: transformer.forward(params, tokens, positions,
                                        config=model_config.replace(attention=impl),
                                        segment_ids=seg, return_hidden=True)[0]
              for impl in ("xla", "pallas_gpu")}
    real = SEGMENTS != 0
    numerics.assert_forward_close(np.asarray(hidden["pallas_gpu"])[real],
                                  np.asarray(hidden["xla"])[real], model_config, 64,
                                  extra=4 * numerics.TRANSCENDENTAL_U)
