"""The update's micro-batch loops: gradient accumulation and the no-gradient scoring passes,
over `rl.microbatches` slices of the left-padded rows or over packed micro-batches
(`rl.pack_length` > 0, `train/packing.py`).

Shapes: b rows in a minibatch, B in the batch, N new tokens.
"""
import functools

import jax
import jax.numpy as jnp

from rlvr_jax import sharding
from rlvr_jax.train import packing
from rlvr_jax.train.experience import Experience
from rlvr_jax.train.rl_config import RLConfig


def map_microbatches(fn, data, num: int):
    """Apply fn to `num` equal row slices of data with lax.map; concatenate the outputs."""
    split = jax.tree.map(lambda x: x.reshape((num, x.shape[0] // num) + x.shape[1:]), data)
    out = jax.lax.map(fn, split)
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)


def scoring_passes(fn, exp: Experience, rl: RLConfig, params=None):
    """fn(params, micro-batch Experience) -> pytree of [b, N] arrays, over the whole batch,
    without gradient: on `rl.microbatches · rl.minibatches` slices of the left-padded rows,
    or summed over the packed micro-batches (`rl.pack_length` > 0; 0 in rows of invalid
    groups). The parameters pass each micro-batch through `_pinned` (gathered per
    micro-batch, not hoisted out of the loop)."""
    view = Experience(tokens=exp.tokens, attention=exp.attention, mask=exp.mask,
                      sampler_logp=exp.sampler_logp, row_valid=exp.row_valid)
    if not rl.pack_length:
        pieces = rl.microbatches * rl.minibatches
        return jax.lax.stop_gradient(map_microbatches(
            lambda x: fn(*_pinned(params, x)), view, pieces))
    rl = packing.with_rows(rl, exp.tokens.shape[0] // rl.minibatches, exp.tokens.shape[1])
    real = exp.attention * exp.row_valid[:, None].astype(exp.attention.dtype)
    plan = packing.plan(exp.tokens, real, pack_length=rl.pack_length, pack_rows=rl.pack_rows)
    micro = lambda m: view.replace(packed=packing.micro(  # noqa: E731
        plan, m, pack_rows=rl.pack_rows, num_new=exp.num_new))
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                         jax.eval_shape(fn, params, micro(0)))
    out = jax.lax.fori_loop(0, packing.trips(plan, rl.pack_rows), lambda m, acc: jax.tree.map(
        jnp.add, acc, fn(*_pinned(params, micro(m)))), zeros)
    return jax.lax.stop_gradient(out)


def _sharded(grads, specs):
    """grads constrained to the parameters' layout (`specs`: their logical axes; None leaves
    them to XLA): each micro-batch's gradients reduce-scatter into their FSDP shards and the
    accumulator stays sharded, instead of a full all-reduce per micro-batch."""
    if specs is None or jax.tree.structure(grads) != jax.tree.structure(
            specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec)):
        return grads  # A tree the specs do not describe (e.g. a trainable subset).
    return sharding.constrain_tree(grads, specs)


def _pinned(params, x):
    """(params, x) through an optimisation barrier tied to the loop-variant x: XLA cannot
    hoist the parameters' FSDP all-gathers out of the micro-batch loop (which would hold
    every layer's gathered weights for the whole loop); each micro-batch gathers its own."""
    return jax.lax.optimization_barrier((params, x))


def accumulate(grad_fn, params, micro, counts, specs=None):
    """(Σ loss, Σ grads, mean metrics) of grad_fn over the leading (micro-batch) axis; grads
    sharded as the parameters' logical `specs` say (see `_sharded`)."""
    def micro_step(acc, x):
        (loss, m), g = grad_fn(*_pinned(params, x), counts)
        return jax.tree.map(jnp.add, acc, (loss, _sharded(g, specs))), m

    zeros = (jnp.zeros((), jnp.float32), _sharded(jax.tree.map(jnp.zeros_like, params), specs))
    (loss, grads), mets = jax.lax.scan(micro_step, zeros, micro)
    return loss, grads, jax.tree.map(jnp.mean, mets)


def accumulate_packed(grad_fn, params, mb: Experience, plan: packing.Plan, counts,
                      rl: RLConfig, specs=None):
    """(Σ loss, Σ grads, mean metrics) of grad_fn over the packed micro-batches of minibatch
    `mb`: `packing.trips(plan)` of them (a loop whose trip count the lengths decide)."""
    def micro(m):
        x = packing.micro(plan, m, pack_rows=rl.pack_rows, num_new=mb.num_new)
        return mb.replace(mask=mb.mask * x.member.astype(mb.mask.dtype), packed=x)

    def body(m, acc):
        (loss, mets), g = grad_fn(*_pinned(params, micro(m)), counts)
        return jax.tree.map(jnp.add, acc, (loss, _sharded(g, specs), mets))

    shapes = jax.eval_shape(lambda: grad_fn(params, micro(0), counts))
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                         (shapes[0][0], shapes[1], shapes[0][1]))
    zeros = (zeros[0], _sharded(zeros[1], specs), zeros[2])
    trips = packing.trips(plan, rl.pack_rows)
    loss, grads, mets = jax.lax.fori_loop(0, trips, body, zeros)
    return loss, grads, jax.tree.map(lambda x: x / trips.astype(x.dtype), mets)


def micro_batches(mb: Experience, rl: RLConfig):
    """(accumulate(grad_fn, params, counts=, specs=) over the micro-batches of minibatch `mb`, the
    fraction of the tokens its forwards process that are padding): packed rows
    (`rl.pack_length` > 0) or `rl.microbatches` equal slices of the left-padded rows."""
    # Real: the tokens of rows in valid groups (dynamic sampling's fillers are padding too).
    real = mb.attention * mb.row_valid[:, None].astype(mb.attention.dtype)
    if rl.pack_length:  # Sequences at their real lengths in shared rows.
        rl = packing.with_rows(rl, *mb.tokens.shape)
        plan = packing.plan(mb.tokens, real, pack_length=rl.pack_length, pack_rows=rl.pack_rows)
        processed = packing.trips(plan, rl.pack_rows) * rl.pack_rows * rl.pack_length
        run = functools.partial(accumulate_packed, mb=mb, plan=plan, rl=rl)
    else:
        b = mb.tokens.shape[0]
        micro = jax.tree.map(lambda x: x.reshape(
            (rl.microbatches, b // rl.microbatches) + x.shape[1:]), mb)
        processed = mb.attention.size
        run = functools.partial(accumulate, micro=micro)
    return run, 1.0 - jnp.sum(real) / processed
