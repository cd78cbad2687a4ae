"""Brute-force NumPy reference for rlvr_jax.advantages.tree: an explicit prefix tree (a trie)
built from token CONTENT, as TEMPO's Prefix-to-Tree does, independent of the lineage walk of
the JAX code. `lineage_tokens` writes the content a tree rollout would hold (a forked row copies
its parent's first fork_at tokens; every decoded token is a fresh id), so the trie of the
contents is the lineage's tree."""
import math

import numpy as np


def lineage_tokens(fork_parent, fork_at, num_tokens):
    """[B, N] token ids of a tree rollout: parents first (by recursion), fresh ids elsewhere."""
    b = len(fork_parent)
    rows, counter = {}, [0]

    def build(i):
        if i in rows:
            return rows[i]
        p, k = int(fork_parent[i]), int(fork_at[i])
        head = list(build(p)[:k]) if k > 0 and p != i else []
        tail = list(range(counter[0], counter[0] + num_tokens - len(head)))
        counter[0] += len(tail)
        rows[i] = head + tail
        return rows[i]
    return np.array([build(i) for i in range(b)])


def _trie(tokens):
    """{prefix tuple: set of rows through it} of one group's rows."""
    leaves = {}
    for i, row in enumerate(tokens):
        for t in range(len(row)):
            leaves.setdefault(tuple(row[:t + 1]), set()).add(i)
    return leaves


def tree_advantages(rewards, tokens, mask, mode, scale="none", eps=1e-6, exponent=1.0,
                    group_mask=None, leaves=None):
    """[B, N] float64: per group, node(i, t) = leaves of the trie node of row i's prefix
    through t; V(node) = mean reward of its leaves; V(root) = mean over the group's leaves
    (`leaves` [P, G] bool; None: every row); rows that are no leaf are left out (0)."""
    rewards = np.asarray(rewards, np.float64)
    p, g = rewards.shape
    n = tokens.shape[1]
    out = np.zeros((p * g, n))
    for q in range(p):
        rows = [i for i in range(g) if leaves is None or leaves[q][i]]
        r = rewards[q]
        kept = r[rows]
        if len(rows) < 2 or kept.max() == kept.min() or (
                group_mask is not None and not group_mask[q]):
            continue
        below = _trie([tokens[q * g + i] for i in rows])  # trie rows are positions in `rows`
        root = kept.mean()
        std = np.std(kept, ddof=1) + eps if scale == "group" else 1.0
        for i in rows:
            row = tokens[q * g + i]
            nodes = [frozenset(rows)] + [frozenset(rows[k] for k in below[tuple(row[:t + 1])])
                                         for t in range(n)]
            value = [np.mean(r[sorted(s)]) for s in nodes]
            parent = root  # V of the previous segment's node.
            for t in range(n):
                node, v = nodes[t + 1], value[t + 1]
                if node != nodes[t]:  # A new segment starts at t.
                    parent = value[t]
                if mode == "treerl":
                    a = ((v - root) + (v - parent)) / math.sqrt(len(node))
                elif mode == "tempo":
                    a = (r[i] - root) + (v - value[t] if t >= 1 else 0.0)
                else:
                    a = (r[i] - root) / len(node) ** exponent
                if mask[q * g + i][t]:
                    out[q * g + i, t] = a / std
    return out
