"""Exact / loop-based references for rlvr_jax.evaluation."""
import math
from collections import Counter
from fractions import Fraction


def pass_at_k(n, c, k):
    """Exact `1 - C(n-c, k) / C(n, k)` with Python big integers."""
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def maj_at_k(ids, correct):
    votes = Counter(a for a in ids if a >= 0)
    if not votes:
        return 0.0
    top = max(votes.values())
    for j, a in enumerate(ids):          # first sample whose answer has the top count
        if a >= 0 and votes[a] == top:
            return float(correct[j])


def iqm(values):
    xs = sorted(float(v) for v in values)
    cut = len(xs) // 4
    mid = xs[cut:len(xs) - cut]
    return sum(mid) / len(mid)
