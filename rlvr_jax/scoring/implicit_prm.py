"""An implicit process reward model (PRIME) as a per-step device term, learned online.

    reward.components = "token,implicit_prm"   # rl.process_source="learned": the process path

PRIME (Cui et al. 2025, "Process Reinforcement through Implicit Rewards"; Yuan et al. 2024,
"Free Process Rewards without Process Labels"): a copy π_φ of the policy, trained only on
outcome labels, is a process reward model through its log-ratio to a frozen reference:

    r_t = β · (log π_φ(y_t | y_<t) − log π_ref(y_t | y_<t))            (every model token)
    L(φ) = BCE(σ(Σ_t r_t), y)      y = 1 when the verifier accepts the completion

The term returns `StepRewards` [B, N] with r_t × weight on every model token (each token is
a step), summed into the completion's reward by default or, with `rl.process_source =
"learned"`, fed to the process path. After the step's update, `update` takes one Adam step
of L on the same rollout (PRIME updates φ before scoring; here φ scored this step's rollout
as it was, a lag of one step) — the step calls it through `Scorer.learn`. φ, π_ref (both
the policy at the start of RL) and φ's optimizer state live in `TrainState.reward_params`
as {"phi", "ref", "opt"}; unlike a frozen scoring model's they are checkpointed with the run
(`train/resume.frozen_fields`), so a resumed run continues φ.
"""
import dataclasses
from typing import Any, Dict, Tuple

import jax
import jax.numpy as jnp
import optax

from rlvr_jax.models import completion_logprobs
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.scoring.process import StepRewards
from rlvr_jax.scoring.reward_model import reward_params

Metrics = Dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class ImplicitPRM:
    """PRIME's static description (hashable: part of the compiled program).

    Attributes:
      config: the policy's `ModelConfig` (φ and π_ref are copies of the policy).
      weight: w of the step reward w · r_t.
      beta: β of r_t.
      learning_rate: Adam's step size for φ.
    """
    config: ModelConfig
    weight: float = 1.0
    beta: float = 0.05
    learning_rate: float = 1e-5

    def __post_init__(self):
        if self.beta <= 0 or self.learning_rate <= 0:
            raise ValueError(f"reward.implicit_prm_beta and _lr must be > 0, got {self.beta} "
                             f"and {self.learning_rate}")


def optimizer(iprm: ImplicitPRM) -> optax.GradientTransformation:
    """φ's optimizer: Adam, global norm clipped at 1."""
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(iprm.learning_rate))


def init_params(iprm: ImplicitPRM, policy_params) -> Dict[str, Any]:
    """{"phi", "ref", "opt"}: φ and π_ref as copies of `policy_params`, φ's optimizer state."""
    phi = jax.tree.map(jnp.array, policy_params)
    ref = jax.tree.map(jnp.array, policy_params)
    return {"phi": phi, "ref": ref, "opt": optimizer(iprm).init(phi)}


def token_rewards(phi, ref, rollout, *, iprm: ImplicitPRM) -> jax.Array:
    """r_t = β · (log π_φ − log π_ref) [B, N] float32 of the completion tokens, 0 outside
    `rollout.model_mask` (gradient through φ only)."""
    tokens, attention = rollout.sequences()
    n = rollout.tokens.shape[1]
    lp, _ = completion_logprobs(phi, tokens, attention, n, config=iprm.config)
    lr, _ = completion_logprobs(ref, tokens, attention, n, config=iprm.config)
    m = rollout.model_mask.astype(bool)
    return jnp.where(m, iprm.beta * (lp - jax.lax.stop_gradient(lr)), 0.0)


def outcome_loss(r_tok: jax.Array, labels: jax.Array) -> Tuple[jax.Array, Metrics]:
    """PRIME's cross-entropy of the implicit outcome reward Σ_t r_t [B] against labels [B]
    in {0, 1}: (mean BCE, {prime/loss, prime/accuracy (sign of Σ_t r_t agrees)})."""
    z = jnp.sum(r_tok, axis=1)
    y = labels.astype(jnp.float32)
    loss = jnp.mean(optax.sigmoid_binary_cross_entropy(z, y))
    acc = jnp.mean(((z > 0) == (y > 0.5)).astype(jnp.float32))
    return loss, {"prime/loss": loss, "prime/accuracy": acc}


def implicit_prm_term(setup, weight):
    """The per-step device term `implicit_prm` (`setup.reward_model` an `ImplicitPRM`), else
    None; the returned fn carries `update(reward_params, x, correct) -> (reward_params,
    metrics)`, φ's online step (`Scorer.learn`)."""
    del weight
    iprm = setup.reward_model
    if not isinstance(iprm, ImplicitPRM):
        return None
    tx = optimizer(iprm)

    def fn(rewards, x):
        del rewards
        p = reward_params(x.reward_params)
        r = jax.lax.stop_gradient(token_rewards(p["phi"], p["ref"], x.rollout, iprm=iprm))
        ends = x.rollout.model_mask.astype(bool)
        per_row = jnp.sum(r, axis=1)
        return (StepRewards(values=iprm.weight * r, ends=ends),
                {"prime/token_reward": jnp.sum(r) / jnp.maximum(jnp.sum(ends), 1),
                 "prime/sequence_reward": jnp.mean(per_row)})

    def update(params, x, correct):
        p = reward_params(params)
        grad_fn = jax.value_and_grad(lambda phi: outcome_loss(
            token_rewards(phi, p["ref"], x.rollout, iprm=iprm), correct), has_aux=True)
        (_, metrics), grads = grad_fn(p["phi"])
        updates, opt = tx.update(grads, p["opt"], p["phi"])
        metrics["prime/grad_norm"] = optax.tree.norm(grads)
        return dict(p, phi=optax.apply_updates(p["phi"], updates), opt=opt), metrics

    fn.update = update
    return fn
