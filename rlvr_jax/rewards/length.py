"""DAPO soft overlong punishment (Yu et al. 2025, "DAPO", eq. 13).

    R_len(L) = 0                              if L <= L_max - L_buffer
             = (L_max - L_buffer - L) / L_buffer   if L_max - L_buffer < L <= L_max
             = -1                             if L > L_max

added to the task reward. ``L`` is the number of response tokens.
"""
from __future__ import annotations


def _check(max_length, buffer_length):
    if max_length <= 0:
        raise ValueError(f"max_length must be > 0, got {max_length}")
    if not 0 < buffer_length <= max_length:
        raise ValueError(f"buffer_length must be in (0, max_length], got {buffer_length}")


def overlong_penalty(length: int, *, max_length: int, buffer_length: int) -> float:
    """Host version of the penalty for one response length (a float in [-1, 0])."""
    _check(max_length, buffer_length)
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    start = max_length - buffer_length
    if length <= start:
        return 0.0
    if length > max_length:
        return -1.0
    return (start - length) / buffer_length


def overlong_penalty_jnp(lengths, *, max_length: int, buffer_length: int):
    """Jittable penalty for response lengths ``[B]`` (int) → ``float32[B]`` in [-1, 0]."""
    import jax.numpy as jnp  # lazily: reward workers need not import JAX

    _check(max_length, buffer_length)
    lengths = jnp.asarray(lengths, jnp.float32)
    start = float(max_length - buffer_length)
    ramp = (start - lengths) / float(buffer_length)
    return jnp.clip(ramp, -1.0, 0.0).astype(jnp.float32)
