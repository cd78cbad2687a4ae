"""NumPy references (float64, plain loops) of the length shaping terms, the forward noise
correction and the length-by-correctness metrics (`rlvr_jax.scoring.shaping`,
`rlvr_jax.scoring.noise`, `rlvr_jax.train.metrics`), written from the papers' formulas."""
import math

import numpy as np


def cosine_length_np(lengths, correct, *, max_len, min_value_correct=1.0,
                     max_value_correct=2.0, min_value_wrong=-10.0, max_value_wrong=0.0,
                     exceed_length=-10.0):
    """Yeo et al. 2025, eq. 1: CosFn(t, T, η_min, η_max) = η_min + ½(η_max − η_min)(1 +
    cos(tπ/T)); correct: η_max = r0 = max_value_correct at t = 0, η_min = rL =
    min_value_correct at T; wrong: r0 = min_value_wrong, rL = max_value_wrong; r_e = the
    exceed value at t ≥ T."""
    out = []
    for t, c in zip(np.asarray(lengths, np.float64), np.asarray(correct, bool)):
        if t >= max_len:
            out.append(exceed_length)
            continue
        r0, rl = (max_value_correct, min_value_correct) if c else (min_value_wrong,
                                                                   max_value_wrong)
        out.append(rl + 0.5 * (r0 - rl) * (1.0 + math.cos(t * math.pi / max_len)))
    return np.asarray(out, np.float64)


def length_penalty_np(lengths, correct, group_size, *, incorrect=False):
    """Kimi k1.5's length reward: λ = 0.5 − (len − min_len) / (max_len − min_len) over each
    group; correct: λ; wrong: 0 (Kimi's full rule, `incorrect`: min(0, λ)); one length in
    the group: 0."""
    lengths = np.asarray(lengths, np.float64)
    correct = np.asarray(correct, bool)
    out = np.zeros(len(lengths))
    for start in range(0, len(lengths), group_size):
        group = lengths[start:start + group_size]
        lo, hi = min(group), max(group)
        for i in range(start, start + group_size):
            lam = 0.0 if hi == lo else 0.5 - (lengths[i] - lo) / (hi - lo)
            out[i] = lam if correct[i] else (min(0.0, lam) if incorrect else 0.0)
    return out


def forward_corrected_np(rewards, group_size, *, fn_rate, fp_rate):
    """Each correctness unit b = 1[r ≥ 1] replaced by P(clean = 1 | b) under the channel
    (false negatives `fn_rate`, false positives `fp_rate`), given the group's clean success
    rate estimated by inverting the channel on its observed mean."""
    rewards = np.asarray(rewards, np.float64)
    out = rewards.copy()
    for start in range(0, len(rewards), group_size):
        b = [1.0 if r >= 1.0 else 0.0 for r in rewards[start:start + group_size]]
        p = (sum(b) / group_size - fp_rate) / (1.0 - fn_rate - fp_rate)
        p = min(1.0, max(0.0, p))
        for i, bi in enumerate(b):
            if bi:
                num, den = (1 - fn_rate) * p, (1 - fn_rate) * p + fp_rate * (1 - p)
                post = num / den if den > 0 else 1.0
            else:
                num, den = fn_rate * p, fn_rate * p + (1 - fp_rate) * (1 - p)
                post = num / den if den > 0 else 0.0
            out[start + i] = rewards[start + i] - bi + post
    return out


def length_by_correctness_np(mask, correct):
    """(mean length of the correct rows, of the others); 0 for a kind with no rows."""
    lengths = np.asarray(mask, np.float64).sum(axis=1)
    correct = np.asarray(correct, bool)
    means = []
    for rows in (correct, ~correct):
        means.append(float(lengths[rows].mean()) if rows.any() else 0.0)
    return tuple(means)
