"""Evaluation metrics: unbiased pass@k, CoT-pass@k, maj@k, mean@k, best@k, IQM and bootstrap CIs.

All functions are pure and jittable (counts given as arrays); per-problem metrics are `[P]`
float arrays, average them yourself (`.mean()`) or feed per-seed scores to `bootstrap_ci`.
Shapes: `P` problems, `N` samples per problem, `R` runs (seeds), `K` tasks.
"""
import jax
import jax.numpy as jnp
import numpy as np


def _concrete(x):
    """`x` as a NumPy array if it is concrete (not traced), else None."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def pass_at_k(n, c, k, *, max_n=None):
    """Unbiased pass@k estimator from `n` samples of which `c` are correct.

    Formula: `pass@k = 1 - C(n-c, k) / C(n, k) = 1 - Π_{i=n-c+1}^{n} (1 - k/i)`, computed as
    `-expm1(Σ log1p(-k/i))` (no large binomials: stable for n in the thousands); it is 1 when
    `n - c < k`. Paper: Chen et al. 2021, "Evaluating Large Language Models Trained on Code".

    Args:
      n, c, k: broadcastable integer arrays or ints (`0 <= c <= n`, `1 <= k <= n`).
      max_n: static upper bound on `n`; needed only when `n` is traced (inside `jit`).

    Returns:
      float array (float32, or float64 with x64 enabled) of the broadcast shape.
    """
    n_np, c_np, k_np = _concrete(n), _concrete(c), _concrete(k)
    if max_n is None:
        if n_np is None:
            raise ValueError("pass_at_k needs a static max_n when n is traced")
        max_n = int(np.max(n_np))
    if n_np is not None and c_np is not None and k_np is not None:
        if np.any(c_np < 0) or np.any(c_np > n_np):
            raise ValueError("pass_at_k needs 0 <= c <= n")
        if np.any(k_np < 1) or np.any(k_np > n_np):
            raise ValueError("pass_at_k needs 1 <= k <= n")
    dtype = jnp.result_type(float)
    n, c, k = (jnp.asarray(x).astype(dtype) for x in (n, c, k))
    n, c, k = jnp.broadcast_arrays(n, c, k)
    j = jnp.arange(max_n, dtype=dtype).reshape((1,) * n.ndim + (max_n,))
    i = n[..., None] - j                       # the factors i = n, n-1, ..., n-c+1
    use = (j < c[..., None]) & (i > k[..., None])
    terms = jnp.where(use, jnp.log1p(-k[..., None] / jnp.where(use, i, 1.0)), 0.0)
    return jnp.where(n - c < k, 1.0, 0.0 - jnp.expm1(jnp.sum(terms, axis=-1)))


def _first_k(x, k, name):
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be [P, N], got {x.shape}")
    if k is None:
        return x
    if not 1 <= k <= x.shape[1]:
        raise ValueError(f"k must be in [1, N={x.shape[1]}], got {k}")
    return x[:, :k]


def pass_at_k_from_samples(correct, *, k):
    """Unbiased pass@k per problem from a `[P, N]` bool/0-1 correctness matrix (returns `[P]`)."""
    corr = jnp.asarray(correct)
    if corr.ndim != 2:
        raise ValueError(f"correct must be [P, N], got {corr.shape}")
    n = corr.shape[1]
    c = jnp.sum(corr.astype(bool).astype(jnp.int32), axis=1)
    return pass_at_k(n, c, k, max_n=n)


def cot_pass_at_k(answer_correct, reasoning_correct, *, k):
    """CoT-pass@k: pass@k where a sample counts only if its answer and its reasoning are correct.

    Formula: `c = Σ_j 1[answer_j ∧ reasoning_j]`, then `pass_at_k(N, c, k)`.
    Paper: Wen et al. 2025, "Reinforcement Learning with Verifiable Rewards Implicitly
    Incentivizes Correct Reasoning in Base LLMs".

    Args:
      answer_correct, reasoning_correct: `[P, N]` bool/0-1.
      k: static int.

    Returns:
      `[P]` float.
    """
    a = jnp.asarray(answer_correct).astype(bool)
    r = jnp.asarray(reasoning_correct).astype(bool)
    if a.shape != r.shape:
        raise ValueError(f"answer_correct {a.shape} and reasoning_correct {r.shape} differ")
    return pass_at_k_from_samples(a & r, k=k)


def mean_at_k(correct, *, k=None):
    """mean@k: average correctness (or reward) of the first `k` samples, `[P, N] -> [P]`."""
    return jnp.mean(_first_k(correct, k, "correct").astype(jnp.float32), axis=1)


def best_at_k(rewards, *, k=None):
    """best@k: the maximum reward among the first `k` samples, `[P, N] -> [P]`."""
    return jnp.max(_first_k(rewards, k, "rewards").astype(jnp.float32), axis=1)


def maj_at_k(answer_ids, correct, *, k=None):
    """maj@k: correctness of the majority-vote answer among the first `k` samples.

    Formula: `maj@k = correct(argmax_a Σ_{j<k} 1[answer_j = a])`, ties broken in favour of the
    answer that appears first; samples with `answer_id < 0` (no answer extracted) do not vote;
    a problem with no vote scores 0. Paper: Wang et al. 2023, "Self-Consistency Improves Chain
    of Thought Reasoning in Language Models".

    Args:
      answer_ids: `[P, N]` int ids of the extracted (normalised) answers, -1 for none.
      correct: `[P, N]` bool/0-1 correctness of each sample (equal answers must agree).
      k: static number of samples used (default N).

    Returns:
      `[P]` float32 in {0, 1}.
    """
    ids = _first_k(answer_ids, k, "answer_ids")
    corr = _first_k(correct, k, "correct").astype(bool)
    if ids.shape != corr.shape:
        raise ValueError(f"answer_ids {ids.shape} and correct {corr.shape} differ")
    valid = ids >= 0
    same = (ids[:, :, None] == ids[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    votes = jnp.sum(same.astype(jnp.int32), axis=2)         # [P, k] votes for sample j's answer
    winner = jnp.argmax(votes, axis=1)                       # first index of the largest count
    win_correct = jnp.take_along_axis(corr, winner[:, None], axis=1)[:, 0]
    return jnp.where(jnp.any(valid, axis=1), win_correct, False).astype(jnp.float32)


def iqm(scores):
    """Interquartile mean of all entries: the mean of the middle 50% after sorting.

    Formula: sort the `n` entries, drop `floor(n/4)` from each end, average the rest (the
    25%-trimmed mean, as in `scipy.stats.trim_mean(x, 0.25)`). Paper: Agarwal et al. 2021,
    "Deep Reinforcement Learning at the Edge of the Statistical Precipice".

    Args:
      scores: any-shape float array (e.g. `[R, K]` runs × tasks).

    Returns:
      float32 scalar.
    """
    x = jnp.sort(jnp.asarray(scores).astype(jnp.float32).reshape(-1))
    n = x.shape[0]
    if n == 0:
        raise ValueError("iqm of an empty array")
    cut = n // 4
    return jnp.mean(x[cut:n - cut])


_STATISTICS = {"iqm": iqm, "mean": lambda x: jnp.mean(jnp.asarray(x).astype(jnp.float32))}


def bootstrap_ci(key, scores, *, statistic="iqm", num_resamples=2000, confidence=0.95):
    """Stratified percentile-bootstrap confidence interval of an aggregate over runs and tasks.

    Each resample draws `R` runs with replacement *independently for every task* (stratified
    bootstrap), then computes `statistic` over the resampled `[R, K]` matrix; the interval is
    the `(1 ± confidence)/2` percentiles of the resampled statistics. Paper: Agarwal et al. 2021,
    "Deep Reinforcement Learning at the Edge of the Statistical Precipice" (rliable).

    Args:
      key: `jax.random` key.
      scores: `[R]` (one task) or `[R, K]` float scores of R runs (seeds) on K tasks.
      statistic: "iqm" | "mean".
      num_resamples: static number of bootstrap resamples.
      confidence: coverage in (0, 1).

    Returns:
      `(point, low, high)` float32 scalars: the statistic on `scores` and the interval.
    """
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {tuple(_STATISTICS)}, got {statistic!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = jnp.asarray(scores).astype(jnp.float32)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"scores must be [R] or [R, K], got {jnp.shape(scores)}")
    fn = _STATISTICS[statistic]
    r, t = x.shape
    idx = jax.random.randint(key, (num_resamples, r, t), 0, r)
    resampled = jnp.take_along_axis(x[None], idx, axis=1)   # [S, R, K]
    stats = jax.vmap(fn)(resampled)
    alpha = 100.0 * (1.0 - confidence) / 2.0
    low, high = jnp.percentile(stats, jnp.array([alpha, 100.0 - alpha]))
    return fn(x), low, high
