"""Hints: groups that fail are sampled again with a prefix of the worked solution (GHPO,
"Adaptive Guidance Accelerates RL", SEELE, HiLL), inside the one compiled RL step.

    rl.hint_mode = "off" | "on_fail" | "schedule"
    rl.hint_fraction = 0.5     # of the worked solution's tokens (its EOS excluded)
    rl.hint_decay_steps = 0    # > 0: the fraction decays linearly to 0 over that many
                               # optimizer steps
    rl.hint_groups = 0         # K > 0: the second pass samples K groups (the first K that
                               # need a hint); 0: all P'

on_fail: the groups whose G samples the verifier all rejects are sampled again, each prompt
followed by the first ⌊fraction·len⌋ tokens of its solution; "schedule": every group is,
with the decaying fraction. The hinted row's completion is hint ++ continuation (cut to N):
the policy is trained on the continuation in the context of prompt + hint, the hint tokens
are masked from the loss (`Rollout.loss_mask`) and the verifier scores the whole completion.
Static shapes: the second pass samples K prompts (rl.hint_groups; all P' when 0) at width
Tp + N under a `lax.cond` that runs it only when some group needs a hint, so a step decodes
at most (P' + K)·G rows (`hint/decoded_rows` counts the second pass's). Guide's importance
correction against the hint-free context is not implemented. Shapes: P' prompts, G rows
each, B' = P'·G, N new tokens, Tp prompt width.
"""
from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax import sampling, scoring

MODES = ("off", "on_fail", "schedule")
Metrics = Dict[str, jax.Array]


def hint_fraction(step, rl) -> jax.Array:
    """rl.hint_fraction, decaying linearly to 0 over rl.hint_decay_steps (0: constant)."""
    if rl.hint_decay_steps <= 0:
        return jnp.asarray(rl.hint_fraction, jnp.float32)
    left = jnp.clip(1.0 - step.astype(jnp.float32) / rl.hint_decay_steps, 0.0, 1.0)
    return (rl.hint_fraction * left).astype(jnp.float32)


def hinted_prompts(prompt_tokens, prompt_mask, hint_tokens, h, pad_id: int
                   ) -> Tuple[jax.Array, jax.Array]:
    """Left-padded [P', Tp + N] prompts: each prompt followed by the first h[p] tokens of
    `hint_tokens` [P', N] (a stable sort moves the padding to the left)."""
    n = hint_tokens.shape[1]
    full = jnp.concatenate([prompt_tokens, hint_tokens], axis=1)
    mask = jnp.concatenate([prompt_mask.astype(jnp.int32),
                            (jnp.arange(n)[None, :] < h[:, None]).astype(jnp.int32)], axis=1)
    order = jnp.argsort(mask, axis=1, stable=True)
    mask = jnp.take_along_axis(mask, order, axis=1)
    tokens = jnp.where(mask > 0, jnp.take_along_axis(full, order, axis=1), pad_id)
    return tokens.astype(prompt_tokens.dtype), mask.astype(prompt_mask.dtype)


def splice(hint_tokens, h, cont: sampling.Rollout, pad_id: int) -> sampling.Rollout:
    """Rows [B', N] of hint ++ continuation: tokens j < h[b] from `hint_tokens`, then the
    continuation's, cut to N; `loss_mask` only on the continuation's tokens."""
    n = cont.tokens.shape[1]
    j = jnp.arange(n)[None, :]
    src = jnp.clip(j - h[:, None], 0, n - 1)
    take = lambda x: jnp.take_along_axis(x, src, axis=1)  # noqa: E731
    is_hint = j < h[:, None]
    from_cont = (~is_hint) & (take(cont.mask) > 0)
    mask = (is_hint | from_cont).astype(cont.mask.dtype)
    return cont.replace(
        tokens=jnp.where(is_hint, hint_tokens, jnp.where(from_cont, take(cont.tokens), pad_id)),
        mask=mask, loss_mask=from_cont.astype(cont.mask.dtype),
        logprobs=jnp.where(from_cont, take(cont.logprobs), 0.0),
        lengths=jnp.sum(mask, axis=1).astype(cont.lengths.dtype),
        finished=cont.finished & (cont.lengths + h <= n))


def hint_groups(need, k: int) -> Tuple[jax.Array, jax.Array]:
    """(idx [K], hinted [K]): the K groups the second pass samples (the first K of `need`
    [P'] bool, then groups that need none; all P' in order when K >= P') and which of them
    get a hint."""
    p = need.shape[0]
    idx = jnp.arange(p) if k >= p else jnp.argsort(~need, stable=True)[:k]
    return idx, need[idx]


def with_hints(rollout: sampling.Rollout, correct, batch, rng, step, *, trace: Callable,
               rl, group_size: int, pad_id: int) -> Tuple[sampling.Rollout, Metrics]:
    """`rollout` with the groups that need a hint (rl.hint_mode) replaced by hinted rows,
    at most rl.hint_groups of them (0: any number).

    correct: [B'] bool, the verifier's verdicts of `rollout`; batch: the step's batch with
    "solution_tokens" / "solution_mask" [P', N]; trace(batch, rng) -> Rollout: the sampler.
    """
    p, g = batch["prompt_tokens"].shape[0], group_size
    need = ~jnp.any(correct.reshape(p, g), axis=1)
    if rl.hint_mode == "schedule":
        need = jnp.ones_like(need)
    frac = hint_fraction(step, rl)
    sol_len = jnp.sum(batch["solution_mask"], axis=1) - 1  # Its EOS is never a hint.
    h = jnp.where(need, jnp.floor(frac * sol_len).astype(jnp.int32), 0)
    idx, hinted = hint_groups(h > 0, rl.hint_groups or p)
    h = jnp.where(hinted, h[idx], 0)                       # [K]
    rows = (idx[:, None] * g + jnp.arange(g)[None, :]).reshape(-1)  # [K·G] rows of `rollout`
    take = jnp.repeat(hinted, g)
    sub = {key: v[idx] if getattr(v, "ndim", 0) and v.shape[0] == p else v
           for key, v in batch.items()}
    base = rollout.replace(loss_mask=rollout.model_mask)

    def hint_pass(_):
        tokens, mask = hinted_prompts(sub["prompt_tokens"], sub["prompt_mask"],
                                      sub["solution_tokens"], h, pad_id)
        cont = trace({**sub, "prompt_tokens": tokens, "prompt_mask": mask}, rng)
        new = splice(jnp.repeat(sub["solution_tokens"], g, axis=0), jnp.repeat(h, g), cont,
                     pad_id)
        old = jax.tree.map(lambda a: a[rows], base)
        new = new.replace(prompt_tokens=old.prompt_tokens, prompt_mask=old.prompt_mask,
                          decode_steps=old.decode_steps)
        return jax.tree.map(lambda a, b, full: full.at[rows].set(jnp.where(
            take.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)), new, old, base)

    any_hint = jnp.any(hinted)
    out = jax.lax.cond(any_hint, hint_pass, lambda _: base, None)
    return out, {"hint/needed_group_fraction": jnp.mean(need.astype(jnp.float32)),
                 "hint/hinted_group_fraction": jnp.sum(hinted.astype(jnp.float32)) / p,
                 "hint/fraction": frac,
                 "hint/decoded_rows": any_hint.astype(jnp.float32) * idx.shape[0] * g}


def hinted_rollout(rollout: sampling.Rollout, state, batch, rng, *, sampler, scorer, rl):
    """(`rollout` with rl.hint_mode's hinted groups, their metrics) inside the RL step; the
    verdicts that pick the failed groups are `scorer`'s of `rollout` (a `Sampler`, a
    `scoring.Scorer`, the state's parameters)."""
    if rl.hint_mode == "off":
        return rollout, {}
    sc = sampler.sampling_config
    return with_hints(
        rollout, first_pass_correct(rollout, state, batch, scorer, sc.num_samples), batch,
        jax.random.fold_in(rng, 1), state.step,
        trace=lambda b, r: sampler.trace(state.params, b, r)[0], rl=rl,
        group_size=sc.num_samples, pad_id=sc.pad_id)


def first_pass_correct(rollout: sampling.Rollout, state, batch, scorer, group_size: int):
    """[B'] bool: `scorer`'s verdicts of the step's first pass (what picks the groups a
    second pass rewrites: hints here, self-verification in `train/verify.py`)."""
    x = scoring.Inputs(rollout, answers=jnp.repeat(batch["answers"], group_size, axis=0),
                       group_size=group_size, reward_params=state.reward_params,
                       rubric=scoring.Rubric.of_batch(batch, group_size))
    return scorer.score_device(x, None)[2]

