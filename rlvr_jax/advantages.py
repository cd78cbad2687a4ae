"""Advantage estimators for RL with verifiable rewards (pure, jittable functions).

Shape vocabulary: `P` prompts, `G` samples per prompt, `B = P*G` sequences (sequence
`p*G + g` is sample `g` of prompt `p`), `T` tokens. Group estimators take rewards `[P, G]` and
return sequence advantages `[P, G]`; `broadcast_to_tokens` turns them into `[B, T]`.
All outputs are float32. A group whose rewards are all equal (tested as `max == min`, never
through a float std) gets advantage exactly 0.
"""
import jax
import jax.numpy as jnp

_SCALES = ("group", "batch", "none")


def _group_rewards(rewards, group_mask=None):
    r = jnp.asarray(rewards).astype(jnp.float32)
    if r.ndim != 2:
        raise ValueError(f"rewards must be [P, G], got shape {r.shape}")
    if r.shape[1] < 2:
        raise ValueError(f"group estimators need G >= 2 samples per prompt, got G={r.shape[1]}")
    if group_mask is None:
        gm = jnp.ones((r.shape[0],), bool)
    else:
        gm = jnp.asarray(group_mask).astype(bool)
        if gm.shape != (r.shape[0],):
            raise ValueError(f"group_mask must be [P]={r.shape[0]}, got shape {gm.shape}")
    return r, gm


def zero_variance_groups(rewards):
    """Groups whose rewards are all equal (`max == min`): no learning signal under GRPO.

    Used by dynamic sampling (DAPO, Yu et al. 2025) to drop such groups.

    Args:
      rewards: `[P, G]` rewards.

    Returns:
      `[P]` bool, True where the group's rewards are all equal.
    """
    r = jnp.asarray(rewards)
    if r.ndim != 2:
        raise ValueError(f"rewards must be [P, G], got shape {r.shape}")
    return jnp.max(r, axis=1) == jnp.min(r, axis=1)


def dynamic_sampling_mask(rewards):
    """Groups kept by DAPO dynamic sampling: `[P]` bool, `~zero_variance_groups(rewards)`.

    Paper: Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale".
    verl: `algorithm.filter_groups` (DAPO recipe); TRL: none.
    """
    return ~zero_variance_groups(rewards)


def select_groups(keep, num_groups):
    """Static-shape selection of the first `num_groups` kept groups of an oversampled batch.

    Dynamic sampling inside `jit`: sample `P_over > num_groups` prompts, compute `keep`
    (e.g. `dynamic_sampling_mask`), then gather these indices. Kept groups come first in their
    original order; if fewer than `num_groups` are kept the remaining slots are filled with
    dropped groups and flagged invalid (pass `valid` as `group_mask` to the estimators and
    mask their tokens out of the loss).

    Args:
      keep: `[P_over]` bool.
      num_groups: static int, the number of groups to return (<= P_over).

    Returns:
      `(indices, valid)`: `[num_groups]` int32 indices into the oversampled batch and
      `[num_groups]` bool validity.
    """
    keep = jnp.asarray(keep).astype(bool)
    if keep.ndim != 1 or not 0 < num_groups <= keep.shape[0]:
        raise ValueError(f"keep must be 1-D with at least num_groups={num_groups} entries, "
                         f"got shape {keep.shape}")
    order = jnp.argsort(~keep, stable=True)[:num_groups].astype(jnp.int32)
    return order, keep[order]


def group_metrics(rewards, group_mask=None):
    """Flat dict of scalar reward statistics over the valid groups of `rewards[P, G]`.

    Keys: `reward_mean`, `reward_std` (ddof=0), `zero_variance_fraction` (fraction of valid
    groups with all-equal rewards), `solved_fraction` (fraction of valid groups whose best
    sample has the batch's maximum reward), `num_valid_groups`.
    """
    r, gm = _group_rewards(rewards, group_mask)
    w = jnp.broadcast_to(gm[:, None], r.shape).astype(jnp.float32)
    n = jnp.maximum(jnp.sum(w), 1.0)
    mean = jnp.sum(w * r) / n
    std = jnp.sqrt(jnp.sum(w * jnp.square(r - mean)) / n)
    ng = jnp.maximum(jnp.sum(gm.astype(jnp.float32)), 1.0)
    zv = jnp.sum((zero_variance_groups(r) & gm).astype(jnp.float32)) / ng
    rmax = jnp.max(jnp.where(gm[:, None], r, -jnp.inf))
    solved = jnp.sum(((jnp.max(r, axis=1) == rmax) & gm).astype(jnp.float32)) / ng
    return {"reward_mean": mean, "reward_std": std, "zero_variance_fraction": zv,
            "solved_fraction": solved, "num_valid_groups": jnp.sum(gm.astype(jnp.int32))}


def _masked_std(x, w, ddof):
    n = jnp.sum(w)
    mean = jnp.sum(w * x) / jnp.maximum(n, 1.0)
    var = jnp.sum(w * jnp.square(x - mean)) / jnp.maximum(n - ddof, 1.0)
    return jnp.sqrt(var)


def grpo(rewards, *, scale="group", eps=1e-6, group_mask=None):
    """Group-relative advantage of GRPO and its scale variants.

    Formula: `A_i = (r_i - mean_g(r)) / (s + eps)` with
      - `scale="group"`: `s` = unbiased (ddof=1) std of the group (GRPO, Shao et al. 2024,
        "DeepSeekMath"); verl `algorithm.adv_estimator=grpo`, TRL `scale_rewards="group"`.
      - `scale="batch"`: `s` = unbiased std of all rewards of the valid groups ("Lite PPO",
        Liu et al. 2025, "Tricks or Traps? A Deep Dive into RL for LLM Reasoning");
        TRL `scale_rewards="batch"`.
      - `scale="none"`: `s = 1 - eps`, i.e. no division (Dr.GRPO, Liu et al. 2025,
        "Understanding R1-Zero-Like Training"); verl `norm_adv_by_std_in_grpo=False`,
        TRL `scale_rewards="none"`.
    Groups with `max == min` rewards get exactly 0; groups with `group_mask` False get 0 and are
    left out of batch statistics.

    Args:
      rewards: `[P, G]` float rewards, `G >= 2`.
      scale: "group" | "batch" | "none".
      eps: added to the std in the denominator.
      group_mask: optional `[P]` bool of valid groups (e.g. kept by dynamic sampling).

    Returns:
      `[P, G]` float32 advantages.
    """
    if scale not in _SCALES:
        raise ValueError(f"scale must be one of {_SCALES}, got {scale!r}")
    r, gm = _group_rewards(rewards, group_mask)
    centered = r - jnp.mean(r, axis=1, keepdims=True)
    if scale == "group":
        denom = jnp.std(r, axis=1, ddof=1, keepdims=True) + eps
    elif scale == "batch":
        w = jnp.broadcast_to(gm[:, None], r.shape).astype(jnp.float32)
        denom = _masked_std(r, w, ddof=1) + eps
    else:
        denom = jnp.ones((), jnp.float32)
    zero = zero_variance_groups(r) | ~gm
    return jnp.where(zero[:, None], 0.0, centered / denom)


def rloo(rewards, *, group_mask=None):
    """REINFORCE leave-one-out advantage: `A_i = r_i - mean_{j != i} r_j = G/(G-1)·(r_i - mean)`.

    Paper: Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for
    Learning from Human Feedback in LLMs" (after Kool et al. 2019). verl
    `adv_estimator=rloo`; TRL `RLOOTrainer`. All-equal groups and invalid groups get 0.

    Args:
      rewards: `[P, G]` float rewards, `G >= 2`.
      group_mask: optional `[P]` bool of valid groups.

    Returns:
      `[P, G]` float32 advantages.
    """
    r, gm = _group_rewards(rewards, group_mask)
    g = r.shape[1]
    total = jnp.sum(r, axis=1, keepdims=True)
    adv = r - (total - r) / (g - 1)
    zero = zero_variance_groups(r) | ~gm
    return jnp.where(zero[:, None], 0.0, adv)


def grpo_passk(rewards, *, scale="none", eps=1e-6, group_mask=None):
    """Pass@k-oriented group advantage: only the best sample of each group is credited.

    Formula: for the (first) argmax sample `A = r_max - r_2nd` (the reward gap to the runner-up),
    every other sample gets 0; with `scale="group"` the gap is divided by the group std + eps.
    This optimises pass@G (the k = G case of pass@k training; Chen et al. 2025, "Pass@k Training
    for Adaptively Balancing Exploration and Exploitation"). verl: `adv_estimator=grpo_passk`
    (which divides by the std when `norm_adv_by_std_in_grpo`).

    Args:
      rewards: `[P, G]` float rewards, `G >= 2`.
      scale: "none" | "group".
      eps: added to the std when `scale="group"`.
      group_mask: optional `[P]` bool of valid groups.

    Returns:
      `[P, G]` float32 advantages (at most one non-zero per group).
    """
    if scale not in ("none", "group"):
        raise ValueError(f"scale must be 'none' or 'group', got {scale!r}")
    r, gm = _group_rewards(rewards, group_mask)
    top2 = jax.lax.top_k(r, 2)[0]
    gap = top2[:, 0] - top2[:, 1]
    if scale == "group":
        gap = gap / (jnp.std(r, axis=1, ddof=1) + eps)
    best = jax.nn.one_hot(jnp.argmax(r, axis=1), r.shape[1], dtype=bool)
    adv = jnp.where(best, gap[:, None], 0.0)
    return jnp.where(gm[:, None], adv, 0.0)


def ngrpo(rewards, *, max_reward=1.0, eps=1e-6, group_mask=None):
    """NGRPO advantage calibration: a virtual maximum-reward sample joins every group's statistics.

    Formula: with `r' = (r_1, ..., r_G, max_reward)`, `A_i = (r_i - mean(r')) / (std_{ddof=1}(r') + eps)`.
    All-wrong groups then get negative advantages instead of 0; all-`max_reward` groups get 0.
    Paper: Nan et al. 2025, "NGRPO: Negative-enhanced Group Relative Policy Optimization"
    (which also uses asymmetric clipping: pass `eps_low != eps_high` to `losses.ppo_clip`).
    verl / TRL: none.

    Args:
      rewards: `[P, G]` float rewards, `G >= 2`.
      max_reward: reward of the virtual sample (the maximum achievable reward).
      eps: added to the std.
      group_mask: optional `[P]` bool of valid groups (invalid groups get 0).

    Returns:
      `[P, G]` float32 advantages.
    """
    r, gm = _group_rewards(rewards, group_mask)
    virtual = jnp.full((r.shape[0], 1), max_reward, jnp.float32)
    aug = jnp.concatenate([r, virtual], axis=1)
    centered = r - jnp.mean(aug, axis=1, keepdims=True)
    adv = centered / (jnp.std(aug, axis=1, ddof=1, keepdims=True) + eps)
    zero = zero_variance_groups(aug) | ~gm
    return jnp.where(zero[:, None], 0.0, adv)


def sign_weighted(advantages, *, positive_weight=1.0, negative_weight=1.0):
    """Reweight positive and negative advantages: `w+ · A` where `A > 0`, `w- · A` where `A < 0`.

    `positive_weight=0` trains on negative samples only (NSR) and `negative_weight=0` on positive
    samples only (PSR) (Zhu et al. 2025, "The Surprising Effectiveness of Negative
    Reinforcement in LLM Reasoning"); asymmetric suppression of positive advantages is the idea
    of A-GRAE. verl / TRL: none.

    Args:
      advantages: any-shape float advantages.
      positive_weight, negative_weight: non-negative floats.

    Returns:
      float32 array of the same shape.
    """
    a = jnp.asarray(advantages).astype(jnp.float32)
    return jnp.where(a > 0, positive_weight * a, negative_weight * a)


def w_reinforce(rewards, *, positive_weight=0.1, threshold=0.5):
    """W-REINFORCE advantage for binary-correctness rewards: `+λ` if correct, `-1` otherwise.

    Formula: `A_i = λ` if `r_i > threshold` else `-1`, used with `losses.reinforce` (`-A·logp`),
    i.e. `L = λ·L_PSR + L_NSR`. Paper: Zhu et al. 2025, "The Surprising Effectiveness of
    Negative Reinforcement in LLM Reasoning" (λ = 0.1). No baseline, so all-equal groups are
    not zeroed. verl / TRL: none.

    Args:
      rewards: any-shape float rewards (typically `[P, G]` of 0/1).
      positive_weight: λ, the weight of correct samples.
      threshold: rewards above it count as correct.

    Returns:
      float32 advantages of the same shape.
    """
    r = jnp.asarray(rewards).astype(jnp.float32)
    return jnp.where(r > threshold, jnp.float32(positive_weight), jnp.float32(-1.0))


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
