"""Token-level advantage estimators: GAE, discounted returns, REINFORCE++ (+baseline), whitening.

Token estimators take per-token rewards or outcome rewards and a `[B, T]` response mask and
return `[B, T]` float32 advantages, 0 at masked positions.
"""
import jax
import jax.numpy as jnp

from rlvr_jax.advantages.group import _group_rewards, zero_variance_groups


def broadcast_to_tokens(advantages, mask):
    """Sequence advantages to per-token advantages: `A_{i,t} = A_i · m_{i,t}`.

    Args:
      advantages: `[B]` or `[P, G]` (flattened row-major to `B = P*G`).
      mask: `[B, T]` bool/0-1 response-token mask.

    Returns:
      `[B, T]` float32, zero at masked positions.
    """
    a = jnp.asarray(advantages).astype(jnp.float32).reshape(-1)
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2 or a.shape[0] != m.shape[0]:
        raise ValueError(f"advantages with {a.shape[0]} sequences do not match mask {m.shape}")
    return jnp.where(m, a[:, None], 0.0)


def whiten(x, mask, *, shift_mean=True, eps=1e-8):
    """Whiten `x` over its valid elements: `(x - mean) / sqrt(var + eps)`, 0 where masked.

    Mean and unbiased (ddof=1) variance are taken over all elements with `mask` True
    (verl `masked_whiten`). With `shift_mean=False` the mean is added back.

    Args:
      x: any-shape float array (e.g. `[B, T]`).
      mask: bool/0-1 array of the same shape.
      shift_mean: subtract the mean (True) or keep it.
      eps: added to the variance.

    Returns:
      float32 array of the same shape.
    """
    x = jnp.asarray(x).astype(jnp.float32)
    m = jnp.asarray(mask).astype(bool)
    if x.shape != m.shape:
        raise ValueError(f"x {x.shape} and mask {m.shape} must have the same shape")
    w = m.astype(jnp.float32)
    xs = jnp.where(m, x, 0.0)
    n = jnp.sum(w)
    mean = jnp.sum(xs) / jnp.maximum(n, 1.0)
    var = jnp.sum(w * jnp.square(xs - mean)) / jnp.maximum(n - 1.0, 1.0)
    out = (xs - mean) * jax.lax.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return jnp.where(m, out, 0.0)


def _check_tokens(name, x, mask):
    x = jnp.asarray(x).astype(jnp.float32)
    if x.ndim != 2 or x.shape != mask.shape:
        raise ValueError(f"{name} must be [B, T] like mask {mask.shape}, got {x.shape}")
    return jnp.where(mask, x, 0.0)


def _reverse_scan(step, init, xs):
    """Scan over the time axis (axis 1 of `[B, T]` inputs) from the last token to the first."""
    xs_t = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), xs)
    _, ys = jax.lax.scan(step, init, xs_t, reverse=True)
    return jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), ys)


def gae(rewards, values, mask, *, gamma=1.0, lam=1.0):
    """Generalized advantage estimation over the valid tokens of each sequence (unwhitened).

    Formula: `δ_t = r_t + γ V_{t+1} - V_t`, `A_t = δ_t + γλ A_{t+1}`, where `t+1` is the next
    *valid* token (masked positions are skipped) and the value after the last valid token is 0;
    `returns = A + V`. Paper: Schulman et al. 2016, "High-Dimensional Continuous Control Using
    Generalized Advantage Estimation". verl `adv_estimator=gae` (`gamma`, `lam`); TRL PPO
    `gamma`, `lam`. Whiten the advantages afterwards with `whiten` if wanted.

    Args:
      rewards: `[B, T]` float per-token rewards.
      values: `[B, T]` float value estimates.
      mask: `[B, T]` bool/0-1 response-token mask.
      gamma: discount; lam: GAE λ (defaults 1, the usual RLVR choice).

    Returns:
      `(advantages, returns)`, both `[B, T]` float32 and 0 at masked positions.
    """
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be [B, T], got shape {m.shape}")
    r = _check_tokens("rewards", rewards, m)
    v = _check_tokens("values", values, m)

    def step(carry, inp):
        next_value, next_adv = carry
        r_t, v_t, m_t = inp
        delta = r_t + gamma * next_value - v_t
        adv = delta + gamma * lam * next_adv
        new_value = jnp.where(m_t, v_t, next_value)
        new_adv = jnp.where(m_t, adv, next_adv)
        return (new_value, new_adv), jnp.where(m_t, adv, 0.0)

    zeros = jnp.zeros((m.shape[0],), jnp.float32)
    adv = _reverse_scan(step, (zeros, zeros), (r, v, m))
    return adv, jnp.where(m, adv + v, 0.0)


def discounted_returns(rewards, mask, *, gamma=1.0):
    """Discounted return over valid tokens: `G_t = r_t + γ G_{t+1}` (next valid token), 0 after the end.

    Args:
      rewards: `[B, T]` float per-token rewards.
      mask: `[B, T]` bool/0-1 response-token mask.
      gamma: discount.

    Returns:
      `[B, T]` float32 returns, 0 at masked positions.
    """
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be [B, T], got shape {m.shape}")
    r = _check_tokens("rewards", rewards, m)

    def step(carry, inp):
        r_t, m_t = inp
        ret = r_t + gamma * carry
        return jnp.where(m_t, ret, carry), jnp.where(m_t, ret, 0.0)

    return _reverse_scan(step, jnp.zeros((m.shape[0],), jnp.float32), (r, m))


def token_rewards(rewards, mask, *, kl=None, kl_coef=0.0):
    """Per-token rewards: the outcome reward on each sequence's last valid token, minus `β·KL_t`.

    Formula: `r_t = 1[t = last valid] · R_i - β · KL_t` (KL in the reward, PPO/RLHF style; the
    KL term is stop-gradient). Sequences with no valid token get all zeros.

    Args:
      rewards: `[B]` (or `[P, G]`) float outcome rewards.
      mask: `[B, T]` bool/0-1 response-token mask.
      kl: optional `[B, T]` per-token KL estimate (e.g. `losses.kl(..., kind="k1")`).
      kl_coef: β.

    Returns:
      `[B, T]` float32 rewards, 0 at masked positions.
    """
    m = jnp.asarray(mask).astype(bool)
    r = jnp.asarray(rewards).astype(jnp.float32).reshape(-1)
    if m.ndim != 2 or r.shape[0] != m.shape[0]:
        raise ValueError(f"rewards with {r.shape[0]} sequences do not match mask {m.shape}")
    t = m.shape[1]
    idx = jnp.arange(t, dtype=jnp.int32)[None, :]
    last = jnp.max(jnp.where(m, idx, -1), axis=1)
    out = jnp.where(idx == last[:, None], r[:, None], 0.0)
    if kl is not None:
        k = _check_tokens("kl", jax.lax.stop_gradient(kl), m)
        out = out - kl_coef * k
    return jnp.where(m, out, 0.0)


def _sequence_mask(mask, sequence_mask):
    m = jnp.asarray(mask).astype(bool)
    if sequence_mask is None:
        return m
    s = jnp.asarray(sequence_mask).astype(bool).reshape(-1)
    if s.shape[0] != m.shape[0]:
        raise ValueError(f"sequence_mask has {s.shape[0]} entries, mask has {m.shape[0]} rows")
    return m & s[:, None]


def reinforce_plus_plus(token_rewards, mask, *, gamma=1.0, sequence_mask=None, eps=1e-8):
    """REINFORCE++: discounted per-token returns, whitened over all valid tokens of the batch.

    Formula: `G_t = Σ_{t' >= t} γ^{t'-t} r_{t'}` (see `token_rewards` for `r_t`, which may include
    a `-β·KL_t` penalty), then `A = whiten(G)` over the valid tokens of valid sequences.
    Paper: Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language
    Models". verl `adv_estimator=reinforce_plus_plus`; OpenRLHF `advantage_estimator=reinforce`.

    Args:
      token_rewards: `[B, T]` float per-token rewards.
      mask: `[B, T]` bool/0-1 response-token mask.
      gamma: discount.
      sequence_mask: optional `[B]` bool of valid sequences (groups dropped by dynamic sampling
        are left out of the statistics and get 0).
      eps: added to the variance when whitening.

    Returns:
      `[B, T]` float32 advantages, 0 at masked positions.
    """
    m = _sequence_mask(mask, sequence_mask)
    returns = discounted_returns(token_rewards, m, gamma=gamma)
    return whiten(returns, m, eps=eps)


def reinforce_plus_plus_baseline(rewards, mask, *, group_mask=None, eps=1e-8):
    """REINFORCE++-baseline: subtract the group mean of the outcome reward, then batch-whiten.

    Formula: `A_{i,t} = whiten_t(r_i - mean_g(r))` over all valid tokens of valid groups
    (outcome reward only, γ = 1; put KL in the loss). Paper: Hu 2025 (REINFORCE++).
    verl `adv_estimator=reinforce_plus_plus_baseline`; OpenRLHF
    `advantage_estimator=reinforce_baseline`.

    Args:
      rewards: `[P, G]` float outcome rewards.
      mask: `[B, T]` bool/0-1 response-token mask with `B = P*G`.
      group_mask: optional `[P]` bool of valid groups.
      eps: added to the variance when whitening.

    Returns:
      `[B, T]` float32 advantages, 0 at masked positions.
    """
    r, gm = _group_rewards(rewards, group_mask)
    centered = r - jnp.mean(r, axis=1, keepdims=True)
    centered = jnp.where(zero_variance_groups(r)[:, None], 0.0, centered)
    seq_valid = jnp.repeat(gm, r.shape[1])
    m = _sequence_mask(mask, seq_valid)
    return whiten(broadcast_to_tokens(centered, m), m, eps=eps)
