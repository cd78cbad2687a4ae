"""Shaping terms on the completion length (device terms) and KL in the reward.

`overlong` is the term `fn(rewards [B], x) -> (rewards + coef · R_len(length), metrics)`
(`scoring.terms`), configured either as the `overlong` component (coef = its weight, buffer
N // 4) or by `rl.overlong_buffer` / `rl.overlong_penalty` (the same term; not both).

`cosine_length` (Yeo et al. 2025, "Demystifying Long Chain-of-Thought Reasoning in LLMs",
eq. 1) adds w · R_cos(c, L): with c the verifier's correctness and L the completion length,

    CosFn(L, r0, rL) = rL + ½ (r0 − rL) (1 + cos(π L / L_max))     (r0 at L = 0, rL at L_max)
    R_cos = CosFn(L, max_value_correct, min_value_correct)   if c     (2 → 1: shorter is better)
          = CosFn(L, min_value_wrong, max_value_wrong)       if not c (−10 → 0: longer is better)
          = exceed_length                                    if L ≥ L_max      (−10)

(`reward.cosine_*`; the paper's values, its code's option names; L_max = `reward.cosine_max_len`,
0: N = `sampling.max_new_tokens`).

`length_penalty` (Kimi Team 2025, "Kimi k1.5", its "Length Penalty" section) adds w · λ_i
to the correct completions only, with λ_i = 0.5 − (L_i − min_len) / (max_len − min_len) over the
G completions of the same prompt (0 when they all have one length): a bonus up to +0.5 for
the shortest correct answer, a penalty down to −0.5 for the longest. Kimi also gives wrong
answers min(0, λ_i); `reward.length_penalty_incorrect = True` does that too.

`kl_in_reward` is the one shaping that needs the policy: it takes the per-token
KL(π_old‖π_ref) that the update computes from its reference log-probs.
"""
import functools
import math
from typing import Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.rewards.length import overlong_penalty_jnp
from rlvr_jax.scoring.score import is_correct

Metrics = Dict[str, jax.Array]


def overlong(rewards: jax.Array, x, *, max_length: int, buffer: int,
             coef: float) -> Tuple[jax.Array, Metrics]:
    """DAPO soft overlong punishment: r + coef · R_len(x.rollout.lengths) (`rewards.length`)."""
    penalty = coef * overlong_penalty_jnp(x.rollout.lengths, max_length=max_length,
                                          buffer_length=buffer)
    return rewards + penalty, {"reward/overlong": jnp.mean(penalty)}


def overlong_term(setup, weight):
    """The overlong term: the component (coef = `weight`, buffer N // 4) or `rl.overlong_*`
    (a buffer > 0); None when neither asks for it."""
    n, rl = setup.max_new_tokens, setup.rl
    buffer = 0 if rl is None else rl.overlong_buffer
    if weight is not None:
        if buffer > 0:
            raise ValueError("reward.components: 'overlong' and rl.overlong_buffer > 0 would "
                             "apply the DAPO penalty twice; use one of them")
        return functools.partial(overlong, max_length=n, buffer=max(1, n // 4), coef=weight)
    if buffer > 0:
        return functools.partial(overlong, max_length=n, buffer=buffer,
                                 coef=rl.overlong_penalty)
    return None


# Yeo et al. 2025's values (their code's flags math_rule_cosine_scale_* and
# math_rule_common_exceed_length, scripts of section 4.2).
DEFAULTS = {"cosine_max_len": 0, "cosine_min_value_correct": 1.0,
            "cosine_max_value_correct": 2.0, "cosine_min_value_wrong": -10.0,
            "cosine_max_value_wrong": 0.0, "cosine_exceed_length": -10.0,
            "length_penalty_incorrect": False}
COSINE = ("cosine_min_value_correct", "cosine_max_value_correct", "cosine_min_value_wrong",
          "cosine_max_value_wrong", "cosine_exceed_length")


def _field(reward, name: str):
    """`reward.<name>` (its `DEFAULTS` value without a `config.reward` or the field)."""
    return DEFAULTS[name] if reward is None else reward.get(name, DEFAULTS[name])


def cosine_length_reward(lengths: jax.Array, correct: jax.Array, *, max_len: int,
                         min_value_correct: float, max_value_correct: float,
                         min_value_wrong: float, max_value_wrong: float,
                         exceed_length: float) -> jax.Array:
    """R_cos [B] float32 of completion lengths [B] and correctness [B] bool (module
    docstring; Yeo et al. 2025, eq. 1). Jittable."""
    t = jnp.asarray(lengths, jnp.float32)
    wave = 0.5 * (1.0 + jnp.cos(t * (math.pi / max_len)))  # 1 at L = 0, 0 at L = L_max.
    start = jnp.where(correct, max_value_correct, min_value_wrong)
    end = jnp.where(correct, min_value_correct, max_value_wrong)
    value = end + (start - end) * wave
    return jnp.where(t >= max_len, jnp.float32(exceed_length), value).astype(jnp.float32)


def cosine_length(rewards: jax.Array, x, *, weight: float, max_len: int, **values
                  ) -> Tuple[jax.Array, Metrics]:
    """(rewards + weight · R_cos [B], metrics): R_cos of `x.rollout.lengths` and the
    verifier's correctness (`x.verdicts`); `values`: the five `COSINE` values."""
    lengths = x.rollout.lengths
    score = cosine_length_reward(lengths, is_correct(x.verdicts), max_len=max_len, **values)
    exceeded = jnp.mean((lengths >= max_len).astype(jnp.float32))
    return rewards + weight * score, {"reward/cosine_length": jnp.mean(score),
                                      "reward/cosine_length_exceeded": exceeded}


def cosine_length_term(setup, weight):
    """The `cosine_length` component (weight: its weight), or None when unlisted."""
    if weight is None:
        return None
    n = setup.max_new_tokens
    max_len = int(_field(setup.reward, "cosine_max_len")) or n
    if max_len <= 0 or (n and max_len > n):
        raise ValueError(f"reward.cosine_max_len: must be in [1, sampling.max_new_tokens = "
                         f"{n}] (0: max_new_tokens), got {max_len}")
    values = {k[len("cosine_"):]: float(_field(setup.reward, k)) for k in COSINE}
    return functools.partial(cosine_length, weight=float(weight), max_len=max_len, **values)


def length_penalty_values(lengths: jax.Array, correct: jax.Array, group_size: int, *,
                          incorrect: bool = False) -> jax.Array:
    """Kimi k1.5's length reward [B] float32 of lengths [B] and correctness [B] bool, over
    groups of `group_size` consecutive rows: λ for correct rows, 0 (with `incorrect`:
    min(0, λ)) for wrong ones (module docstring). Jittable."""
    t = jnp.asarray(lengths, jnp.float32).reshape(-1, group_size)
    lo, hi = jnp.min(t, axis=1, keepdims=True), jnp.max(t, axis=1, keepdims=True)
    span = hi - lo
    lam = jnp.where(span > 0, 0.5 - (t - lo) / jnp.where(span > 0, span, 1.0), 0.0)
    lam = lam.reshape(-1)
    wrong = jnp.minimum(lam, 0.0) if incorrect else jnp.zeros_like(lam)
    return jnp.where(correct, lam, wrong).astype(jnp.float32)


def length_penalty(rewards: jax.Array, x, *, weight: float, incorrect: bool
                   ) -> Tuple[jax.Array, Metrics]:
    """(rewards + weight · λ [B], metrics): `length_penalty_values` of `x.rollout.lengths`,
    the verifier's correctness and groups of `x.group_size`."""
    correct = is_correct(x.verdicts)
    lam = length_penalty_values(x.rollout.lengths, correct, x.group_size,
                                incorrect=incorrect)
    return rewards + weight * lam, {"reward/length_penalty": jnp.mean(lam)}


def length_penalty_term(setup, weight):
    """The `length_penalty` component (weight: its weight), or None when unlisted."""
    if weight is None:
        return None
    incorrect = bool(_field(setup.reward, "length_penalty_incorrect"))
    return functools.partial(length_penalty, weight=float(weight), incorrect=incorrect)



def check_length_config(reward) -> None:
    """Raises ValueError naming the field: `reward.cosine_max_len` < 0, or a cosine range
    whose min is above its max."""
    if _field(reward, "cosine_max_len") < 0:
        raise ValueError(f"reward.cosine_max_len: must be >= 0 (0: sampling.max_new_tokens), "
                         f"got {reward.cosine_max_len}")
    for kind in ("correct", "wrong"):
        lo = _field(reward, f"cosine_min_value_{kind}")
        hi = _field(reward, f"cosine_max_value_{kind}")
        if lo > hi:
            raise ValueError(f"reward.cosine_min_value_{kind}: must be <= "
                             f"reward.cosine_max_value_{kind}, got {lo} > {hi}")


def kl_in_reward(rewards: jax.Array, kl_tok: jax.Array, mask: jax.Array, row_valid: jax.Array,
                 kl_coef, *, per_token: bool) -> Tuple[jax.Array, Metrics]:
    """The stop-gradient KL(π_old‖π_ref) penalty in the reward (PPO/RLHF style).

    Sequence-level estimators get r − β·Σ_t KL_t; token-level ones that take it per token
    (`per_token`) keep r (the estimator subtracts β·KL_t).

    Args:
      rewards: [P, G]; kl_tok: [B, N] per-token KL (B = P·G); mask: [B, N];
      row_valid: [B] rows of valid groups; kl_coef: β (a scalar, maybe traced).

    Returns:
      (rewards [P, G], metrics incl. the observed per-token KL `kl/reward_kl`).
    """
    seq_kl = jnp.sum(kl_tok, axis=1)
    lengths = jnp.maximum(jnp.sum(mask, axis=1), 1).astype(jnp.float32)
    n_rows = jnp.maximum(jnp.sum(row_valid.astype(jnp.float32)), 1.0)
    observed = jnp.sum(jnp.where(row_valid, seq_kl / lengths, 0.0)) / n_rows
    if not per_token:
        rewards = rewards - kl_coef * seq_kl.reshape(rewards.shape)
    metrics = {"reward/kl_penalty": -kl_coef * jnp.sum(seq_kl) / n_rows,
               "kl/reward_kl": observed, "kl/coef": jnp.asarray(kl_coef, jnp.float32)}
    return rewards, metrics
