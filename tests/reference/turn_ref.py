"""Loop-based NumPy references for rlvr_jax.advantages.turn (turns as Python lists)."""
import numpy as np


def turns_of(turn_ids, mask, i):
    """[(k, first_t, last_t)] of row i's model turns, in order."""
    out = {}
    for t in range(len(mask[i])):
        if mask[i][t]:
            k = int(turn_ids[i][t])
            first, _ = out.get(k, (t, t))
            out[k] = (first, t)
    return [(k, f, l) for k, (f, l) in sorted(out.items())]


def turn_rewards(values, turn_ids, mask, outcome, i):
    """Row i's per-turn rewards (value at each turn's last token; + outcome at the last)."""
    turns = turns_of(turn_ids, mask, i)
    r = [float(values[i][last]) for _, _, last in turns]
    if r:
        r[-1] += float(outcome[i])
    return r


def returns(r, gamma):
    return [sum(gamma ** (j - k) * r[j] for j in range(k, len(r))) for k in range(len(r))]


def group_advantages(values, turn_ids, mask, outcome, num_samples, gamma=1.0, eps=1e-6):
    """Per token: turn k's return, normalised over the group's episodes that have turn k."""
    b, n = np.shape(mask)
    rets = [returns(turn_rewards(values, turn_ids, mask, outcome, i), gamma) for i in range(b)]
    out = np.zeros((b, n))
    for i in range(b):
        p = i // num_samples
        members = range(p * num_samples, (p + 1) * num_samples)
        for k, first, last in turns_of(turn_ids, mask, i):
            peers = [rets[j][k] for j in members if k < len(rets[j])]
            a = 0.0
            if len(peers) >= 2 and max(peers) != min(peers):
                a = (rets[i][k] - np.mean(peers)) / (np.std(peers, ddof=1) + eps)
            for t in range(first, last + 1):
                if mask[i][t] and turn_ids[i][t] == k:
                    out[i, t] = a
    return out


def gae(values, turn_ids, mask, outcome, token_values, gamma=1.0, lam=1.0):
    """Per token: GAE over turns, V_k = token_values at turn k's first model token."""
    b, n = np.shape(mask)
    out = np.zeros((b, n))
    for i in range(b):
        turns = turns_of(turn_ids, mask, i)
        r = turn_rewards(values, turn_ids, mask, outcome, i)
        v = [float(token_values[i][first]) for _, first, _ in turns] + [0.0]
        adv, acc = [0.0] * len(r), 0.0
        for k in reversed(range(len(r))):
            acc = r[k] + gamma * v[k + 1] - v[k] + gamma * lam * acc
            adv[k] = acc
        for (k, first, last), a in zip(turns, adv):
            for t in range(first, last + 1):
                if mask[i][t] and turn_ids[i][t] == k:
                    out[i, t] = a
    return out
