"""KL-divergence estimators between the policy and a reference policy (k1, k2, k3 and `+` variants).

With samples from the policy and `δ = logp - ref_logp`:
  - k1 = δ: unbiased estimate of KL(π || π_ref); as a *loss* its expected gradient is zero,
    so it does nothing (use it only as a reward penalty).
  - k2 = δ²/2: biased, low variance; as a loss its gradient is that of reverse KL(π || π_ref).
  - k3 = exp(-δ) - 1 + δ: unbiased, ≥ 0, low variance (Schulman 2020, "Approximating KL
    Divergence"); as a loss its gradient is that of forward KL(π_ref || π). GRPO's usual choice.
  - "k1+", "k3+": the value of k1 / k3 with the gradient of k2 (verl's `+` variants).
"""
import warnings

import jax
import jax.numpy as jnp

KINDS = ("k1", "k2", "k3", "k1+", "k3+")


def kl(logp, ref_logp, *, kind="k3", mask=None, clamp=20.0):
    """Per-token KL estimate between the policy and the reference policy.

    Formula (δ = clamp(logp - ref_logp, ±clamp)): k1 = δ; k2 = δ²/2; k3 = exp(-δ) - 1 + δ;
    "k1+" / "k3+" = value of k1 / k3 + (k2 - sg(k2)). See the module docstring for which
    divergence each estimator's gradient optimises. Papers: Schulman 2020, "Approximating KL
    Divergence"; Shao et al. 2024 (GRPO uses k3). verl: `kl_loss_type` /
    `kl_ctrl` `kl_penalty` = "kl" (k1), "mse" (k2), "low_var_kl" (k3), "k1+", "k3+";
    TRL: k3 only (`beta`). verl additionally clamps the k3 value to ±10.

    Args:
      logp: `[B, T]` log-probs of the sampled tokens under the policy (any float dtype).
      ref_logp: `[B, T]` log-probs under the reference policy.
      kind: one of "k1", "k2", "k3", "k1+", "k3+".
      mask: optional `[B, T]` bool/0-1 mask; masked positions are sanitised and set to 0.
      clamp: bound on |δ| before `exp`.

    Returns:
      `[B, T]` float32 per-token estimates (gradient flows into `logp` and `ref_logp`; wrap
      `ref_logp` in `stop_gradient` if it is not frozen, and use `kl_penalty` in rewards).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    lp = jnp.asarray(logp).astype(jnp.float32)
    ref = jnp.asarray(ref_logp).astype(jnp.float32)
    if lp.shape != ref.shape:
        raise ValueError(f"logp {lp.shape} and ref_logp {ref.shape} must have the same shape")
    if mask is not None:
        m = jnp.asarray(mask).astype(bool)
        if m.shape != lp.shape:
            raise ValueError(f"mask {m.shape} must match logp {lp.shape}")
        lp, ref = jnp.where(m, lp, 0.0), jnp.where(m, ref, 0.0)
    delta = jnp.clip(lp - ref, -clamp, clamp)
    k2 = 0.5 * jnp.square(delta)
    if kind == "k2":
        out = k2
    else:
        out = delta if kind.startswith("k1") else jnp.expm1(-delta) + delta
        if kind.endswith("+"):
            out = jax.lax.stop_gradient(out) + k2 - jax.lax.stop_gradient(k2)
    if mask is not None:
        out = jnp.where(m, out, 0.0)
    return out


def kl_loss(logp, ref_logp, mask, *, kind="k3", coef=1.0):
    """Per-token KL loss term `coef · kl(logp, sg(ref_logp))`, 0 where masked (GRPO style).

    Warns when `kind="k1"`: its expected gradient is zero, so as a loss it does nothing.
    verl: `actor.use_kl_loss`, `kl_loss_coef`, `kl_loss_type`; TRL: `beta`.

    Args:
      logp, ref_logp: `[B, T]` log-probs (policy / reference).
      mask: `[B, T]` bool/0-1 response-token mask.
      kind: estimator (see `kl`).
      coef: β.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 and `{"kl_mean": ...}` over valid tokens.
    """
    if kind == "k1":
        warnings.warn("kl kind='k1' used as a loss: its expected gradient is zero; use 'k3', 'k2' "
                      "or 'k1+' for a KL loss", stacklevel=2)
    values = kl(logp, jax.lax.stop_gradient(ref_logp), kind=kind, mask=mask)
    m = jnp.asarray(mask).astype(bool)
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32)), 1.0)
    return coef * values, {"kl_mean": jax.lax.stop_gradient(jnp.sum(values) / n)}


def kl_penalty(logp, ref_logp, mask, *, kind="k1"):
    """Stop-gradient per-token KL for a reward penalty (`r_t -= β · kl_t`, PPO/RLHF style).

    verl: `algorithm.use_kl_in_reward`, `kl_penalty`; feed it to `advantages.token_rewards`.

    Returns:
      `[B, T]` float32 estimates with no gradient, 0 where masked.
    """
    return jax.lax.stop_gradient(kl(logp, ref_logp, kind=kind, mask=mask))


def adaptive_kl_coef(coef, observed_kl, *, target, horizon, num_steps):
    """Adaptive KL coefficient of Ziegler et al. 2019 ("Fine-Tuning LMs from Human Preferences").

    Formula: `e = clip(observed_kl / target - 1, -0.2, 0.2)`, `β ← β · (1 + e · num_steps / horizon)`.
    verl: `algorithm.kl_ctrl.type=adaptive` (`target_kl`, `horizon`).

    Args:
      coef: current β (scalar). observed_kl: scalar mean KL of the batch.
      target: target KL. horizon: adaptation horizon in samples. num_steps: samples in the batch.

    Returns:
      The updated float32 scalar β.
    """
    err = jnp.clip(jnp.asarray(observed_kl, jnp.float32) / target - 1.0, -0.2, 0.2)
    return jnp.asarray(coef, jnp.float32) * (1.0 + err * num_steps / horizon)
