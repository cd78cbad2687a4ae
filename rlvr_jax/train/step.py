"""The RL iteration, readable top to bottom: sample → score → select groups → log-probs →
advantages → optimise.

One RL step is composed from a `rlvr_jax.sampler.Sampler` and a `scoring.Scorer`
(`make_step`): ONE jitted program when both are traceable (`make_rl_step`), else the same
stages split at one seam (`make_split_step`: sample → the scorer's host stage → one compiled
program of the device terms and the update), with the same keys (`step_keys`). The
supervised warm-up step is `train/sft.py`. The data between the update's stages is typed
(`train/experience.py`); the algorithm's functions are resolved once from the `RLConfig`
(`train/algorithms.py`); the per-micro-batch losses live in `train/objective.py`, their
micro-batch loops (left-padded or packed) in `train/microbatch.py` and the rollout
statistics in `train/metrics.py`.

Shapes: P' prompts in a batch (P' = P · oversample with dynamic sampling), P groups that
enter the update, G samples per prompt, B = P·G sequences, Tp prompt tokens, N new tokens.
"""
import functools
from typing import Callable, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import optax

from rlvr_jax import advantages as adv_lib
from rlvr_jax import losses, models, sampling, scoring, tree_rollouts
from rlvr_jax.models import ModelConfig, lora, transformer
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import distill, hints, microbatch, objective, offpolicy, reference, verify
from rlvr_jax.train.algorithms import Algorithm, resolve
from rlvr_jax.train.experience import Experience, Groups, experience_from, take_rows
from rlvr_jax.train.metrics import advantage_metrics, length_by_correctness, rollout_metrics
from rlvr_jax.train.rl_config import RLConfig
from rlvr_jax.train.state import TrainState, join_trainable, reference_of, split_trainable

Batch = Dict[str, jax.Array]
Metrics = Dict[str, jax.Array]


# ----------------------------------------------------------------------------- rng

def step_keys(rng: jax.Array) -> Tuple[jax.Array, jax.Array, jax.Array]:
    """(the state's next rng, the sampling rng, the update rng) of one RL step.

    The one rng discipline of both forms: `make_rl_step` splits inside its program,
    `make_split_step` (and `make_sample_fn` → host scoring → `make_update_fn(...)(..., rng)`)
    outside.
    """
    rng, sample_rng, update_rng = jax.random.split(rng, 3)
    return rng, sample_rng, update_rng


# ----------------------------------------------------------------------------- update stages

def select_update_groups(rollout: sampling.Rollout, rewards: jax.Array, num_samples: int,
                         rl: RLConfig, steps: Optional[scoring.StepRewards] = None
                         ) -> Tuple[Groups, Metrics]:
    """The P groups that enter the update (dynamic sampling keeps informative ones first).

    Args:
      rollout: B' = P'·G sequences, G = num_samples consecutive rows per prompt.
      rewards: [B'] float32; steps: the process rewards [B', N] of the rollout, or None.

    Returns:
      (Groups of B = P·G rows, rewards [P, G], valid [P] (and their steps); metrics).
    """
    r = rewards.reshape(-1, num_samples)
    if r.shape[0] == rl.num_prompts and not rl.dynamic_sampling:
        keep = jnp.ones((r.shape[0],), bool)
        return Groups(rollout, r, keep, steps), {
            "rollout/kept_group_fraction": jnp.ones((), jnp.float32)}
    if not rl.dynamic_sampling:
        raise ValueError(f"batch has {r.shape[0]} prompts but num_prompts={rl.num_prompts} "
                         "(only dynamic sampling may oversample)")
    keep = adv_lib.dynamic_sampling_mask(r)
    groups, valid = adv_lib.select_groups(keep, rl.num_prompts)
    rows = (groups[:, None] * num_samples + jnp.arange(num_samples)[None, :]).reshape(-1)
    kept = jnp.mean(keep.astype(jnp.float32))
    metrics = {"rollout/kept_group_fraction": kept,
               # Of the sampled groups (after selection every valid group has variance).
               "rollout/sampled_zero_variance_fraction": 1.0 - kept,
               "rollout/all_correct_fraction": jnp.mean(
                   (jnp.min(r, axis=1) > 0.5).astype(jnp.float32))}
    taken = take_rows(rollout, rows)
    if rollout.fork_parent is not None:  # Tree rollouts: parents by their rows' new ids.
        taken = taken.replace(fork_parent=tree_rollouts.regroup_parents(taken.fork_parent,
                                                                        num_samples))
    return Groups(taken, jnp.take(r, groups, axis=0), valid,
                  None if steps is None else take_rows(steps, rows)), metrics


def score_experience(state: TrainState, exp: Experience, *, rl: RLConfig,
                     model_config: ModelConfig, temperature: float, proximal=None
                     ) -> Tuple[Experience, Optional[jax.Array]]:
    """Adds the log-probs the algorithm needs, without gradient, one micro-batch at a time.

    proximal: the weights whose log-probs are old_logp (asynchronous rollouts: those the
    sampler used, `train/async_step.py`); None: `state.params`.

    Returns:
      (exp with old_logp / entropy / ref_logp / old_values where needed, the sampling
      policy's log-probs [B, N] when computed (KL in the reward needs them) else None).
    """
    def logprobs_of(params, with_entropy=False):
        return microbatch.scoring_passes(lambda p, x: objective.logprobs_of(
            p, x, model_config=model_config, temperature=temperature,
            chunk=rl.logprob_chunk, with_entropy=with_entropy), exp, rl, params)

    want_entropy = rl.entropy_keep_fraction < 1.0
    current = None
    if rl.needs_old_logprobs or want_entropy:  # One pass for both.
        current, ent = logprobs_of(state.params if proximal is None else proximal,
                                   with_entropy=want_entropy)
        exp = exp.replace(old_logp=current if rl.needs_old_logprobs else None, entropy=ent)
    if rl.needs_reference:
        ref = reference.to_device_memory(reference_of(state))
        exp = exp.replace(ref_logp=logprobs_of(ref)[0])
        if rl.kl_in_reward and current is None:
            current = logprobs_of(state.params)[0]
    if rl.needs_value:
        exp = exp.replace(old_values=microbatch.scoring_passes(lambda p, x: objective.values_of(
            p, x, model_config=model_config), exp, rl, state.value_params))
    return exp, current


def kl_in_reward(groups: Groups, exp: Experience, current: jax.Array, kl_coef, *,
                 algo: Algorithm, rl: RLConfig) -> Tuple[Groups, jax.Array, Metrics]:
    """The per-token KL(π_old‖π_ref) of the algorithm's estimator, then the reward shaping
    of the scoring room (`scoring.kl_in_reward`).

    Returns:
      (groups with shaped rewards, per-token KL [B, N], metrics incl. the observed KL).
    """
    del rl
    kl_tok = algo.kl(current, exp.ref_logp, exp.mask)
    rewards, metrics = scoring.kl_in_reward(groups.rewards, kl_tok, exp.mask, exp.row_valid,
                                            kl_coef, per_token=algo.kl_reward_per_token)
    return groups.replace(rewards=rewards), kl_tok, metrics


def advantages_stage(groups: Groups, exp: Experience, *, algo: Algorithm,
                     kl_tok: Optional[jax.Array] = None, kl_coef=0.0
                     ) -> Tuple[Experience, Metrics]:
    """Advantages ([B] or [B, N]) and GAE returns into the experience, with their metrics;
    process rewards (`groups.steps`) enter as token rewards or a process advantage."""
    steps = groups.steps
    if algo.tree_advantages is not None:  # Prefix-tree credit (rl.tree_advantage).
        return algo.tree_advantages(groups.rewards, groups.valid, exp)
    if algo.turn_advantages is not None:  # Multi-turn credit (rl.turn_advantage).
        a, returns = algo.turn_advantages(
            groups.rewards, groups.rollout.turn_ids, exp.mask, old_values=exp.old_values,
            turn_rewards=None if steps is None else steps.values, group_mask=groups.valid)
        return exp.replace(advantages=a, returns=returns), advantage_metrics(a, exp.mask)
    if algo.token_advantages is None:
        a = algo.group_advantages(groups.rewards, groups.valid).reshape(-1)
        if steps is None:
            return exp.replace(advantages=a), advantage_metrics(a, exp.row_valid)
        returns = None
    else:
        extra = {} if steps is None or algo.process_rewards is None else {
            "process_rewards": algo.process_rewards(steps.values, steps.ends, exp.mask)}
        a, returns = algo.token_advantages(
            groups.rewards, exp.mask, groups.valid,
            kl=kl_tok if algo.kl_reward_per_token else None, kl_coef=kl_coef,
            old_values=exp.old_values, **extra)
    if steps is not None and algo.process_advantages is not None:  # Outcome + process mix.
        a = adv_lib.broadcast_to_tokens(a, exp.mask) if a.ndim == 1 else a
        a = a + algo.process_advantages(steps.values, steps.ends, exp.mask, groups.valid)
    return exp.replace(advantages=a, returns=returns), advantage_metrics(a, exp.mask)


def guidance_stage(state: TrainState, groups: Groups, exp: Experience, current, *,
                   rl: RLConfig, model_config: ModelConfig, temperature: float
                   ) -> Tuple[Experience, Metrics]:
    """Expert rows (rl.offpolicy_per_group: their flags and CHORD's μ into `exp`,
    `train/offpolicy.py`) and the teacher's per-token term (rl.teacher, `train/distill.py`);
    with rollout/all_wrong_fraction and their metrics. current: the policy's log-probs
    [B, N] of the sampled tokens, or None."""
    k, b = rl.offpolicy_per_group, exp.tokens.shape[0]
    metrics = offpolicy.group_metrics(groups.rewards, groups.valid, k)
    if k:
        exp = exp.replace(offpolicy=offpolicy.offpolicy_rows(b, groups.rewards.shape[1], k),
                          sft_weight=jnp.full((b,), offpolicy.sft_weight(state.step, rl)))
        metrics["offpolicy/sft_weight"] = exp.sft_weight[0]
    if rl.teacher:
        exp, distill_metrics = distill.teacher_stage(state, exp, current, rl=rl,
                                                     model_config=model_config,
                                                     temperature=temperature)
        metrics.update(distill_metrics)
    return exp, metrics


def _minibatch_counts(mb: Experience) -> Dict[str, jax.Array]:
    """Global normalisers of a minibatch (each at least 1)."""
    counts = losses.global_counts(mb.mask)
    # Dr.GRPO's B counts the rows of groups in the update, not those dynamic sampling dropped.
    counts["num_rows"] = jnp.sum(mb.row_valid.astype(jnp.float32))
    return jax.tree.map(lambda c: jnp.maximum(c, 1.0), counts)


def _minibatch_order(rng: jax.Array, b: int, rl: RLConfig) -> jax.Array:
    """[epochs · minibatches, b / minibatches]: each epoch's rows, permuted if minibatched."""
    perms = [jax.random.permutation(jax.random.fold_in(rng, e), b) if rl.minibatches > 1
             else jnp.arange(b) for e in range(rl.epochs)]
    return jnp.stack(perms).reshape(rl.epochs * rl.minibatches, b // rl.minibatches)


def optimise(state: TrainState, exp: Experience, rng: jax.Array, *, algo: Algorithm,
             model_config: ModelConfig, rl: RLConfig, tx: optax.GradientTransformation,
             temperature: float, value_tx: Optional[optax.GradientTransformation] = None
             ) -> Tuple[TrainState, Metrics]:
    """μ epochs × minibatches optimizer steps, each accumulated over micro-batches.

    With a value model (gae), each minibatch also takes one step of the value optimizer
    on the same rows.
    """
    b = exp.tokens.shape[0]
    if rl.entropy_mask_random and exp.entropy is not None:  # Uniform scores: a random share.
        exp = exp.replace(entropy=jax.random.uniform(rng, exp.entropy.shape))
    order = _minibatch_order(rng, b, rl)
    policy_objective = functools.partial(
        objective.policy_objective, model_config=model_config, algo=algo,
        temperature=temperature, logprob_chunk=rl.logprob_chunk, tis_cap=rl.tis_cap,
        tis_level=rl.tis_level, tis_mode=rl.tis_mode, offpolicy_gamma=rl.offpolicy_gamma,
        mismatch=rl.max_staleness > 0)
    trainable, frozen = split_trainable(state.params)  # LoRA: gradients of the adapters only.
    grad_fn = jax.value_and_grad(
        lambda p, *args, **kw: policy_objective(join_trainable(p, frozen), *args, **kw),
        has_aux=True)
    value_grad_fn = jax.value_and_grad(functools.partial(
        objective.value_objective, model_config=model_config, algo=algo), has_aux=True)
    specs = lora.specs_like(transformer.param_logical_axes(model_config), trainable,
                            model_config)  # The gradients' FSDP shards (LoRA: the adapters').
    value_specs = None if algo.value_loss is None else models.value_logical_axes(model_config)

    def minibatch_step(carry, rows):
        params, opt_state, vparams, vopt_state = carry
        mb = take_rows(exp, rows)
        counts = _minibatch_counts(mb)
        if mb.entropy is not None:  # The cutoff is over the minibatch's valid tokens.
            mb = mb.replace(entropy=None, entropy_mask=losses.high_entropy_mask(
                mb.entropy, mb.mask, keep_fraction=rl.entropy_keep_fraction))
        accumulate, padded = microbatch.micro_batches(mb, rl)
        loss, grads, mets = accumulate(grad_fn, params, counts=counts, specs=specs)
        mets["update/padded_fraction"] = padded
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        mets.update({"train/loss": loss, "train/grad_norm": optax.tree.norm(grads)})
        if mb.entropy_mask is not None:
            mets["train/entropy_kept_fraction"] = jnp.sum(mb.entropy_mask) / counts["num_tokens"]
        if algo.value_loss is not None:
            vloss, vgrads, vmets = accumulate(value_grad_fn, vparams, counts=counts,
                                              specs=value_specs)
            vupdates, vopt_state = value_tx.update(vgrads, vopt_state, vparams)
            vparams = optax.apply_updates(vparams, vupdates)
            mets.update(vmets)
            mets.update({"value/loss": vloss, "value/grad_norm": optax.tree.norm(vgrads)})
        return (params, opt_state, vparams, vopt_state), mets

    carry = (trainable, state.opt_state, state.value_params, state.value_opt_state)
    (params, opt_state, vparams, vopt_state), mets = jax.lax.scan(minibatch_step, carry, order)
    mets = jax.tree.map(jnp.mean, mets)
    mets["train/update_norm"] = optax.tree.norm(jax.tree.map(jnp.subtract, params, trainable))
    return state.replace(params=join_trainable(params, frozen), opt_state=opt_state,
                         value_params=vparams, value_opt_state=vopt_state,
                         step=state.step + rl.epochs * rl.minibatches), mets


def _check_update_inputs(state: TrainState, rl: RLConfig, num_rows: int, value_tx) -> None:
    if rl.needs_value and (value_tx is None or state.value_params is None):
        raise ValueError("advantage='gae' needs state.value_params and a value_tx optimizer")
    if rl.adaptive_kl and state.kl_coef is None:
        raise ValueError("an adaptive KL coefficient (kl_target) needs state.kl_coef "
                         "(create_train_state(..., kl_coef=rl.kl_coef))")
    if num_rows % (rl.minibatches * rl.microbatches):
        raise ValueError(f"{num_rows} sequences do not split into {rl.minibatches} "
                         f"minibatches × {rl.microbatches} micro-batches")


def update(state: TrainState, rollout: sampling.Rollout, rewards: jax.Array, rng: jax.Array, *,
           num_samples: int, model_config: ModelConfig, rl: RLConfig,
           tx: optax.GradientTransformation, temperature: float,
           value_tx: Optional[optax.GradientTransformation] = None,
           steps: Optional[scoring.StepRewards] = None, proximal=None
           ) -> Tuple[TrainState, Metrics]:
    """Everything after scoring: groups → log-probs (→ values) → advantages → optimise.

    Args:
      state: the train state (with value_params / value_opt_state for gae, and kl_coef
        for an adaptive KL coefficient).
      rollout: the sampler's B' = P'·G sequences.
      rewards: [B'] float32 (from an on-device or a host verifier).
      rng: for minibatch shuffling.
      num_samples: G.
      temperature: the sampling temperature (log-probs are of logits / T).
      value_tx: the value model's optimizer (gae only).
      steps: process rewards [B', N] (`scoring.StepRewards`; rl.process_weight > 0).
      proximal: the weights of the old log-probs (`score_experience`); None: state.params.

    Returns:
      (new state, flat metrics dict of scalars).
    """
    algo = resolve(rl)
    if rl.process and steps is None:
        raise ValueError("rl.process_weight > 0 needs the process rewards (steps=)")
    per_step = rl.process or rl.turn_advantage != "none"  # Step or turn rewards [B, N].
    groups, metrics = select_update_groups(rollout, rewards, num_samples, rl,
                                           steps if per_step else None)
    _check_update_inputs(state, rl, groups.rollout.tokens.shape[0], value_tx)
    exp, current = score_experience(state, experience_from(groups), rl=rl,
                                    model_config=model_config, temperature=temperature,
                                    proximal=proximal)
    kl_coef = state.kl_coef if rl.adaptive_kl else rl.kl_coef
    kl_tok = None
    if rl.needs_reference and rl.kl_in_reward:
        groups, kl_tok, kl_metrics = kl_in_reward(groups, exp, current, kl_coef, algo=algo, rl=rl)
        metrics.update(kl_metrics)
    exp, adv_metrics = advantages_stage(groups, exp, algo=algo, kl_tok=kl_tok, kl_coef=kl_coef)
    exp, guide_metrics = guidance_stage(state, groups, exp, current, rl=rl,
                                        model_config=model_config, temperature=temperature)
    metrics.update(guide_metrics)
    metrics.update(rollout_metrics(groups.rollout, groups.rewards, groups.valid))
    metrics.update(adv_metrics)
    state, train_metrics = optimise(state, exp, rng, algo=algo, model_config=model_config,
                                    rl=rl, tx=tx, temperature=temperature, value_tx=value_tx)
    metrics.update(train_metrics)
    if rl.adaptive_kl:  # verl's observed KL: per-token mean of each sequence, averaged.
        state = state.replace(kl_coef=losses.adaptive_kl_coef(
            kl_coef, metrics["kl/reward_kl"], target=rl.kl_target, horizon=rl.kl_horizon,
            num_steps=exp.tokens.shape[0]))
    return state, metrics


# ----------------------------------------------------------------------------- programs

def score_and_update(state: TrainState, rollout: sampling.Rollout, episodes, answers: jax.Array,
                     host: Optional[scoring.HostScores], rng: jax.Array, *,
                     scorer: scoring.Scorer, num_samples: int, model_config: ModelConfig,
                     rl: RLConfig, tx: optax.GradientTransformation, temperature: float,
                     value_tx: Optional[optax.GradientTransformation] = None, proximal=None,
                     batch=None, verification=None):
    """The device terms (`scorer.score_device`, after the host stage's `host` if any) then
    `update`: (state, metrics, samples {"tokens" [B', N], "mask" [B', N], "rewards" [B'],
    "correct" [B'] bool}); traceable. answers: [P'] int32 (None: no term reads them);
    proximal: the weights of the old log-probs (None: the state's); batch: the RL batch
    (a rubric judge reads its rubric); verification: self-verification's rows and rewards
    (`train/verify.py`), which replace the verifier's on those rows."""
    answers = None if answers is None else jnp.repeat(answers, num_samples, axis=0)
    x = scoring.Inputs(rollout, answers=answers,
                       group_size=num_samples, episodes=episodes,
                       reward_params=state.reward_params, params=state.params,
                       model_config=model_config,
                       rubric=scoring.Rubric.of_batch(batch or {}, num_samples))
    turns = None  # Per-step device rewards [B, N] (turns, learned steps) per step, or summed.
    if rl.device_steps:
        rewards, reward_metrics, correct, turns = scorer.score_device(x, host, with_steps=True)
    else:
        rewards, reward_metrics, correct = scorer.score_device(x, host)
    rewards, correct = verify.with_verification(rewards, correct, verification)
    steps = turns if rl.device_steps else None if host is None else host.steps
    state, metrics = update(state, rollout, rewards, rng, num_samples=num_samples,
                            model_config=model_config, rl=rl, tx=tx, temperature=temperature,
                            value_tx=value_tx, steps=steps, proximal=proximal)
    reward_params, learned = scorer.learn(x, correct)  # Online-learned terms (implicit PRM).
    state = state.replace(reward_params=reward_params)
    metrics.update(reward_metrics)
    metrics.update(learned)
    metrics.update(length_by_correctness(rollout, correct))
    return state, metrics, {"tokens": rollout.tokens, "mask": rollout.mask, "rewards": rewards,
                            "correct": correct}


def make_sample_fn(model_config: ModelConfig, sampling_config: sampling.SamplingConfig, *,
                   decode_shardings=None):
    """Jitted `(params, batch, rng) -> Rollout` (plain sampling; a `Sampler` for episodes)."""
    sampler = Sampler(model_config, sampling_config, decode_shardings=decode_shardings)
    return jax.jit(lambda params, batch, rng: sampler.trace(params, batch, rng)[0])


def make_update_fn(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                   rl: RLConfig, tx: optax.GradientTransformation, *,
                   value_tx: Optional[optax.GradientTransformation] = None):
    """Jitted `(state, rollout, rewards[B'], rng=None, steps=None) -> (state, metrics)`: the
    update of rewards scored elsewhere.

    rng: the update's key (`step_keys`; then `state.rng` is left as given); without it
    the key is split off `state.rng`. steps: process rewards (`scoring.StepRewards`).
    value_tx: the value model's optimizer (advantage="gae" only).
    """
    @functools.partial(jax.jit, donate_argnums=(0,))
    def update_fn(state, rollout, rewards, rng=None, steps=None):
        if rng is None:  # Without a key from `step_keys`, split one off the state's.
            state_rng, rng = jax.random.split(state.rng)
            state = state.replace(rng=state_rng)
        return update(state, rollout, rewards, rng,
                      num_samples=sampling_config.num_samples, model_config=model_config,
                      rl=rl, tx=tx, temperature=sampling_config.temperature,
                      value_tx=value_tx, steps=steps)
    return update_fn


def make_rl_step(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                 rl: RLConfig, tx: optax.GradientTransformation, verifier: Callable = None, *,
                 scorer: Optional[scoring.Scorer] = None, sampler: Optional[Sampler] = None,
                 value_tx: Optional[optax.GradientTransformation] = None,
                 return_rollout: bool = False, decode_shardings=None, env=None):
    """ONE jitted program: sample → score on device → advantages → updates.

    Args:
      verifier: jittable fn(tokens [B, N], mask [B, N], answers [B]) -> [B] float32,
        e.g. `rlvr_jax.tasks.make_token_verifier(tokenizer)` (with `rl.overlong_*`:
        `scoring.token_scorer`); or give `scorer`, a traceable `scoring.Scorer`.
      sampler: a traceable `rlvr_jax.sampler.Sampler` (default: plain sampling with
        `decode_shardings`, `sampler.decode_layout`, or episodes with `env`).
      env: a `multiturn.DeviceEnv` for the default sampler and scorer: multi-turn episodes
        with its tool inside the program, its per-turn rewards added (the `env` term).
      value_tx: the value model's optimizer (advantage="gae" only).
      return_rollout: also return {"tokens" [B', N], "mask" [B', N], "rewards" [B'],
        "correct" [B'] bool} of the sampled completions.

    Returns:
      rl_step(state, batch) -> (state, metrics) with batch = {"prompt_tokens" [P', Tp],
      "prompt_mask" [P', Tp], "answers" [P'] int32}; (state, metrics, samples) with
      return_rollout. The state is donated.
    """
    if scorer is None:
        if verifier is None:
            raise ValueError("make_rl_step: give a token verifier or a scorer")
        scorer = scoring.token_scorer(verifier, rl=rl, num_samples=sampling_config.num_samples,
                                      max_new_tokens=sampling_config.max_new_tokens, env=env)
    sampler = sampler or Sampler(model_config, sampling_config, env=env,
                                 decode_shardings=decode_shardings)
    if not sampler.fuses_with(scorer):
        raise ValueError("make_rl_step: one program needs a traceable sampler and scorer (no "
                         "host environment or host terms); make_step splits the others")
    finish = functools.partial(score_and_update, scorer=scorer, model_config=model_config,
                               num_samples=sampling_config.num_samples, rl=rl, tx=tx,
                               temperature=sampling_config.temperature, value_tx=value_tx)

    @functools.partial(jax.jit, donate_argnums=(0,))
    def rl_step(state: TrainState, batch: Batch):
        rng, sample_rng, update_rng = step_keys(state.rng)
        rollout, episodes = sampler.trace(state.params, batch, sample_rng)
        rollout = offpolicy.with_experts(rollout, batch, rl, sampling_config.num_samples)
        rollout, hint_metrics = hints.hinted_rollout(rollout, state, batch, sample_rng,
                                                     sampler=sampler, scorer=scorer, rl=rl)
        rollout, checks, verify_metrics = verify.verified_rollout(
            rollout, state, batch, sample_rng, sampler=sampler, scorer=scorer, rl=rl)
        state, metrics, samples = finish(state.replace(rng=rng), rollout, episodes,
                                         batch["answers"], None, update_rng, batch=batch,
                                         verification=checks)
        metrics.update(hint_metrics)
        metrics.update(verify_metrics)
        return (state, metrics, samples) if return_rollout else (state, metrics)
    return rl_step


def make_split_step(sampler: Sampler, scorer: scoring.Scorer, rl: RLConfig,
                    tx: optax.GradientTransformation, *,
                    value_tx: Optional[optax.GradientTransformation] = None):
    """The same stages split at one seam, for a sampler or scorer that needs the host:
    sample (compiled, or host episodes) → the scorer's host stage → one compiled program
    of the device terms and the update; the same keys as `make_rl_step` (`step_keys`).

    Returns: step(state, batch, examples) -> (state, metrics, samples) with `examples` the
    batch's P' examples. The state is donated.
    """
    sc = sampler.sampling_config
    if rl.hint_mode != "off" or rl.verify_groups:
        raise ValueError("rl.hint_mode and rl.verify_groups need the one-program step (a "
                         "traceable sampler and scorer: no host terms or host environment)")
    scorer.start()  # Its host pool, if any: started before the first step's samples.
    finish = jax.jit(functools.partial(
        score_and_update, scorer=scorer, model_config=sampler.model_config,
        num_samples=sc.num_samples, rl=rl, tx=tx, temperature=sc.temperature,
        value_tx=value_tx), donate_argnums=(0,))

    def split_step(state: TrainState, batch: Batch, examples):
        rng, sample_rng, update_rng = step_keys(state.rng)
        rollout, episodes, sample_metrics = sampler(state.params, batch, sample_rng, examples)
        rollout = offpolicy.with_experts(rollout, batch, rl, sc.num_samples)
        host = scorer.score_host(rollout, examples, sc.num_samples)
        state, metrics, samples = finish(state.replace(rng=rng), rollout, episodes,
                                         batch.get("answers"), host, update_rng, batch=batch)
        metrics.update(sample_metrics)
        return state, metrics, samples
    return split_step


def make_step(sampler: Sampler, scorer: scoring.Scorer, rl: RLConfig,
              tx: optax.GradientTransformation, *,
              value_tx: Optional[optax.GradientTransformation] = None):
    """The RL step of a sampler and a scorer: `make_rl_step`'s one program when they fuse
    (`Sampler.fuses_with`: both traceable), else `make_split_step`. Returns step(state, batch, examples) -> (state,
    metrics, samples); the state is donated."""
    if sampler.fuses_with(scorer):
        program = make_rl_step(sampler.model_config, sampler.sampling_config, rl, tx,
                               scorer=scorer, sampler=sampler, value_tx=value_tx,
                               return_rollout=True)
        return lambda state, batch, examples=(): program(state, batch)
    return make_split_step(sampler, scorer, rl, tx, value_tx=value_tx)
