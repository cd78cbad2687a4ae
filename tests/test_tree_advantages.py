"""Prefix-tree advantages (#42): `advantages.tree_advantages` against the brute-force trie of
tests/reference/tree_ref.py, the no-fork reductions to the group estimators, and the rules
(all-equal groups, invalid groups and masked tokens give 0)."""
import jax
import numpy as np
import pytest

from rlvr_jax import advantages
from rlvr_jax.advantages import tree
from tests import numerics
from tests.reference import tree_ref

P, G, N = 3, 6, 16
MODES = ("treerl", "tempo", "lambda_grpo")


def _lineage(seed, chains=False, free=0):
    """A random tree rollout of P groups: rows are roots or forks of an earlier row (at a
    position within that row's length; a fork of a fork inherits a fork_at >= its parent's,
    or any, with `chains`), lengths from 1 to N (a root may end before its siblings' fork
    points), the last `free` rows of a group empty (length 0: no leaf, `leaves`), then
    the rows of each group permuted so parents may come after their children."""
    rng = np.random.default_rng(seed)
    parent, at, length = [], [], []
    for q in range(P):
        par, fat, ln = [0], [0], [int(rng.integers(1, N + 1))]
        for i in range(1, G):
            if i >= G - free:
                par.append(i), fat.append(0), ln.append(0)
                continue
            j = i - 1 if chains and rng.random() < 0.7 else int(rng.integers(0, i))
            if rng.random() < 0.25 and not chains:
                par.append(i), fat.append(0), ln.append(int(rng.integers(1, N + 1)))
                continue
            lo = fat[j] if (chains or rng.random() < 0.5) else 0
            k = int(rng.integers(min(lo, ln[j]), ln[j] + 1))
            par.append(j), fat.append(k), ln.append(int(rng.integers(max(k, 1), N + 1)))
        perm = rng.permutation(G)  # new position of old row i is perm[i]
        inv = np.argsort(perm)
        parent += [q * G + int(perm[par[inv[s]]]) for s in range(G)]
        at += [fat[inv[s]] for s in range(G)]
        length += [ln[inv[s]] for s in range(G)]
    mask = (np.arange(N)[None, :] < np.array(length)[:, None]).astype(np.float32)
    rewards = rng.integers(0, 3, size=(P, G)).astype(np.float32) / 2
    return np.array(parent, np.int32), np.array(at, np.int32), mask, rewards


def _atol(rewards, scale, leaves=None):
    """JAX float32 vs the float64 reference: each advantage is a handful of node values, each
    a sum over ≤ G centred rewards (the mean another G-term sum) divided by the node size,
    combined in ≤ 4 operations (and one sqrt); terms ≤ 2·max|r| each, at most 3 of them, so
    magnitude 6·max|r|; with scale="group" also the std (a G-term reduction and a sqrt),
    dividing the magnitude by the smallest group std."""
    mag = 6 * float(np.max(np.abs(rewards)))
    if scale == "group":
        kept = [r if leaves is None else r[leaves[q]] for q, r in enumerate(rewards)]
        stds = [np.std(r, ddof=1) for r in kept if len(r) > 1 and r.max() > r.min()]
        mag /= min(stds)
    return numerics.ref_atol(3 * G + 8, mag, transcendentals=2)


_JIT = jax.jit(tree.tree_advantages, static_argnames=("mode", "scale", "eps", "exponent"))


def _run(rewards, parent, at, mask, **kw):
    """The jitted estimator (one compilation per mode, scale and shape for the module)."""
    return np.asarray(_JIT(rewards, parent, at, mask, **kw))


def _eager(rewards, parent, at, mask, **kw):
    return np.asarray(tree.tree_advantages(rewards, parent, at, mask, **kw))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", ["none", "group"])
def test_tree_advantages_match_the_trie_reference(mode, scale):
    for seed, chains, free in [(0, False, 0), (1, False, 2), (2, True, 0), (3, True, 1)]:
        parent, at, mask, rewards = _lineage(seed, chains, free)
        leaves = (mask.sum(1) > 0).reshape(P, G) if free else None
        tokens = tree_ref.lineage_tokens(parent, at, N)
        got = _run(rewards, parent, at, mask, mode=mode, scale=scale, leaves=leaves)
        want = tree_ref.tree_advantages(rewards, tokens, mask, mode, scale, leaves=leaves)
        np.testing.assert_allclose(got, want, rtol=0, atol=_atol(rewards, scale, leaves))


def test_a_hand_built_tree():
    """Two rows sharing 2 tokens (row 1 forked from row 0 at 2), rewards 1 and 0: the shared
    node has V = 0.5 = V(root), each tail V = r."""
    r, parent, at = np.array([[1.0, 0.0]]), np.array([0, 0]), np.array([0, 2])
    mask = np.ones((2, 4))
    np.testing.assert_array_equal(_run(r, parent, at, mask, mode="treerl"),
                                  [[0, 0, 1, 1], [0, 0, -1, -1]])
    np.testing.assert_array_equal(_run(r, parent, at, mask, mode="tempo"),
                                  [[.5, .5, 1, .5], [-.5, -.5, -1, -.5]])
    np.testing.assert_array_equal(_run(r, parent, at, mask, mode="lambda_grpo"),
                                  [[.25, .25, .5, .5], [-.25, -.25, -.5, -.5]])


@pytest.mark.parametrize("scale", ["none", "group"])
def test_no_fork_reduces_to_the_group_estimators(scale):
    """fork_parent = arange, fork_at = 0: tempo and lambda_grpo are GRPO (scale "group") or
    Dr.GRPO ("none") on every token, treerl twice that. The same float32 operations up to
    order (r − mean, / (std + eps)): two orders of a 2G-term chain."""
    _, _, mask, rewards = _lineage(4)
    base = np.asarray(advantages.broadcast_to_tokens(
        advantages.grpo(rewards, scale=scale).reshape(-1), mask))
    parent, at = np.arange(P * G, dtype=np.int32), np.zeros(P * G, np.int32)
    atol = numerics.reorder_atol(2 * G, 2 * float(np.max(np.abs(base))))
    for mode, factor in [("treerl", 2.0), ("tempo", 1.0), ("lambda_grpo", 1.0)]:
        np.testing.assert_allclose(_run(rewards, parent, at, mask, mode=mode, scale=scale),
                                   factor * base, rtol=0, atol=atol)


@pytest.mark.parametrize("mode", MODES)
def test_equal_rewards_invalid_groups_and_masked_tokens_give_zero(mode):
    parent, at, mask, rewards = _lineage(5, chains=True)
    rewards[0] = 0.5  # an all-equal group
    valid = np.array([True, False, True])
    a = _run(rewards, parent, at, mask, mode=mode, scale="group", group_mask=valid)
    assert np.all(a[:G] == 0) and np.all(a[G:2 * G] == 0)
    assert np.all(a[mask == 0] == 0) and np.any(a[2 * G:] != 0)


@pytest.mark.parametrize("mode", MODES)
def test_mask_changes_nothing_else_and_jit_matches_eager(mode):
    parent, at, mask, rewards = _lineage(6)
    full = _run(rewards, parent, at, np.ones_like(mask), mode=mode)
    np.testing.assert_array_equal(_run(rewards, parent, at, mask, mode=mode),
                                  np.where(mask > 0, full, 0.0))
    # Eager runs op by op, jit may fuse and reorder: the bound of two orders of one chain.
    np.testing.assert_allclose(_eager(rewards, parent, at, mask, mode=mode),
                               _run(rewards, parent, at, mask, mode=mode), rtol=0,
                               atol=2 * _atol(rewards, "none"))


def test_bad_inputs_raise_one_line_errors():
    parent, at, mask, rewards = _lineage(7)
    with pytest.raises(ValueError, match="mode must be"):
        tree.tree_advantages(rewards, parent, at, mask, mode="mcts")
    with pytest.raises(ValueError, match=r"fork_parent .* must be \[B\]"):
        tree.tree_advantages(rewards, parent[:-1], at[:-1], mask)


# ----------------------------------------------------------------------------- wiring

def test_rl_config_takes_tree_credit_only_where_it_composes():
    from rlvr_jax.train.rl_config import RLConfig
    RLConfig(num_prompts=2, tree_advantage="tempo", advantage_scale="none")
    for bad, match in [(dict(tree_advantage="mcts"), "tree_advantage must be one of"),
                       (dict(tree_advantage="treerl", advantage="rloo"), "advantage='grpo'"),
                       (dict(tree_advantage="treerl", advantage_scale="batch"), "'batch'"),
                       (dict(tree_advantage="tempo", policy_loss="gspo"), "per-token"),
                       (dict(tree_advantage="tempo", process_weight=0.5), "process_weight"),
                       (dict(tree_advantage="lambda_grpo", tree_exponent=-1.0), ">= 0")]:
        with pytest.raises(ValueError, match=match):
            RLConfig(num_prompts=2, **bad)


def test_validate_rejects_tree_credit_without_tree_rollouts():
    from rlvr_jax.train import config as config_lib
    from rlvr_jax.train import validate
    from rlvr_jax.train.errors import ConfigError
    config = config_lib.arithmetic_config()
    config.rl.tree_advantage = "treerl"
    with pytest.raises(ConfigError, match=r"^rl.tree_advantage: 'treerl' reads the lineage"):
        validate.validate(config)


def test_advantages_stage_reads_the_lineage_of_the_experience():
    """The update's hook: per-token tree advantages from exp.fork_parent / fork_at (rows with
    no token are no leaf), the lineage dropped afterwards; without one, a clear error."""
    import jax.numpy as jnp
    from rlvr_jax.train import algorithms
    from rlvr_jax.train import step as step_lib
    from rlvr_jax.train.experience import Experience, Groups
    from rlvr_jax.train.rl_config import RLConfig
    parent, at, mask, rewards = _lineage(8, free=1)
    valid = jnp.array([True, True, False])
    mask = mask * np.repeat(np.asarray(valid), G)[:, None]
    algo = algorithms.resolve(RLConfig(num_prompts=P, tree_advantage="tempo"))
    exp = Experience(tokens=jnp.zeros((P * G, N + 2), jnp.int32),
                     attention=jnp.ones((P * G, N + 2), jnp.int32), mask=jnp.asarray(mask),
                     sampler_logp=jnp.zeros((P * G, N)), row_valid=jnp.repeat(valid, G),
                     fork_parent=jnp.asarray(parent), fork_at=jnp.asarray(at))
    groups = Groups(rollout=None, rewards=jnp.asarray(rewards), valid=valid)
    got, metrics = step_lib.advantages_stage(groups, exp, algo=algo)
    want = tree.tree_advantages(rewards, parent, at, mask, mode="tempo", scale="group",
                                group_mask=valid, leaves=(mask.sum(1) > 0).reshape(P, G))
    np.testing.assert_array_equal(np.asarray(got.advantages), np.asarray(want))
    assert got.fork_parent is None and got.fork_at is None and "advantages/mean" in metrics
    with pytest.raises(ValueError, match="needs the lineage of tree rollouts"):
        step_lib.advantages_stage(groups, exp.replace(fork_parent=None, fork_at=None),
                                  algo=algo)
