"""Prefix-tree advantages: per-token credit from the branch structure of tree rollouts.

A tree rollout (`sampling.Rollout.fork_parent`, `.fork_at`) keeps G leaves per prompt, but a
forked row shares its first `fork_at` completion tokens with the row it was copied from. Row
`i`'s token `t` then belongs to the node `n(i, t)` = the rows of its group that share the
prefix through `t`: `{j : owner(j, t) = owner(i, t)}` with `owner(i, t) = owner(fork_parent[i],
t)` if `t < fork_at[i]` else `i` (docs/tree_rollouts.md). Nodes shrink along a row; a node's
value is the mean reward of its leaves, `V(n) = mean_{j ∈ n} r_j`, and the root (the prompt,
before the first token) holds all G rows: `V(root) = mean_g r`. `n(i, −1)` is the root.

Estimators (`tree_advantages(..., mode=)`), all `[B, N]` per token:

- **treerl** (Hou et al. 2025, "TreeRL: LLM Reinforcement Learning with On-Policy Tree
  Search", §3.2): a segment is a maximal run of a row's tokens with the same node `n`; its
  parent `p(n)` is the previous segment's node (the root for the first). Each token of `n` gets
  `[(V(n) − V(root)) + (V(n) − V(p(n)))] / √|n|` (global + local advantage, divided by the
  square root of the leaves below, as nodes shared by many leaves are trained on once per leaf).
  No fork: `2·(r_i − mean)`, twice Dr.GRPO.
- **tempo** (Tran et al. 2025, "Exploiting Tree Structure for Credit Assignment in RL Training
  of LLMs", TEMPO): GRPO's group-relative signal plus the branch-gated temporal difference of
  the prefix values, `(r_i − V(root)) + [V(n(i, t)) − V(n(i, t−1))]` for `t ≥ 1` (the TD is
  non-zero only at a token whose node is smaller than the previous token's, a branch point).
  Departure: the prompt's own branching at `t = 0` gets no TD (every root row starts there;
  GRPO's term already credits it), so that no fork gives exactly Dr.GRPO, `r_i − mean`.
- **lambda_grpo** (Sullivan & Koller 2025, "GRPO is Secretly a Process Reward Model",
  λ-GRPO): GRPO trains a token shared by the process set `n` once per member, i.e. with weight
  `|n|`; λ-GRPO divides each token's term by the size of its process set:
  `(r_i − mean) / |n(i, t)|^α` with α = 1 the paper's (α is this library's generalisation).
  No fork: `r_i − mean`.

`scale="group"` divides every estimator by the group's unbiased std + eps (GRPO's
normalisation; TEMPO's "normalised rewards", as V is linear in the rewards; no fork then gives
GRPO, and 2·GRPO for treerl); `"none"` keeps reward units (TreeRL's and the Dr.GRPO forms).
A group whose rewards are all equal (`max == min`) gets exactly 0, as do invalid groups and
masked tokens; `leaves` leaves out rows that are no leaf (the update passes the rows with at
least one token; every row of the current sampler has one). Rows of a group are in any order;
`fork_parent` may be a global row index (it is read modulo G: every parent is a row of the
same group). Cost: O(P·G·N) memory, O(P·G²·N) work.
"""
import jax
import jax.numpy as jnp

TREE_MODES = ("treerl", "tempo", "lambda_grpo")


def _lineage(fork_parent, fork_at, num_samples, p):
    par = jnp.asarray(fork_parent).astype(jnp.int32)
    at = jnp.asarray(fork_at).astype(jnp.int32)
    if par.shape != (p * num_samples,) or at.shape != par.shape:
        raise ValueError(f"fork_parent {par.shape} and fork_at {at.shape} must be [B]="
                         f"[{p * num_samples}]")
    return (par % num_samples).reshape(p, num_samples), at.reshape(p, num_samples)


def prefix_owners(fork_parent, fork_at, num_tokens, *, num_samples):
    """`owner(i, t)` as a group-local row index: the row that decoded row i's token t.

    Args:
      fork_parent, fork_at: `[B]` int lineage (`sampling.Rollout`), `B = P·G`.
      num_tokens: N. num_samples: G.

    Returns:
      `[P, G, N]` int32 in `[0, G)`.
    """
    p = jnp.shape(fork_parent)[0] // num_samples
    par, at = _lineage(fork_parent, fork_at, num_samples, p)
    shape = (p, num_samples, num_tokens)
    own0 = jnp.broadcast_to(jnp.arange(num_samples, dtype=jnp.int32)[None, :, None], shape)
    inherit = jnp.arange(num_tokens)[None, None, :] < at[:, :, None]
    gather = jnp.broadcast_to(par[:, :, None], shape)

    def resolve(_, own):  # Each pass follows one more link of a fork chain (depth < G).
        return jnp.where(inherit, jnp.take_along_axis(own, gather, axis=1), own0)
    return jax.lax.fori_loop(0, num_samples, resolve, own0)


def prefix_values(rewards, fork_parent, fork_at, num_tokens, leaves=None):
    """Node sizes `|n(i, t)|` and centred values `V(n(i, t)) − V(root)` of every token.

    Args:
      rewards: `[P, G]` rewards; fork_parent, fork_at: `[B]` lineage; num_tokens: N.
      leaves: optional `[P, G]` bool, the rows that are leaves (None: all); the others count
        in no node and no mean.

    Returns:
      `(size [P, G, N] float32, value [P, G, N] float32)` (a non-leaf row's own tokens:
      size 0, value 0).
    """
    r = jnp.asarray(rewards).astype(jnp.float32)
    w = _leaf_weights(r, leaves)
    own = prefix_owners(fork_parent, fork_at, num_tokens, num_samples=r.shape[1])
    centred = w * (r - _mean(r, w))

    def add_leaf(j, acc):  # Leaf j is below token (i, t) iff it has i's owner there.
        own_j = jax.lax.dynamic_index_in_dim(own, j, axis=1)  # [P, 1, N]
        below = (own == own_j).astype(jnp.float32) * w[:, j, None, None]
        return acc[0] + below, acc[1] + below * centred[:, j, None, None]
    zero = jnp.zeros(own.shape, jnp.float32)  # O(P·G·N) memory, a fixed summation order.
    size, total = jax.lax.fori_loop(0, r.shape[1], add_leaf, (zero, zero))
    return size, total / jnp.maximum(size, 1.0)


def _leaf_weights(r, leaves):
    if leaves is None:
        return jnp.ones_like(r)
    w = jnp.asarray(leaves).astype(bool)
    if w.shape != r.shape:
        raise ValueError(f"leaves must be [P, G]={r.shape}, got shape {w.shape}")
    return w.astype(jnp.float32)


def _mean(r, w):
    return jnp.sum(w * r, axis=1, keepdims=True) / jnp.maximum(jnp.sum(w, 1, keepdims=True), 1.0)


def _parent_values(size, value, num_leaves):
    """V(p(n)) − V(root) per token: the value of the node before the token's segment."""
    n = size.shape[-1]
    root = jnp.broadcast_to(num_leaves[:, None, None], size.shape[:-1] + (1,))
    prev_size = jnp.concatenate([root, size[..., :-1]], -1)
    prev_value = jnp.concatenate([jnp.zeros(value.shape[:-1] + (1,)), value[..., :-1]], -1)
    start = jnp.where(size != prev_size, jnp.arange(n), -1)  # A segment starts here.
    last = jax.lax.cummax(start, axis=start.ndim - 1)
    return jnp.where(last >= 0, jnp.take_along_axis(prev_value, jnp.maximum(last, 0), -1), 0.0)


def tree_advantages(rewards, fork_parent, fork_at, mask, *, mode="treerl", scale="none",
                    eps=1e-6, exponent=1.0, group_mask=None, leaves=None):
    """Per-token prefix-tree advantages of G leaves per prompt (module docstring: formulas).

    Args:
      rewards: `[P, G]` float rewards of the leaves, `G >= 2`.
      fork_parent, fork_at: `[B]` int32 lineage of the `B = P·G` rows (`sampling.Rollout`).
      mask: `[B, N]` tokens that are trained on (others get 0).
      mode: "treerl" | "tempo" | "lambda_grpo".
      scale: "none" (reward units) | "group" (divide by the group's ddof=1 std + eps).
      eps: added to the std. exponent: λ-GRPO's α (weight `|n|^-α`).
      group_mask: optional `[P]` bool of valid groups (others get 0).
      leaves: optional `[P, G]` bool, the rows that are leaves (None: all): the mean, the
        std, the node values and the all-equal test run over these; a group with fewer than
        2 gets 0, as do the other rows.

    Returns:
      `[B, N]` float32 advantages.
    """
    if mode not in TREE_MODES:
        raise ValueError(f"mode must be one of {TREE_MODES}, got {mode!r}")
    if scale not in ("none", "group"):
        raise ValueError(f"scale must be 'none' or 'group', got {scale!r}")
    r = jnp.asarray(rewards).astype(jnp.float32)
    m = jnp.asarray(mask).astype(bool)
    if r.ndim != 2 or r.shape[1] < 2 or m.ndim != 2 or m.shape[0] != r.size:
        raise ValueError(f"rewards must be [P, G] with G >= 2 and mask [P·G, N]; got rewards "
                         f"{r.shape}, mask {m.shape}")
    p, g = r.shape
    w = _leaf_weights(r, leaves)
    size, value = prefix_values(r, fork_parent, fork_at, m.shape[1], leaves=w)
    num_leaves = jnp.sum(w, axis=1)
    own = (w * (r - _mean(r, w)))[:, :, None]  # r_i − V(root)
    if mode == "treerl":
        parent = _parent_values(size, value, num_leaves)
        a = (2.0 * value - parent) / jnp.sqrt(jnp.maximum(size, 1.0))
    elif mode == "tempo":
        td = value[..., 1:] - value[..., :-1]
        a = own + jnp.concatenate([jnp.zeros((p, g, 1)), td], axis=-1)
    else:
        a = own * jnp.maximum(size, 1.0) ** -float(exponent)
    if scale == "group":
        var = jnp.sum(w * jnp.square(r - _mean(r, w)), 1) / jnp.maximum(num_leaves - 1, 1.0)
        a = a / (jnp.sqrt(var) + eps)[:, None, None]
    big, small = jnp.where(w > 0, r, -jnp.inf), jnp.where(w > 0, r, jnp.inf)
    flat = (jnp.max(big, axis=1) == jnp.min(small, axis=1)) | (num_leaves < 2)
    if group_mask is not None:
        flat = flat | ~jnp.asarray(group_mask).astype(bool)
    a = jnp.where(w[:, :, None] > 0, a, 0.0)
    a = jnp.where(flat[:, None, None], 0.0, a).reshape(m.shape)
    return jnp.where(m, a, 0.0).astype(jnp.float32)
