"""Self-verification (RISE, "Trust, But Verify", Liu et al. 2025): the policy also learns to
verify its own solutions, inside the one compiled RL step.

    rl.verify_groups = K          # > 0: K groups of each batch become verification groups
    rl.verify_template = "\\nCorrect? "   # after the solution; the verdict follows it
    rl.verify_yes, rl.verify_no = "Y", "N"  # one token each

After the first pass is sampled and verified, K of the policy's own completions are drawn
(uniformly among those short enough for N: solution + template + one verdict token, a
correct and a wrong one in turn while both last: the verdicts cannot win on the base rate)
and each is verified G times by a second pass: prompt, then the completion (its stop token
dropped), then the template, then the policy samples a continuation whose first token is
its verdict. The G verification rows of a source take the place of one group of the batch,
chosen among the groups whose rewards are all equal first (they carry no policy gradient);
the row is prompt ++ [solution ++ template (loss-masked)] ++ continuation, cut to N, as a
hinted row is (`hints.splice`). Both kinds of rows are trained in the one update, each with
the true verifier's reward: a solving row its verdict, a verification row 1 if its verdict
token says what the verifier said of the solution (`yes` for a correct one, `no` for a wrong
one), else 0. Shapes: P' prompts, G rows each, B' = P'·G, N new tokens, Tp prompt width,
K verification groups.

Logged: `verify/accuracy` (share of verification rows whose verdict is right),
`verify/yes_rate`, `verify/source_correct` (share of verified solutions that are correct),
`verify/groups` (verification groups filled this step), `verify/solve_correct` (the solving
rows' share of correct answers; `reward/correct` counts both kinds), and counts to sum over
steps: `verify/rows_correct_source` / `verify/right_correct_source` (verification rows of a
correct solution / those saying yes), `verify/rows_wrong_source` / `verify/right_wrong_source`
(of a wrong one / those saying no): their balanced accuracy is ½(Σright_c/Σrows_c +
Σright_w/Σrows_w), which saying always yes (or always no) cannot raise above ½.

A policy that never writes a verdict token gets no verification signal (every verification
row scores 0). `sft.verify_fraction` teaches the format in the warm-up (`warmup_rows`): that
share of its rows become verifications of the worked solution (verdict yes) or of a copy
whose final answer is changed (verdict no), the loss on the verdict and its EOS only.
"""
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling
from rlvr_jax.data.tokenizers import single_token
from rlvr_jax.train import hints

Metrics = Dict[str, jax.Array]


class Verification(NamedTuple):
    """Which rows of a step verify (rows [B'] bool) and their rewards (reward [B'] float32:
    1 for a right verdict, 0 else; 0 on the solving rows)."""
    rows: jax.Array
    reward: jax.Array


def verify_prefix(rollout: sampling.Rollout, template, pad_id: int):
    """(prefix [B, N] int32, h [B] int32): each completion of `rollout` without its stop
    token (the last token of a `finished` row), then the template [Lt]: what a
    verification pass reads after the prompt; h = its length."""
    n = rollout.tokens.shape[1]
    length = (jnp.sum(rollout.model_mask != 0, axis=1) - rollout.finished).astype(jnp.int32)
    j = jnp.arange(n)[None, :]
    at = jnp.clip(j - length[:, None], 0, template.shape[0] - 1)
    prefix = jnp.where(j < length[:, None], rollout.tokens, jnp.where(
        j < (length + template.shape[0])[:, None], template[at], pad_id))
    return prefix.astype(jnp.int32), length + template.shape[0]


def choose(correct, rng, eligible, *, group_size: int, k: int
           ) -> Tuple[jax.Array, jax.Array, jax.Array]:
    """(slots [K], sources [K], filled [K] bool): the groups replaced (all-equal groups
    first), the completions verified and which slots have a source (fewer eligible ones
    than K). Sources are drawn uniformly among the `eligible` [B'] completions (solution +
    template + a verdict fit N), alternately a correct and a wrong one while both last, so
    that saying always yes (or no) is right on about half of them, not on the base rate."""
    p = correct.shape[0] // group_size
    c = correct.reshape(p, group_size)
    slots = jnp.argsort(~jnp.all(c == c[:, :1], axis=1), stable=True)[:k]
    draw = jax.random.uniform(rng, eligible.shape)
    rank = lambda m: jnp.argsort(jnp.argsort(jnp.where(m, draw, 2.0)))  # noqa: E731
    order = jnp.where(correct, 2 * rank(eligible & correct), 2 * rank(eligible & ~correct) + 1)
    sources = jnp.argsort(jnp.where(eligible, order, 4 * correct.shape[0]))[:k]
    return slots, sources, eligible[sources]


def self_verification(rollout: sampling.Rollout, correct, batch, rng, *, trace: Callable,
                      k: int, group_size: int, pad_id: int
                      ) -> Tuple[sampling.Rollout, Verification, Metrics]:
    """`rollout` with K groups replaced by verification rows (module doc), their
    `Verification` and metrics.

    correct: [B'] bool, the verifier's verdicts of `rollout`; batch: the step's batch with
    "verify_template" [P', Lt] (every row the template's ids) and "verify_verdicts" [P', 2]
    (the yes and no ids); trace(batch, rng) -> Rollout: the sampler."""
    b, n = rollout.tokens.shape
    g = group_size
    template, yes, no = batch["verify_template"][0], batch["verify_verdicts"][0, 0], \
        batch["verify_verdicts"][0, 1]
    prefix, h = verify_prefix(rollout, template, pad_id)
    slots, src, filled = choose(correct, jax.random.fold_in(rng, 2), h < n, group_size=g, k=k)
    prefix, h = prefix[src], h[src]
    src_prompt = src // g
    ptoks, pmask = hints.hinted_prompts(batch["prompt_tokens"][src_prompt],
                                        batch["prompt_mask"][src_prompt], prefix, h, pad_id)
    sub = {key: v[src_prompt] if getattr(v, "ndim", 0) and v.shape[0] == b // g else v
           for key, v in batch.items()}
    cont = trace({**sub, "prompt_tokens": ptoks, "prompt_mask": pmask}, jax.random.fold_in(rng, 3))
    new = hints.splice(jnp.repeat(prefix, g, axis=0), jnp.repeat(h, g), cont, pad_id)
    rows = (slots[:, None] * g + jnp.arange(g)[None, :]).reshape(-1)   # [K·G] rows replaced.
    base = rollout.replace(loss_mask=rollout.model_mask)
    new = new.replace(prompt_tokens=rollout.prompt_tokens[jnp.repeat(src, g)],
                      prompt_mask=rollout.prompt_mask[jnp.repeat(src, g)],
                      decode_steps=base.decode_steps if base.decode_steps is None
                      else base.decode_steps[rows])
    take = jnp.repeat(filled, g)
    out = jax.tree.map(lambda a, full: full.at[rows].set(jnp.where(
        take.reshape((-1,) + (1,) * (a.ndim - 1)), a, full[rows])), new, base)
    verdict = jnp.take_along_axis(new.tokens, jnp.minimum(jnp.repeat(h, g), n - 1)[:, None],
                                  axis=1)[:, 0]
    target = jnp.repeat(correct[src], g)
    right = jnp.where(target, verdict == yes, verdict == no) & (jnp.repeat(h, g) < n)
    is_verify = jnp.zeros((b,), bool).at[rows].set(take)
    reward = jnp.zeros((b,), jnp.float32).at[rows].set(jnp.where(take, right, 0.0))
    count = jnp.maximum(jnp.sum(take), 1).astype(jnp.float32)
    solving = ~is_verify
    metrics = {
        "verify/accuracy": jnp.sum(jnp.where(take, right, False)) / count,
        "verify/yes_rate": jnp.sum(jnp.where(take, verdict == yes, False)) / count,
        "verify/source_correct": jnp.sum(jnp.where(filled, correct[src], False))
        / jnp.maximum(jnp.sum(filled), 1).astype(jnp.float32),
        "verify/groups": jnp.sum(filled).astype(jnp.float32),
        "verify/solve_correct": jnp.sum(correct & solving) / jnp.maximum(
            jnp.sum(solving), 1).astype(jnp.float32)}
    for name, on in (("correct", target), ("wrong", ~target)):  # Counts: sum over steps.
        metrics[f"verify/rows_{name}_source"] = jnp.sum(take & on).astype(jnp.float32)
        metrics[f"verify/right_{name}_source"] = jnp.sum(take & on & right).astype(jnp.float32)
    return out, Verification(is_verify, reward), metrics


def verified_rollout(rollout: sampling.Rollout, state, batch, rng, *, sampler, scorer, rl):
    """(rollout, `Verification` or None, metrics) inside the RL step: rl.verify_groups'
    verification rows in place of K groups (none when it is 0); the verdicts that decide
    the targets are `scorer`'s of `rollout`."""
    if not rl.verify_groups:
        return rollout, None, {}
    sc = sampler.sampling_config
    return self_verification(
        rollout, hints.first_pass_correct(rollout, state, batch, scorer, sc.num_samples),
        batch, rng, trace=lambda b, r: sampler.trace(state.params, b, r)[0],
        k=rl.verify_groups, group_size=sc.num_samples, pad_id=sc.pad_id)


def with_verification(rewards, correct, verification):
    """(rewards [B'], correct [B'] bool) with the verification rows' in the verifier's
    place (unchanged without a `Verification`)."""
    if verification is None:
        return rewards, correct
    return (jnp.where(verification.rows, verification.reward, rewards),
            jnp.where(verification.rows, verification.reward > 0, correct))


def wrong_solution(example, rng: np.random.Generator) -> Optional[str]:
    """The worked solution with its final integer answer changed by a nonzero amount in
    [-9, 9]; None when the solution does not end with an integer answer."""
    sol, answer = example.solution, example.answer
    if not sol or example.answer_value is None or not sol.endswith(answer):
        return None
    delta = int(rng.choice([d for d in range(-9, 10) if d]))
    return sol[:len(sol) - len(answer)] + str(example.answer_value + delta)


def warmup_rows(examples, comp, comp_mask, targets, tokenizer, rl, fraction: float,
                rng: np.random.Generator):
    """The warm-up batch (comp [P, N] int32, comp_mask [P, N] bool, targets [P, N] int32)
    with about `fraction` of its rows turned into verifications: solution (the worked one,
    or `wrong_solution`'s, half each) ++ rl.verify_template ++ verdict ++ EOS, the loss on
    the verdict and the EOS only. Rows that would not fit N stay as they are."""
    template = tokenizer.encode(rl.verify_template)
    verdicts = (single_token(tokenizer, rl.verify_no, "rl.verify_no"),
                single_token(tokenizer, rl.verify_yes, "rl.verify_yes"))
    comp, comp_mask, targets = comp.copy(), comp_mask.copy(), targets.copy()
    n = comp.shape[1]
    for i, ex in enumerate(examples):
        if not ex.solution or rng.random() >= fraction:
            continue
        right = bool(rng.random() < 0.5)
        sol = ex.solution if right else wrong_solution(ex, rng)
        if sol is None:
            continue
        ids = tokenizer.encode(sol) + template + [verdicts[right], tokenizer.eos_id]
        if len(ids) > n:
            continue
        comp[i], comp_mask[i], targets[i] = tokenizer.pad_id, False, 0
        comp[i, :len(ids)], comp_mask[i, :len(ids)] = ids, True
        targets[i, len(ids) - 2:len(ids)] = 1
    return comp, comp_mask, targets
