"""Expert traces in the group (`rlvr_jax.train.offpolicy`, rl.offpolicy_per_group): LUFFY's
shaped objective and CHORD's SFT weight against NumPy references (values and gradients),
the rows the worked solution replaces, the group metrics, μ's schedule and the config's
errors. The step with expert rows runs in tests/test_configs.py (luffy_arithmetic)."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling
from rlvr_jax.data import datasets
from rlvr_jax.train import offpolicy, rl_config
from tests import numerics
from tests.reference import offpolicy_ref

B, N, G = 6, 5, 3


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    logp = np.log(rng.uniform(1e-4, 1.0, (B, N))).astype(np.float32)
    adv = rng.standard_normal(B).astype(np.float32)
    per_token = rng.standard_normal((B, N)).astype(np.float32)
    off = np.asarray(offpolicy.offpolicy_rows(B, G, 1))
    return per_token, logp, adv, off


@pytest.mark.parametrize("mu", [0.0, 0.3])
@pytest.mark.parametrize("gamma", [0.1, 1.0])
def test_shaped_objective_matches_numpy(mu, gamma):
    per_token, logp, adv, off = _inputs()
    mus = np.full(B, mu, np.float32)
    fn = lambda lp: offpolicy.shaped_objective(  # noqa: E731
        jnp.asarray(per_token), lp, jnp.asarray(adv), jnp.asarray(off), jnp.asarray(mus),
        gamma=gamma)
    got = np.asarray(fn(jnp.asarray(logp)), np.float64)
    grad = np.asarray(jax.grad(lambda lp: jnp.sum(fn(lp)))(jnp.asarray(logp)), np.float64)
    want, want_grad = offpolicy_ref.shaped_objective_np(per_token, logp, adv, off, mus, gamma)
    # A handful of float32 roundings (an exp, a division, products) on terms of size
    # ≤ |Â| + |log p| + 1.
    atol = numerics.ref_atol(8, float(np.max(np.abs(adv)) + np.max(np.abs(logp)) + 1),
                             transcendentals=1)
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=atol)
    assert off.tolist() == [False, False, True] * 2  # The last row of each group of 3.


def test_insert_solutions_replaces_the_last_rows_of_each_group(tok):
    examples = [types.SimpleNamespace(key=f"k{i}", solution=s) for i, s in
                enumerate(["1 + 2 = 3", "4"])]
    arrays = offpolicy.solution_arrays(examples, tok, N + 7)
    want_tokens, want_mask = datasets.completion_arrays([e.solution for e in examples], tok,
                                                        max_len=N + 7)
    b, n = 2 * G, N + 7
    rollout = sampling.Rollout(
        tokens=jnp.full((b, n), 7, jnp.int32), mask=jnp.ones((b, n), jnp.int32),
        logprobs=jnp.full((b, n), -1.0), lengths=jnp.full((b,), n, jnp.int32),
        finished=jnp.zeros((b,), bool), prompt_tokens=jnp.zeros((b, 2), jnp.int32),
        prompt_mask=jnp.ones((b, 2), jnp.int32))
    out = offpolicy.insert_solutions(rollout, {k: jnp.asarray(v) for k, v in arrays.items()},
                                     per_group=1, group_size=G)
    for p in range(2):
        np.testing.assert_array_equal(out.tokens[p * G + G - 1], want_tokens[p])
        np.testing.assert_array_equal(out.mask[p * G + G - 1], want_mask[p])
        assert int(out.lengths[p * G + G - 1]) == want_mask[p].sum()
        assert bool(out.finished[p * G + G - 1]) and float(out.logprobs[p * G + G - 1, 0]) == 0
        np.testing.assert_array_equal(out.tokens[p * G:p * G + G - 1], 7)  # Sampled rows kept.
    with pytest.raises(ValueError, match="offpolicy_per_group"):
        offpolicy.insert_solutions(rollout, arrays, per_group=G, group_size=G)
    with pytest.raises(ValueError, match="no worked solution"):
        offpolicy.solution_arrays([types.SimpleNamespace(key="x", solution="")], tok, n)
    with pytest.raises(ValueError, match="max_new_tokens"):
        offpolicy.solution_arrays(examples, tok, 2)


def test_group_metrics_and_sft_schedule():
    rewards = np.array([[0, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 1]], np.float32)
    valid = np.array([True, True, True, False])
    m = offpolicy.group_metrics(jnp.asarray(rewards), jnp.asarray(valid), 1)
    assert float(m["rollout/all_wrong_fraction"]) == pytest.approx(
        offpolicy_ref.all_wrong_fraction_np(rewards, valid, 1))  # 2/3, exact in float32 ±1 ulp
    assert float(m["offpolicy/reward_on"]) == pytest.approx(1 / 6)
    assert float(m["offpolicy/reward_off"]) == pytest.approx(2 / 3)
    rl = rl_config.RLConfig(num_prompts=4, offpolicy_per_group=1, offpolicy_sft_weight=0.8,
                            offpolicy_sft_weight_end=0.2, offpolicy_sft_decay_steps=10)
    mus = [float(offpolicy.sft_weight(jnp.asarray(s), rl)) for s in (0, 5, 10, 20)]
    assert mus == pytest.approx([0.8, 0.5, 0.2, 0.2])
    for bad, match in ((dict(offpolicy_gamma=0.0), "offpolicy_gamma"),
                       (dict(offpolicy_sft_weight=1.5), "offpolicy_sft_weight"),
                       (dict(offpolicy_per_group=1, tis_cap=2.0), "per-token"),
                       (dict(offpolicy_per_group=-1), "offpolicy_per_group")):
        with pytest.raises(ValueError, match=match):
            rl_config.RLConfig(num_prompts=4, **bad)
