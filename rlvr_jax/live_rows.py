"""Finished rows stop costing: the sampler's decode loop continues on its live rows only.

A batch of B completions with real lengths finishes unevenly: most rows stop long before
the longest one, and a loop over all B rows spends most of its row-steps on finished rows
(useful fraction ~0.32 for the benchmarks' length draw, `rlvr_jax.workloads`). With
compaction, `sampling.generate` runs its loop at a decreasing sequence of static batch sizes
(`batch_sizes`): once the live rows fit the next size, it moves them (their KV cache rows,
their state and their ORIGINAL row ids) into a batch of that size and continues there. The
row ids keep each row's sampling noise (`token_sampling.uniform_bits(rows=...)`) and say
where its tokens go in the [B, N] outputs, so compaction does not change what a row samples.

Each batch size is one more compiled loop body; each move copies the kept rows' cache.
The loop's state is a `DecodeState` (one entry per row, plus the step counter); moving rows
is `take_state_rows`.
"""
import math
from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.models import decoding

MULTIPLE = 8  # Batch sizes are multiples of 8 (sublane tiles on TPU, warp-friendly on GPU).
AUTO_RATIO = 0.7  # CPU; measured on the real-length workload: useful fraction ~0.87 (docs).
# GPU/TPU: a step's time hardly shrinks below a few dozen rows (launch-bound), and every size
# is one more compiled loop body: halve the batch, down to 32 rows (256: 4 sizes, not 11).
AUTO_RATIO_DEVICE, AUTO_FLOOR_DEVICE = 0.5, 32
AUTO_MIN_TOKENS = 128  # Below this many new tokens compaction is off by default.


class DecodeState(NamedTuple):
    """`sampling.generate`'s decode-loop state, every row's part explicit (b rows: B, or
    fewer after compaction).

    t: int32 scalar, the column the next step samples (it feeds token t - 1); cache: the
    `models.decoding` cache (b rows; the prefill's P rows until the first phase repeats
    them); token: [b] int32, fed next; done: [b] bool; tokens, logprobs, mask: [b, N]
    (int32, float32, int32), the outputs so far; rows: [b] int32, each row's original id
    (its noise counter and its place in the outputs); budgets: [b] int32 (a row is done
    after that many tokens) or None."""
    t: jax.Array
    cache: dict
    token: jax.Array
    done: jax.Array
    tokens: jax.Array
    logprobs: jax.Array
    mask: jax.Array
    rows: jax.Array
    budgets: Optional[jax.Array]


def _on_cpu(backend=None) -> bool:
    return (backend or jax.default_backend()) == "cpu"


def auto_ratio(max_new_tokens: int, backend=None) -> float:
    """The ratio `compact_ratio=None` stands for on `backend` (default: JAX's): from
    `AUTO_MIN_TOKENS` new tokens `AUTO_RATIO` on CPU, `AUTO_RATIO_DEVICE` elsewhere; else 0
    (off: short completions leave little idle work, and every batch size is one more
    compiled loop body)."""
    if max_new_tokens < AUTO_MIN_TOKENS:
        return 0.0
    return AUTO_RATIO if _on_cpu(backend) else AUTO_RATIO_DEVICE


def sizes_of(batch: int, sampling_config, backend=None) -> Tuple[int, ...]:
    """The loop's batch sizes for a `sampling.SamplingConfig` at `batch` rows: `batch_sizes`
    at `ratio_of`, down to `AUTO_FLOOR_DEVICE` rows off CPU when the ratio is automatic."""
    auto = sampling_config.compact_ratio is None and not _on_cpu(backend)
    return batch_sizes(batch, ratio_of(sampling_config, backend),
                       AUTO_FLOOR_DEVICE if auto else MULTIPLE)


def check_ratio(ratio) -> None:
    """Raises ValueError unless `ratio` is a valid `SamplingConfig.compact_ratio`."""
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                              or not 0 <= ratio < 1):
        raise ValueError(f"compact_ratio must be None (automatic) or in [0, 1) (0 = off), "
                         f"got {ratio!r}")


def ratio_of(sampling_config, backend=None) -> float:
    """The compaction ratio a `sampling.SamplingConfig` means (None: `auto_ratio`)."""
    ratio = sampling_config.compact_ratio
    return auto_ratio(sampling_config.max_new_tokens, backend) if ratio is None else float(ratio)


def useful_fraction(rollout) -> jax.Array:
    """float32 scalar: completion tokens / row-steps the decode loop ran, of a
    `sampling.Rollout` (1.0: no step was spent on a finished row)."""
    return (jnp.sum(rollout.lengths, dtype=jnp.float32)
            / jnp.maximum(jnp.sum(rollout.decode_steps, dtype=jnp.float32), 1.0))


def batch_sizes(batch: int, ratio: float, floor: int = MULTIPLE) -> Tuple[int, ...]:
    """The loop's batch sizes: (B, b1, b2, …), each b_{i+1} = ratio · b_i rounded up to a
    multiple of 8 (and at least 8 below b_i), down to `floor` rows. (B,) when ratio is 0
    (off) or B is too small to shrink."""
    sizes = [batch]
    if not 0.0 < ratio < 1.0:
        return tuple(sizes)
    while True:
        nxt = min(-(-math.ceil(ratio * sizes[-1]) // MULTIPLE) * MULTIPLE, sizes[-1] - MULTIPLE)
        if nxt < max(floor, MULTIPLE):
            return tuple(sizes)
        sizes.append(nxt)


def live_first(done: jax.Array, size: int) -> jax.Array:
    """[size] int32 positions of the rows to keep from done [b] bool: the live rows first
    (in order), then finished ones to fill the batch."""
    return jnp.argsort(done.astype(jnp.int32), stable=True)[:size].astype(jnp.int32)


def decode(step, state, phases, sizes: Tuple[int, ...], repeats: int, share: bool = False):
    """Runs `sampling.generate`'s decode loop and returns [B, ...] (tokens, logprobs, mask,
    done, decode steps) by original row id.

    Args:
      step: the loop body, `DecodeState` -> `DecodeState` (`sampling.decode_step`).
      state: the initial `DecodeState` (`sampling.first_state`), its cache the prefill's
        (P rows).
      phases: ((cache slots, steps limit), ...): the cache phases at all B rows; the cache
        is repeated `repeats` (G) times along the batch entering the first (or shared:
        `share`, `decoding.resize_cache`).
      sizes: `batch_sizes(B, ratio)`; after the phases, one loop per smaller size.
    """
    for i, (slots, limit) in enumerate(phases):
        grown = decoding.resize_cache(state.cache, slots, repeats if i == 0 else 1, share)
        state = run(step, state._replace(cache=grown), limit, sizes)
    return compact(step, state, sizes)


def run(step, state: DecodeState, limit, sizes: Tuple[int, ...]) -> DecodeState:
    """`step` at all rows until step `limit` or until the live rows fit `sizes[1]`."""
    next_size = sizes[1] if len(sizes) > 1 else 0

    def cond(state):
        return (state.t < limit) & (jnp.sum(~state.done, dtype=jnp.int32) > next_size)
    return jax.lax.while_loop(cond, step, state)


def compact(step, state: DecodeState, sizes: Tuple[int, ...]):
    """After the phases (the state at all B rows, in order): one loop per smaller size, on
    the live rows only, to the end; returns `decode`'s [B, ...] outputs."""
    sizes = tuple(sizes) + (0,)
    n = state.tokens.shape[1]
    out = _write_back(None, state)
    for size, next_size in zip(sizes[1:-1], sizes[2:]):
        state = take_state_rows(state, live_first(state.done, size))
        state = run(step, state, n, (size, next_size))
        out = _write_back(out, state)
    return out


def take_state_rows(state: DecodeState, index, same_groups: bool = False) -> DecodeState:
    """The decode state's rows at index [b'] (the step counter unchanged); same_groups:
    every row is taken from its own prompt's rows (`decoding.take_rows`)."""
    take = lambda x: None if x is None else jnp.take(x, index, axis=0)  # noqa: E731
    return DecodeState(state.t, decoding.take_rows(state.cache, index, same_groups),
                       *(take(x) for x in state[2:]))


def _write_back(out, state: DecodeState):
    """Writes the state's rows into the [B, ...] outputs (tokens, logprobs, mask, done,
    decode steps) at their original ids; `out` None: the state holds all B rows in order."""
    new = (state.tokens, state.logprobs, state.mask, state.done,
           jnp.broadcast_to(state.t, state.rows.shape))
    if out is None:
        return new
    return tuple(o.at[state.rows].set(x, unique_indices=True) for o, x in zip(out, new))
