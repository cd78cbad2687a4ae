"""NumPy references for `rlvr_jax.token_sampling`'s CPU draws, in float64."""
import numpy as np


def inverse_cdf(scaled, u):
    """(tokens [B], cdf [B, V]) of inverse-transform sampling from softmax(scaled [B, V]):
    token = the first id whose cumulative probability exceeds u [B] ∈ [0, 1)."""
    scaled = np.asarray(scaled, np.float64)
    p = np.exp(scaled - scaled.max(-1, keepdims=True))
    cdf = np.cumsum(p / p.sum(-1, keepdims=True), axis=-1)
    tokens = np.array([np.searchsorted(c, x, side="right") for c, x in zip(cdf, u)])
    return np.minimum(tokens, scaled.shape[-1] - 1), cdf
