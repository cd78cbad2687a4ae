"""A noisy verifier, and its backward or forward correction, as device reward terms (jittable).

    config.reward.noise_fn_rate = 0.2     # p1: a correct completion scores 0 (false negative)
    config.reward.noise_fp_rate = 0.1     # p0: a wrong completion scores 1 (false positive)
    config.reward.noise_seed = 0
    config.reward.correction_fn_rate = 0.2   # backward correction with these rates (0, 0: off)
    config.reward.correction_fp_rate = 0.1
    config.reward.correction_kind = "backward"   # or "forward"

`noisy` (the `noise` term, `scoring.terms`) wraps the reward of the terms before it: with c = 1[r ≥ 1] (the correctness of
`scoring.is_correct`) and u ~ U[0, 1) per completion,

    r̂ = r − c·1[u < p1] + (1 − c)·1[u < p0]

so a binary verdict flips (1 → 0 with p1, 0 → 1 with p0) and a weighted sum of components
loses or gains exactly its correctness unit. p1 = 1 − γ, p0 = γ gives rewards that are
Bernoulli(γ) whatever the completion (the "spurious rewards" control; γ = 0.5: p1 = p0 = 0.5).
The flips are logged as counts (`reward/noise_false_negatives`, `reward/noise_false_positives`);
`reward/correct` still counts the true verdicts (metrics are taken before shaping).

Seeded: u is drawn from `PRNGKey(seed)` folded with a hash of the rollout's prompt and
completion tokens, so the same rollout gets the same flips on the one-program and the split
path, in a rerun, and after a resume; different rollouts get independent draws.

`backward_corrected` is `noise_corrected_reward` r̃ = (r̂ − ρ1) / (1 − ρ0 − ρ1): with a
verifier's false-negative rate ρ0 = P(r̂=0 | r=1) and false-positive rate ρ1 = P(r̂=1 | r=0),
E[r̂ | r] = ρ1 + r (1 − ρ0 − ρ1), so E[r̃ | r] = r (Natarajan et al. 2013's backward
correction applied to rewards). r̃ lies outside [0, 1] when ρ1 > 0; its variance grows as
ρ0 + ρ1 → 1. The rates must be measured on the task's own data (docs/verifiers.md). It is
the `correction` term, after `noise` when both are configured.

`forward_corrected` (`reward.correction_kind = "forward"`; after Cai et al. 2025, "RL with
Verifiable yet Noisy Rewards under Imperfect Verifiers", arXiv 2510.00915, whose forward
correction reweights the score-function terms with the channel applied forward, never
inverted, and needs only the FN rate) replaces each completion's observed correctness
b = 1[r̂ ≥ 1] by its posterior mean under the channel, given its group's clean success rate
p̂ = clip((mean_G b − ρ1) / (1 − ρ0 − ρ1), 0, 1):

    w1 = P(r=1 | r̂=1) = (1−ρ0) p̂ / ((1−ρ0) p̂ + ρ1 (1−p̂))
    w0 = P(r=1 | r̂=0) = ρ0 p̂ / (ρ0 p̂ + (1−ρ1)(1−p̂))           r̃ = r̂ − b + w_b

(ρ0 = fn_rate, ρ1 = fp_rate as above; the paper names them the other way round).
w ∈ [0, 1]: bounded whatever the rates, unlike the backward r̃. With the true p,
E[w_r̂] = p (the tower rule) and E[w_r̂ ∇log π] = (1 − ρ0 − ρ1)(w1 − w0) ∇J with w1 > w0
for 0 < p < 1: the expected update points along the clean gradient (scaled down, not
unbiased); with ρ1 = 0 (a rule verifier's false negatives only) it needs only the FN rate.
This posterior form is our derivation from the paper's abstract (its body could not be read
here); tests/test_length_noise_shaping.py checks both properties. A third-party summary of
the paper gives its weights as w0 = ρ0 − 1 and w1 = ρ0 on the score-function terms (ρ0 the
FN rate here): the verdict shifted by −(1 − ρ0), which any group baseline cancels; how the
paper's GRPO hook applies them could not be checked, so that form is not offered.

Both corrections are affine in the observed verdict within a group, so on binary rewards a
group advantage divided by the group's std (grpo) cancels either up to its ε; with a
mean-only group baseline (Dr.GRPO, RLOO) the backward correction scales every advantage by
the same 1 / (1 − ρ0 − ρ1) (which Adam's normalisation all but cancels) while the forward
one scales each group by its own w1 − w0, damping the groups whose zeros are most likely
false negatives.
"""
import functools
from typing import Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np

Metrics = Dict[str, jax.Array]

FIELDS = ("noise_fn_rate", "noise_fp_rate", "correction_fn_rate", "correction_fp_rate")
KINDS = ("backward", "forward")


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


def rollout_key(seed: int, rollout) -> jax.Array:
    """A PRNG key from `seed` and a uint32 hash of the rollout's prompt and completion
    tokens (position-weighted, so a permutation of the rows changes it)."""
    def fold(x):
        x = jnp.asarray(x).astype(jnp.uint32).reshape(-1)
        w = jnp.arange(1, x.shape[0] + 1, dtype=jnp.uint32) * jnp.uint32(2654435761)
        return jnp.sum((x + jnp.uint32(1)) * w, dtype=jnp.uint32)
    key = jax.random.PRNGKey(seed)
    key = jax.random.fold_in(key, fold(rollout.prompt_tokens))
    return jax.random.fold_in(key, fold(rollout.tokens))


def noisy(rewards: jax.Array, x, *, fn_rate: float, fp_rate: float, seed: int
          ) -> Tuple[jax.Array, Metrics]:
    """(r̂ [B], metrics): rewards [B] with injected false negatives (rate `fn_rate`, p1)
    and false positives (rate `fp_rate`, p0); see the module docstring. x: `terms.Inputs`."""
    r = jnp.asarray(rewards, jnp.float32)
    u = jax.random.uniform(rollout_key(seed, x.rollout), r.shape)
    correct = r >= 1.0
    false_neg = correct & (u < fn_rate)
    false_pos = ~correct & (u < fp_rate)
    out = r - false_neg.astype(jnp.float32) + false_pos.astype(jnp.float32)
    n_neg, n_pos = jnp.sum(false_neg, dtype=jnp.float32), jnp.sum(false_pos, dtype=jnp.float32)
    return out, {"reward/noise_false_negatives": n_neg, "reward/noise_false_positives": n_pos,
                 "reward/noise_flip_fraction": (n_neg + n_pos) / r.shape[0]}


def backward_corrected(rewards: jax.Array, x, *, fn_rate: float, fp_rate: float
                       ) -> Tuple[jax.Array, Metrics]:
    """(r̃ [B], metrics): `noise_corrected_reward` of the (noisy) rewards."""
    del x
    out = noise_corrected_reward(jnp.asarray(rewards, jnp.float32), fn_rate=fn_rate,
                                 fp_rate=fp_rate)
    return out, {"reward/corrected_mean": jnp.mean(out)}


def forward_weights(p, *, fn_rate: float, fp_rate: float):
    """(w0, w1): P(r=1 | r̂=0) and P(r=1 | r̂=1) for a clean success rate p (any shape; numpy
    or jax) under FN rate `fn_rate` and FP rate `fp_rate` (module docstring); where an
    observation is impossible (a zero denominator) its weight is its own value (0 or 1)."""
    xp = jnp if isinstance(p, jax.Array) else np
    hit, miss = (1.0 - fn_rate) * p, fp_rate * (1.0 - p)      # P(r=1, r̂=1), P(r=0, r̂=1)
    lost, kept = fn_rate * p, (1.0 - fp_rate) * (1.0 - p)     # P(r=1, r̂=0), P(r=0, r̂=0)
    w1 = xp.where(hit + miss > 0, hit / xp.where(hit + miss > 0, hit + miss, 1.0), 1.0)
    w0 = xp.where(lost + kept > 0, lost / xp.where(lost + kept > 0, lost + kept, 1.0), 0.0)
    return w0, w1


def forward_corrected(rewards: jax.Array, x, *, fn_rate: float, fp_rate: float
                      ) -> Tuple[jax.Array, Metrics]:
    """(r̃ [B], metrics): each completion's correctness unit replaced by its posterior mean
    given its group of G = `x.group_size` consecutive rows (module docstring)."""
    r = jnp.asarray(rewards, jnp.float32)
    b = (r >= 1.0).astype(jnp.float32)
    observed = jnp.mean(b.reshape(-1, x.group_size), axis=1, keepdims=True)
    p = jnp.clip((observed - fp_rate) / (1.0 - fn_rate - fp_rate), 0.0, 1.0)
    w0, w1 = forward_weights(p, fn_rate=fn_rate, fp_rate=fp_rate)
    posterior = jnp.where(b.reshape(-1, x.group_size) > 0, w1, w0).reshape(-1)
    out = r - b + posterior
    return out, {"reward/corrected_mean": jnp.mean(out),
                 "reward/forward_weight_gap": jnp.mean(w1 - w0)}


def check_noise_config(reward) -> None:
    """Raises ValueError naming the field for rates outside [0, 1], correction rates whose
    sum is >= 1 (an uninformative verifier), or an unknown `correction_kind`."""
    kind = reward.get("correction_kind", "backward")
    if kind not in KINDS:
        raise ValueError(f"reward.correction_kind: must be one of {', '.join(KINDS)}, "
                         f"got {kind!r}")
    for name in FIELDS:
        value = reward.get(name, 0.0)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"reward.{name}: must be in [0, 1], got {value}")
    fn, fp = reward.get("correction_fn_rate", 0.0), reward.get("correction_fp_rate", 0.0)
    if fn + fp >= 1.0:
        raise ValueError(f"reward.correction_fn_rate: with reward.correction_fp_rate the sum "
                         f"must be < 1 (the verifier is uninformative), got {fn} + {fp}")


def noise_term(setup, weight):
    """`noisy` with `reward.noise_fn_rate` / `noise_fp_rate` / `noise_seed`; None when both
    rates are 0."""
    del weight
    p1, p0 = _rates(setup.reward, "noise")
    if not (p1 > 0 or p0 > 0):
        return None
    return functools.partial(noisy, fn_rate=p1, fp_rate=p0,
                             seed=int(setup.reward.get("noise_seed", 0)))


def correction_term(setup, weight):
    """`backward_corrected` (or, with `reward.correction_kind = "forward"`,
    `forward_corrected`) with `reward.correction_fn_rate` / `correction_fp_rate`; None when
    both are 0."""
    del weight
    q1, q0 = _rates(setup.reward, "correction")
    if not (q1 > 0 or q0 > 0):
        return None
    forward = setup.reward.get("correction_kind", "backward") == "forward"
    return functools.partial(forward_corrected if forward else backward_corrected,
                             fn_rate=q1, fp_rate=q0)


def _rates(reward, prefix: str) -> Tuple[float, float]:
    """(`reward.<prefix>_fn_rate`, `reward.<prefix>_fp_rate`), checked when either is set
    ((0, 0) without a `config.reward`)."""
    if reward is None:
        return 0.0, 0.0
    rates = (float(reward.get(f"{prefix}_fn_rate", 0.0)),
             float(reward.get(f"{prefix}_fp_rate", 0.0)))
    if any(rates):
        check_noise_config(reward)
    return rates
