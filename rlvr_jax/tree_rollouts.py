"""Tree rollouts: rows fork inside `sampling.generate`'s decode loop (`SamplingConfig.tree`).

Each prompt keeps its G = num_samples rows (the leaves), in static shapes. The first R = G -
max_forks · (branches - 1) rows of each group are roots; the others are spare: they decode
as independent samples until a fork claims them. Decode step t feeds token t - 1 and gets
the logits of token t (`sampling.feed_step`); when a live root-or-copy row r forks there,
branches - 1 spare rows of its prompt are overwritten with a copy of its state (KV-cache
row, tokens / log-probs / mask columns 0 … t - 1, token to feed, done flag, budget; what the
spare row had decoded is discarded), and then every row samples token t
(`sampling.emit_step`) with its OWN row id's noise: the copies share r's t tokens
(fork_at = t) and draw their own token t from the same distribution. No row ever changes
its id or noise, so a row no fork touched samples exactly what the independent sampler
samples in it: with no fork at all the rollout is the independent one, bit for bit, and a
spare row no fork claimed is an ordinary independent sample (fork_parent itself, fork_at 0).
Spare rows never fork (a later claim would orphan their copies).

Modes (`TreeConfig.mode`): "depth" forks every live row at the completion positions
`depths`, "every" at K, 2K, … (K = `every`), lower rows first while spare rows remain;
"entropy" forks, at each step, the live row of each prompt whose next-token distribution
has the highest entropy above `entropy_threshold` (at most one fork per prompt and step).

Cost: the batch stays B rows, so a step costs what it costs without forks (plus one copy
of the cache on the steps where some row forks, under `lax.cond`). Compaction
(`compact_ratio`, `live_rows`) starts only once no row can fork any more (the last fork
step of modes "depth" / "every" is past, or no prompt has both a live root-or-copy row and
spare rows left): a claimed row must still be in the batch. The cache phases
(`cache_window`) apply as usual. "Bit for bit" holds where the two loops run the same
batch sizes: without compaction (below 128 new tokens by default, or compact_ratio 0), or
when no fork can happen (e.g. max_forks 0). Shapes: P prompts, B = P · G rows, N =
max_new_tokens, V vocabulary.
"""
import dataclasses
import functools
import math
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax import live_rows, numerics
from rlvr_jax.models import decoding

MODES = ("depth", "every", "entropy")


@dataclasses.dataclass(frozen=True)
class TreeConfig:
    """Where rows fork. Frozen and hashable (part of the static `SamplingConfig`).

    Attributes:
      mode: "depth" (at the completion positions `depths`), "every" (at K, 2K, … with K =
        `every`) or "entropy" (where a row's next-token entropy exceeds `entropy_threshold`).
      branches: rows after a fork (the parent and branches - 1 copies), >= 2.
      max_forks: forks per prompt (each claims branches - 1 spare rows), >= 0.
      depths: mode "depth": positions t >= 1 (the copies share t tokens, resample token t).
      every: mode "every": K >= 1.
      entropy_threshold: mode "entropy": nats, >= 0 (entropy of softmax(logits / T),
        before top-k / top-p)."""
    mode: str = "depth"
    branches: int = 2
    max_forks: int = 1
    depths: Tuple[int, ...] = ()
    every: int = 0
    entropy_threshold: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "depths", tuple(sorted({int(d) for d in self.depths})))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if isinstance(self.branches, bool) or not isinstance(self.branches, int) \
                or self.branches < 2:
            raise ValueError(f"branches must be an int >= 2, got {self.branches!r}")
        if isinstance(self.max_forks, bool) or not isinstance(self.max_forks, int) \
                or self.max_forks < 0:
            raise ValueError(f"max_forks must be an int >= 0, got {self.max_forks!r}")
        if self.mode == "depth" and (not self.depths or self.depths[0] < 1):
            raise ValueError(f"depths must be positions >= 1 for mode depth, got {self.depths}")
        if self.mode == "every" and self.every < 1:
            raise ValueError(f"every must be >= 1 for mode every, got {self.every}")
        if self.mode == "entropy" and not (self.entropy_threshold >= 0
                                           and math.isfinite(self.entropy_threshold)):
            raise ValueError(f"entropy_threshold must be a finite number >= 0, got "
                             f"{self.entropy_threshold}")

    def roots(self, num_samples: int) -> int:
        """R = G - max_forks · (branches - 1): the rows of a prompt that start decoding."""
        return num_samples - self.max_forks * (self.branches - 1)

    def fork_steps(self, max_new_tokens: int) -> Tuple[int, ...]:
        """The positions t (1 <= t < N) where rows fork in modes "depth" / "every"."""
        if self.mode == "every":
            return tuple(range(self.every, max_new_tokens, self.every))
        return tuple(d for d in self.depths if d < max_new_tokens)

    def check(self, num_samples: int, max_new_tokens: int) -> None:
        """Raises ValueError unless the forks fit G = num_samples rows and N new tokens."""
        if self.roots(num_samples) < 1:
            raise ValueError(f"max_forks must leave a root: num_samples ({num_samples}) - "
                             f"max_forks ({self.max_forks}) * (branches ({self.branches}) - 1)"
                             f" = {self.roots(num_samples)} < 1")
        if self.mode == "depth" and self.depths[-1] >= max_new_tokens:
            raise ValueError(f"depths must be < max_new_tokens ({max_new_tokens}), got "
                             f"{self.depths}")


def from_config(section) -> Optional[TreeConfig]:
    """A config's `sampling.tree` block (`train/config.py`; None or mode "": off) as a
    `TreeConfig`."""
    if section is None or not section.mode:
        return None
    return TreeConfig(mode=section.mode, branches=section.branches, max_forks=section.max_forks,
                      depths=tuple(section.depths), every=section.every,
                      entropy_threshold=section.entropy_threshold)


class TreeState(NamedTuple):
    """The forks so far, [B] each: parent (int32, `Rollout.fork_parent`), at (int32,
    `Rollout.fork_at`), spare (bool: not claimed by a fork yet)."""
    parent: jax.Array
    at: jax.Array
    spare: jax.Array


def start(b: int, g: int, tc: TreeConfig) -> TreeState:
    """The TreeState at t = 1 of B = b rows in groups of g: every row its own parent, the
    rows g >= R of each group spare."""
    ids = jnp.arange(b, dtype=jnp.int32)
    return TreeState(parent=ids, at=jnp.zeros((b,), jnp.int32), spare=ids % g >= tc.roots(g))


def entropy(logits, temperature: float, vocab_limit: int = 0) -> jax.Array:
    """[B] float32 entropy (nats) of softmax(logits [B, V] / temperature) over the ids below
    `vocab_limit` (0: all)."""
    if 0 < vocab_limit < logits.shape[-1]:
        logits = logits[:, :vocab_limit]
    return numerics.entropy(logits.astype(jnp.float32) / temperature)


def plan(tree: TreeState, wants: jax.Array, priority: jax.Array, t, tc: TreeConfig, g: int,
         one_per_prompt: bool):
    """Which spare rows are claimed at step t, and from which parents.

    Args: tree; wants [B] bool, the live rows that would fork; priority [B] float32 (lower
    forks first); t: int32 scalar, the step (fork_at of the copies); g: G.
    Returns: (index [B] int32: the parent for a claimed row, the row itself else; claim [B]
    bool; the next TreeState). The k-th fork of a prompt (by priority) claims its
    branches - 1 lowest spare rows of rank k (b - 1) … (k + 1)(b - 1) - 1."""
    b = wants.shape[0]
    p, per = b // g, tc.branches - 1
    wants, spare = wants.reshape(p, g), tree.spare.reshape(p, g)
    score = jnp.where(wants, priority.reshape(p, g), jnp.inf)
    order = jnp.argsort(score, axis=1, stable=True).astype(jnp.int32)  # Candidates first.
    forks = jnp.minimum(jnp.sum(wants, axis=1), jnp.sum(spare, axis=1) // per)
    if one_per_prompt:
        forks = jnp.minimum(forks, 1)
    rank = (jnp.cumsum(spare, axis=1) - 1) // per  # The fork a spare row would serve.
    claim = spare & (rank < forks[:, None])
    parent = jnp.take_along_axis(order, jnp.clip(rank, 0, g - 1), axis=1)
    ids = jnp.arange(b, dtype=jnp.int32)
    index = jnp.where(claim.reshape(b), (parent + jnp.arange(p, dtype=jnp.int32)[:, None] * g)
                      .reshape(b), ids)
    claim = claim.reshape(b)
    return index, claim, TreeState(parent=jnp.where(claim, index, tree.parent),
                                  at=jnp.where(claim, t, tree.at), spare=tree.spare & ~claim)


def tree_step(feed: Callable, emit: Callable, tc: TreeConfig, sc, carry):
    """One decode step with forks: `feed` (token t - 1 in, logits of token t out), the forks
    of `plan` (their rows copied only when some row forks), then `emit` (sample token t).

    carry: (DecodeState, TreeState); feed: state -> (state, logits [B, V]); emit: (state,
    logits) -> next state."""
    state, tree = carry
    g = sc.num_samples
    state, logits = feed(state)
    live = ~state.done & ~tree.spare
    ids = jnp.arange(live.shape[0], dtype=jnp.int32)
    if tc.mode == "entropy":
        ent = entropy(logits, sc.temperature, sc.vocab_limit)
        wants, priority = live & (ent > tc.entropy_threshold), -ent
    else:
        steps = jnp.asarray(tc.fork_steps(sc.max_new_tokens) or (0,), jnp.int32)
        wants, priority = live & jnp.any(state.t == steps), (ids % g).astype(jnp.float32)
    index, claim, tree = plan(tree, wants, priority, state.t, tc, g, tc.mode == "entropy")

    def copy(args):
        st, lg = args
        # Within the prompt (its prefix stays shared); each row keeps its own noise.
        moved = live_rows.take_state_rows(st, index, same_groups=True)._replace(rows=st.rows)
        return moved, jnp.take(lg, index, axis=0)

    state, logits = jax.lax.cond(jnp.any(claim), copy, lambda args: args, (state, logits))
    return emit(state, logits), tree


def decode(feed: Callable, emit: Callable, state: live_rows.DecodeState, phases, sizes, sc):
    """The tree decode loop (`sampling.generate` with `sc.tree` set): in each cache phase,
    `tree_step` while a row may still fork (up to the last fork step in modes "depth" /
    "every", while some prompt has a live root-or-copy row and spare rows left), then plain
    steps (`live_rows.run`: they stop when the live rows fit the next batch size); then
    `live_rows.compact` continues on the live rows.

    Args: feed, emit: as `tree_step` takes them; state: `sampling.first_state`'s (its cache
    the prefill's P rows, repeated G times entering the first phase); phases: ((cache
    slots, steps limit), ...); sizes: `live_rows.sizes_of(B, sc)`; sc: the
    `SamplingConfig` (its `tree` set).
    Returns: ((tokens, logprobs, mask [B, N], finished [B], decode steps [B]),
    {"fork_parent": [B] int32, "fork_at": [B] int32})."""
    tc, g, n = sc.tree, sc.num_samples, sc.max_new_tokens
    tree = start(state.done.shape[0], g, tc)
    steps = range(1, n) if tc.mode == "entropy" else tc.fork_steps(n)
    until = max(steps, default=0) + 1 if tc.max_forks else 1  # Steps t < until may fork.
    plain = lambda st: emit(*feed(st))  # noqa: E731
    first = 1  # The phase's first step.
    for i, (slots, limit) in enumerate(phases):
        grown = decoding.resize_cache(state.cache, slots, g if i == 0 else 1, sc.share_prompt_kv)
        state = state._replace(cache=grown)
        if first < until:
            state, tree = jax.lax.while_loop(
                functools.partial(_forking, min(limit, until), g, tc.branches - 1),
                functools.partial(tree_step, feed, emit, tc, sc), (state, tree))
        state = live_rows.run(plain, state, limit, sizes)
        first = limit
    out = live_rows.compact(plain, state, sizes)
    return out, {"fork_parent": tree.parent, "fork_at": tree.at}


def _forking(limit: int, g: int, per: int, carry) -> jax.Array:
    """Whether the tree loop goes on: step < limit and some prompt can still fork (it has
    a live root-or-copy row and `per` = branches - 1 spare rows; neither ever comes back)."""
    state, tree = carry
    b = tree.spare.shape[0]
    live = (~state.done & ~tree.spare).reshape(b // g, g)
    spare = jnp.sum(tree.spare.reshape(b // g, g), axis=1)
    return (state.t < limit) & jnp.any(jnp.any(live, axis=1) & (spare >= per))


def regroup_parents(fork_parent: jax.Array, g: int) -> jax.Array:
    """[B] `Rollout.fork_parent` of rows taken from a rollout as whole groups of g (e.g.
    dynamic sampling's selected groups), by the rows' new ids: a parent keeps its place in
    its group."""
    rows = jnp.arange(fork_parent.shape[0], dtype=jnp.int32)
    return rows // g * g + fork_parent % g


def shared_tokens(rollout) -> jax.Array:
    """int32 scalar: completion tokens the rows of a tree `sampling.Rollout` got by copy
    (the sum of fork_at); decoded tokens = sum(lengths) - this."""
    return jnp.sum(rollout.fork_at, dtype=jnp.int32)
