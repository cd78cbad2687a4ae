"""The decode loop's phases: caches that grow by `cache_window` slots per phase.

`sampling.generate` decodes in phases over caches of Tp + W, Tp + 2W, …, Tp + N - 1 slots so
early steps do not read the empty end of the cache; one compiled loop body per phase and one
cache copy between phases (`models.decoding.resize_cache`)."""
from typing import Optional, Tuple

import jax

AUTO_WINDOW_MIN_TOKENS = 128  # Shorter completions decode in one phase by default.


def auto_cache_window(max_new_tokens: int, backend: Optional[str] = None) -> int:
    """The phase width `cache_window=None` stands for on `backend` (default: JAX's): on CPU
    0 (one phase) below `AUTO_WINDOW_MIN_TOKENS` new tokens, else W = ceil((N - 1) / k), k = 4
    phases (8 from N = 512) over caches of Tp + W, …, Tp + N - 1 slots (a step reads about
    N / 2k unfilled slots, not N / 2; CPU cost model, qwen2.5-0.5b, 256 rows: 8 phases 1.44×
    the byte minimum, 4: 1.48). Elsewhere 0: each phase is one more compiled loop body (8 at
    qwen2.5-0.5b: over 110 s on an H200; 4: +11% tokens/s on an H100 with "grouped")."""
    if max_new_tokens < AUTO_WINDOW_MIN_TOKENS or (backend or jax.default_backend()) != "cpu":
        return 0
    phases = 8 if max_new_tokens >= 512 else 4
    return -(-(max_new_tokens - 1) // phases)


def cache_window_setting(value: int) -> Optional[int]:
    """An int `cache_window` setting as configs and command lines write it (-1: automatic,
    0: one phase, W > 0: phases of W slots) as `SamplingConfig` takes it (-1 -> None);
    raises ValueError below -1."""
    if value < -1:
        raise ValueError(f"must be -1 (automatic), 0 (one phase) or a number of slots > 0, "
                         f"got {value}")
    return None if value == -1 else value


def cache_window_of(sc) -> int:
    """The phase width `generate` uses: `sc.cache_window`, or the automatic one if None."""
    return auto_cache_window(sc.max_new_tokens) if sc.cache_window is None else sc.cache_window


def cache_sizes(tp: int, n: int, window: int) -> Tuple[int, ...]:
    """Cache sizes of the decode phases; the last is Tp + N - 1 (enough for N tokens)."""
    full = tp + n - 1
    if window <= 0:
        return (full,)
    sizes = list(range(tp + window, full, window)) + [full]
    return tuple(sizes)
