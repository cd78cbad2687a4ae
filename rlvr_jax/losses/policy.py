"""Policy-gradient surrogate losses: PPO clip (clip-higher, dual-clip), GSPO, LUSPO, CISPO,
REINFORCE, TIS.

Every loss returns `(per_token_loss[B, T], metrics)`: the per-token values are exactly 0 at
masked positions (aggregate them with `losses.aggregate`) and `metrics` is a flat dict of
float32 scalars computed over the valid tokens. Ratios are computed in float32 whatever the
input dtype; inputs are sanitised at masked positions and the log-ratio is clamped to
`±LOG_RATIO_CLAMP` before `exp`, so garbage (−inf, NaN, 1e30) in padding gives finite loss and
exactly zero gradients there.
"""
import jax
import jax.numpy as jnp

from rlvr_jax.numerics import masked_mean, masked_stats

LOG_RATIO_CLAMP = 20.0


def _mask(mask, shape):
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2 or m.shape != shape:
        raise ValueError(f"mask must be [B, T] = {shape}, got {m.shape}")
    return m


def _tokens(name, x, m):
    x = jnp.asarray(x)
    if x.shape != m.shape:
        raise ValueError(f"{name} must be [B, T] = {m.shape}, got {x.shape}")
    return jnp.where(m, x.astype(jnp.float32), 0.0)


def _advantages(advantages, m):
    a = jnp.asarray(advantages)
    if a.ndim == 1 and a.shape[0] == m.shape[0]:
        a = jnp.broadcast_to(a[:, None], m.shape)
    elif a.shape != m.shape:
        raise ValueError(f"advantages must be [B] or [B, T] with [B, T] = {m.shape}, got {a.shape}")
    return jnp.where(m, a.astype(jnp.float32), 0.0)


def _log_ratio(logp, old_logp, m):
    logp = jnp.asarray(logp)
    lp = _tokens("logp", logp, m)
    old = _tokens("old_logp", old_logp, m)
    return lp, jnp.clip(lp - old, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def _fraction(flag, m):
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32)), 1.0)
    return jnp.sum((flag & m).astype(jnp.float32)) / n


def _clipped_surrogate(ratio, adv, m, eps_low, eps_high, dual_clip, delta):
    """Shared PPO-clip arithmetic on float32 `[B, T]` ratios (value and gradient through `ratio`)."""
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    if delta is not None and delta <= 1.0 + eps_high:
        raise ValueError(f"delta must be > 1 + eps_high, got {delta}")
    unclipped_ratio = ratio if delta is None else jnp.minimum(ratio, delta)
    loss1 = -adv * unclipped_ratio
    loss2 = -adv * jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = jnp.maximum(loss1, loss2)
    r = jax.lax.stop_gradient(ratio)
    metrics = {
        "clip_frac_low": _fraction((r < 1.0 - eps_low) & (adv < 0), m),
        "clip_frac_high": _fraction((r > 1.0 + eps_high) & (adv > 0), m),
    }
    metrics["clip_frac"] = metrics["clip_frac_low"] + metrics["clip_frac_high"]
    if dual_clip is not None:
        bound = -dual_clip * adv
        metrics["dual_clip_frac"] = _fraction((adv < 0) & (jax.lax.stop_gradient(loss) > bound), m)
        loss = jnp.where(adv < 0, jnp.minimum(loss, bound), loss)
    metrics.update(masked_stats(r, m, "ratio_"))
    return jnp.where(m, loss, 0.0), metrics


def ppo_clip(logp, old_logp, advantages, mask, *, eps_low=0.2, eps_high=0.2, dual_clip=None,
             delta=None):
    """PPO clipped surrogate with asymmetric ("clip-higher") bounds and optional dual clip.

    Formula: `ρ = exp(clamp(logp - old_logp, ±20))`,
    `ℓ_t = max(-A·ρ, -A·clip(ρ, 1 - eps_low, 1 + eps_high))`; with `dual_clip = c` (> 1),
    `ℓ_t ← min(ℓ_t, -c·A)` where `A < 0`; with `delta = δ` the unclipped branch uses
    `min(ρ, δ)` (TRL's two-sided clipping).
    Papers: Schulman et al. 2017 (PPO); Yu et al. 2025 (DAPO, clip-higher eps_high = 0.28);
    Ye et al. 2020 (dual-clip PPO). verl: `actor.clip_ratio_low/high`, `clip_ratio_c`;
    TRL: `epsilon`, `epsilon_high`, `delta`.

    Args:
      logp: `[B, T]` log-probs of the sampled tokens under the current policy (any float dtype).
      old_logp: `[B, T]` log-probs under the behaviour policy (no gradient is taken).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      eps_low, eps_high: clip range `[1 - eps_low, 1 + eps_high]`.
      dual_clip: optional `c > 1` bounding the loss of negative-advantage tokens by `-c·A`.
      delta: optional upper cap `> 1 + eps_high` of the unclipped ratio.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 (0 where masked) and a dict with
      `clip_frac_low` (ρ < 1 - eps_low with A < 0), `clip_frac_high` (ρ > 1 + eps_high with
      A > 0), `clip_frac`, `ratio_mean/min/max`, and `dual_clip_frac` when `dual_clip` is set.
    """
    m = _mask(mask, jnp.shape(logp))
    _, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    adv = _advantages(advantages, m)
    return _clipped_surrogate(jnp.exp(log_ratio), adv, m, eps_low, eps_high, dual_clip, delta)


def gspo(logp, old_logp, advantages, mask, *, eps_low=3e-4, eps_high=4e-4):
    """GSPO: the PPO clipped surrogate with a length-normalised sequence-level ratio.

    Formula: `s_i = exp(clamp((1/|o_i|) Σ_t m_{i,t}(logp - old_logp), ±20))`, written per token as
    `s_{i,t} = sg(s_i) · exp(logp_t - sg(logp_t))` (value `s_i`, gradient `s_i ∇logp_t`), then
    `ℓ_{i,t} = max(-A_i s_{i,t}, -A_i clip(s_{i,t}, 1 - eps_low, 1 + eps_high))`.
    Use it with `aggregate(..., "seq-mean-token-mean")`: then the gradient is exactly the
    paper's sequence-level one; `token-mean` would weight sequences by length.
    Paper: Zheng et al. 2025, "Group Sequence Policy Optimization" (eps 3e-4 / 4e-4).
    verl: `policy_loss.loss_mode=gspo`; TRL: `importance_sampling_level="sequence"`.

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B]` float sequence advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      eps_low, eps_high: clip range of the sequence ratio.

    Returns:
      `(per_token_loss, metrics)` as in `ppo_clip` (fractions over valid tokens, so sequences
      are weighted by length in the metrics only).
    """
    m = _mask(mask, jnp.shape(logp))
    a = jnp.asarray(advantages)
    if a.shape != (m.shape[0],):
        raise ValueError(f"gspo advantages must be [B] = ({m.shape[0]},), got {a.shape}")
    lp, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32), axis=1), 1.0)
    seq_log_ratio = jnp.clip(jnp.sum(log_ratio, axis=1) / n, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    token_log_ratio = jax.lax.stop_gradient(seq_log_ratio)[:, None] + lp - jax.lax.stop_gradient(lp)
    ratio = jnp.exp(token_log_ratio)
    adv = _advantages(a, m)
    return _clipped_surrogate(ratio, adv, m, eps_low, eps_high, None, None)


def luspo(logp, old_logp, advantages, mask, *, eps_low=3e-4, eps_high=4e-4):
    """LUSPO: GSPO with each sequence's loss scaled by its length (length-unbiased GSPO).

    Formula: `ℓ_{i,t} = |o_i| · gspo_{i,t}` (`gspo` above, |o_i| the valid tokens of row i), so
    that `aggregate(..., "seq-mean-token-mean")` is `mean_i(|o_i| · ℓ_i^GSPO)`: GSPO's
    sequence mean weighs every sequence alike, which pushes lengths down; weighing each by its
    length removes that bias. (It equals GSPO's per-token values under "seq-mean-token-sum".)
    Paper: "Length-Unbiased Sequence Policy Optimization: Revealing and Controlling Response
    Length Variation in RLVR". TRL: `loss_type="luspo"` with
    `importance_sampling_level="sequence"` (its loss `mean_i(ℓ_i·|o_i|)` over the B rows);
    verl: — (the authors patch `core_algos.py`).

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B]` float sequence advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      eps_low, eps_high: clip range of the sequence ratio.

    Returns:
      `(per_token_loss, metrics)` as in `gspo`.
    """
    loss, metrics = gspo(logp, old_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high)
    m = _mask(mask, jnp.shape(logp))
    length = jnp.sum(m.astype(jnp.float32), axis=1, keepdims=True)
    return loss * length, metrics


def cispo(logp, old_logp, advantages, mask, *, eps_low=None, eps_high=4.0):
    """CISPO: REINFORCE with a clipped, stop-gradient importance weight.

    Formula: `ℓ_t = -sg(clip(ρ_t, 1 - eps_low, 1 + eps_high)) · A_t · logp_t`; with
    `eps_low=None` there is no lower bound, i.e. `ℓ_t = -sg(min(ρ_t, 1 + eps_high)) A_t logp_t`,
    which is the MiniMax-M1 paper's setting and TRL's (`ε_max = 1 + eps_high`, 5 by default).
    verl's `loss_mode=cispo` also clips from below: pass `eps_low` to get it.
    Paper: MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
    Attention". Unlike PPO clipping, every token keeps a gradient.

    Args:
      logp, old_logp: `[B, T]` log-probs (current / behaviour policy; any float dtype).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.
      eps_low: optional lower clip (`None` = no lower bound).
      eps_high: upper clip of the weight at `1 + eps_high`.

    Returns:
      `(per_token_loss, metrics)` with `clip_frac_high` (ρ > 1 + eps_high), `clip_frac_low`
      (ρ < 1 - eps_low, 0 without a lower bound), `clip_frac` and `ratio_mean/min/max`.
    """
    m = _mask(mask, jnp.shape(logp))
    lp, log_ratio = _log_ratio(logp, jax.lax.stop_gradient(old_logp), m)
    adv = _advantages(advantages, m)
    ratio = jax.lax.stop_gradient(jnp.exp(log_ratio))
    low = 0.0 if eps_low is None else 1.0 - eps_low
    weight = jnp.clip(ratio, low, 1.0 + eps_high)
    loss = jnp.where(m, -weight * adv * lp, 0.0)
    metrics = {"clip_frac_high": _fraction(ratio > 1.0 + eps_high, m),
               "clip_frac_low": _fraction(ratio < low, m)}
    metrics["clip_frac"] = metrics["clip_frac_low"] + metrics["clip_frac_high"]
    metrics.update(masked_stats(ratio, m, "ratio_"))
    return loss, metrics


def reinforce(logp, advantages, mask):
    """REINFORCE / GPG policy-gradient loss `ℓ_t = -A_t · logp_t` (no ratio, no clipping).

    Paper: Williams 1992; Chu et al. 2025, "GPG: A Simple and Strong Reinforcement Learning
    Baseline for Model Reasoning". verl `loss_mode=gpg`. Exactly on-policy: use it with one
    update per batch (or multiply by `truncated_importance_weights`).

    Args:
      logp: `[B, T]` log-probs under the current policy (any float dtype).
      advantages: `[B, T]` or `[B]` float advantages.
      mask: `[B, T]` bool/0-1 response-token mask.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 and `logp_mean/min/max` over valid tokens.
    """
    m = _mask(mask, jnp.shape(logp))
    lp = _tokens("logp", logp, m)
    adv = _advantages(advantages, m)
    return jnp.where(m, -adv * lp, 0.0), masked_stats(lp, m, "logp_")


def truncated_importance_weights(trainer_logp, sampler_logp, mask, *, cap=2.0, level="token",
                                 mode="truncate"):
    """Importance weights correcting the sampler/trainer mismatch (TIS), stop-gradient.

    Formula: token level `w_t = ρ_t = exp(trainer_logp_t - sampler_logp_t)`; sequence level
    `w_{i,t} = Π_t ρ_t = exp(Σ_t m·(trainer_logp - sampler_logp))` for all valid tokens of
    sequence `i`. `mode="truncate"`: `min(w, cap)` (TIS); `mode="mask"`: `w` where `w <= cap`,
    else 0 (masked importance sampling). Multiply the per-token policy loss by the weights.
    Paper: Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL
    Training" (TIS, C = 2). verl: `rollout_is` options (`rollout_is_level`, `rollout_is_mode`,
    `rollout_is_threshold`); TRL: `vllm_importance_sampling_correction`, `..._cap`.
    Both log-probs should come from the logits / temperature before top-k / top-p truncation.

    Args:
      trainer_logp: `[B, T]` log-probs from the trainer's forward pass (old or current policy).
      sampler_logp: `[B, T]` log-probs reported by the sampler.
      mask: `[B, T]` bool/0-1 response-token mask.
      cap: threshold `C > 0`.
      level: "token" | "sequence".
      mode: "truncate" | "mask".

    Returns:
      `(weights, metrics)`: `[B, T]` float32 weights (0 where masked) and `is_weight_mean/min/max`
      (before truncation), `is_capped_frac`, and `sampler_kl_k3` (mean k3 estimate of
      KL(sampler || trainer) over valid tokens).
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    if mode not in ("truncate", "mask"):
        raise ValueError(f"mode must be 'truncate' or 'mask', got {mode!r}")
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    m = _mask(mask, jnp.shape(trainer_logp))
    _, log_ratio = _log_ratio(jax.lax.stop_gradient(trainer_logp),
                              jax.lax.stop_gradient(sampler_logp), m)
    if level == "sequence":
        seq = jnp.clip(jnp.sum(log_ratio, axis=1), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        log_w = jnp.broadcast_to(seq[:, None], m.shape)
    else:
        log_w = log_ratio
    w = jnp.exp(log_w)
    capped = w > cap
    out = jnp.minimum(w, cap) if mode == "truncate" else jnp.where(capped, 0.0, w)
    metrics = masked_stats(w, m, "is_weight_")
    metrics["is_capped_frac"] = _fraction(capped, m)
    k3 = jnp.exp(-log_ratio) - 1.0 + log_ratio
    metrics["sampler_kl_k3"] = masked_mean(k3, m)
    return jnp.where(m, out, 0.0), metrics
