"""Independent references for rlvr_jax.lab.stats's few-seed tests: SciPy's Student t
(scipy ships with jax, a runtime requirement of jax itself) and plain loops for the sign-flip
enumeration and Holm's procedure (float64)."""
import itertools

import numpy as np
from scipy import stats as sps


def t_interval(diffs, level=0.95):
    d = np.asarray(diffs, np.float64)
    return sps.t.interval(level, d.size - 1, loc=d.mean(), scale=sps.sem(d))


def t_pvalue(diffs, mu0, alternative):
    return float(sps.ttest_1samp(np.asarray(diffs, np.float64), mu0,
                                 alternative=alternative).pvalue)


def tost(diffs, margin):
    d = np.asarray(diffs, np.float64)
    return max(t_pvalue(d, -margin, "greater"), t_pvalue(d, margin, "less"))


def sign_flip(diffs, alternative):
    """Loops over itertools.product of the signs; means compared with a relative 1e-9."""
    d = [float(x) for x in diffs]
    obs = sum(d) / len(d)
    tol = 1e-9 * sum(abs(x) for x in d) / len(d)
    hits = total = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(d)):
        m = sum(s * x for s, x in zip(signs, d)) / len(d)
        total += 1
        if alternative == "greater":
            hits += m >= obs - tol
        elif alternative == "less":
            hits += m <= obs + tol
        else:
            hits += abs(m) >= abs(obs) - tol
    return hits / total


def holm(pvalues):
    """Holm by its definition: p̃_i = max over the j ranked at or before i of
    min(1, (k − rank_j)·p_j) (ranks from 0, ties in input order)."""
    k = len(pvalues)
    ranked = sorted(range(k), key=lambda i: (pvalues[i], i))
    rank = {i: r for r, i in enumerate(ranked)}
    out = []
    for i in range(k):
        out.append(max(min(1.0, (k - rank[j]) * pvalues[j]) for j in range(k)
                       if rank[j] <= rank[i]))
    return out


def two_stage_bootstrap_sd(values):
    """The exact standard deviation of the seed × prompt bootstrap mean of values [S, P]:
    sqrt((1/S)·[mean_s (m_s − m̄)² + mean_s σ_s² / P]) (plug-in moments)."""
    x = np.asarray(values, np.float64)
    s, p = x.shape
    m = x.mean(axis=1)
    between = ((m - m.mean()) ** 2).mean()
    within = x.var(axis=1).mean() / p
    return float(np.sqrt((between + within) / s))
