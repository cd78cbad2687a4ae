"""Loop-based NumPy references for rlvr_jax.advantages."""
import math

import numpy as np


def _std(values, ddof):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - ddof))


def grpo(rewards, scale="group", eps=1e-6, group_mask=None):
    rewards = np.asarray(rewards, np.float64)
    p, g = rewards.shape
    valid = [True] * p if group_mask is None else [bool(v) for v in group_mask]
    batch = [rewards[i, j] for i in range(p) if valid[i] for j in range(g)]
    out = np.zeros((p, g))
    for i in range(p):
        row = list(rewards[i])
        if not valid[i] or max(row) == min(row):
            continue
        mean = sum(row) / g
        if scale == "group":
            denom = _std(row, 1) + eps
        elif scale == "batch":
            denom = _std(batch, 1) + eps
        else:
            denom = 1.0
        for j in range(g):
            out[i, j] = (row[j] - mean) / denom
    return out


def rloo(rewards):
    rewards = np.asarray(rewards, np.float64)
    p, g = rewards.shape
    out = np.zeros((p, g))
    for i in range(p):
        if rewards[i].max() == rewards[i].min():
            continue
        for j in range(g):
            others = [rewards[i, l] for l in range(g) if l != j]
            out[i, j] = rewards[i, j] - sum(others) / len(others)
    return out


def grpo_passk(rewards):
    rewards = np.asarray(rewards, np.float64)
    out = np.zeros_like(rewards)
    for i, row in enumerate(rewards):
        best = 0
        for j in range(len(row)):
            if row[j] > row[best]:
                best = j
        second = max(row[j] for j in range(len(row)) if j != best)
        out[i, best] = row[best] - second
    return out


def ngrpo(rewards, max_reward=1.0, eps=1e-6):
    rewards = np.asarray(rewards, np.float64)
    out = np.zeros_like(rewards)
    for i, row in enumerate(rewards):
        aug = list(row) + [max_reward]
        if max(aug) == min(aug):
            continue
        mean = sum(aug) / len(aug)
        std = _std(aug, 1)
        for j in range(len(row)):
            out[i, j] = (row[j] - mean) / (std + eps)
    return out


def gae(rewards, values, mask, gamma, lam):
    rewards, values = np.asarray(rewards, np.float64), np.asarray(values, np.float64)
    b, t = rewards.shape
    adv = np.zeros((b, t))
    for i in range(b):
        steps = [s for s in range(t) if mask[i, s]]
        running = 0.0
        for pos in reversed(range(len(steps))):
            s = steps[pos]
            next_value = values[i, steps[pos + 1]] if pos + 1 < len(steps) else 0.0
            delta = rewards[i, s] + gamma * next_value - values[i, s]
            running = delta + gamma * lam * running
            adv[i, s] = running
    returns = np.where(mask, adv + values, 0.0)
    return adv, returns


def whiten(x, mask, eps=1e-8):
    vals = [float(x[idx]) for idx in zip(*np.nonzero(mask))]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / max(len(vals) - 1, 1)
    out = np.zeros(np.shape(x))
    for idx in zip(*np.nonzero(mask)):
        out[idx] = (x[idx] - mean) / math.sqrt(var + eps)
    return out


def reinforce_plus_plus(token_rewards, mask, gamma):
    b, t = token_rewards.shape
    returns = np.zeros((b, t))
    for i in range(b):
        steps = [s for s in range(t) if mask[i, s]]
        for pos, s in enumerate(steps):
            returns[i, s] = sum(gamma ** q * token_rewards[i, steps[pos + q]]
                                for q in range(len(steps) - pos))
    return whiten(returns, mask)


def reinforce_plus_plus_baseline(rewards, mask):
    rewards = np.asarray(rewards, np.float64)
    p, g = rewards.shape
    tok = np.zeros(mask.shape)
    for i in range(p):
        mean = sum(rewards[i]) / g
        for j in range(g):
            for s in range(mask.shape[1]):
                if mask[i * g + j, s]:
                    tok[i * g + j, s] = rewards[i, j] - mean
    return whiten(tok, mask)


def w_reinforce(rewards, positive_weight, negative_weight, threshold=0.5):
    """+λ for a right sample (r > threshold), −μ for a wrong one, element by element."""
    out = np.zeros(np.shape(rewards), np.float32)
    for idx in np.ndindex(out.shape):
        out[idx] = positive_weight if rewards[idx] > threshold else -negative_weight
    return out
