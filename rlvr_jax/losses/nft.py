"""NFT (Negative-aware Fine-Tuning): a supervised objective on correct AND wrong answers.

Same contract as `losses.policy`: `(per_token_loss[B, T], metrics)`, exactly 0 (and zero
gradient) at masked positions, float32 ratios from a clamped log-ratio.
"""
import jax
import jax.numpy as jnp

from rlvr_jax.losses.policy import _fraction, _log_ratio, _mask
from rlvr_jax.numerics import masked_stats

PROMPT_WEIGHTS = ("none", "negative_rate", "grpo")


def nft(logp, old_logp, rewards, correct_rate, mask, *, negative_weight=1.0, eps=0.05,
        prompt_weight="negative_rate", rate_clip=0.02):
    """NFT loss: likelihood on correct answers, an implicit negative policy on wrong ones.

    Formula: `R_t = exp(clamp(logp_t - old_logp_t, ±20))`, r̂ = clip(correct_rate, rate_clip,
    1 - rate_clip) (the group's accuracy under the old policy), then per token
      - correct answer (`rewards > 0`): `ℓ_t = -ω · log R_t`;
      - wrong answer: `ℓ_t = -ω · negative_weight · log(⌈(1 - r̂ R_t) / (1 - r̂)⌉_eps)`,
        where `⌈x⌉_eps` has the value `max(x, eps)` and the gradient of `x`
        (straight-through, as the authors' code) — maximising the likelihood of the wrong
        answer under the implicit negative policy `(π_old - r̂ π_θ) / (1 - r̂)`;
    with the prompt weight ω = 1 ("none"), `1 - r̂` ("negative_rate") or `√((1 - r̂)/r̂)`
    ("grpo"). Rows of groups with `correct_rate` 0 or 1 (no contrast) get 0.
    On-policy (`old_logp = sg(logp)`, R = 1): `∂ℓ_t/∂logp_t = -ω` (correct) and
    `ω·r̂/(1 - r̂)` (wrong, × negative_weight), so with negative_weight = 1 the gradient is
    `-ω (r - r̂)/(1 - r̂) ∇logp`: Dr.GRPO's `-(r - r̂)∇logp` for "negative_rate" and GRPO's
    `-(r - r̂)/σ ∇logp` with the population std `σ = √(r̂(1 - r̂))` for "grpo" (the paper's
    on-policy equivalence; tested).
    Paper: Chen et al. 2025, "Bridging Supervised Learning and Reinforcement Learning in Math
    Reasoning" (NVlabs/NFT, built on verl: `neg_weight`, `clamp_negative`, `normalize` 0 / 1 /
    2 = these prompt weights, correct rates clipped to [0.02, 0.98]). The default `eps` was
    chosen here (the authors' value was not found).

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      rewards: `[B]` binary correctness (> 0: correct).
      correct_rate: `[B]` accuracy of each row's group (its G samples), in [0, 1].
      mask: `[B, T]` bool/0-1 response-token mask.
      negative_weight: weight of the wrong answers' term.
      eps: floor of the negative policy's ratio inside the log (0 < eps < 1).
      prompt_weight: "none" | "negative_rate" | "grpo".
      rate_clip: r̂ is clipped to [rate_clip, 1 - rate_clip] (0 < rate_clip < 0.5).

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 and `negative_floor_frac` (wrong-answer
      tokens whose negative ratio is below eps), `ratio_mean/min/max`.
    """
    if prompt_weight not in PROMPT_WEIGHTS:
        raise ValueError(f"prompt_weight must be one of {PROMPT_WEIGHTS}, got {prompt_weight!r}")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    if not 0.0 < rate_clip < 0.5:
        raise ValueError(f"rate_clip must be in (0, 0.5), got {rate_clip}")
    m = _mask(mask, jnp.shape(logp))
    b = m.shape[0]
    r, rate = jnp.asarray(rewards), jnp.asarray(correct_rate)
    if r.shape != (b,) or rate.shape != (b,):
        raise ValueError(f"rewards and correct_rate must be [B] = ({b},), got {r.shape}, "
                         f"{rate.shape}")
    rate = rate.astype(jnp.float32)
    contrast = (rate > 0.0) & (rate < 1.0)
    rh = jnp.clip(jnp.where(contrast, rate, 0.5), rate_clip, 1.0 - rate_clip)[:, None]
    correct = jnp.broadcast_to((r > 0)[:, None], m.shape)
    _, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    ratio = jnp.exp(log_ratio)
    proxy = (1.0 - rh * ratio) / (1.0 - rh)
    floored = proxy + jax.lax.stop_gradient(jnp.maximum(proxy, eps) - proxy)
    per_token = jnp.where(correct, -log_ratio, -negative_weight * jnp.log(floored))
    weight = {"none": jnp.ones_like(rh), "negative_rate": 1.0 - rh,
              "grpo": jnp.sqrt((1.0 - rh) / rh)}[prompt_weight]
    keep = m & contrast[:, None]
    loss = jnp.where(keep, weight * per_token, 0.0)
    metrics = {"negative_floor_frac": _fraction(~correct & (jax.lax.stop_gradient(proxy) < eps),
                                                keep)}
    metrics.update(masked_stats(jax.lax.stop_gradient(ratio), m, "ratio_"))
    return loss, metrics


def nft_from_advantages(logp, old_logp, advantages, mask, **kwargs):
    """`nft` from Dr.GRPO advantages of binary rewards, `A_i = r_i - r̂_g` (what the trainer has).

    For r ∈ {0, 1} the pair is recovered exactly: `r = 1[A > 0]`, `r̂ = r - A`; `A = 0` only in
    groups with no contrast (r̂ ∈ {0, 1}), which `nft` leaves out. Non-binary rewards are not
    NFT's setting: this would read them as wrong/right by the sign of A.

    Args:
      logp, old_logp, mask: as in `nft`.
      advantages: `[B]` float32 `r - mean_group(r)` (`advantages.grpo(..., scale="none")`).
      **kwargs: `nft`'s hyperparameters.

    Returns:
      `nft(...)`'s `(per_token_loss, metrics)`.
    """
    a = jnp.asarray(advantages).astype(jnp.float32)
    if a.ndim != 1:
        raise ValueError(f"nft advantages must be [B] (one per sequence), got {a.shape}")
    correct = a > 0
    rate = jnp.where(correct, 1.0 - a, -a)
    return nft(logp, old_logp, correct.astype(jnp.float32), rate, mask, **kwargs)
