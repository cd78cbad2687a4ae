"""Off-policy corrections for asynchronous rollouts: AReaL's decoupled PPO and the
sampler/trainer mismatch KL.

Three policies meet in an asynchronous step: the behaviour policy μ that sampled the tokens
(the sampler's weights, `max_staleness` steps old at most, in its numerics), the proximal
policy π_prox the clip is centred on, and the policy π_θ being trained. Shapes as in
`losses.policy`: `[B, T]` log-probs and masks.
"""
import jax
import jax.numpy as jnp

from rlvr_jax.losses.kl import kl
from rlvr_jax.losses.policy import _mask, ppo_clip, truncated_importance_weights
from rlvr_jax.numerics import masked_mean


def decoupled_ppo(logp, prox_logp, behav_logp, advantages, mask, *, eps_low=0.2,
                  eps_high=0.2, cap=2.0, level="token", mode="truncate"):
    """AReaL's decoupled PPO objective: the clip around π_prox, the behaviour weight apart.

    Formula: `w = exp(prox_logp − behav_logp)` (token or sequence level), truncated
    `min(w, cap)` or masked `w·[w ≤ cap]` (`truncated_importance_weights`);
    `u = exp(logp − prox_logp)`; `ℓ_t = w_t · max(−A·u_t, −A·clip(u_t, 1 − eps_low,
    1 + eps_high))`. With π_prox = μ (no staleness, same numerics) `w = 1` and this is
    `ppo_clip(logp, prox_logp, ...)`.
    Paper: Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement Learning System
    for Language Reasoning" (§5, decoupled PPO; its `behav_imp_weight_cap` is `cap`).

    Args:
      logp: `[B, T]` log-probs of the sampled tokens under π_θ (the gradient flows here).
      prox_logp: `[B, T]` under the proximal policy; behav_logp: `[B, T]` the sampler's.
      advantages: `[B]` or `[B, T]`; mask: `[B, T]` response tokens.
      eps_low, eps_high: the clip range around π_prox; cap, level, mode: the behaviour weight.

    Returns:
      `(per_token_loss [B, T] float32, metrics)`: ppo_clip's metrics and the weight's
      (`is_weight_mean/min/max`, `is_capped_frac`, `sampler_kl_k3`).
    """
    w, w_metrics = truncated_importance_weights(prox_logp, behav_logp, mask, cap=cap,
                                                level=level, mode=mode)
    loss, metrics = ppo_clip(logp, prox_logp, advantages, mask, eps_low=eps_low,
                             eps_high=eps_high)
    metrics.update(w_metrics)
    return loss * w, metrics


def mismatch_kl(logp, sampler_logp, mask):
    """Mean over valid tokens of the k3 estimate of KL(μ‖π) from tokens μ sampled.

    Formula: `d_t = logp_t − sampler_logp_t` (clamped to ±20), `k3_t = e^{d_t} − 1 − d_t ≥ 0`
    (Schulman's unbiased, non-negative estimator; `losses.kl`'s k3 with μ in the policy's
    place); 0 when the two agree.

    Args: logp, sampler_logp: `[B, T]` log-probs (no gradient is taken); mask: `[B, T]`.
    Returns: a float32 scalar.
    """
    sg = jax.lax.stop_gradient
    k3 = kl(sg(sampler_logp), sg(logp), kind="k3", mask=mask)
    return masked_mean(k3, _mask(mask, jnp.shape(logp)))
