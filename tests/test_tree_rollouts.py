"""Tests for rlvr_jax.tree_rollouts: forks inside `sampling.generate`'s decode loop.

Every configuration is one compilation (seconds on CPU): the tests share a few module-scoped
rollouts of the tiny model on test_sampling's prompts (P = 3, G = 4, N = 12, sampled with
top-k / top-p and a quarter of the vocabulary as stop tokens, so rows end unevenly).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling, tree_rollouts
from rlvr_jax.models import transformer
from rlvr_jax.sampling import SamplingConfig
from rlvr_jax.tree_rollouts import TreeConfig

from tests import numerics
from tests.test_sampling import (PROMPT_MASK, PROMPTS, check_rollout_structure,
                                 recomputed_logprobs)

G = 4
BASE = SamplingConfig(temperature=0.7, top_k=20, top_p=0.95, max_new_tokens=12, num_samples=G,
                      stop_token_ids=tuple(range(1, 128, 4)), pad_id=0)
KEY = jax.random.PRNGKey(3)
FIELDS = ("tokens", "logprobs", "mask", "lengths", "finished")
# Forks at positions 2 and 5 (two forks per prompt: R = 2 roots); at high entropy (two
# forks: R = 2). Mode "every" is mode "depth" at K, 2K, … (`TreeConfig.fork_steps`).
DEPTH = TreeConfig(mode="depth", depths=(2, 5), branches=2, max_forks=2)
ENTROPY = TreeConfig(mode="entropy", entropy_threshold=0.5, branches=2, max_forks=2)


def run(params, config, tree):
    return sampling.jit_generate(params, PROMPTS, PROMPT_MASK, KEY, model_config=config,
                                 sampling_config=BASE.replace(tree=tree))


@pytest.fixture(scope="module")
def independent(tiny_params, tiny_config):
    return run(tiny_params, tiny_config, None)


@pytest.fixture(scope="module")
def depth(tiny_params, tiny_config):
    return run(tiny_params, tiny_config, DEPTH)


def as_np(rollout):
    return {f: np.asarray(getattr(rollout, f)) for f in FIELDS + ("fork_parent", "fork_at")}


def check_tree(rollout, independent, tree: TreeConfig, params, config):
    """The invariants of any tree rollout (see the module docstring of `tree_rollouts`)."""
    r, ind = as_np(rollout), as_np(independent)
    parent, at, rows = r["fork_parent"], r["fork_at"], np.arange(len(r["lengths"]))
    check_rollout_structure(rollout, BASE)
    assert (parent // G == rows // G).all()  # A parent is a row of the same prompt.
    forked = at > 0
    assert ((parent == rows) == ~forked).all()
    assert (rows % G >= tree.roots(G))[forked].all()  # Only spare rows are claimed.
    assert forked.reshape(-1, G).sum(1).max() <= tree.max_forks * (tree.branches - 1)
    # Untouched rows (roots, unclaimed spare rows) are the independent sampler's, bitwise.
    for f in ("tokens", "logprobs", "mask"):
        np.testing.assert_array_equal(r[f][~forked], ind[f][~forked])
    for i in np.flatnonzero(forked):
        p, k = parent[i], at[i]
        assert not forked[p] or at[p] <= k  # A copy forks again only after it was made.
        assert r["lengths"][i] > k and r["lengths"][p] >= k  # The copy sampled token k.
        np.testing.assert_array_equal(r["tokens"][i, :k], r["tokens"][p, :k])
        np.testing.assert_array_equal(r["logprobs"][i, :k], r["logprobs"][p, :k])
    # Every row's log-probs are the training forward's (cache vs full recompute: the
    # forward in two orders, numerics.assert_forward_close's bound).
    ref = recomputed_logprobs(params, config, rollout, BASE.temperature)
    mask = r["mask"] == 1
    numerics.assert_forward_close(r["logprobs"][mask], ref[mask], config,
                                  r["tokens"].shape[1] + PROMPTS.shape[1])
    return forked


def test_a_tree_that_never_forks_is_the_independent_sampler_bit_for_bit(
        tiny_params, tiny_config, independent):
    # The threshold is never reached: one spare row per prompt decodes as an ordinary sample.
    never = TreeConfig(mode="entropy", entropy_threshold=1e9, max_forks=1)
    rollout, ind = as_np(run(tiny_params, tiny_config, never)), as_np(independent)
    for f in FIELDS:
        np.testing.assert_array_equal(rollout[f], ind[f], err_msg=f)
    np.testing.assert_array_equal(rollout["fork_parent"], np.arange(3 * G))
    np.testing.assert_array_equal(rollout["fork_at"], np.zeros(3 * G))
    assert independent.fork_parent is None and independent.fork_at is None


def test_depth_forks_share_prefixes_and_keep_the_roots(tiny_params, tiny_config, independent,
                                                       depth):
    forked = check_tree(depth, independent, DEPTH, tiny_params, tiny_config)
    assert forked.any()
    assert set(np.asarray(depth.fork_at)[forked]) <= set(DEPTH.depths)
    shared = int(tree_rollouts.shared_tokens(depth))
    assert shared == int(np.asarray(depth.fork_at).sum()) > 0


def test_entropy_forks(tiny_params, tiny_config, independent):
    rollout = run(tiny_params, tiny_config, ENTROPY)
    forked = check_tree(rollout, independent, ENTROPY, tiny_params, tiny_config)
    assert forked.any()
    # Each fork happened where the parent's next-token entropy H exceeds the threshold.
    # The sampler's float32 H vs this float64 one from the training forward: the logits of
    # two forward orders differ by δ (assert_forward_close's bound, / T), each log-prob by
    # ε more (log_softmax_atol); dH = Σ p (dlog p)(1 + log p) stays below (δ + ε)(1 +
    # max|log p|), plus the V-term sum's rounding γ_V · H.
    tokens, mask = rollout.sequences()
    logits = np.asarray(transformer.jit_forward(tiny_params, tokens, mask, config=tiny_config))
    tp, parent, at = PROMPTS.shape[1], np.asarray(rollout.fork_parent), np.asarray(rollout.fork_at)
    s = logits.astype(np.float64)[parent[forked], tp - 1 + at[forked]] / BASE.temperature
    logp = s - s.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    ent = -(np.exp(logp) * logp).sum(-1)
    length = tokens.shape[1]
    delta = numerics.reorder_atol(numerics.forward_chain(tiny_config, length),
                                  float(np.abs(logits).max())) / BASE.temperature
    tol = ((delta + numerics.log_softmax_atol(s)) * (1 + float(np.abs(logp).max()))
           + numerics.gamma(s.shape[-1]) * float(ent.max()))
    assert (ent > ENTROPY.entropy_threshold - tol).all(), ent


def test_tree_rollout_traced_again_sharded_is_the_same(tiny_params, tiny_config, depth):
    """`generate` traced inside an outer jit, as the trainer's RL step traces it, with the
    prompts sharded over a 3-device data axis (forks copy rows within a prompt's shard)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as PS
    mesh = Mesh(np.array(jax.devices()[:3]), ("data",))
    batch, replicated = NamedSharding(mesh, PS("data")), NamedSharding(mesh, PS())

    def step(params, prompts, mask, rng):
        rollout = sampling.generate(params, prompts, mask, rng, model_config=tiny_config,
                                    sampling_config=BASE.replace(tree=DEPTH))
        return rollout, tree_rollouts.shared_tokens(rollout)

    run = jax.jit(step, in_shardings=(replicated, batch, batch, replicated),
                  out_shardings=(batch, replicated))
    rollout, shared = run(tiny_params, PROMPTS, PROMPT_MASK, KEY)
    assert rollout.tokens.sharding.spec == PS("data")
    for name, want in as_np(depth).items():
        if name != "logprobs":
            np.testing.assert_array_equal(np.asarray(getattr(rollout, name)), want, err_msg=name)
    # The same forward with the batch split over devices: a forward's reordering bound.
    numerics.assert_forward_close(rollout.logprobs, depth.logprobs, tiny_config,
                                  PROMPTS.shape[1] + BASE.max_new_tokens)
    assert int(shared) == int(np.asarray(depth.fork_at).sum())


def test_compaction_after_the_last_fork_samples_what_the_full_batch_samples(tiny_params,
                                                                           tiny_config):
    """As test_sampling's compaction test, with forks at 2 and 5 (R = 5 of G = 8 rows): from
    step 6 on the loop continues on its live rows only (8 of 16), and every row gets the
    tokens, mask, lineage and `finished` of the loop that carries all 16 rows to the end."""
    p, g, n = 2, 8, 16
    prompts = jnp.asarray(np.random.default_rng(0).integers(1, tiny_config.vocab_size, (p, 6)),
                          jnp.int32)
    budgets = jnp.asarray(np.random.default_rng(1).integers(1, n + 1, p * g), jnp.int32)
    sc = SamplingConfig(temperature=0.9, top_k=20, top_p=0.9, max_new_tokens=n, num_samples=g,
                        stop_token_ids=tuple(range(1, 128, 16)), cache_window=0,
                        compact_ratio=0.5,
                        tree=TreeConfig(mode="depth", depths=(2, 5), branches=2, max_forks=3))
    run = lambda c: sampling.jit_generate(  # noqa: E731
        tiny_params, prompts, jnp.ones((p, 6), jnp.int32), KEY, model_config=tiny_config,
        sampling_config=c, budgets=budgets)
    compact, full = as_np(run(sc)), run(sc.replace(compact_ratio=0.0))
    for name, got in compact.items():
        if name != "logprobs":
            np.testing.assert_array_equal(got, np.asarray(getattr(full, name)), err_msg=name)
    # The same float32 forward with another batch in the dots: a forward's reordering bound.
    numerics.assert_forward_close(compact["logprobs"], full.logprobs, tiny_config, 6 + n)
    forked = compact["fork_at"] > 0
    assert forked.any() and set(compact["fork_at"][forked]) <= {2, 5}
    for i in np.flatnonzero(forked):
        k, parent = compact["fork_at"][i], compact["fork_parent"][i]
        np.testing.assert_array_equal(compact["logprobs"][i, :k], compact["logprobs"][parent, :k])
    assert np.asarray(run(sc).decode_steps).sum() < np.asarray(full.decode_steps).sum()


plan = jax.jit(tree_rollouts.plan, static_argnames=("tc", "g", "one_per_prompt"))


def test_fork_steps():
    assert TreeConfig(mode="every", every=4).fork_steps(13) == (4, 8, 12)
    assert TreeConfig(mode="every", every=4).fork_steps(12) == (4, 8)
    assert TreeConfig(mode="depth", depths=(9, 3, 3)).depths == (3, 9)


def test_plan_claims_spare_rows_in_order_within_the_budget():
    tc = TreeConfig(mode="depth", depths=(1,), branches=3, max_forks=2)  # G = 6: R = 2.
    tree = tree_rollouts.start(12, 6, tc)
    wants = jnp.array([1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0], bool)
    priority = jnp.array([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], jnp.float32)
    index, claim, tree = plan(tree, wants, priority, jnp.int32(4), tc=tc, g=6,
                              one_per_prompt=False)
    # Prompt 0: row 1 (priority 0) takes spare rows 2, 3, row 0 takes 4, 5; prompt 1: row 7
    # takes 8, 9; 10, 11 stay spare.
    np.testing.assert_array_equal(index, [0, 1, 1, 1, 0, 0, 6, 7, 7, 7, 10, 11])
    np.testing.assert_array_equal(tree.at, [0, 0, 4, 4, 4, 4, 0, 0, 4, 4, 0, 0])
    np.testing.assert_array_equal(tree.spare, np.arange(12) >= 10)
    np.testing.assert_array_equal(claim, (tree.at > 0))
    # One fork per prompt and step (mode entropy): only the best candidate forks.
    index, _, _ = plan(tree_rollouts.start(12, 6, tc), wants, priority, jnp.int32(4), tc=tc,
                       g=6, one_per_prompt=True)
    np.testing.assert_array_equal(index, [0, 1, 1, 1, 4, 5, 6, 7, 7, 7, 10, 11])


def test_entropy_matches_numpy():
    logits = jax.random.normal(jax.random.PRNGKey(0), (3, 50)) * 3
    got = jax.jit(tree_rollouts.entropy, static_argnums=(1, 2))(logits, 0.7, 40)
    s = np.asarray(logits, np.float64)[:, :40] / 0.7
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = -(p * np.log(p)).sum(-1)
    # A float32 log-softmax entry (its bound), times the probabilities summing to 1, plus
    # the 40-term sum of terms of size <= the log-softmax's magnitude (γ_40).
    atol = numerics.log_softmax_atol(s) + numerics.ref_atol(40, float(np.abs(want).max()) + 1,
                                                            transcendentals=1)
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=atol)


@pytest.mark.parametrize("kwargs, match", [
    (dict(mode="width"), "mode must be one of"),
    (dict(branches=1), "branches must be an int >= 2"),
    (dict(max_forks=-1), "max_forks must be an int >= 0"),
    (dict(depths=()), "depths must be positions >= 1"),
    (dict(depths=(0, 3)), "depths must be positions >= 1"),
    (dict(mode="every", every=0), "every must be >= 1"),
    (dict(mode="entropy", entropy_threshold=-1.0), "entropy_threshold must be"),
])
def test_bad_tree_config_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TreeConfig(**{"depths": (3,), **kwargs})


def test_forks_must_leave_a_root_and_fit_the_completion():
    with pytest.raises(ValueError, match="max_forks must leave a root"):
        BASE.replace(tree=TreeConfig(depths=(3,), branches=3, max_forks=2))  # 4 - 2·2 = 0.
    with pytest.raises(ValueError, match="depths must be < max_new_tokens"):
        BASE.replace(tree=TreeConfig(depths=(12,)))
    assert BASE.replace(tree=TreeConfig(depths=(3,), branches=4, max_forks=1)).tree.roots(G) == 1


def test_rollout_metrics_count_shared_and_decoded_tokens(depth):
    from rlvr_jax.train.metrics import rollout_metrics
    rewards, valid = jnp.zeros((3, G)), jnp.ones((3,), bool)
    rollout_metrics = jax.jit(rollout_metrics)  # One program each (eager: ~2 s of dispatch).
    m = rollout_metrics(depth, rewards, valid)
    shared, lengths = int(np.asarray(depth.fork_at).sum()), int(np.asarray(depth.lengths).sum())
    assert int(m["rollout/shared_prefix_tokens"]) == shared > 0
    assert int(m["rollout/decoded_tokens"]) == lengths - shared
    plain = rollout_metrics(depth.replace(fork_parent=None, fork_at=None), rewards, valid)
    assert "rollout/shared_prefix_tokens" not in plain


def test_regroup_parents_keeps_each_parent_in_its_group():
    # Groups 2 and 0 of G = 3 rows taken (dynamic sampling): row 7 of group 2 forked from 6.
    taken = jnp.asarray([6, 6, 8, 0, 1, 0], jnp.int32)
    np.testing.assert_array_equal(tree_rollouts.regroup_parents(taken, 3), [0, 0, 2, 3, 4, 3])


def test_episode_samplers_refuse_a_tree(tiny_config):
    """The Sampler at construction, and the episode functions called directly (device
    `generate_episodes`, host `play_on_host`: both start with `multiturn.rollout.begin`)."""
    from rlvr_jax import multiturn
    from rlvr_jax.sampler import Sampler
    with pytest.raises(ValueError, match="episodes do not fork"):
        Sampler(tiny_config, BASE.replace(tree=DEPTH), env=object())
    with pytest.raises(ValueError, match="episodes do not fork"):
        multiturn.rollout.begin(None, None, None, None, None, model_config=tiny_config,
                                sampling_config=BASE.replace(tree=DEPTH), env=None)
