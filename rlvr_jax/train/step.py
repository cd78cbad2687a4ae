"""The RL iteration, readable top to bottom: sample → score → advantages → update.

`make_rl_step` composes the pieces into ONE jitted program for on-device
verifiers. For host verifiers (math-verify, code sandboxes) use the split path:
`make_sample_fn` → score on the host → `make_update_fn`; it runs the same
update code. `make_sft_step` is the supervised warm-up step.

Shapes: P' prompts in a batch (P' = P · oversample with dynamic sampling),
P groups that enter the update, G samples per prompt, B = P·G sequences,
Tp prompt tokens, N new tokens.
"""
import dataclasses
import functools
from typing import Callable, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import optax

from rlvr_jax import advantages as adv_lib
from rlvr_jax import losses, sampling
from rlvr_jax.models import ModelConfig, sequence_logprobs
from rlvr_jax.models.value import value_forward
from rlvr_jax.rewards.length import overlong_penalty_jnp
from rlvr_jax.train.state import TrainState

Batch = Dict[str, jax.Array]
Metrics = Dict[str, jax.Array]

ADVANTAGES = ("grpo", "rloo", "grpo_passk", "ngrpo", "w_reinforce", "gpg",
              "reinforce_pp", "reinforce_pp_baseline", "gae")
# Estimators that give per-token advantages [B, N] (the others give one per sequence).
TOKEN_ADVANTAGES = ("reinforce_pp", "reinforce_pp_baseline", "gae")
POLICY_LOSSES = ("ppo_clip", "gspo", "cispo", "reinforce")
GPG_ALPHAS = ("paper", "verl")


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """Static hyperparameters of the RL update (hashable: a static jit argument).

    Attributes:
      num_prompts: P, the groups that enter the update. Without dynamic sampling
        it must equal the batch's prompts; with it, the batch holds more.
      advantage: "grpo" | "rloo" | "grpo_passk" | "ngrpo" | "w_reinforce" | "gpg"
        (sequence level) or "reinforce_pp" | "reinforce_pp_baseline" | "gae" (token level).
      advantage_scale: for grpo: "group" (GRPO), "batch" (Lite-PPO), "none" (Dr.GRPO).
      advantage_eps: the std's epsilon.
      gpg_alpha: GPG's scale α = B / n with n = "paper": samples in groups with
        non-zero advantage; "verl": samples with non-zero reward.
      gamma, lam: discount and GAE λ (reinforce_pp uses gamma; gae both).
      whiten_advantages: gae: whiten the advantages over the valid tokens of the batch.
      value_clip: gae: value clipping range around the old values (None: no clipping).
      positive_weight, negative_weight: scale positive / negative advantages
        (negative-sample reinforcement: positive_weight=0).
      policy_loss: "ppo_clip" | "gspo" | "cispo" | "reinforce".
      eps_low, eps_high: clip range (CISPO: eps_high is the weight cap).
      dual_clip: optional dual-clip constant c > 1 (ppo_clip).
      aggregation: a `losses.MODES` name.
      kl_coef, kl_kind: KL(π‖π_ref) term; 0 disables the reference model.
      kl_in_reward: put the (stop-gradient) KL in the reward instead of the loss: summed
        over the sequence for sequence-level estimators, −β·KL_t per token for token-level ones.
      kl_target, kl_horizon: with kl_in_reward, adapt β towards a target per-token KL
        (`losses.adaptive_kl_coef`); β then lives in `TrainState.kl_coef`.
      entropy_coef: entropy bonus coefficient (loss −= coef · H).
      entropy_keep_fraction: < 1 keeps only that fraction of highest-entropy
        tokens in the policy loss ("Beyond the 80/20 rule").
      epochs, minibatches, microbatches: μ passes over the batch, each split
        into optimizer steps, each accumulated over micro-batches.
      dynamic_sampling: keep groups with non-zero reward variance first (DAPO).
      overlong_buffer, overlong_penalty: DAPO soft overlong shaping (0 disables).
      tis_cap: truncated importance sampling cap on trainer/sampler ratios.
      logprob_chunk: sequence chunk of the log-prob computation.
    """
    num_prompts: int
    advantage: str = "grpo"
    advantage_scale: str = "group"
    advantage_eps: float = 1e-6
    gpg_alpha: str = "paper"
    gamma: float = 1.0
    lam: float = 1.0
    whiten_advantages: bool = True
    value_clip: Optional[float] = None
    positive_weight: float = 1.0
    negative_weight: float = 1.0
    policy_loss: str = "ppo_clip"
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: Optional[float] = None
    aggregation: str = "seq-mean-token-mean"
    kl_coef: float = 0.0
    kl_kind: str = "k3"
    kl_in_reward: bool = False
    kl_target: Optional[float] = None
    kl_horizon: int = 10000
    entropy_coef: float = 0.0
    entropy_keep_fraction: float = 1.0
    epochs: int = 1
    minibatches: int = 1
    microbatches: int = 1
    dynamic_sampling: bool = False
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0
    tis_cap: Optional[float] = None
    logprob_chunk: int = 128

    def __post_init__(self):
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage must be one of {ADVANTAGES}, got {self.advantage!r}")
        if self.policy_loss not in POLICY_LOSSES:
            raise ValueError(f"policy_loss must be one of {POLICY_LOSSES}, "
                             f"got {self.policy_loss!r}")
        if self.aggregation not in losses.MODES:
            raise ValueError(f"aggregation must be one of {losses.MODES}, "
                             f"got {self.aggregation!r}")
        if self.kl_kind not in losses.KINDS:
            raise ValueError(f"kl_kind must be one of {losses.KINDS}, got {self.kl_kind!r}")
        for name in ("num_prompts", "epochs", "minibatches", "microbatches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.entropy_keep_fraction <= 1.0:
            raise ValueError("entropy_keep_fraction must be in (0, 1]")
        if self.gpg_alpha not in GPG_ALPHAS:
            raise ValueError(f"gpg_alpha must be one of {GPG_ALPHAS}, got {self.gpg_alpha!r}")
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.value_clip is not None and self.value_clip <= 0:
            raise ValueError(f"value_clip must be > 0 or None, got {self.value_clip}")
        if self.kl_target is not None:
            if not (self.kl_in_reward and self.kl_coef > 0):
                raise ValueError("kl_target (adaptive KL) needs kl_in_reward=True and kl_coef > 0")
            if self.kl_target <= 0 or self.kl_horizon < 1:
                raise ValueError("kl_target must be > 0 and kl_horizon >= 1")

    @property
    def needs_old_logprobs(self) -> bool:
        """One epoch of one minibatch is on-policy: the old log-prob is sg(logp)."""
        return self.epochs > 1 or self.minibatches > 1

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0.0

    @property
    def needs_value(self) -> bool:
        """PPO with GAE trains a value model (`TrainState.value_params`)."""
        return self.advantage == "gae"

    @property
    def token_level(self) -> bool:
        return self.advantage in TOKEN_ADVANTAGES

    @property
    def adaptive_kl(self) -> bool:
        """β adapts (`TrainState.kl_coef` holds it)."""
        return self.kl_target is not None


# ----------------------------------------------------------------------------- pieces

def score_on_device(rollout: sampling.Rollout, answers: jax.Array, *,
                    verifier: Callable, rl: RLConfig,
                    max_new_tokens: int) -> Tuple[jax.Array, Metrics]:
    """Rewards [B] from a jittable token verifier plus optional overlong shaping.

    Args:
      rollout: the sampler's output for B = P'·G sequences.
      answers: [P'] int32 reference answers (repeated over the G samples here).
      verifier: fn(tokens [B, N], mask [B, N], answers [B]) -> [B] float32.
    """
    g = rollout.tokens.shape[0] // answers.shape[0]
    correct = verifier(rollout.tokens, rollout.mask, jnp.repeat(answers, g, axis=0))
    reward = correct
    metrics = {"reward/correct": jnp.mean(correct)}
    if rl.overlong_buffer > 0:
        penalty = rl.overlong_penalty * overlong_penalty_jnp(
            rollout.lengths, max_length=max_new_tokens, buffer_length=rl.overlong_buffer)
        reward = reward + penalty
        metrics["reward/overlong"] = jnp.mean(penalty)
    return reward, metrics


def group_advantages(rewards: jax.Array, group_mask: jax.Array, rl: RLConfig) -> jax.Array:
    """Sequence advantages [P, G] from rewards [P, G] with the configured estimator."""
    if rl.advantage == "grpo":
        a = adv_lib.grpo(rewards, scale=rl.advantage_scale, eps=rl.advantage_eps,
                         group_mask=group_mask)
    elif rl.advantage == "rloo":
        a = adv_lib.rloo(rewards, group_mask=group_mask)
    elif rl.advantage == "grpo_passk":
        a = adv_lib.grpo_passk(rewards, group_mask=group_mask)
    elif rl.advantage == "ngrpo":
        a = adv_lib.ngrpo(rewards, eps=rl.advantage_eps, group_mask=group_mask)
    elif rl.advantage == "gpg":
        a = gpg_advantages(rewards, group_mask, alpha=rl.gpg_alpha)
    elif rl.advantage == "w_reinforce":
        a = adv_lib.w_reinforce(rewards, positive_weight=rl.positive_weight)
    else:
        raise ValueError(f"{rl.advantage!r} is a token-level estimator: use token_advantages")
    if rl.advantage != "w_reinforce" and (rl.positive_weight != 1.0 or rl.negative_weight != 1.0):
        a = adv_lib.sign_weighted(a, positive_weight=rl.positive_weight,
                                  negative_weight=rl.negative_weight)
    return jnp.where(group_mask[:, None], a, 0.0)


def gpg_advantages(rewards: jax.Array, group_mask: jax.Array, *,
                   alpha: str = "paper") -> jax.Array:
    """GPG advantage `A_i = α·(r_i − mean_g(r))` [P, G] (no std; all-equal groups give 0).

    α = B / n rescales the gradient for the samples that carry no signal: B = the samples
    of the valid groups, and n = (alpha="paper") the samples in groups with non-zero
    advantage (Chu et al. 2025, "GPG", its gradient correction), or (alpha="verl") the
    samples with a non-zero reward (verl `adv_estimator=gpg`). For 0/1 rewards the two
    differ: an all-correct group counts for verl, not for the paper.

    Args:
      rewards: [P, G] float rewards. group_mask: [P] bool valid groups.
    """
    if alpha not in GPG_ALPHAS:
        raise ValueError(f"alpha must be one of {GPG_ALPHAS}, got {alpha!r}")
    r = rewards.astype(jnp.float32)
    g = r.shape[1]
    zero = adv_lib.zero_variance_groups(r) | ~group_mask
    centered = jnp.where(zero[:, None], 0.0, r - jnp.mean(r, axis=1, keepdims=True))
    total = jnp.sum(group_mask.astype(jnp.float32)) * g
    if alpha == "paper":
        n = jnp.sum((~zero).astype(jnp.float32)) * g
    else:
        n = jnp.sum(((r != 0) & group_mask[:, None]).astype(jnp.float32))
    return centered * (total / jnp.maximum(n, 1.0))


def token_advantages(rewards: jax.Array, mask: jax.Array, valid: jax.Array, rl: RLConfig, *,
                     kl: Optional[jax.Array] = None, kl_coef=0.0,
                     old_values: Optional[jax.Array] = None
                     ) -> Tuple[jax.Array, Optional[jax.Array]]:
    """Per-token advantages [B, N] (and GAE returns) of the token-level estimators.

    Args:
      rewards: [P, G] outcome rewards. mask: [B, N] response mask (0 for invalid groups).
      valid: [P] bool valid groups.
      kl: optional [B, N] stop-gradient KL(π_old‖π_ref) per token, put in the reward as
        −kl_coef·KL_t (reinforce_pp, gae).
      old_values: [B, N] values of the old policy's states (gae).

    Returns:
      (advantages [B, N], returns [B, N] for gae else None), 0 at masked positions.
    """
    g = rewards.shape[1]
    row_valid = jnp.repeat(valid, g)
    if rl.advantage == "reinforce_pp_baseline":
        return adv_lib.reinforce_plus_plus_baseline(rewards, mask, group_mask=valid), None
    per_token = adv_lib.token_rewards(rewards.reshape(-1), mask, kl=kl, kl_coef=kl_coef)
    if rl.advantage == "reinforce_pp":
        return adv_lib.reinforce_plus_plus(per_token, mask, gamma=rl.gamma,
                                           sequence_mask=row_valid), None
    if rl.advantage != "gae":
        raise ValueError(f"{rl.advantage!r} is not a token-level estimator")
    a, returns = adv_lib.gae(per_token, old_values, mask, gamma=rl.gamma, lam=rl.lam)
    if rl.whiten_advantages:
        m = mask.astype(bool) & row_valid[:, None]
        a = adv_lib.whiten(a, m)
    return a, returns


def _select(tree, index):
    return jax.tree.map(lambda x: jnp.take(x, index, axis=0), tree)


def select_groups(rollout: sampling.Rollout, rewards: jax.Array, num_samples: int,
                  rl: RLConfig) -> Tuple[sampling.Rollout, jax.Array, jax.Array, Metrics]:
    """The P groups that enter the update (dynamic sampling keeps informative ones first).

    Args:
      rollout: B' = P'·G sequences, G = num_samples consecutive rows per prompt.
      rewards: [B'] float32.

    Returns:
      (rollout of B = P·G rows, rewards [P, G], valid [P] bool, metrics).
    """
    r = rewards.reshape(-1, num_samples)
    if r.shape[0] == rl.num_prompts and not rl.dynamic_sampling:
        keep = jnp.ones((r.shape[0],), bool)
        return rollout, r, keep, {"rollout/kept_group_fraction": jnp.ones((), jnp.float32)}
    if not rl.dynamic_sampling:
        raise ValueError(f"batch has {r.shape[0]} prompts but num_prompts={rl.num_prompts} "
                         "(only dynamic sampling may oversample)")
    keep = adv_lib.dynamic_sampling_mask(r)
    groups, valid = adv_lib.select_groups(keep, rl.num_prompts)
    rows = (groups[:, None] * num_samples + jnp.arange(num_samples)[None, :]).reshape(-1)
    metrics = {"rollout/kept_group_fraction": jnp.mean(keep.astype(jnp.float32)),
               # Of the sampled groups (after selection every valid group has variance).
               "rollout/sampled_zero_variance_fraction": 1.0 - jnp.mean(keep.astype(jnp.float32)),
               "rollout/all_correct_fraction": jnp.mean(
                   (jnp.min(r, axis=1) > 0.5).astype(jnp.float32))}
    return _select(rollout, rows), jnp.take(r, groups, axis=0), valid, metrics


def rollout_metrics(rollout: sampling.Rollout, rewards: jax.Array, advantages: jax.Array,
                    valid: jax.Array) -> Metrics:
    """Reward, advantage and length statistics over the valid groups.

    Args: rollout (B rows), rewards [P, G], advantages [P, G], valid [P].
    """
    g = rewards.shape[1]
    metrics = {f"rollout/{k}": v for k, v in adv_lib.group_metrics(rewards, valid).items()}
    row_valid = jnp.repeat(valid, g)
    a = advantages.reshape(-1)
    n_valid = jnp.maximum(jnp.sum(row_valid), 1)
    lengths = jnp.sum(rollout.mask, axis=1)
    valid_tokens = jnp.sum(jnp.where(row_valid, lengths, 0))  # The tokens that are trained on.
    metrics.update({
        "rollout/valid_tokens": valid_tokens,
        "rollout/response_length": valid_tokens / n_valid,
        "rollout/response_length_max": jnp.max(lengths),
        "rollout/truncation_rate": jnp.mean((~rollout.finished).astype(jnp.float32)),
        "advantages/mean": jnp.sum(jnp.where(row_valid, a, 0.0)) / n_valid,
        "advantages/abs_mean": jnp.sum(jnp.where(row_valid, jnp.abs(a), 0.0)) / n_valid,
        "advantages/min": jnp.where(jnp.any(row_valid),
                                    jnp.min(jnp.where(row_valid, a, jnp.inf)), 0.0),
        "advantages/max": jnp.where(jnp.any(row_valid),
                                    jnp.max(jnp.where(row_valid, a, -jnp.inf)), 0.0),
    })
    return metrics


# ----------------------------------------------------------------------------- losses

def _completion_logprobs(params, tokens, attention, *, model_config, temperature, chunk,
                         n_new, with_entropy):
    logp, ent = sequence_logprobs(params, tokens, attention, config=model_config,
                                  temperature=temperature, chunk_size=chunk,
                                  with_entropy=with_entropy)
    logp = logp[:, -n_new:]
    return logp, (None if ent is None else ent[:, -n_new:])


def policy_loss(params, mb: Dict[str, jax.Array], counts: Dict[str, jax.Array], *,
                model_config: ModelConfig, rl: RLConfig, temperature: float
                ) -> Tuple[jax.Array, Metrics]:
    """The loss of one micro-batch, normalised by the counts of its whole minibatch.

    Summing these losses (and their gradients) over the micro-batches of a
    minibatch gives exactly the minibatch's loss.
    """
    n_new = mb["mask"].shape[1]
    # The entropy is always computed: it is logged, and cheap next to the LM-head matmul.
    logp, ent = _completion_logprobs(params, mb["tokens"], mb["attention"],
                                     model_config=model_config, temperature=temperature,
                                     chunk=rl.logprob_chunk, n_new=n_new, with_entropy=True)
    mask = mb["mask"]
    old = mb["old_logp"] if "old_logp" in mb else jax.lax.stop_gradient(logp)
    adv = mb["advantages"]
    loss_mask = mask
    if rl.entropy_keep_fraction < 1.0:
        loss_mask = mb["entropy_mask"]
    if rl.policy_loss == "ppo_clip":
        per_token, metrics = losses.ppo_clip(logp, old, adv, loss_mask, eps_low=rl.eps_low,
                                             eps_high=rl.eps_high, dual_clip=rl.dual_clip)
    elif rl.policy_loss == "gspo":
        per_token, metrics = losses.gspo(logp, old, adv, loss_mask, eps_low=rl.eps_low,
                                         eps_high=rl.eps_high)
    elif rl.policy_loss == "cispo":
        per_token, metrics = losses.cispo(logp, old, adv, loss_mask, eps_high=rl.eps_high)
    else:
        per_token, metrics = losses.reinforce(logp, adv, loss_mask)
        zero = jnp.zeros((), jnp.float32)  # No clipping: no token loses its gradient to it.
        metrics.update(clip_frac_low=zero, clip_frac_high=zero, clip_frac=zero)
    metrics = {f"loss/{k}": v for k, v in metrics.items()}
    if rl.tis_cap is not None:
        w, tis_metrics = losses.truncated_importance_weights(old, mb["sampler_logp"], mask,
                                                             cap=rl.tis_cap)
        per_token = per_token * w
        metrics.update({f"tis/{k}": v for k, v in tis_metrics.items()})
    if rl.needs_reference:  # KL(π_θ‖π_ref): a loss term, or (kl_in_reward) only logged.
        kl_tok = losses.kl(logp, mb["ref_logp"], kind=rl.kl_kind, mask=mask)
        if not rl.kl_in_reward:
            per_token = per_token + rl.kl_coef * kl_tok
        metrics["loss/kl"] = jnp.sum(jax.lax.stop_gradient(kl_tok)) / jnp.maximum(
            jnp.sum(mask), 1)
    if rl.entropy_coef > 0:
        per_token = per_token - rl.entropy_coef * jnp.where(mask, ent, 0.0)
    num_sequences = counts["num_rows"] if rl.aggregation == "seq-mean-token-sum-norm" else \
        counts["num_sequences"]
    loss = losses.aggregate(per_token, mask, rl.aggregation, num_tokens=counts["num_tokens"],
                            num_sequences=num_sequences, max_len=n_new)
    # Diagnostics on this micro-batch (means over its valid tokens).
    m = mask.astype(jnp.float32)
    nt = jnp.maximum(jnp.sum(m), 1.0)
    sampler_diff = jnp.where(mask, mb["sampler_logp"] - jax.lax.stop_gradient(logp), 0.0)
    metrics["train/sampler_trainer_kl"] = jnp.sum(sampler_diff) / nt
    metrics["train/sampler_trainer_max_abs_diff"] = jnp.max(jnp.abs(sampler_diff))
    metrics["train/entropy"] = jnp.sum(jnp.where(mask, ent, 0.0)) / nt
    return loss, metrics


# ----------------------------------------------------------------------------- update

def _map_microbatches(fn, data: Dict[str, jax.Array], num: int):
    """Apply fn to `num` equal row slices of data with lax.map; concatenate the outputs."""
    split = jax.tree.map(lambda x: x.reshape((num, x.shape[0] // num) + x.shape[1:]), data)
    out = jax.lax.map(fn, split)
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)


def value_loss(value_params, mb: Dict[str, jax.Array], counts: Dict[str, jax.Array], *,
               model_config: ModelConfig, rl: RLConfig) -> Tuple[jax.Array, Metrics]:
    """Clipped value loss of one micro-batch, token-mean over its whole minibatch.

    The value of completion token n is the value model's output at the position before
    it (the state in which the token was chosen).
    """
    n_new = mb["mask"].shape[1]
    v = value_forward(value_params, mb["tokens"], mb["attention"],
                      config=model_config)[:, -n_new - 1:-1]
    per_token, metrics = losses.value_loss(v, mb["old_values"], mb["returns"], mb["mask"],
                                           clip=rl.value_clip)
    loss = losses.aggregate(per_token, mb["mask"], "token-mean", num_tokens=counts["num_tokens"])
    return loss, {f"value/{k}": x for k, x in metrics.items()}


def _accumulate(grad_fn, params, micro, counts):
    """(Σ loss, Σ grads, mean metrics) of grad_fn over the leading (micro-batch) axis."""
    def micro_step(acc, x):
        (loss, m), g = grad_fn(params, x, counts)
        return jax.tree.map(jnp.add, acc, (loss, g)), m

    zeros = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, params))
    (loss, grads), mets = jax.lax.scan(micro_step, zeros, micro)
    return loss, grads, jax.tree.map(jnp.mean, mets)


def _scan_updates(state: TrainState, experience: Dict[str, jax.Array], rng: jax.Array, *,
                  model_config: ModelConfig, rl: RLConfig, tx: optax.GradientTransformation,
                  temperature: float,
                  value_tx: Optional[optax.GradientTransformation] = None
                  ) -> Tuple[TrainState, Metrics]:
    """μ epochs × minibatches optimizer steps, each accumulated over micro-batches.

    With a value model (gae), each minibatch also takes one step of the value optimizer
    on the same rows.
    """
    b = experience["tokens"].shape[0]
    mb_size = b // rl.minibatches
    perms = [jax.random.permutation(jax.random.fold_in(rng, e), b) if rl.minibatches > 1
             else jnp.arange(b) for e in range(rl.epochs)]
    order = jnp.stack(perms).reshape(rl.epochs * rl.minibatches, mb_size)
    grad_fn = jax.value_and_grad(functools.partial(
        policy_loss, model_config=model_config, rl=rl, temperature=temperature), has_aux=True)
    value_grad_fn = jax.value_and_grad(functools.partial(
        value_loss, model_config=model_config, rl=rl), has_aux=True)

    def minibatch_step(carry, rows):
        params, opt_state, vparams, vopt_state = carry
        mb = _select(experience, rows)
        counts = losses.global_counts(mb["mask"])
        # Dr.GRPO's B counts the rows of groups in the update, not those dynamic sampling dropped.
        counts["num_rows"] = jnp.sum(mb["row_valid"].astype(jnp.float32))
        counts = jax.tree.map(lambda c: jnp.maximum(c, 1.0), counts)
        if rl.entropy_keep_fraction < 1.0:  # The cutoff is over the minibatch's valid tokens.
            mb["entropy_mask"] = losses.high_entropy_mask(
                mb.pop("entropy"), mb["mask"], keep_fraction=rl.entropy_keep_fraction)
        micro = jax.tree.map(
            lambda x: x.reshape((rl.microbatches, mb_size // rl.microbatches) + x.shape[1:]), mb)
        loss, grads, mets = _accumulate(grad_fn, params, micro, counts)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        mets["train/loss"] = loss
        mets["train/grad_norm"] = optax.tree.norm(grads)
        if rl.entropy_keep_fraction < 1.0:
            mets["train/entropy_kept_fraction"] = jnp.sum(mb["entropy_mask"]) / counts[
                "num_tokens"]
        if rl.needs_value:
            vloss, vgrads, vmets = _accumulate(value_grad_fn, vparams, micro, counts)
            vupdates, vopt_state = value_tx.update(vgrads, vopt_state, vparams)
            vparams = optax.apply_updates(vparams, vupdates)
            mets.update(vmets)
            mets["value/loss"] = vloss
            mets["value/grad_norm"] = optax.tree.norm(vgrads)
        return (params, opt_state, vparams, vopt_state), mets

    carry = (state.params, state.opt_state, state.value_params, state.value_opt_state)
    (params, opt_state, vparams, vopt_state), mets = jax.lax.scan(minibatch_step, carry, order)
    mets = jax.tree.map(jnp.mean, mets)
    mets["train/update_norm"] = optax.tree.norm(
        jax.tree.map(jnp.subtract, params, state.params))
    return state.replace(params=params, opt_state=opt_state, value_params=vparams,
                         value_opt_state=vopt_state,
                         step=state.step + rl.epochs * rl.minibatches), mets


def _token_advantage_metrics(a: jax.Array, mask: jax.Array) -> Metrics:
    """advantages/* statistics over the valid tokens of token-level advantages [B, N]."""
    m = mask.astype(bool)
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32)), 1.0)
    any_valid = jnp.any(m)
    return {"advantages/mean": jnp.sum(jnp.where(m, a, 0.0)) / n,
            "advantages/abs_mean": jnp.sum(jnp.where(m, jnp.abs(a), 0.0)) / n,
            "advantages/min": jnp.where(any_valid, jnp.min(jnp.where(m, a, jnp.inf)), 0.0),
            "advantages/max": jnp.where(any_valid, jnp.max(jnp.where(m, a, -jnp.inf)), 0.0)}


def update(state: TrainState, rollout: sampling.Rollout, rewards: jax.Array, rng: jax.Array, *,
           num_samples: int, model_config: ModelConfig, rl: RLConfig,
           tx: optax.GradientTransformation, temperature: float,
           value_tx: Optional[optax.GradientTransformation] = None
           ) -> Tuple[TrainState, Metrics]:
    """Everything after scoring: groups → log-probs (→ values) → advantages → updates.

    Args:
      state: the train state (with value_params / value_opt_state for gae, and kl_coef
        for an adaptive KL coefficient).
      rollout: the sampler's B' = P'·G sequences.
      rewards: [B'] float32 (from an on-device or a host verifier).
      rng: for minibatch shuffling.
      num_samples: G.
      temperature: the sampling temperature (log-probs are of logits / T).
      value_tx: the value model's optimizer (gae only).

    Returns:
      (new state, flat metrics dict of scalars).
    """
    if rl.needs_value and (value_tx is None or state.value_params is None):
        raise ValueError("advantage='gae' needs state.value_params and a value_tx optimizer")
    if rl.adaptive_kl and state.kl_coef is None:
        raise ValueError("an adaptive KL coefficient (kl_target) needs state.kl_coef "
                         "(create_train_state(..., kl_coef=rl.kl_coef))")
    rollout, r, valid, metrics = select_groups(rollout, rewards, num_samples, rl)
    b = rollout.tokens.shape[0]
    if b % (rl.minibatches * rl.microbatches):
        raise ValueError(f"{b} sequences do not split into {rl.minibatches} minibatches × "
                         f"{rl.microbatches} micro-batches")
    n_new = rollout.tokens.shape[1]
    row_valid = jnp.repeat(valid, num_samples)
    mask = rollout.mask * row_valid[:, None].astype(rollout.mask.dtype)
    experience = {
        "tokens": jnp.concatenate([rollout.prompt_tokens, rollout.tokens], axis=1),
        "attention": jnp.concatenate([rollout.prompt_mask, rollout.mask], axis=1),
        "mask": mask,
        "sampler_logp": rollout.logprobs,
        "row_valid": row_valid,
    }
    chunked = functools.partial(_completion_logprobs, model_config=model_config,
                                temperature=temperature, chunk=rl.logprob_chunk, n_new=n_new)
    inputs = {"tokens": experience["tokens"], "attention": experience["attention"]}
    pieces = rl.microbatches * rl.minibatches

    def logprobs_of(params, with_entropy=False):
        out = _map_microbatches(
            lambda x: chunked(params, x["tokens"], x["attention"], with_entropy=with_entropy),
            inputs, pieces)
        return jax.lax.stop_gradient(out)

    # Log-probs (and entropies) of the policy that sampled, in one pass where needed.
    want_entropy = rl.entropy_keep_fraction < 1.0
    current = None
    if rl.needs_old_logprobs or want_entropy:
        current, ent = logprobs_of(state.params, with_entropy=want_entropy)
        if rl.needs_old_logprobs:
            experience["old_logp"] = current
        if want_entropy:
            experience["entropy"] = ent
    kl_coef = state.kl_coef if rl.adaptive_kl else rl.kl_coef
    kl_tok, new_kl_coef = None, None
    if rl.needs_reference:
        experience["ref_logp"] = logprobs_of(state.ref_params)[0]
        if rl.kl_in_reward:  # Stop-gradient KL penalty in the reward.
            if current is None:
                current = logprobs_of(state.params)[0]
            kl_tok = losses.kl(current, experience["ref_logp"], kind=rl.kl_kind, mask=mask)
            seq_kl = jnp.sum(kl_tok, axis=1)
            lengths = jnp.maximum(jnp.sum(mask, axis=1), 1).astype(jnp.float32)
            n_rows = jnp.maximum(jnp.sum(row_valid.astype(jnp.float32)), 1.0)
            observed = jnp.sum(jnp.where(row_valid, seq_kl / lengths, 0.0)) / n_rows
            if rl.advantage not in ("reinforce_pp", "gae"):  # Sequence-level: Σ_t KL_t.
                r = r - kl_coef * seq_kl.reshape(r.shape)
            metrics["reward/kl_penalty"] = -kl_coef * jnp.sum(seq_kl) / n_rows
            metrics["kl/reward_kl"] = observed
            metrics["kl/coef"] = jnp.asarray(kl_coef, jnp.float32)
            if rl.adaptive_kl:  # verl's observed KL: per-token mean of each sequence, averaged.
                new_kl_coef = losses.adaptive_kl_coef(kl_coef, observed, target=rl.kl_target,
                                                      horizon=rl.kl_horizon, num_steps=b)

    if rl.token_level:
        if rl.needs_value:
            experience["old_values"] = jax.lax.stop_gradient(_map_microbatches(
                lambda x: value_forward(state.value_params, x["tokens"], x["attention"],
                                        config=model_config)[:, -n_new - 1:-1],
                inputs, pieces))
        a_tok, returns = token_advantages(
            r, mask, valid, rl, kl=kl_tok if rl.advantage in ("reinforce_pp", "gae") else None,
            kl_coef=kl_coef, old_values=experience.get("old_values"))
        if returns is not None:
            experience["returns"] = returns
        experience["advantages"] = a_tok
        lengths = jnp.maximum(jnp.sum(mask, axis=1), 1).astype(jnp.float32)
        a = (jnp.sum(a_tok, axis=1) / lengths).reshape(r.shape)  # Per-sequence summary.
        metrics.update(rollout_metrics(rollout, r, a, valid))
        metrics.update(_token_advantage_metrics(a_tok, mask))
    else:
        a = group_advantages(r, valid, rl)
        experience["advantages"] = a.reshape(-1)
        metrics.update(rollout_metrics(rollout, r, a, valid))
    state, train_metrics = _scan_updates(state, experience, rng, model_config=model_config,
                                         rl=rl, tx=tx, temperature=temperature,
                                         value_tx=value_tx)
    metrics.update(train_metrics)
    if new_kl_coef is not None:
        state = state.replace(kl_coef=new_kl_coef)
    return state, metrics


# ----------------------------------------------------------------------------- programs

def decode_layout(params, decode_shardings=None):
    """The parameters laid out for decoding.

    Training layouts (e.g. FSDP) make every decode step all-gather the weights; a decode
    layout (e.g. replicated, or tensor-parallel) pays one re-layout per rollout instead.
    `decode_shardings` is a pytree of `NamedSharding`s like the params (see
    `rlvr_jax.sharding.logical_to_mesh_sharding`); None keeps the training layout.
    """
    if decode_shardings is None:
        return params
    return jax.lax.with_sharding_constraint(params, decode_shardings)


def make_sample_fn(model_config: ModelConfig, sampling_config: sampling.SamplingConfig, *,
                   decode_shardings=None):
    """Jitted `(params, batch, rng) -> Rollout` for the split (host-verifier) path.

    decode_shardings: optional parameter layout for decoding (`decode_layout`).
    """
    @jax.jit
    def sample_fn(params, batch, rng):
        return sampling.generate(decode_layout(params, decode_shardings), batch["prompt_tokens"],
                                 batch["prompt_mask"], rng, model_config=model_config,
                                 sampling_config=sampling_config)
    return sample_fn


def make_update_fn(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                   rl: RLConfig, tx: optax.GradientTransformation, *,
                   value_tx: Optional[optax.GradientTransformation] = None):
    """Jitted `(state, rollout, rewards[B']) -> (state, metrics)` for the split path.

    value_tx: the value model's optimizer (advantage="gae" only).
    """
    @functools.partial(jax.jit, donate_argnums=(0,))
    def update_fn(state, rollout, rewards):
        rng, update_rng = jax.random.split(state.rng)
        return update(state.replace(rng=rng), rollout, rewards, update_rng,
                      num_samples=sampling_config.num_samples, model_config=model_config,
                      rl=rl, tx=tx, temperature=sampling_config.temperature,
                      value_tx=value_tx)
    return update_fn


def make_rl_step(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                 rl: RLConfig, tx: optax.GradientTransformation, verifier: Callable, *,
                 value_tx: Optional[optax.GradientTransformation] = None,
                 return_rollout: bool = False, decode_shardings=None):
    """ONE jitted program: sample → score on device → advantages → updates.

    Args:
      verifier: jittable fn(tokens [B, N], mask [B, N], answers [B]) -> [B] float32,
        e.g. `rlvr_jax.tasks.make_token_verifier(tokenizer)`.
      value_tx: the value model's optimizer (advantage="gae" only).
      return_rollout: also return {"tokens" [B', N], "mask" [B', N], "rewards" [B']} of
        the sampled completions (e.g. to log what the policy writes).
      decode_shardings: optional parameter layout for decoding (`decode_layout`).

    Returns:
      rl_step(state, batch) -> (state, metrics) with batch = {"prompt_tokens" [P', Tp],
      "prompt_mask" [P', Tp], "answers" [P'] int32}; (state, metrics, samples) with
      return_rollout. The state is donated.
    """
    @functools.partial(jax.jit, donate_argnums=(0,))
    def rl_step(state: TrainState, batch: Batch):
        rng, sample_rng, update_rng = jax.random.split(state.rng, 3)
        rollout = sampling.generate(decode_layout(state.params, decode_shardings),
                                    batch["prompt_tokens"], batch["prompt_mask"], sample_rng,
                                    model_config=model_config, sampling_config=sampling_config)
        rewards, reward_metrics = score_on_device(
            rollout, batch["answers"], verifier=verifier, rl=rl,
            max_new_tokens=sampling_config.max_new_tokens)
        state, metrics = update(state.replace(rng=rng), rollout, rewards, update_rng,
                                num_samples=sampling_config.num_samples,
                                model_config=model_config, rl=rl, tx=tx,
                                temperature=sampling_config.temperature, value_tx=value_tx)
        metrics.update(reward_metrics)
        if return_rollout:
            return state, metrics, {"tokens": rollout.tokens, "mask": rollout.mask,
                                    "rewards": rewards}
        return state, metrics
    return rl_step


def make_sft_step(model_config: ModelConfig, tx: optax.GradientTransformation, *,
                  chunk_size: int = 128):
    """Jitted supervised step: token-mean NLL of the target tokens.

    batch = {"tokens" [B, T], "attention" [B, T], "loss_mask" [B, T]} where
    loss_mask marks the tokens to predict (the worked solution and its EOS).
    """
    def loss_fn(params, batch):
        logp, _ = sequence_logprobs(params, batch["tokens"], batch["attention"],
                                    config=model_config, chunk_size=chunk_size)
        m = batch["loss_mask"].astype(jnp.float32)
        return -jnp.sum(logp * m) / jnp.maximum(jnp.sum(m), 1.0)

    @functools.partial(jax.jit, donate_argnums=(0,))
    def sft_step(state: TrainState, batch: Batch):
        loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {"sft/loss": loss, "sft/grad_norm": optax.tree.norm(grads)}
        return state.replace(params=params, opt_state=opt_state, step=state.step + 1), metrics
    return sft_step
