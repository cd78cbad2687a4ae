"""NumPy references (float64, plain loops) of the expert rows' objective
(`rlvr_jax.train.offpolicy`), from LUFFY (Yan et al. 2025, eq. 6-7: the off-policy ratio
π_θ/π_φ with π_φ = 1, shaped by f(x) = x / (x + γ), unclipped) and CHORD (Zhang et al.
2025: L = (1 − μ)·L_RL + μ·L_SFT)."""
import numpy as np


def shaped_objective_np(per_token, logp, adv, offpolicy, mu, gamma):
    """(loss [b, N], ∂loss/∂logp [b, N]) per token; adv [b] (one per row)."""
    b, n = logp.shape
    loss, grad = np.zeros((b, n)), np.zeros((b, n))
    for i in range(b):
        for t in range(n):
            p = np.exp(np.float64(logp[i, t]))
            if offpolicy[i]:
                rl, drl = -adv[i] * p / (p + gamma), -adv[i] * gamma * p / (p + gamma) ** 2
                loss[i, t] = (1 - mu[i]) * rl + mu[i] * -np.float64(logp[i, t])
                grad[i, t] = (1 - mu[i]) * drl - mu[i]
            else:
                loss[i, t] = (1 - mu[i]) * per_token[i, t]
    return loss, grad


def all_wrong_fraction_np(rewards, valid, per_group):
    """Of the valid groups, the share whose on-policy rows (all but the last per_group) all
    score < 0.5."""
    rows = [r[:len(r) - per_group] for r, v in zip(rewards, valid) if v]
    return sum(all(x < 0.5 for x in r) for r in rows) / max(len(rows), 1)
