"""Sequence-level (group) advantage estimators and the dynamic-sampling helpers.

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


def w_reinforce(rewards, *, positive_weight=0.1, threshold=0.5, negative_weight=1.0):
    """W-REINFORCE advantage for binary-correctness rewards: `+λ` if correct, `-μ` otherwise.

    Formula: `A_i = λ` if `r_i > threshold` else `-μ` (μ = negative_weight, 1 by default),
    used with `losses.reinforce` (`-A·logp`), i.e. `L = λ·L_PSR + μ·L_NSR`. Paper: Zhu et al.
    2025, "The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning" (λ = 0.1;
    NSR is λ = 0, μ = 1; PSR, +1 for right samples and 0 for wrong ones, is λ = 1, μ = 0).
    No baseline, so all-equal groups are not zeroed. verl / TRL: none.

    Args:
      rewards: any-shape float rewards (typically `[P, G]` of 0/1).
      positive_weight: λ, the weight of correct samples.
      threshold: rewards above it count as correct.
      negative_weight: μ, the weight of wrong samples (their advantage is −μ).

    Returns:
      float32 advantages of the same shape.
    """
    r = jnp.asarray(rewards).astype(jnp.float32)
    return jnp.where(r > threshold, jnp.float32(positive_weight),
                     -jnp.float32(negative_weight))


GPG_ALPHAS = ("paper", "verl")


def gpg(rewards, *, alpha="paper", group_mask=None):
    """GPG advantage `A_i = α·(r_i − mean_g(r))` (no std; all-equal groups give 0).

    α = B / n rescales the gradient for the samples that carry no signal: B = the samples
    of the valid groups, and n = (alpha="paper") the samples in groups with non-zero
    advantage (Chu et al. 2025, "GPG", its gradient correction), or (alpha="verl") the
    samples with a non-zero reward (verl `adv_estimator=gpg`). For 0/1 rewards the two
    differ: an all-correct group counts for verl, not for the paper.

    Args:
      rewards: `[P, G]` float rewards.
      alpha: "paper" or "verl" (see above).
      group_mask: optional `[P]` bool of valid groups (invalid ones count in neither B nor n).

    Returns:
      `[P, G]` float32 advantages.
    """
    if alpha not in GPG_ALPHAS:
        raise ValueError(f"alpha must be one of {GPG_ALPHAS}, got {alpha!r}")
    r = jnp.asarray(rewards).astype(jnp.float32)
    gm = jnp.ones((r.shape[0],), bool) if group_mask is None else jnp.asarray(group_mask)
    g = r.shape[1]
    zero = zero_variance_groups(r) | ~gm
    centered = jnp.where(zero[:, None], 0.0, r - jnp.mean(r, axis=1, keepdims=True))
    total = jnp.sum(gm.astype(jnp.float32)) * g
    if alpha == "paper":
        n = jnp.sum((~zero).astype(jnp.float32)) * g
    else:
        n = jnp.sum(((r != 0) & gm[:, None]).astype(jnp.float32))
    return centered * (total / jnp.maximum(n, 1.0))
