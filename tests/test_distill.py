"""On-policy distillation (`rlvr_jax.train.distill`, `rl.teacher`): the per-token divergences
against NumPy references over a whole vocabulary (values, and the policy gradient they give
against the divergence's own gradient), and the teacher inside a compiled update."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import models, sampling
from rlvr_jax.models import presets
from rlvr_jax.train import distill, rl_config
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.state import create_train_state
from tests import numerics
from tests.reference import distill_ref
from tests.test_algorithms import G, N, P, TX, rollout  # noqa: F401  (the fixture)

V = 16
FD_ERR = 1e-8  # Central differences in float64 with h = 1e-6: O(h²) + O(1e-16 / h) ≪ 1e-8.


def _case(seed):
    rng = np.random.default_rng(seed)
    z = (2.0 * rng.standard_normal(V)).astype(np.float32)
    teacher = distill_ref.log_softmax_np(3.0 * rng.standard_normal(V))
    return z, teacher


def _surrogate_grad(z, teacher_logp, **kw):
    """∇_z of Σ_y sg(π(y))·(−A_y)·log π(y), A_y the advantage `distill_advantages` gives
    token y (no verifier advantage): the expected policy gradient of the term."""
    u = jnp.asarray(teacher_logp, jnp.float32)

    def surrogate(z):
        s = jax.nn.log_softmax(z)
        d = distill.token_divergence(jax.lax.stop_gradient(s), u, **kw)
        a = distill.distill_advantages(jnp.zeros((V,)), d[:, None], jnp.ones((V, 1)), 1.0)
        return jnp.sum(jax.lax.stop_gradient(jnp.exp(s)) * -a[:, 0] * s)
    return np.asarray(jax.grad(surrogate)(jnp.asarray(z)), np.float64)


def _atol(z, teacher_logp):
    # One float32 log-softmax (log_softmax_atol), then sums of V terms of size
    # ≤ max|log π − log π_t| + 1 with an exp and a log each; plus the reference's FD error.
    mag = float(np.max(np.abs(distill_ref.log_softmax_np(z) - teacher_logp))) + 1.0
    return (numerics.log_softmax_atol(z[None]) * (V + 1) +
            numerics.ref_atol(2 * V + 4, mag, transcendentals=4) + FD_ERR)


@pytest.mark.parametrize("seed", [0, 1])
def test_reverse_kl_per_token_values_and_gradient(seed):
    z, u = _case(seed)
    s = jax.nn.log_softmax(jnp.asarray(z))
    d = np.asarray(distill.token_divergence(s, jnp.asarray(u, jnp.float32)), np.float64)
    p = np.exp(distill_ref.log_softmax_np(z))
    # E_{y∼π_s}[d_y] is KL(π_s‖π_t): the per-token reward −d is an unbiased estimate of −KL.
    np.testing.assert_allclose(np.sum(p * d), distill_ref.reverse_kl_np(z, u), rtol=0,
                               atol=_atol(z, u))
    want = distill_ref.grad_np(lambda x: distill_ref.reverse_kl_np(x, u), z)
    np.testing.assert_allclose(_surrogate_grad(z, u), want, rtol=0, atol=_atol(z, u))


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_jsd_per_token_gradient_is_the_jsd_gradient(beta):
    z, u = _case(2)
    want = distill_ref.grad_np(lambda x: distill_ref.jsd_np(x, u, beta), z)
    got = _surrogate_grad(z, u, divergence="jsd", beta=beta)
    np.testing.assert_allclose(got, want, rtol=0, atol=_atol(z, u))
    assert np.max(np.abs(want)) > 1e-2  # Not a vacuous comparison.


def test_divergence_and_config_errors():
    with pytest.raises(ValueError, match="teacher_divergence"):
        distill.token_divergence(jnp.zeros(2), jnp.zeros(2), divergence="forward")
    for bad, match in ((dict(teacher_divergence="kl"), "teacher_divergence"),
                       (dict(teacher_jsd_beta=1.0), "teacher_jsd_beta"),
                       (dict(teacher_coef=-1.0), "teacher_coef"),
                       (dict(policy_loss="gspo"), "per-token")):
        with pytest.raises(ValueError, match=match):
            rl_config.RLConfig(num_prompts=P, teacher="t", **bad)


@functools.lru_cache(maxsize=None)
def _program(vocab):
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(1,), pad_id=0)
    rl = rl_config.RLConfig(num_prompts=P, teacher="(in the state)", teacher_coef=0.5,
                            aggregation="token-mean")
    return step_lib.make_update_fn(presets.get("tiny", vocab_size=vocab), sc, rl, TX)


def _update(params, teacher, model_config, rollout, rewards):  # noqa: F811
    state = create_train_state(jax.tree.map(jnp.copy, params), TX, jax.random.PRNGKey(1))
    state = state.replace(teacher_params=distill.Teacher(  # Copies: the update donates.
        jax.tree.map(jnp.copy, teacher), model_config))
    _, metrics = _program(model_config.vocab_size)(state, rollout, jnp.asarray(rewards))
    return {k: float(v) for k, v in metrics.items()}


def test_teacher_in_the_update(tok, params, model_config, rollout):  # noqa: F811
    """With all rewards equal (no verifier advantage) the on-policy ppo_clip loss is
    w·mean_t d_t over the valid tokens (ratio 1): train/loss = w·distill/reverse_kl; the
    reverse KL is the outside computation's; a teacher identical to the policy gives 0."""
    other = models.init_params(model_config, jax.random.PRNGKey(7))
    m = _update(params, other, model_config, rollout, np.zeros(P * G, np.float32))
    tokens = jnp.concatenate([rollout.prompt_tokens, rollout.tokens], 1)
    att = jnp.concatenate([rollout.prompt_mask, rollout.mask], 1)
    lp = lambda p: np.asarray(models.completion_logprobs(  # noqa: E731
        p, tokens, att, N, config=model_config, temperature=1.0)[0], np.float64)
    mask = np.asarray(rollout.mask, np.float64)
    want = np.sum((lp(params) - lp(other)) * mask) / np.sum(mask)
    # Two float32 evaluations of each forward in other orders (micro-batched scoring pass vs
    # the whole batch), then a mean of ≤ B·N terms.
    atol = 2 * numerics.reorder_atol(numerics.forward_chain(model_config, tokens.shape[1]) +
                                     P * G * N, float(np.max(np.abs(lp(other)))))
    assert abs(m["distill/reverse_kl"] - want) <= atol
    assert abs(m["train/loss"] - 0.5 * m["distill/reverse_kl"]) <= atol
    assert m["distill/divergence"] == m["distill/reverse_kl"]
    same = _update(params, params, model_config, rollout, np.zeros(P * G, np.float32))
    assert abs(same["distill/reverse_kl"]) <= atol
