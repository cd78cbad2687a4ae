"""Process (step) rewards: per-step verdicts placed on the token that ends each step.

A step reward is `r_{i,k}` for step k of sequence i, held in a `[B, T]` array at the token
`t_k` that ends the step (`step_ends[i, t_k]` True, 0 elsewhere). Two credit assignments:

- **sum** (the usual return): `G_t = Σ_{k: t_k ≥ t} r_k` — every future step counts.
- **min** (PURE, Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process
  Reward Model Needs for Reasoning"): `G_t = min_{k: t_k ≥ t} r_k` — a token is worth the
  worst step still ahead of it, so a run of high-scoring steps cannot outweigh one bad step.

`min_form_rewards` rewrites the step rewards so that ordinary summed returns (REINFORCE++, GAE
with γ = λ = 1) give the min-form return exactly (T = 0), or PURE's softmin approximation
(T > 0). `group_process_advantages` is DeepSeekMath's process supervision for group
estimators: step rewards normalised over all steps of the G samples of a prompt, then summed
(or min-ed) over the steps still ahead of each token.
"""
import jax.numpy as jnp

from rlvr_jax.advantages.token import _reverse_scan


def _inputs(step_rewards, step_ends, mask):
    m = jnp.asarray(mask).astype(bool)
    e = jnp.asarray(step_ends).astype(bool) & m
    r = jnp.asarray(step_rewards).astype(jnp.float32)
    if r.shape != m.shape or e.shape != m.shape or m.ndim != 2:
        raise ValueError(f"step_rewards {r.shape}, step_ends {e.shape} and mask {m.shape} must "
                         "all be [B, T]")
    return jnp.where(e, r, 0.0), e, m


def _suffix_min(r, ends):
    """S_t = min_{t' ≥ t, ends} r_{t'} per row ([B, T]; +inf where no step is ahead)."""
    inf = jnp.full((r.shape[0],), jnp.inf, jnp.float32)

    def step(carry, inp):
        r_t, e_t = inp
        new = jnp.where(e_t, jnp.minimum(carry, r_t), carry)
        return new, new
    return _reverse_scan(step, inf, (r, ends))


def min_form_rewards(step_rewards, step_ends, mask, *, temperature=0.0):
    """Step rewards rewritten for min-form credit assignment (PURE).

    T = 0 (exact): at step end t_k, `r*_k = S_k − S_{k+1}` with `S_k = min_{j ≥ k} r_j` and
    `S_{K+1} = 0`, so the summed return `Σ_{j ≥ k} r*_j = S_k`, the minimum of the future step
    rewards, for every token up to the last step.
    T > 0 (PURE's transform): `r*_k = softmax_k(−r/T) · r_k` over the sequence's steps, whose
    sum tends to `min_k r_k` as T → 0.

    Args:
      step_rewards: `[B, T]` float, the reward of each step at the token ending it.
      step_ends: `[B, T]` bool, True at the tokens that end a step.
      mask: `[B, T]` response-token mask.
      temperature: T (0: exact).

    Returns:
      `[B, T]` float32, non-zero only at step ends.
    """
    r, e, _ = _inputs(step_rewards, step_ends, mask)
    if temperature > 0:
        logits = jnp.where(e, -r / temperature, -jnp.inf)
        top = jnp.max(jnp.where(e, logits, -1e30), axis=1, keepdims=True)
        w = jnp.where(e, jnp.exp(logits - top), 0.0)
        w = w / jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1e-30)
        return jnp.where(e, w * r, 0.0)
    s = _suffix_min(r, e)
    after = jnp.concatenate([s[:, 1:], jnp.full((r.shape[0], 1), jnp.inf, jnp.float32)], 1)
    after = jnp.where(jnp.isinf(after), 0.0, after)
    return jnp.where(e, s - after, 0.0)


def process_returns(step_rewards, step_ends, mask, *, form="sum"):
    """Per-token process return: `Σ_{k: t_k ≥ t} r_k` ("sum") or `min_{k: t_k ≥ t} r_k`
    ("min"); 0 at tokens after the last step and at masked positions.

    Args: step_rewards, step_ends, mask: `[B, T]` (see `min_form_rewards`); form: "sum" | "min".

    Returns: `[B, T]` float32.
    """
    r, e, m = _inputs(step_rewards, step_ends, mask)
    if form == "min":
        s = _suffix_min(r, e)
        return jnp.where(m & ~jnp.isinf(s), s, 0.0)
    if form != "sum":
        raise ValueError(f"form must be 'sum' or 'min', got {form!r}")

    def step(carry, inp):
        carry = carry + inp
        return carry, carry
    total = _reverse_scan(step, jnp.zeros((r.shape[0],), jnp.float32), r)
    return jnp.where(m, total, 0.0)


def group_process_advantages(step_rewards, step_ends, mask, *, num_samples, group_mask=None,
                             form="sum", eps=1e-6, scale=True):
    """DeepSeekMath process supervision: group-normalised step rewards, returned per token.

    Formula: for the steps of all G samples of a prompt, `r̃ = (r − mean) / (std + eps)`
    (unbiased std over the group's steps; a group whose step rewards are all equal, or that
    has fewer than 2 steps, gets r̃ = 0), then `A_t = process_returns(r̃, form)`. Paper: Shao
    et al. 2024, DeepSeekMath §4.1.3 (sum form); "min" applies PURE's min-form to r̃.

    Args:
      step_rewards, step_ends, mask: `[B, T]` with `B = P·G` (see `min_form_rewards`).
      num_samples: G.
      group_mask: optional `[P]` bool of valid groups (others get 0).
      form: "sum" | "min".
      eps: added to the std.
      scale: divide by the std (DeepSeekMath); False: `r̃ = r − mean` only, a group baseline
        as PRIME's (Cui et al. 2025) for dense rewards whose spread starts near 0 (the
        implicit PRM's: dividing by that spread would blow noise up to unit size).

    Returns:
      `[B, T]` float32 advantages, 0 at masked positions and after each sequence's last step.
    """
    r, e, m = _inputs(step_rewards, step_ends, mask)
    b, t = r.shape
    p = b // num_samples
    rg, eg = r.reshape(p, num_samples * t), e.reshape(p, num_samples * t).astype(jnp.float32)
    n = jnp.sum(eg, axis=1, keepdims=True)
    mean = jnp.sum(rg, axis=1, keepdims=True) / jnp.maximum(n, 1.0)
    var = jnp.sum(eg * jnp.square(rg - mean), axis=1, keepdims=True) / jnp.maximum(n - 1, 1.0)
    hi = jnp.max(jnp.where(eg > 0, rg, -jnp.inf), axis=1, keepdims=True)
    lo = jnp.min(jnp.where(eg > 0, rg, jnp.inf), axis=1, keepdims=True)
    flat = (n < 2) | (hi == lo)
    if group_mask is not None:
        flat = flat | ~jnp.asarray(group_mask).astype(bool).reshape(p, 1)
    norm = jnp.where(flat, 0.0, (rg - mean) / (jnp.sqrt(var) + eps if scale else 1.0))
    norm = jnp.where(eg > 0, norm, 0.0).reshape(b, t)
    return process_returns(norm, e, m, form=form)


def process_token_rewards(step_rewards, step_ends, mask, *, weight=1.0, form="sum",
                          temperature=0.0):
    """The process part of the per-token rewards of a token estimator (REINFORCE++, GAE):
    `α · r_k` at each step end ("sum"), or `α · r*_k` of `min_form_rewards` ("min"), so that
    the estimator's summed returns give the chosen credit assignment. Add it to
    `token_rewards(outcome, ...)`.

    Returns: `[B, T]` float32, non-zero only at step ends.
    """
    if form == "min":
        return weight * min_form_rewards(step_rewards, step_ends, mask, temperature=temperature)
    r, _, _ = _inputs(step_rewards, step_ends, mask)
    return weight * r
