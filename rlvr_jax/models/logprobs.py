"""Per-token log-probabilities and entropies from final hidden states, in chunks.

For large vocabularies (Qwen: V = 151936) the [B, T, V] float32 logits of a
training batch do not fit in memory. These functions compute the LM head,
log-softmax (float32) and the quantities we need one sequence chunk at a time
inside a `lax.scan`, with the chunk body rematerialised so the backward pass
also holds only one chunk of logits.
"""
import functools
from typing import Optional, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.models import transformer
from rlvr_jax.numerics import entropy
from rlvr_jax.models.config import ModelConfig


def _chunk_stats(hidden, targets, head, temperature, with_entropy):
    """Log-prob of `targets` and entropy for one chunk. hidden [B, C, D], targets [B, C]."""
    logits = jnp.einsum("bcd,dv->bcv", hidden, head, preferred_element_type=jnp.float32)
    logits = logits / temperature
    logz = jax.nn.logsumexp(logits, axis=-1)
    chosen = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    logp = chosen - logz
    if not with_entropy:
        return logp, jnp.zeros_like(logp)
    return logp, entropy(logits)


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

    Args:
      hidden: [B, T, D] final hidden states (any float dtype; the matmul runs in
        that dtype with float32 accumulation).
      targets: [B, T] int32 token ids whose log-probs are wanted at each position.
      head: [D, V] LM-head matrix (cast to the hidden dtype).
      temperature: logits are divided by it before the softmax (the sampler uses
        the same definition).
      chunk_size: positions per chunk; T is padded up to a multiple of it.
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
    chunk = max(1, min(chunk_size, t))
    n = -(-t // chunk)
    pad = n * chunk - t
    if pad:
        hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))
        targets = jnp.pad(targets, ((0, 0), (0, pad)))
    head = head.astype(hidden.dtype)
    hs = hidden.reshape(b, n, chunk, d).swapaxes(0, 1)
    ts = targets.reshape(b, n, chunk).swapaxes(0, 1)
    body = jax.checkpoint(functools.partial(
        _chunk_stats, head=head, temperature=temperature, with_entropy=with_entropy))

    def step(_, xs):
        return None, body(*xs)

    _, (logp, ent) = jax.lax.scan(step, None, (hs, ts))
    logp = logp.swapaxes(0, 1).reshape(b, n * chunk)[:, :t]
    ent = ent.swapaxes(0, 1).reshape(b, n * chunk)[:, :t]
    return logp, (ent if with_entropy else None)


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
                                 transformer.head_matrix(params, config),
                                 temperature=temperature, chunk_size=chunk_size,
                                 with_entropy=with_entropy)
    zero = jnp.zeros_like(logp[:, :1])
    logp = jnp.concatenate([zero, logp], axis=1)
    if ent is not None:
        ent = jnp.concatenate([zero, ent], axis=1)
    return logp, ent
