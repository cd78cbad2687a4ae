"""Length draws for the real-length benchmark workloads (`scripts/benchmark.py ... --lengths real`).

Real RLVR batches are not full rows: prompts are shorter than their bucket and completions
average about a third of the budget N with a long right tail. The benchmarks draw lengths from
one fixed recipe so that every number quoted against "real lengths" refers to the same batch:

- prompt lengths uniform in [prompt_len // 4, prompt_len], one per prompt;
- completion lengths min(N, max(1, round(exp(mu + sigma * z)))), z standard normal, with
  sigma = 1.0 and mu = ln(0.35 N) - sigma^2 / 2 (so the untruncated mean is 0.35 N), one per
  sample, row-major over [prompts, samples].
"""
import numpy as np

SIGMA = 1.0
MEAN_FRACTION = 0.35


def completion_lengths(count: int, new_tokens: int, seed: int = 0) -> np.ndarray:
    """[count] int32 completion lengths in [1, new_tokens], log-normal (see the module)."""
    if count < 1 or new_tokens < 1:
        raise ValueError(f"count and new_tokens must be >= 1, got {count} and {new_tokens}")
    mu = np.log(MEAN_FRACTION * new_tokens) - SIGMA ** 2 / 2
    z = np.random.default_rng(seed).standard_normal(count)
    return np.clip(np.round(np.exp(mu + SIGMA * z)), 1, new_tokens).astype(np.int32)


def prompt_lengths(count: int, prompt_len: int, seed: int = 0) -> np.ndarray:
    """[count] int32 prompt lengths uniform in [max(1, prompt_len // 4), prompt_len]."""
    if count < 1 or prompt_len < 1:
        raise ValueError(f"count and prompt_len must be >= 1, got {count} and {prompt_len}")
    rng = np.random.default_rng([seed, 1])  # A stream independent of the completions'.
    return rng.integers(max(1, prompt_len // 4), prompt_len + 1, size=count).astype(np.int32)
