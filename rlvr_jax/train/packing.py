"""The packed update: sequences at their real lengths in shared rows (`rl.pack_length` > 0).

The rollout's rows are `[left pad | prompt | completion | right pad]`; at real RLVR lengths
most of their tokens are padding. Packing moves each sequence's real tokens (prompt then
completion, in order) into rows of L = `rl.pack_length` tokens, first-fit-decreasing, with
segment ids (sequence i is segment i + 1; 0 is padding) and positions restarting at 0 in
every segment. A token's RoPE position and the tokens it attends to are those of the
left-padded row (positions there count the real tokens before it), so the per-token
log-probs, entropies and values are the unpacked path's, reordered.

Static shapes, no overflow. A minibatch of b sequences is planned into K = R·ceil(b / R)
rows (R = `rl.pack_rows`, or by default an eighth of the rows that hold one unpacked
micro-batch's tokens: `with_rows`); K ≥ b rows always hold b sequences of at most L tokens, so no
batch of the shape overflows. The update runs micro-batches of R rows in a loop whose trip
count is the rows the plan used, ceil(rows_used / R): short batches run fewer trips. Each
micro-batch's log-probs are scattered back to the [b, N] completion grid, masked to the
sequences in that micro-batch, so advantages, masks (multi-turn loss masks, entropy masks),
process rewards and every aggregation mode apply unchanged, normalised by the minibatch's
counts as in the unpacked micro-batch loop. The no-gradient scoring passes (old and reference
log-probs, entropies, old values) run over the whole batch's plan the same way.

The LM head and log-softmax run over every packed position (prompt tokens and the rows'
padding included), not a gathered buffer of the scored positions only.
"""
import dataclasses
from typing import Dict

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np


@flax.struct.dataclass
class Plan:
    """Where every token of a minibatch's b sequences sits in its K packed rows of L tokens.

    Attributes:
      dest: [b, T] int32 flat slot (row·L + column) of each real token; K·L for padding.
      row: [b] int32 packed row of each sequence.
      rows_used: int32 scalar, rows holding at least one token.
      tokens, segments, positions: [K, L] int32 packed tokens, segment ids (0: padding),
        positions (restarting at 0 per segment).
    """
    dest: jax.Array
    row: jax.Array
    rows_used: jax.Array
    tokens: jax.Array
    segments: jax.Array
    positions: jax.Array


@flax.struct.dataclass
class Micro:
    """One packed micro-batch: R rows and the map back to the minibatch's completion grid.

    Attributes:
      tokens, segments, positions: [R, L] int32.
      index: [b, N] int32 flat slot in [R·L] of the position that predicts completion token
        n (the one before it in its segment), clipped into range.
      member: [b, N] bool, completion tokens of sequences in this micro-batch (real ones).
    """
    tokens: jax.Array
    segments: jax.Array
    positions: jax.Array
    index: jax.Array
    member: jax.Array


AUTO_TRIPS = 8  # pack_rows = 0: full rows would take this many packed micro-batches.


def with_rows(rl, batch: int, row_tokens: int):
    """`rl` with its packed rows per micro-batch R resolved: `rl.pack_rows`, or for 0 an
    AUTO_TRIPS-th of the rows that hold one unpacked micro-batch of a b-row minibatch,
    max(1, ⌈(b / microbatches) · (Tp + N) / pack_length / AUTO_TRIPS⌉): at most the unpacked
    micro-batch's memory, and fine enough that the last trip's padding stays small."""
    if rl.pack_rows:
        return rl
    tokens = (batch // rl.microbatches) * row_tokens
    rows = max(1, -(-tokens // (rl.pack_length * AUTO_TRIPS)))
    return dataclasses.replace(rl, pack_rows=rows)


def num_rows(batch: int, pack_rows: int) -> int:
    """K, the static packed rows of a b-sequence minibatch: R·ceil(b / R) ≥ b."""
    return pack_rows * -(-batch // pack_rows)


def _first_fit_decreasing(lengths: jax.Array, num: int, capacity: int):
    """(row [b], offset [b], fill [K]) of first-fit-decreasing packing of `lengths` [b]."""
    order = jnp.argsort(-lengths, stable=True)

    def place(fill, length):
        row = jnp.argmax(fill + length <= capacity)  # An empty row always fits (K ≥ b).
        return fill.at[row].add(length), (row, fill[row])

    fill, (rows, offsets) = jax.lax.scan(place, jnp.zeros((num,), jnp.int32), lengths[order])
    row = jnp.zeros_like(rows).at[order].set(rows)
    return row, jnp.zeros_like(offsets).at[order].set(offsets), fill


def plan(tokens: jax.Array, attention: jax.Array, *, pack_length: int, pack_rows: int) -> Plan:
    """Packs b sequences (tokens, attention [b, T], real tokens where attention is 1).

    Raises:
      ValueError: if a row of T tokens may not fit in pack_length.
    """
    b, t = tokens.shape
    if pack_length < t:
        raise ValueError(f"rl.pack_length={pack_length} must be >= Tp + N = {t} (a sequence "
                         "must fit in one packed row)")
    k = num_rows(b, pack_rows)
    real = attention != 0
    row, offset, fill = _first_fit_decreasing(jnp.sum(real, axis=1, dtype=jnp.int32), k,
                                              pack_length)
    compact = jnp.cumsum(real, axis=1, dtype=jnp.int32) - 1
    dest = jnp.where(real, (row * pack_length + offset)[:, None] + compact, k * pack_length)
    flat = dest.reshape(-1)

    def scatter(values):
        out = jnp.zeros((k * pack_length,), jnp.int32).at[flat].set(
            values.reshape(-1).astype(jnp.int32), mode="drop")
        return out.reshape(k, pack_length)
    segments = jnp.broadcast_to(jnp.arange(1, b + 1, dtype=jnp.int32)[:, None], (b, t))
    return Plan(dest=dest, row=row, rows_used=jnp.sum(fill > 0, dtype=jnp.int32),
                tokens=scatter(tokens), segments=scatter(segments), positions=scatter(compact))


def micro(p: Plan, m: jax.Array, *, pack_rows: int, num_new: int) -> Micro:
    """Micro-batch m (traced) of plan `p`: rows [m·R, (m + 1)·R)."""
    rows = lambda x: jax.lax.dynamic_slice_in_dim(x, m * pack_rows, pack_rows)  # noqa: E731
    length = p.tokens.shape[1]
    size = pack_rows * length
    completion = p.dest[:, -num_new:]
    member = (completion < p.tokens.size) & ((p.row // pack_rows) == m)[:, None]
    index = jnp.clip(completion - 1 - m * size, 0, size - 1)
    return Micro(tokens=rows(p.tokens), segments=rows(p.segments),
                 positions=rows(p.positions), index=index, member=member)


def trips(p: Plan, pack_rows: int) -> jax.Array:
    """Micro-batches the plan needs: ceil(rows_used / R) (int32 scalar, at least 1)."""
    return jnp.maximum((p.rows_used + pack_rows - 1) // pack_rows, 1)


def unpack(flat: jax.Array, mb: Micro) -> jax.Array:
    """[R, L] per-position values (position p predicts token p + 1) → [b, N], 0 outside
    this micro-batch's real completion tokens."""
    return jnp.where(mb.member, flat.reshape(-1)[mb.index], 0.0)


def plan_stats(seq_lengths: np.ndarray, rl, batch: int, row_tokens: int) -> Dict[str, int]:
    """Host-side: {"trips", "processed_tokens"} of the update for sequences of these real
    lengths (one minibatch); unpacked: one trip over b rows of Tp + N (`row_tokens`)."""
    if rl.pack_length <= 0:
        return {"trips": 1, "processed_tokens": batch * row_tokens}
    rl = with_rows(rl, batch, row_tokens)
    lengths = jnp.asarray(seq_lengths, jnp.int32)
    attention = (jnp.arange(row_tokens)[None] < lengths[:, None]).astype(jnp.int32)
    p = plan(attention, attention, pack_length=rl.pack_length, pack_rows=rl.pack_rows)
    n = int(trips(p, rl.pack_rows))
    return {"trips": n, "processed_tokens": n * rl.pack_rows * rl.pack_length}
