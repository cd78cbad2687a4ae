"""Trust-region variants of the policy loss: SAPO's soft gate, DPPO's divergence mask, DCPO's
probability-dependent clip bounds.

Same contract as `losses.policy`: `(per_token_loss[B, T], metrics)`, exactly 0 (and zero
gradient) at masked positions whatever they hold, ratios in float32 from a log-ratio clamped
to `±LOG_RATIO_CLAMP`, metrics over the valid tokens. With the old log-prob equal to
`sg(logp)` (one epoch, one minibatch) each of them has the gradient of `-A·logp` on every
token it keeps.
"""
import jax
import jax.numpy as jnp

from rlvr_jax.losses.policy import _advantages, _fraction, _log_ratio, _mask, _tokens
from rlvr_jax.numerics import masked_mean, masked_stats

DPPO_DIVERGENCES = ("tv", "binary_kl")
_TINY = 1e-30  # Floor of 1 - p inside a log (p = 1 exactly has no binary-KL mass to move).


def sapo(logp, old_logp, advantages, mask, *, tau_pos=1.0, tau_neg=1.05):
    """SAPO: a smooth sigmoid gate on the token ratio instead of a hard clip.

    Formula: `ρ = exp(clamp(logp - old_logp, ±20))`, `τ = tau_pos` where `A > 0` else `tau_neg`,
    `f(ρ) = (4/τ)·σ(τ(ρ - 1))`, `ℓ_t = -f(ρ_t)·A_t`. Its gradient is
    `-A·w(ρ)·ρ·∇logp` with `w = 4σ(1 - σ)`: exactly the policy gradient at `ρ = 1` (`w = 1`),
    decaying smoothly as ρ leaves 1 (faster for larger τ; the paper takes `τ_neg > τ_pos`
    because negative updates spread mass over many unsampled tokens). No token is cut off.
    Paper: Gao et al. 2025, "Soft Adaptive Policy Optimization" (τ_pos = 1, τ_neg = 1.05).
    verl: `policy_loss.loss_mode=sapo`, `tau_pos`, `tau_neg` (forces seq-mean-token-mean);
    TRL: `loss_type="sapo"`, `sapo_temperature_pos`, `sapo_temperature_neg`.

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      tau_pos, tau_neg: gate temperatures (> 0) for positive / non-positive advantages.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 and `gate_weight_mean/min/max` (the
      gradient weight `w(ρ)` relative to the policy gradient) and `ratio_mean/min/max`.
    """
    if tau_pos <= 0 or tau_neg <= 0:
        raise ValueError(f"tau_pos and tau_neg must be > 0, got {tau_pos}, {tau_neg}")
    m = _mask(mask, jnp.shape(logp))
    _, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    adv = _advantages(advantages, m)
    ratio = jnp.exp(log_ratio)
    tau = jnp.where(adv > 0, jnp.float32(tau_pos), jnp.float32(tau_neg))
    gate = jax.nn.sigmoid(tau * (ratio - 1.0))
    loss = jnp.where(m, -(4.0 / tau) * gate * adv, 0.0)
    g = jax.lax.stop_gradient(gate)
    metrics = masked_stats(4.0 * g * (1.0 - g), m, "gate_weight_")
    metrics.update(masked_stats(jax.lax.stop_gradient(ratio), m, "ratio_"))
    return loss, metrics


def dppo(logp, old_logp, advantages, mask, *, divergence="tv", eps_low=0.15, eps_high=0.15,
         ratio_cap=20.0):
    """DPPO: mask the tokens whose *probability* moved too far, not those whose ratio did.

    Formula (p = exp(logp), q = exp(old_logp), ρ = p/q):
      - `divergence="tv"` (DPPO-Binary-TV): a token is kept when `p - q <= eps_high` (A > 0) or
        `p - q >= -eps_low` (A ≤ 0);
      - `divergence="binary_kl"` (DPPO-Binary-KL): with
        `D = q log(q/p) + (1-q) log((1-q)/(1-p))`, kept when `D <= eps_high or p <= q` (A > 0),
        `D <= eps_low or p >= q` (A ≤ 0);
      `ℓ_t = -A_t · sg(min(ρ_t, ratio_cap)) · logp_t · keep_t`. A rare token may move from 1e-5
      to 1e-3 (ρ = 100: PPO clips it) while a likely one may fall from 0.99 to 0.8 (ρ = 0.81:
      PPO keeps it); the divergence treats them the other way round.
    Paper: "Rethinking the Trust Region in LLM Reinforcement Learning" (sail-sg Stable-RL,
    2026, arXiv:2602.04879; its verl recipe: TV threshold 0.15, binary-KL 0.05). This follows
    verl's `loss_mode=dppo_tv` / `dppo_kl` (thresholds in `clip_ratio_low/high`, the
    truncation in `clip_ratio_c`: 20 by default, 1e4 (off) in its recipe); TRL: —.
    prime-rl's variant was not checked.

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      divergence: "tv" | "binary_kl".
      eps_low, eps_high: divergence thresholds (>= 0) for A ≤ 0 / A > 0.
      ratio_cap: truncation `C > 0` of the stop-gradient importance weight.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 and `clip_frac_low` / `clip_frac_high`
      (masked-out tokens with A < 0 / A > 0), `clip_frac`, `ratio_capped_frac`,
      `ratio_mean/min/max`.
    """
    if divergence not in DPPO_DIVERGENCES:
        raise ValueError(f"divergence must be one of {DPPO_DIVERGENCES}, got {divergence!r}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    if ratio_cap <= 0:
        raise ValueError(f"ratio_cap must be > 0, got {ratio_cap}")
    m = _mask(mask, jnp.shape(logp))
    lp, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    old = _tokens("old_logp", jax.lax.stop_gradient(old_logp), m)
    adv = _advantages(advantages, m)
    ratio = jax.lax.stop_gradient(jnp.exp(log_ratio))
    keep = jax.lax.stop_gradient(_dppo_keep(lp, old, adv, divergence, eps_low, eps_high))
    weight = jnp.minimum(ratio, ratio_cap)
    loss = jnp.where(m & keep, -adv * weight * lp, 0.0)
    metrics = {"clip_frac_low": _fraction(~keep & (adv < 0), m),
               "clip_frac_high": _fraction(~keep & (adv > 0), m),
               "ratio_capped_frac": _fraction(keep & (ratio > ratio_cap), m)}
    metrics["clip_frac"] = _fraction(~keep, m)
    metrics.update(masked_stats(ratio, m, "ratio_"))
    return loss, metrics


def _dppo_keep(lp, old, adv, divergence, eps_low, eps_high):
    """Bool `[B, T]`: the tokens DPPO trains on (see `dppo`)."""
    p, q = jnp.exp(lp), jnp.exp(old)
    if divergence == "tv":
        return jnp.where(adv > 0, p - q <= eps_high, p - q >= -eps_low)
    log1m = lambda x: jnp.log(jnp.maximum(-jnp.expm1(x), _TINY))  # noqa: E731  log(1 - e^x)
    d = q * (old - lp) + (1.0 - q) * (log1m(old) - log1m(lp))
    return jnp.where(adv > 0, (d <= eps_high) | (p <= q), (d <= eps_low) | (p >= q))


def dcpo_clip_bounds(old_logp, *, eps_low=0.2, eps_high=0.2, ratio_cap=10.0):
    """DCPO's ratio bounds for a token of prior (behaviour-policy) probability q.

    Formula: `low = (1 + sqrt(max(1 - 4 eps_low / q, 0))) / 2`,
    `high = min((1 + sqrt(1 + 4 eps_high / q)) / 2, ratio_cap)`: the ratios with
    `|ρ - 1|·ρ·q <= eps`, i.e. a bound on the change of probability `|p - q| = |ρ - 1|·q`
    weighted by p/q. Likely tokens (q → 1) get a range close to PPO's; rare ones a wide one.
    Paper: Yang et al. 2025, "DCPO: Dynamic Clipping Policy Optimization" (upper bound capped
    at 10).

    Args:
      old_logp: `[...]` behaviour-policy log-probs (no gradient is taken).
      eps_low, eps_high: ε of the lower / upper bound (>= 0).
      ratio_cap: the largest upper bound (> 1).

    Returns:
      `(low, high)`: float32 arrays shaped like `old_logp`, `0.5 <= low <= 1 <= high`.
    """
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    if ratio_cap <= 1:
        raise ValueError(f"ratio_cap must be > 1, got {ratio_cap}")
    q = jnp.exp(jax.lax.stop_gradient(jnp.asarray(old_logp).astype(jnp.float32)))
    low = 0.5 + 0.5 * jnp.sqrt(jnp.maximum(1.0 - 4.0 * eps_low / q, 0.0))
    high = jnp.minimum(0.5 + 0.5 * jnp.sqrt(1.0 + 4.0 * eps_high / q), ratio_cap)
    return low, high


def dcpo(logp, old_logp, advantages, mask, *, eps_low=0.2, eps_high=0.2, ratio_cap=10.0):
    """PPO clip with DCPO's probability-dependent bounds (`dcpo_clip_bounds`).

    Formula: `ℓ_t = max(-A ρ, -A clip(ρ, low(q_t), high(q_t)))`, q_t = exp(old_logp_t). Only
    the dynamic clip of DCPO; its smooth advantage standardisation (across steps) and OTM
    aggregation are not part of this loss.
    Paper: Yang et al. 2025, "DCPO: Dynamic Clipping Policy Optimization". verl: no built-in
    (the authors' fork: `loss_mode=dcpo`, `clip_type=dynamic`); TRL: —.

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      eps_low, eps_high, ratio_cap: see `dcpo_clip_bounds`.

    Returns:
      `(per_token_loss, metrics)` with `clip_frac_low/high`, `clip_frac` (as in `ppo_clip`),
      `clip_low_mean`, `clip_high_mean` (the bounds over valid tokens) and `ratio_mean/min/max`.
    """
    m = _mask(mask, jnp.shape(logp))
    _, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    old = _tokens("old_logp", jax.lax.stop_gradient(old_logp), m)
    low, high = dcpo_clip_bounds(old, eps_low=eps_low, eps_high=eps_high, ratio_cap=ratio_cap)
    adv = _advantages(advantages, m)
    ratio = jnp.exp(log_ratio)
    loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, low, high))
    r = jax.lax.stop_gradient(ratio)
    metrics = {"clip_frac_low": _fraction((r < low) & (adv < 0), m),
               "clip_frac_high": _fraction((r > high) & (adv > 0), m),
               "clip_low_mean": masked_mean(low, m), "clip_high_mean": masked_mean(high, m)}
    metrics["clip_frac"] = metrics["clip_frac_low"] + metrics["clip_frac_high"]
    metrics.update(masked_stats(r, m, "ratio_"))
    return jnp.where(m, loss, 0.0), metrics

