"""Loop-based float64 NumPy references for the off-policy corrections of asynchronous
rollouts (rlvr_jax.losses.decoupled): AReaL's decoupled PPO and the mismatch KL."""
import math

import numpy as np

from tests.reference import losses_ref


def behaviour_weights(prox, behav, mask, cap, level, mode):
    """[B, T] w = π_prox / π_behav per token or per sequence (Π over its valid tokens),
    then min(w, cap) ("truncate") or w·[w ≤ cap] ("mask"); 0 off the mask."""
    b, t = prox.shape
    w = np.zeros((b, t))
    for i in range(b):
        seq = sum(float(prox[i, s]) - float(behav[i, s]) for s in range(t) if mask[i, s])
        for s in range(t):
            if not mask[i, s]:
                continue
            x = math.exp(seq if level == "sequence" else float(prox[i, s]) - float(behav[i, s]))
            w[i, s] = min(x, cap) if mode == "truncate" else (x if x <= cap else 0.0)
    return w


def decoupled_ppo(logp, prox, behav, adv, mask, eps_low, eps_high, cap, level, mode):
    """Per-token w_t · max(−A·u, −A·clip(u, 1 − eps_low, 1 + eps_high)), u = π_θ / π_prox."""
    loss, _, _ = losses_ref.ppo_clip(logp.astype(np.float64), prox.astype(np.float64), adv,
                                     mask, eps_low, eps_high)
    return loss * behaviour_weights(prox, behav, mask, cap, level, mode)


def mismatch_kl(logp, behav, mask):
    """Mean over valid tokens of e^d − 1 − d, d = logp − behav."""
    d = (logp.astype(np.float64) - behav)[mask.astype(bool)]
    return float(np.mean(np.exp(d) - 1.0 - d)) if d.size else 0.0
