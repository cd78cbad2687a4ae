"""Loop-based NumPy references for rlvr_jax.advantages.process (steps as lists, not scans)."""
import math

import numpy as np


def _steps(step_rewards, step_ends, mask, i):
    """[(t, r)] of row i's step ends inside the mask."""
    return [(t, float(step_rewards[i][t])) for t in range(len(mask[i]))
            if step_ends[i][t] and mask[i][t]]


def process_returns(step_rewards, step_ends, mask, form="sum"):
    b, n = np.shape(mask)
    out = np.zeros((b, n))
    for i in range(b):
        steps = _steps(step_rewards, step_ends, mask, i)
        for t in range(n):
            ahead = [r for (tk, r) in steps if tk >= t]
            if mask[i][t] and ahead:
                out[i, t] = sum(ahead) if form == "sum" else min(ahead)
    return out


def min_form_rewards(step_rewards, step_ends, mask, temperature=0.0):
    """Per step k (in order): exact r*_k = min(r_k..r_K) - min(r_{k+1}..r_K) (0 past the last);
    softmin: exp(-r_k/T) / sum_j exp(-r_j/T) * r_k."""
    b, n = np.shape(mask)
    out = np.zeros((b, n))
    for i in range(b):
        steps = _steps(step_rewards, step_ends, mask, i)
        rs = [r for _, r in steps]
        for k, (t, r) in enumerate(steps):
            if temperature > 0:
                z = sum(math.exp(-x / temperature) for x in rs)
                out[i, t] = math.exp(-r / temperature) / z * r
            else:
                later = min(rs[k + 1:]) if k + 1 < len(rs) else 0.0
                out[i, t] = min(rs[k:]) - later
    return out


def group_process_advantages(step_rewards, step_ends, mask, num_samples, form="sum",
                             eps=1e-6, group_mask=None, scale=True):
    b, n = np.shape(mask)
    norm = np.zeros((b, n))
    for p in range(b // num_samples):
        rows = range(p * num_samples, (p + 1) * num_samples)
        all_r = [r for i in rows for _, r in _steps(step_rewards, step_ends, mask, i)]
        if (group_mask is not None and not group_mask[p]) or len(all_r) < 2 or \
                max(all_r) == min(all_r):
            continue
        mean = sum(all_r) / len(all_r)
        std = math.sqrt(sum((r - mean) ** 2 for r in all_r) / (len(all_r) - 1))
        for i in rows:
            for t, r in _steps(step_rewards, step_ends, mask, i):
                norm[i, t] = (r - mean) / (std + eps if scale else 1.0)
    return process_returns(norm, step_ends, mask, form=form)
