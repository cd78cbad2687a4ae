"""Independent NumPy/Python restatements of rlvr_jax.data.adaptive's formulas, written from
docs/data.md (not from the implementation), for the tests to compare against."""
import numpy as np


def tracked_rates(n, visits, ema):
    """Rates after `visits` = [(index, [G] correct bools), ...] in order: the first visit
    sets the rate to its pass fraction, later ones blend ema·new + (1−ema)·old."""
    rate = [None] * n
    for i, correct in visits:
        r = sum(bool(c) for c in correct) / len(correct)
        rate[i] = r if rate[i] is None else ema * r + (1 - ema) * rate[i]
    return rate


def admitted(rate, last_epoch, epoch, *, low, high, readmit_epochs):
    """The filter rule in words: unvisited or middling prompts always; an extreme one only
    after sitting out `readmit_epochs` whole epochs (never with 0)."""
    if rate is None:
        return True
    if low < rate < high:
        return True
    if readmit_epochs == 0:
        return False
    sat_out = epoch - last_epoch - 1
    return sat_out >= readmit_epochs


def mixture_weights(base, pass_rates, group_size, floor):
    """w_k ∝ base_k · max(P(a group of G is neither all right nor all wrong), floor)."""
    out = []
    for b, p in zip(base, pass_rates):
        all_right, all_wrong = p ** group_size, (1 - p) ** group_size
        out.append(b / sum(base) * max(1 - all_right - all_wrong, floor))
    total = sum(out)
    return np.array([w / total for w in out])
