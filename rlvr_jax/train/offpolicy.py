"""Expert traces in the group (LUFFY, Yan et al. 2025; CHORD, Zhang et al. 2025).

    rl.offpolicy_per_group = k     # of the G rows of every group, the last k are the
                                   # prompt's worked solution (the task's, or a JSONL
                                   # `solution` field), scored by the same verifier
    rl.offpolicy_gamma = 0.1       # LUFFY's policy shaping f(x) = x / (x + γ)
    rl.offpolicy_sft_weight = μ    # CHORD: (1 − μ)·L_RL + μ·NLL of the expert tokens,
    rl.offpolicy_sft_weight_end, rl.offpolicy_sft_decay_steps   # μ decays linearly

The expert rows enter the group's advantages like any sample (an all-wrong group with a
correct expert row gets a signal). Their policy loss is LUFFY's mixed-policy objective with
policy shaping: the off-policy ratio π_θ(y_t)/π_expert(y_t), π_expert taken as 1 (LUFFY's
choice: the expert's probabilities are not known), shaped by f, unclipped:
ℓ_t = −Â·f(π_θ(y_t)), whose gradient −Â·γ/(π_θ + γ)²·∇π_θ keeps learning from tokens the
policy finds unlikely. On-policy rows keep the algorithm's loss. Shapes: P' prompts, G rows
per group, B' = P'·G, N new tokens.
"""
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling
from rlvr_jax.data import datasets

Metrics = Dict[str, jax.Array]


def solution_arrays(examples, tokenizer, max_new_tokens: int) -> Dict[str, np.ndarray]:
    """{"solution_tokens" [P', N] int32, "solution_mask" [P', N] int32}: the examples' worked
    solutions (EOS included) as completions; one-line ValueError naming the field when one
    is missing or longer than N."""
    missing = [ex.key for ex in examples if not ex.solution]
    if missing:
        raise ValueError(f"{missing[0]!r} has no worked solution (the task's, or a JSONL "
                         "`solution` field)")
    try:
        tokens, mask = datasets.completion_arrays([ex.solution for ex in examples], tokenizer,
                                                  max_len=max_new_tokens)
    except ValueError as e:
        raise ValueError(f"a worked solution does not fit sampling.max_new_tokens ({e})") from e
    return {"solution_tokens": tokens, "solution_mask": mask.astype(np.int32)}


def offpolicy_rows(num_rows: int, group_size: int, per_group: int) -> jax.Array:
    """[B] bool: the last `per_group` rows of every group of `group_size`."""
    return jnp.arange(num_rows) % group_size >= group_size - per_group


def with_experts(rollout: sampling.Rollout, batch, rl, group_size: int) -> sampling.Rollout:
    """`rollout` with rl.offpolicy_per_group expert rows per group (`insert_solutions`);
    unchanged when it is 0."""
    if not rl.offpolicy_per_group:
        return rollout
    return insert_solutions(rollout, batch, per_group=rl.offpolicy_per_group,
                            group_size=group_size)


def insert_solutions(rollout: sampling.Rollout, batch, *, per_group: int,
                     group_size: int) -> sampling.Rollout:
    """`rollout` with the last `per_group` rows of each group replaced by the prompt's worked
    solution (batch["solution_tokens"] / ["solution_mask"], [P', N]): their tokens and mask,
    sampler log-probs 0, finished (their EOS is in the mask)."""
    if not 0 < per_group < group_size:
        raise ValueError(f"rl.offpolicy_per_group must be in [1, num_samples - 1] = [1, "
                         f"{group_size - 1}] (at least one on-policy row), got {per_group}")
    off = offpolicy_rows(rollout.tokens.shape[0], group_size, per_group)
    rep = lambda x: jnp.repeat(x, group_size, axis=0)  # noqa: E731  [P', N] -> [B', N]
    sol, sol_mask = rep(batch["solution_tokens"]), rep(batch["solution_mask"])
    mask = jnp.where(off[:, None], sol_mask.astype(rollout.mask.dtype), rollout.mask)
    return rollout.replace(
        tokens=jnp.where(off[:, None], sol, rollout.tokens), mask=mask,
        logprobs=jnp.where(off[:, None], 0.0, rollout.logprobs),
        lengths=jnp.sum(mask, axis=1).astype(rollout.lengths.dtype),
        finished=jnp.where(off, True, rollout.finished))


def sft_weight(step, rl) -> jax.Array:
    """CHORD's μ at optimizer step `step`: offpolicy_sft_weight decaying linearly to
    offpolicy_sft_weight_end over offpolicy_sft_decay_steps (0: constant)."""
    mu0, mu1 = rl.offpolicy_sft_weight, rl.offpolicy_sft_weight_end
    if rl.offpolicy_sft_decay_steps <= 0:
        return jnp.asarray(mu0, jnp.float32)
    frac = jnp.clip(step.astype(jnp.float32) / rl.offpolicy_sft_decay_steps, 0.0, 1.0)
    return (mu0 + (mu1 - mu0) * frac).astype(jnp.float32)


def shaped_objective(per_token: jax.Array, logp: jax.Array, advantages: jax.Array,
                     offpolicy: jax.Array, mu: jax.Array, *, gamma: float) -> jax.Array:
    """Per-token loss [b, N]: on the expert rows (`offpolicy` [b] bool) LUFFY's shaped
    −Â·f(π_θ), f(x) = x / (x + γ), instead of `per_token` (the algorithm's loss); then
    CHORD's (1 − μ)·that + μ·(−log π_θ) on expert tokens (`mu` [b], 0: LUFFY alone).
    advantages: [b] or [b, N]; logp: [b, N] with gradient."""
    a = advantages if advantages.ndim == 2 else advantages[:, None]
    p = jnp.exp(logp)
    off = offpolicy[:, None]
    rl_tok = jnp.where(off, -a * p / (p + gamma), per_token)
    return (1.0 - mu[:, None]) * rl_tok + jnp.where(off, mu[:, None] * -logp, 0.0)


def group_metrics(rewards: jax.Array, valid: jax.Array, per_group: int) -> Metrics:
    """rollout/all_wrong_fraction: of the valid groups, those whose on-policy rows all score
    < 0.5 (before an expert row helps them); with expert rows also offpolicy/reward_on and
    offpolicy/reward_off, the mean reward of on- and off-policy rows. rewards: [P, G]."""
    g = rewards.shape[1]
    on = rewards[:, :g - per_group]
    v = valid.astype(jnp.float32)
    n = jnp.maximum(jnp.sum(v), 1.0)
    out = {"rollout/all_wrong_fraction": jnp.sum(v * (jnp.max(on, axis=1) < 0.5)) / n}
    if per_group:
        out["offpolicy/reward_on"] = jnp.sum(v[:, None] * on) / (n * on.shape[1])
        out["offpolicy/reward_off"] = jnp.sum(v[:, None] * rewards[:, g - per_group:]) / (
            n * per_group)
    return out
