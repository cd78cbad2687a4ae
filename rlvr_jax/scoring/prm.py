"""A learned process reward model (PRM) as a per-step device term, in the one program.

    prm = scoring.open_prm(path, tokenizer, weight=1.0, form="min")   # reads no weight
    params = scoring.load_reward_params(path, prm, placer.shardings)   # born sharded
    # config: reward.components="token,prm", reward.prm_path=path (docs/process_rewards.md)

A PRM is a reward model (`models.reward_model`: a trunk with a `score` head, saved as a
Hugging Face `*ForSequenceClassification` directory by `scripts/train_prm.py`) read at every
position (`models.reward_model.token_scores`): p_t = σ(score_t) is its probability that the
reasoning up to token t is right (oracle labels) or still reaches the answer (Monte-Carlo
labels). The term reads it at the tokens that end a step and returns `StepRewards` [B, N]:

- step ends on device (`device_step_ends`): a completion token that is not a boundary token
  and is followed by one (`boundary_ids`, e.g. the space between arithmetic's column sums,
  or the answer marker), before the first answer marker (`marker_ids`), in rows that hold a
  marker — the placement of the oracle's `scoring.process` (the token holding a step's last
  character) on the tasks whose steps are space-separated before ``####``;
- forms (`step_values`), each × weight: "sum" r_k = p_k; "min" PURE's min-form rewrite of
  p (`advantages.min_form_rewards`: summed returns give min_{j ≥ k} p_j); "progress" (PAV,
  Setlur et al. 2024, "Rewarding Progress") r_k = p_k − p_{k−1} with p_0 the PRM's value at
  the last prompt token.

Summed into each completion's reward (the default) the forms give Σ_k p_k, min_k p_k and
p_K − p_0; with `rl.process_source = "learned"` (and `rl.process_weight` α > 0) the steps
go to the process path instead, as the oracle's would (`advantages.process`). The PRM's
parameters are frozen in `TrainState.reward_params`, like a reward model's.
"""
import dataclasses
from typing import Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax import sampling
from rlvr_jax.advantages.process import min_form_rewards
from rlvr_jax.data.tokenizers import single_token
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.models.reward_model import token_scores
from rlvr_jax.scoring.process import StepRewards
from rlvr_jax.scoring.reward_model import open_reward_model, reward_params, scores_in_slices
from rlvr_jax.scoring.score import is_correct

FORMS = ("sum", "min", "progress")
Metrics = Dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class ProcessRewardModel:
    """A PRM's static description (hashable: part of the compiled program).

    Attributes:
      config: the PRM trunk's `ModelConfig`.
      boundary_ids: token ids that follow a step's last token.
      marker_ids: token ids of the answer marker (no step at or after it).
      weight: w of `r_k = w · form(p)_k`.
      form: one of `FORMS`.
      label: which of its K scores is the step score.
      microbatches: score the B sequences in this many slices (activation memory).
    """
    config: ModelConfig
    boundary_ids: Tuple[int, ...]
    marker_ids: Tuple[int, ...]
    weight: float = 1.0
    form: str = "sum"
    label: int = 0
    microbatches: int = 1

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"reward.prm_form must be one of {FORMS}, got {self.form!r}")


def device_step_ends(tokens: jax.Array, mask: jax.Array, *, boundary_ids, marker_ids
                     ) -> jax.Array:
    """[B, N] bool: the completion tokens that end a step (module docstring).

    Args: tokens, mask: [B, N] completion ids and the model's own tokens; boundary_ids,
    marker_ids: sequences of ids (a marker also ends the step before it)."""
    m = jnp.asarray(mask).astype(bool)
    is_b = jnp.isin(tokens, jnp.asarray(boundary_ids, jnp.int32)) & m
    is_m = jnp.isin(tokens, jnp.asarray(marker_ids, jnp.int32)) & m
    nxt = jnp.pad((is_b | is_m)[:, 1:], ((0, 0), (0, 1)))
    before_marker = jnp.cumsum(is_m, axis=1) == 0
    has_marker = jnp.any(is_m, axis=1, keepdims=True)
    return m & nxt & ~is_b & before_marker & has_marker


def step_values(probs: jax.Array, p0: jax.Array, ends: jax.Array, mask: jax.Array, *,
                form: str) -> jax.Array:
    """[B, N] float32 step rewards at `ends` (0 elsewhere) from the PRM's values probs [B, N]
    and its value before the first step p0 [B] (form "progress" only; module docstring)."""
    e = ends.astype(bool) & mask.astype(bool)
    p = probs.astype(jnp.float32)
    if form == "sum":
        return jnp.where(e, p, 0.0)
    if form == "min":
        return min_form_rewards(p, e, mask)
    if form != "progress":
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    cols = jnp.arange(p.shape[1], dtype=jnp.int32)[None, :]
    last = jax.lax.cummax(jnp.where(e, cols, -1), axis=1)  # Last step end at or before t.
    prev = jnp.pad(last[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    before = jnp.where(prev >= 0, jnp.take_along_axis(p, jnp.maximum(prev, 0), axis=1),
                       p0.astype(jnp.float32)[:, None])
    return jnp.where(e, p - before, 0.0)


def prm_probs(params, rollout: sampling.Rollout, *, prm: ProcessRewardModel
              ) -> Tuple[jax.Array, jax.Array]:
    """(p [B, N] at the completion's tokens, p_0 [B] at the last prompt token): σ of the PRM's
    per-position score of prompt ++ completion; no gradient. The prompt is left-padded
    (`Rollout`), so its last token sits at column Tp − 1."""
    tokens, attention = rollout.sequences()
    tp = rollout.prompt_tokens.shape[1]
    s = scores_in_slices(lambda t, a: token_scores(params, t, a, config=prm.config)[
        ..., prm.label], tokens, attention, prm.microbatches)
    p = jax.nn.sigmoid(s)
    return p[:, tp:], p[:, tp - 1]


def prm_metrics(values_p: jax.Array, ends: jax.Array, correct: jax.Array) -> Metrics:
    """prm/step_score (mean p over the step ends), prm/steps_per_completion, and
    prm/step_score_correct / _incorrect (over completions the verifier accepts / rejects;
    0 where there are none)."""
    e = ends.astype(jnp.float32)
    per_row = jnp.sum(e, axis=1)
    total = jnp.sum(values_p * e, axis=1)
    c = correct.astype(jnp.float32)
    n_c, n_i = jnp.sum(per_row * c), jnp.sum(per_row * (1.0 - c))
    return {"prm/step_score": jnp.sum(total) / jnp.maximum(jnp.sum(per_row), 1.0),
            "prm/steps_per_completion": jnp.mean(per_row),
            "prm/step_score_correct": jnp.sum(total * c) / jnp.maximum(n_c, 1.0),
            "prm/step_score_incorrect": jnp.sum(total * (1.0 - c)) / jnp.maximum(n_i, 1.0)}


def oracle_agreement(p: jax.Array, ends: jax.Array, oracle: StepRewards) -> Metrics:
    """prm/oracle_step_agreement: of the steps both the PRM's rule and the oracle end at the
    same token, the fraction where p >= 1/2 agrees with the oracle's verdict (>= 1/2);
    prm/oracle_steps_matched: those steps per completion."""
    both = ends.astype(bool) & oracle.ends.astype(bool)
    same = (p >= 0.5) == (oracle.values >= 0.5)
    n = jnp.sum(both)
    return {"prm/oracle_step_agreement": jnp.sum(both & same) / jnp.maximum(n, 1),
            "prm/oracle_steps_matched": n / both.shape[0]}


def prm_term(setup, weight):
    """The per-step device term `prm` (`setup.reward_model` a `ProcessRewardModel`, whose
    weight is the component's), else None. Its parameters are `x.reward_params`."""
    del weight
    prm = setup.reward_model
    if not isinstance(prm, ProcessRewardModel):
        return None

    def fn(rewards, x):
        del rewards
        ro = x.rollout
        p, p0 = prm_probs(reward_params(x.reward_params), ro, prm=prm)
        ends = device_step_ends(ro.tokens, ro.model_mask, boundary_ids=prm.boundary_ids,
                                marker_ids=prm.marker_ids)
        values = prm.weight * step_values(p, p0, ends, ro.model_mask, form=prm.form)
        metrics = prm_metrics(p, ends, is_correct(x.verdicts))
        if x.host_steps is not None:  # The oracle's verdicts (rl.process_oracle_metrics).
            metrics.update(oracle_agreement(p, ends, x.host_steps))
        return StepRewards(values=values, ends=ends), metrics
    return fn


def open_prm(path: str, tokenizer, *, weight: float = 1.0, form: str = "sum",
             boundary: str = " ", marker: str = "####", microbatches: int = 1,
             dtype: str = "float32", param_dtype: str = "float32", max_length: int = 0
             ) -> ProcessRewardModel:
    """The `ProcessRewardModel` of the PRM directory at `path` (checked like a reward model:
    `scoring.open_reward_model`; no weight is read), its step boundaries ("|"-separated,
    `boundary_ids`) and answer marker each one token of `tokenizer`."""
    rm = open_reward_model(path, weight=weight, microbatches=microbatches, dtype=dtype,
                           param_dtype=param_dtype, vocab_size=tokenizer.vocab_size,
                           max_length=max_length)
    return ProcessRewardModel(
        config=rm.config, weight=weight, form=form, microbatches=microbatches,
        boundary_ids=boundary_ids(tokenizer, boundary),
        marker_ids=(single_token(tokenizer, marker, "reward.prm_marker"),))


def boundary_ids(tokenizer, boundary: str) -> Tuple[int, ...]:
    """The ids of the "|"-separated boundary texts `boundary` (each one token), e.g. " " for
    arithmetic and countdown, " |<|<=" for sorting's comparison chains."""
    return tuple(single_token(tokenizer, b, "reward.prm_boundary") for b in boundary.split("|"))
