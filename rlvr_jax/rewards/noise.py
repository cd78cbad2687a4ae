"""Noise-corrected verifier rewards (backward correction for a noisy binary verifier).

A verifier's observed reward r̂ ∈ {0, 1} relates to the true reward r by its
false-negative rate ρ0 = P(r̂=0 | r=1) and false-positive rate ρ1 = P(r̂=1 | r=0):
E[r̂ | r] = ρ1 + r (1 − ρ0 − ρ1). Hence

    r̃ = (r̂ − ρ1) / (1 − ρ0 − ρ1)

has E[r̃ | r] = r (unbiased; Natarajan et al. 2013's correction applied to rewards, as
proposed for RLVR verifiers). r̃ lies outside [0, 1] when ρ1 > 0; its variance grows as
ρ0 + ρ1 → 1. With ρ1 = 0 it is r̂ / (1 − ρ0). The rates must be measured on the
task's own data (docs/verifiers.md).
"""
from __future__ import annotations

import numpy as np


def noise_corrected_reward(observed, *, fn_rate: float, fp_rate: float = 0.0):
    """Unbiased reward ``[B]`` from observed binary rewards ``[B]`` (numpy or jax arrays)."""
    if not (0.0 <= fn_rate < 1.0 and 0.0 <= fp_rate < 1.0):
        raise ValueError(f"rates must be in [0, 1), got fn_rate={fn_rate}, fp_rate={fp_rate}")
    if fn_rate + fp_rate >= 1.0:
        raise ValueError("fn_rate + fp_rate must be < 1 (otherwise the verifier is uninformative)")
    scale = 1.0 / (1.0 - fn_rate - fp_rate)
    if isinstance(observed, (list, tuple)):
        observed = np.asarray(observed, np.float32)
    return (observed - fp_rate) * scale
