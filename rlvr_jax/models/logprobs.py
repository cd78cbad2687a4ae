"""Per-token log-probabilities and entropies from final hidden states, in chunks.

For large vocabularies (Qwen: V = 151936) the [B, T, V] float32 logits of a
training batch do not fit in memory. These functions compute the LM head,
log-softmax (float32) and the quantities we need one sequence chunk at a time
inside a `lax.scan`, with the chunk body rematerialised so the backward pass
also holds only one chunk of logits.

The LM head runs in the compute dtype both ways (`head_logits`): the forward dot takes
compute-dtype operands with float32 accumulation, and the backward pass casts the float32
logits' cotangent to the compute dtype before its two vocabulary-sized dots (as every other
matmul of a bf16 model does), instead of running them float32 × float32. A float32 model
keeps autodiff's dots (the same arithmetic; its program is unchanged).
"""
import functools
from typing import Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from rlvr_jax import sharding
from rlvr_jax.models import transformer
from rlvr_jax.models.config import ModelConfig


@jax.custom_vjp
def head_logits(hidden: jax.Array, head: jax.Array) -> jax.Array:
    """float32 logits [B, C, V] = hidden [B, C, D] @ head [D, V] (both in the compute dtype,
    float32 accumulation); the backward dots take the cotangent in the compute dtype."""
    return jnp.einsum("bcd,dv->bcv", hidden, head, preferred_element_type=jnp.float32)


def _head_logits_fwd(hidden, head):
    return head_logits(hidden, head), (hidden, head)


def _head_logits_bwd(residuals, g):
    hidden, head = residuals
    g = g.astype(hidden.dtype)  # A no-op in float32; bf16 × bf16 dots (f32 accumulation) else.
    d_hidden = jnp.einsum("bcv,dv->bcd", g, head, preferred_element_type=jnp.float32)
    d_head = jnp.einsum("bcd,bcv->dv", hidden, g, preferred_element_type=jnp.float32)
    return d_hidden.astype(hidden.dtype), d_head.astype(head.dtype)


head_logits.defvjp(_head_logits_fwd, _head_logits_bwd)


def _axes_of(entry) -> Tuple[str, ...]:
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def vocab_parallel_specs(batch: int, vocab: int
                         ) -> Optional[Tuple[PartitionSpec, PartitionSpec]]:
    """Mesh specs (rows [B, ...], head [D, V]) of a vocabulary-parallel LM head under the
    active `sharding.activate(...)`: the head split over the mesh axes `vocab` maps to, the rows split
    over the `batch` axes that are not among them (gathered over those), so the logits
    [B, C, V] come out vocab-split with no gather of the head and the head's gradient stays
    on its vocabulary shards. None outside `activate` or when `vocab` is not split."""
    mesh = jax.sharding.get_abstract_mesh()
    rules = nn.get_logical_axis_rules()
    if mesh.empty or not rules:
        return None
    spec = sharding.logical_to_mesh_spec(PartitionSpec("vocab"), rules, (vocab,), mesh)
    vocab_axes = _axes_of(spec[0]) if len(spec) else ()
    if not vocab_axes:
        return None
    spec = sharding.logical_to_mesh_spec(PartitionSpec("batch"), rules, (batch,), mesh)
    rows = tuple(a for a in (_axes_of(spec[0]) if len(spec) else ()) if a not in vocab_axes)
    return (PartitionSpec(rows if len(rows) > 1 else (rows[0] if rows else None)),
            PartitionSpec(None, vocab_axes if len(vocab_axes) > 1 else vocab_axes[0]))


def _chunk_stats(hidden, targets, head, temperature, with_entropy, rows=None):
    """Log-prob of `targets` and entropy for one chunk. hidden [B, C, D], targets [B, C];
    `rows`: the mesh spec of the rows of a vocabulary-parallel head (or None).

    One pass of exponentials serves both: with e = exp(z − max z) and s = Σ_v e_v,
    logz = max z + log s and H = logz − Σ_v e_v z_v / s.
    """
    if rows is not None:
        hidden, targets = (jax.lax.with_sharding_constraint(x, rows) for x in (hidden, targets))
    if hidden.dtype == jnp.float32:  # Autodiff's dots are already float32: same program.
        logits = jnp.einsum("bcd,dv->bcv", hidden, head, preferred_element_type=jnp.float32)
    else:
        logits = head_logits(hidden, head)
    if temperature != 1.0:
        logits = logits / temperature
    top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    e = jnp.exp(logits - top)
    s = jnp.sum(e, axis=-1)
    logz = top[..., 0] + jnp.log(s)
    chosen = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    logp = chosen - logz
    if not with_entropy:
        return logp, jnp.zeros_like(logp)
    return logp, logz - jnp.sum(e * logits, axis=-1) / s


def chunk_plan(length: int, chunk_size: int) -> Tuple[int, int]:
    """(n, c): n = ceil(length / chunk_size) equal chunks of c = ceil(length / n) positions.

    c ≤ chunk_size and n·c − length < n: the last chunk starts at `length − c` (overlapping
    its neighbour by those few positions) instead of padding past the sequence.
    """
    n = -(-length // max(1, chunk_size))
    return n, -(-length // n)


def chunked_logprobs(
    hidden: jax.Array,
    targets: jax.Array,
    head: jax.Array,
    *,
    temperature: float = 1.0,
    chunk_size: int = 128,
    with_entropy: bool = False,
) -> Tuple[jax.Array, Optional[jax.Array]]:
    """log p(targets) and (optionally) the entropy of the softmax at each position.

    The T positions are split into `chunk_plan(T, chunk_size)` equal chunks scanned with
    the chunk body rematerialised, so neither pass holds more than one chunk of [B, c, V]
    logits; a single chunk (T ≤ chunk_size) is computed directly, without recompute.

    Args:
      hidden: [B, T, D] final hidden states (any float dtype; the matmul runs in
        that dtype with float32 accumulation).
      targets: [B, T] int32 token ids whose log-probs are wanted at each position.
      head: [D, V] LM-head matrix (cast to the hidden dtype).
      temperature: logits are divided by it before the softmax (the sampler uses
        the same definition).
      chunk_size: the most positions per chunk.
      with_entropy: also return the entropy [B, T] (float32).

    Returns:
      (logp [B, T] float32, entropy [B, T] float32 or None).
    """
    if hidden.ndim != 3 or targets.shape != hidden.shape[:2]:
        raise ValueError(f"hidden must be [B, T, D] and targets [B, T]; got {hidden.shape}, "
                         f"{targets.shape}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    b, t, d = hidden.shape
    n, c = chunk_plan(t, chunk_size)
    head = head.astype(hidden.dtype)
    specs = vocab_parallel_specs(b, head.shape[1])
    if specs is not None:  # Under a mesh: a vocabulary-parallel head (see the function).
        head = jax.lax.with_sharding_constraint(head, specs[1])
    stats = functools.partial(_chunk_stats, head=head, rows=specs and specs[0],
                              temperature=temperature, with_entropy=with_entropy)
    if n == 1:  # The logits of one chunk exist anyway: keep them for the backward pass.
        logp, ent = stats(hidden, targets)
        return logp, (ent if with_entropy else None)
    full = n - 1  # Chunks [i·c, (i+1)·c) for i < n − 1, then [t − c, t).
    hs = jnp.concatenate([hidden[:, :full * c].reshape(b, full, c, d).swapaxes(0, 1),
                          hidden[None, :, t - c:]], axis=0)
    ts = jnp.concatenate([targets[:, :full * c].reshape(b, full, c).swapaxes(0, 1),
                          targets[None, :, t - c:]], axis=0)
    body = jax.checkpoint(stats)
    _, out = jax.lax.scan(lambda _, xs: (None, body(*xs)), None, (hs, ts))

    def assemble(x):  # [n, B, c] -> [B, t]
        tail = t - full * c
        return jnp.concatenate([x[:full].swapaxes(0, 1).reshape(b, full * c),
                                x[full][:, c - tail:]], axis=1)
    logp, ent = (assemble(x) for x in out)
    return logp, (ent if with_entropy else None)


def completion_logprobs(
    params,
    tokens: jax.Array,
    attention_mask: jax.Array,
    num_new: int,
    *,
    config: ModelConfig,
    temperature: float = 1.0,
    chunk_size: int = 128,
    with_entropy: bool = False,
) -> Tuple[jax.Array, Optional[jax.Array]]:
    """Log-probs (and entropies) of the last `num_new` tokens of each row only.

    The transformer runs over the whole sequence; the LM head, log-softmax and entropy
    only over the `num_new` scored positions (prompt positions are never scored).

    Args:
      tokens: [B, T] int32, a left-padded prompt followed by `num_new` completion tokens.
      attention_mask: [B, T], 1 for real tokens.
      num_new: N, the completion length (static).
      config, temperature, chunk_size, with_entropy: as in `sequence_logprobs`.

    Returns:
      (logp [B, N] float32, entropy [B, N] float32 or None); column n is completion token n,
      equal to `sequence_logprobs(...)[0][:, -N:]`.
    """
    if not 0 < num_new < tokens.shape[1]:
        raise ValueError(f"num_new must be in [1, T) with T = {tokens.shape[1]}, got {num_new}")
    hidden, _ = transformer.forward(params, tokens, config=config,
                                    attention_mask=attention_mask, return_hidden=True)
    return chunked_logprobs(hidden[:, -num_new - 1:-1], tokens[:, -num_new:],
                            transformer.head_matrix(params, config, config.compute_dtype),
                            temperature=temperature,
                            chunk_size=chunk_size, with_entropy=with_entropy)


def sequence_logprobs(
    params,
    tokens: jax.Array,
    attention_mask: jax.Array,
    *,
    config: ModelConfig,
    temperature: float = 1.0,
    chunk_size: int = 128,
    with_entropy: bool = False,
) -> Tuple[jax.Array, Optional[jax.Array]]:
    """Next-token log-probs of a whole sequence under the model.

    Output position t holds log p(tokens[:, t] | tokens[:, :t]); position 0
    (which has no context) holds 0. Align masks with the tokens they score.

    Args:
      params: model parameters.
      tokens: [B, T] int32 (e.g. left-padded prompt followed by the completion).
      attention_mask: [B, T], 1 for real tokens.
      config: the model's config.
      temperature, chunk_size, with_entropy: as in `chunked_logprobs`.

    Returns:
      (logp [B, T] float32, entropy [B, T] float32 or None); entropy at t is
      that of the distribution that produced tokens[:, t].
    """
    hidden, _ = transformer.forward(params, tokens, config=config,
                                    attention_mask=attention_mask, return_hidden=True)
    logp, ent = chunked_logprobs(hidden[:, :-1], tokens[:, 1:],
                                 transformer.head_matrix(params, config, config.compute_dtype),
                                 temperature=temperature, chunk_size=chunk_size,
                                 with_entropy=with_entropy)
    zero = jnp.zeros_like(logp[:, :1])
    logp = jnp.concatenate([zero, logp], axis=1)
    if ent is not None:
        ent = jnp.concatenate([zero, ent], axis=1)
    return logp, ent
