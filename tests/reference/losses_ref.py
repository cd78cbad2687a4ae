"""Loop-based NumPy references for rlvr_jax.losses (values and hand-derived gradients)."""
import math

import numpy as np


def ppo_clip(logp, old, adv, mask, eps_low, eps_high, dual_clip=None):
    b, t = logp.shape
    loss = np.zeros((b, t))
    low = high = n = 0
    for i in range(b):
        for s in range(t):
            if not mask[i, s]:
                continue
            n += 1
            a = adv[i, s]
            ratio = math.exp(logp[i, s] - old[i, s])
            clipped = min(max(ratio, 1 - eps_low), 1 + eps_high)
            value = max(-a * ratio, -a * clipped)
            if dual_clip is not None and a < 0:
                value = min(value, -dual_clip * a)
            loss[i, s] = value
            low += ratio < 1 - eps_low and a < 0
            high += ratio > 1 + eps_high and a > 0
    return loss, low / max(n, 1), high / max(n, 1)


def gspo(logp, old, adv, mask, eps_low, eps_high):
    """Returns the per-token loss and d(seq-mean-token-mean loss)/d logp of the paper's form."""
    b, t = logp.shape
    loss, grad = np.zeros((b, t)), np.zeros((b, t))
    nonempty = sum(1 for i in range(b) if mask[i].any())
    for i in range(b):
        steps = [s for s in range(t) if mask[i, s]]
        if not steps:
            continue
        s_i = math.exp(sum(logp[i, s] - old[i, s] for s in steps) / len(steps))
        clipped = min(max(s_i, 1 - eps_low), 1 + eps_high)
        unclipped_wins = -adv[i] * s_i >= -adv[i] * clipped
        value = max(-adv[i] * s_i, -adv[i] * clipped)
        for s in steps:
            loss[i, s] = value
            # d/dlogp_t of the sequence loss -A s_i is -A s_i / |o_i|; zero if the clip is active.
            if unclipped_wins:
                grad[i, s] = -adv[i] * s_i / len(steps) / nonempty
    return loss, grad


def cispo(logp, old, adv, mask, eps_low, eps_high):
    b, t = logp.shape
    loss = np.zeros((b, t))
    for i in range(b):
        for s in range(t):
            if mask[i, s]:
                w = math.exp(logp[i, s] - old[i, s])
                lo = 0.0 if eps_low is None else 1 - eps_low
                w = min(max(w, lo), 1 + eps_high)
                loss[i, s] = -w * adv[i, s] * logp[i, s]
    return loss


def kl(logp, ref, kind):
    out = np.zeros(logp.shape)
    for idx in np.ndindex(*logp.shape):
        d = logp[idx] - ref[idx]
        out[idx] = {"k1": d, "k2": d * d / 2, "k3": math.exp(-d) - 1 + d}[kind]
    return out


def entropy(logits):
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for row in flat:
        m = max(row)
        z = sum(math.exp(v - m) for v in row)
        h = 0.0
        for v in row:
            p = math.exp(v - m) / z
            if p > 0:
                h -= p * math.log(p)
        out.append(h)
    return np.array(out).reshape(logits.shape[:-1])


def aggregate(values, mask, mode, num_tokens=None, num_sequences=None, max_len=None):
    values = np.asarray(values, np.float64)
    b, t = values.shape
    rows = []
    for i in range(b):
        cnt = sum(1 for s in range(t) if mask[i, s])
        tot = sum(values[i, s] for s in range(t) if mask[i, s])
        rows.append((cnt, tot))
    total = sum(tot for _, tot in rows)
    nonempty = sum(1 for cnt, _ in rows if cnt > 0)
    if mode == "token-mean":
        return total / (num_tokens if num_tokens is not None else max(sum(c for c, _ in rows), 1))
    if mode == "seq-mean-token-mean":
        per_seq = sum(tot / cnt for cnt, tot in rows if cnt > 0)
        return per_seq / (num_sequences if num_sequences is not None else max(nonempty, 1))
    if mode == "seq-mean-token-sum":
        return total / (num_sequences if num_sequences is not None else max(nonempty, 1))
    return total / ((num_sequences if num_sequences is not None else b)
                    * (max_len if max_len is not None else t))


def value_loss(values, old, returns, mask, clip):
    out = np.zeros(values.shape)
    for idx in np.ndindex(*values.shape):
        if not mask[idx]:
            continue
        err = (values[idx] - returns[idx]) ** 2
        if clip is not None:
            vc = old[idx] + min(max(values[idx] - old[idx], -clip), clip)
            err = max(err, (vc - returns[idx]) ** 2)
        out[idx] = 0.5 * err
    return out


def high_entropy_mask(ent, mask, keep_fraction):
    items = sorted(((-ent[idx], idx) for idx in zip(*np.nonzero(mask))))
    k = math.ceil(round(keep_fraction * len(items), 6))
    keep = np.zeros(mask.shape, bool)
    for _, idx in items[:k]:
        keep[idx] = True
    return keep


def low_entropy_complement(ent, mask, keep_fraction):
    """The valid tokens ranked after the top ceil(keep_fraction · N) by entropy (ties: first
    position first), i.e. the bottom (1 − keep_fraction) share."""
    items = sorted(((-ent[idx], idx) for idx in zip(*np.nonzero(mask))))
    k = math.ceil(round(keep_fraction * len(items), 6))
    out = np.zeros(mask.shape, bool)
    for _, idx in items[k:]:
        out[idx] = True
    return out


# ----------------------------------------------------------------------------- issue 46 losses
# Each returns (per-token loss, d(Σ loss)/d logp) in float64; every per-token loss depends on
# its own logp only, so the gradient is the closed-form derivative of the token's formula.

def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def sapo(logp, old, adv, mask, tau_pos, tau_neg):
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for idx in zip(*np.nonzero(mask)):
        a = float(adv[idx])
        tau = tau_pos if a > 0 else tau_neg
        ratio = math.exp(float(logp[idx]) - float(old[idx]))
        s = _sigmoid(tau * (ratio - 1.0))
        loss[idx] = -(4.0 / tau) * s * a
        grad[idx] = -a * 4.0 * s * (1.0 - s) * ratio  # d/dlogp of -(4/τ)σ(τ(e^{lp-old}-1))A
    return loss, grad


def _log1m_exp(x):
    return math.log(max(-math.expm1(x), 1e-30))


def dppo(logp, old, adv, mask, divergence, eps_low, eps_high, cap):
    """Also returns each kept/dropped decision's margin to its threshold (for flip checks)."""
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    margins = []
    for idx in zip(*np.nonzero(mask)):
        lp, lo, a = float(logp[idx]), float(old[idx]), float(adv[idx])
        p, q = math.exp(lp), math.exp(lo)
        if divergence == "tv":
            keep = p - q <= eps_high if a > 0 else p - q >= -eps_low
            margins.append(abs(p - q - (eps_high if a > 0 else -eps_low)))
        else:
            d = q * (lo - lp) + (1 - q) * (_log1m_exp(lo) - _log1m_exp(lp))
            bound = eps_high if a > 0 else eps_low
            keep = d <= bound or (p <= q if a > 0 else p >= q)
            margins.append(min(abs(d - bound), abs(p - q)))
        w = min(math.exp(lp - lo), cap)
        if keep:
            loss[idx] = -a * w * lp
            grad[idx] = -a * w
    return loss, grad, min(margins)


def dcpo_bounds(old, eps_low, eps_high, cap):
    q = math.exp(float(old))
    low = 0.5 + 0.5 * math.sqrt(max(1.0 - 4.0 * eps_low / q, 0.0))
    high = min(0.5 + 0.5 * math.sqrt(1.0 + 4.0 * eps_high / q), cap)
    return low, high


def dcpo(logp, old, adv, mask, eps_low, eps_high, cap):
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    margins = []
    for idx in zip(*np.nonzero(mask)):
        a = float(adv[idx])
        low, high = dcpo_bounds(old[idx], eps_low, eps_high, cap)
        ratio = math.exp(float(logp[idx]) - float(old[idx]))
        clipped = min(max(ratio, low), high)
        loss[idx] = max(-a * ratio, -a * clipped)
        # The unclipped branch wins unless the clip moved ρ towards a smaller loss.
        if -a * ratio >= -a * clipped:
            grad[idx] = -a * ratio
        margins.append(min(abs(ratio - low), abs(ratio - high)))
    return loss, grad, min(margins)


def luspo(logp, old, adv, mask, eps_low, eps_high):
    """LUSPO = |o_i| × GSPO per token; gradient of its seq-mean-token-mean aggregate."""
    loss, grad = gspo(logp, old, adv, mask, eps_low, eps_high)
    length = mask.sum(axis=1, keepdims=True)
    return loss * length, grad * length


def nft(logp, old, rewards, rate, mask, negative_weight, eps, prompt_weight, rate_clip):
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for i, s in zip(*np.nonzero(mask)):
        if not 0.0 < rate[i] < 1.0:
            continue
        rh = min(max(float(rate[i]), rate_clip), 1 - rate_clip)
        w = {"none": 1.0, "negative_rate": 1 - rh, "grpo": math.sqrt((1 - rh) / rh)}[prompt_weight]
        delta = float(logp[i, s]) - float(old[i, s])
        if rewards[i] > 0:
            loss[i, s], grad[i, s] = -w * delta, -w
        else:
            ratio = math.exp(delta)
            proxy = (1 - rh * ratio) / (1 - rh)
            floored = max(proxy, eps)
            loss[i, s] = -w * negative_weight * math.log(floored)
            # Straight-through floor: d/dlogp of -log(proxy) with the floored value inside.
            grad[i, s] = w * negative_weight * rh * ratio / ((1 - rh) * floored)
    return loss, grad


def mass_covering(logp, ref, mask, kind):
    out, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for idx in zip(*np.nonzero(mask)):
        d = float(logp[idx]) - float(ref[idx])
        u = math.exp(d)
        if kind == "forward_kl":
            out[idx], grad[idx] = u - 1 - d, u - 1
        else:
            m = (1 + u) / 2
            out[idx] = 0.5 * (u * math.log(u) - (1 + u) * math.log(m))
            grad[idx] = 0.5 * u * math.log(u / m)  # = ½u(log 2 + log σ(δ))
    return out, grad
