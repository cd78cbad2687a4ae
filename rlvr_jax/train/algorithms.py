"""Algorithms by composition: named presets of `config.rl`, and their resolution into functions.

A preset only sets fields of `config.rl` (`RLConfig`); a config file picks one with
`default_config(algorithm=...)` and may override any field afterwards. `resolve(rl)` turns an
`RLConfig` into the pure functions one update uses (advantage estimator, policy loss, KL term,
entropy bonus, aggregation, value loss), once, outside jit: the update itself never branches
on an algorithm's name. A new estimator is one pure function plus one line in `resolve`.
Formulas and the equivalent verl / TRL options are in docs/algorithms.md.
"""
import dataclasses
import functools
from typing import Callable, Optional

import jax.numpy as jnp

from rlvr_jax import advantages as adv
from rlvr_jax import losses
from rlvr_jax.train.metrics import advantage_metrics
from rlvr_jax.train.rl_config import RLConfig

PRESETS = {
    # DeepSeekMath GRPO: group-normalised advantage, PPO clip, per-sequence token mean,
    # k3 KL in the loss (beta 0.04 in the paper; many RLVR recipes use 0).
    "grpo": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                 eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-mean",
                 kl_coef=0.04, kl_kind="k3"),
    # Dr.GRPO: no std normalisation, sum over tokens / constant max length, no KL.
    "dr_grpo": dict(advantage="grpo", advantage_scale="none", policy_loss="ppo_clip",
                    eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-sum-norm",
                    kl_coef=0.0),
    # DAPO: clip-higher, dynamic sampling, token-level mean, soft overlong shaping, no KL.
    "dapo": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                 eps_low=0.2, eps_high=0.28, aggregation="token-mean", kl_coef=0.0,
                 dynamic_sampling=True, oversample=2.0, overlong_buffer=4,
                 overlong_penalty=1.0),
    # GSPO: sequence-level length-normalised ratio with a tiny clip range.
    "gspo": dict(advantage="grpo", advantage_scale="group", policy_loss="gspo",
                 eps_low=3e-4, eps_high=4e-4, aggregation="seq-mean-token-mean", kl_coef=0.0),
    # RLOO: leave-one-out baseline, REINFORCE-style clipped update.
    "rloo": dict(advantage="rloo", policy_loss="ppo_clip", eps_low=0.2, eps_high=0.2,
                 aggregation="seq-mean-token-mean", kl_coef=0.0),
    # Lite PPO ("Tricks or Traps"): group mean, batch std, token-level aggregation.
    "lite_ppo": dict(advantage="grpo", advantage_scale="batch", policy_loss="ppo_clip",
                     eps_low=0.2, eps_high=0.2, aggregation="token-mean", kl_coef=0.0),
    # CISPO (MiniMax-M1): clipped stop-gradient IS weight times -A·logp.
    "cispo": dict(advantage="grpo", advantage_scale="group", policy_loss="cispo",
                  eps_high=4.0, aggregation="token-mean", kl_coef=0.0),
    # PPO with a value model (initialised from the policy) and GAE (γ = λ = 1), advantages
    # whitened over the batch's valid tokens, clipped value loss with its own optimizer,
    # two minibatches per batch (so the ratio and the value clipping act).
    "ppo": dict(advantage="gae", gamma=1.0, lam=1.0, whiten_advantages=True,
                value_clip=0.5, policy_loss="ppo_clip", eps_low=0.2, eps_high=0.2,
                aggregation="token-mean", kl_coef=0.0, minibatches=2),
    # REINFORCE++: per-token reward = outcome at the last token − β·KL_t (k1, in the reward),
    # γ = 1 returns, whitened over the batch's valid tokens; PPO clip.
    "reinforce_pp": dict(advantage="reinforce_pp", gamma=1.0, policy_loss="ppo_clip",
                         eps_low=0.2, eps_high=0.2, aggregation="token-mean", kl_coef=0.01,
                         kl_kind="k1", kl_in_reward=True),
    # REINFORCE++-baseline: group-mean baseline, then batch whitening; KL in the loss (k3).
    "reinforce_pp_baseline": dict(advantage="reinforce_pp_baseline", policy_loss="ppo_clip",
                                  eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                                  kl_coef=0.01, kl_kind="k3", kl_in_reward=False),
    # GPG: A = α(r − mean_g) with the paper's α, plain −A·logπ, token mean, no KL.
    "gpg": dict(advantage="gpg", gpg_alpha="paper", policy_loss="reinforce",
                aggregation="token-mean", kl_coef=0.0),
    # Negative-sample reinforcement: −1 for wrong samples, 0 for right ones, −A·logπ.
    "nsr": dict(advantage="w_reinforce", positive_weight=0.0, policy_loss="reinforce",
                aggregation="token-mean", kl_coef=0.0),
    # W-REINFORCE: +λ (0.1) for right samples, −1 for wrong ones, −A·logπ.
    "w_reinforce": dict(advantage="w_reinforce", positive_weight=0.1, policy_loss="reinforce",
                        aggregation="token-mean", kl_coef=0.0),
    # "Beyond the 80/20 rule": DAPO-style clip-higher, token mean, policy gradient only
    # through the top-20% highest-entropy tokens of each minibatch.
    "entropy_8020": dict(advantage="grpo", advantage_scale="group", policy_loss="ppo_clip",
                         eps_low=0.2, eps_high=0.28, aggregation="token-mean", kl_coef=0.0,
                         entropy_keep_fraction=0.2),
    # KL in the reward with an adaptive coefficient (Ziegler et al. 2019; verl
    # kl_ctrl.type=adaptive): REINFORCE++ returns, β starts at 0.01 and moves towards a
    # per-token KL target of 0.1 over a horizon of 10000 samples.
    "kl_reward_adaptive": dict(advantage="reinforce_pp", gamma=1.0, policy_loss="ppo_clip",
                               eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                               kl_coef=0.01, kl_kind="k1", kl_in_reward=True, kl_target=0.1,
                               kl_horizon=10000),
    # SAPO: GRPO advantages, a sigmoid gate on the token ratio (τ+ = 1, τ− = 1.05) instead of
    # the clip, sequence mean of token means (verl forces it), no KL.
    "sapo": dict(advantage="grpo", advantage_scale="group", policy_loss="sapo",
                 sapo_tau_pos=1.0, sapo_tau_neg=1.05, aggregation="seq-mean-token-mean",
                 kl_coef=0.0),
    # DPPO-Binary-TV (verl recipe): Dr.GRPO advantages and aggregation, tokens whose
    # probability moved by more than 0.15 masked, truncated stop-gradient ratio, no KL.
    "dppo": dict(advantage="grpo", advantage_scale="none", policy_loss="dppo",
                 dppo_divergence="tv", eps_low=0.15, eps_high=0.15, dppo_ratio_cap=20.0,
                 aggregation="seq-mean-token-sum-norm", kl_coef=0.0),
    # NFT: likelihood of correct answers and of wrong ones under the implicit negative policy,
    # prompt weight 1 − r̂ (on-policy: Dr.GRPO's gradient), token sums over a constant length.
    "nft": dict(advantage="grpo", advantage_scale="none", policy_loss="nft",
                nft_negative_weight=1.0, nft_eps=0.05, nft_prompt_weight="negative_rate",
                aggregation="seq-mean-token-sum-norm", kl_coef=0.0),
    # LUSPO: GSPO (3e-4 / 4e-4) with each sequence's loss scaled by its length.
    "luspo": dict(advantage="grpo", advantage_scale="group", policy_loss="luspo",
                  eps_low=3e-4, eps_high=4e-4, aggregation="seq-mean-token-mean", kl_coef=0.0),
}


def names():
    return sorted(PRESETS)


def apply(rl_config, name: str):
    """Sets the preset's fields on `rl_config` (an ml_collections ConfigDict) in place."""
    if name not in PRESETS:
        raise ValueError(f"unknown algorithm {name!r}; known: {names()}")
    for key, value in PRESETS[name].items():
        setattr(rl_config, key, value)
    rl_config.algorithm = name
    return rl_config


# ----------------------------------------------------------------------------- resolution

@dataclasses.dataclass(frozen=True)
class Algorithm:
    """The pure functions of one update, resolved from an `RLConfig` by `resolve`.

    Shapes: P groups of G samples, B = P·G rows, N completion tokens.

    Attributes:
      group_advantages: fn(rewards [P, G], valid [P]) -> [P, G] (sequence-level estimators),
        or None.
      token_advantages: fn(rewards [P, G], mask [B, N], valid [P], *, kl, kl_coef,
        old_values) -> (advantages [B, N], returns [B, N] or None) (token-level), or None.
      kl_reward_per_token: the KL-in-reward penalty goes to the token estimator per token
        (reinforce_pp, gae) instead of being summed into each sequence's reward.
      policy_loss: fn(logp, old_logp, advantages, mask) -> (per_token [B, N], metrics).
      kl: fn(logp, ref_logp, mask) -> stop-gradient per-token KL [B, N], or None (no reference).
      kl_loss: fn(logp, ref_logp, mask) -> (β·KL per token, {"kl_mean"}), or None (KL not in
        the loss).
      entropy_bonus: fn(entropy, mask) -> per-token −c·H, or None.
      aggregate: fn(per_token, mask, counts, max_len) -> scalar, with `counts` the global
        `losses.global_counts` of the minibatch (plus its valid rows as "num_rows").
      value_loss: fn(values, old_values, returns, mask) -> (per_token, metrics), or None.
      process_rewards: fn(step_values [B, N], step_ends [B, N], mask) -> the process part of
        the per-token rewards [B, N] of a token estimator (reinforce_pp, gae), or None.
      process_advantages: fn(step_values, step_ends, mask, valid [P]) -> α × the group
        process advantages [B, N] added to the outcome advantages (the other estimators),
        or None. Both None without process rewards (`rl.process_weight = 0`).
      entropy_tokens: fn(mask [B, N], high_entropy [B, N]) -> the tokens the policy loss
        trains on when entropy_keep_fraction < 1: the high-entropy ones, or with
        `rl.entropy_mask_invert` the other valid tokens (`losses.low_entropy_complement`).
      turn_advantages: fn(outcome [P, G], turn_ids [B, N], mask, *, turn_rewards, old_values,
        group_mask) -> (advantages [B, N], returns or None) of multi-turn credit
        (`advantages.turn_token_advantages`; rl.turn_advantage), replacing the estimator's;
        None with rl.turn_advantage = "none".
      tree_advantages: fn(rewards [P, G], valid [P], exp) -> (exp with the advantages [B, N]
        of prefix-tree credit from exp.fork_parent / fork_at, `advantages.tree_advantages`,
        and the lineage dropped; their metrics): rl.tree_advantage, replacing GRPO's; None
        with rl.tree_advantage = "none".
    """
    group_advantages: Optional[Callable]
    token_advantages: Optional[Callable]
    kl_reward_per_token: bool
    policy_loss: Callable
    kl: Optional[Callable]
    kl_loss: Optional[Callable]
    entropy_bonus: Optional[Callable]
    aggregate: Callable
    value_loss: Optional[Callable]
    process_rewards: Optional[Callable] = None
    process_advantages: Optional[Callable] = None
    entropy_tokens: Callable = lambda mask, high_entropy: high_entropy
    turn_advantages: Optional[Callable] = None
    tree_advantages: Optional[Callable] = None


def resolve(rl: RLConfig) -> Algorithm:
    """The functions `rl` names, with its hyperparameters bound (call outside jit)."""
    in_loss = rl.needs_reference and not rl.kl_in_reward
    per_token_process = rl.advantage in ("reinforce_pp", "gae")  # Process rewards as rewards.
    return Algorithm(
        group_advantages=None if rl.token_level else _group_estimator(rl),
        token_advantages=_token_estimator(rl) if rl.token_level else None,
        kl_reward_per_token=rl.advantage in ("reinforce_pp", "gae"),
        policy_loss=_policy_loss(rl),
        kl=functools.partial(losses.kl_penalty, kind=rl.kl_kind) if rl.needs_reference
        else None,
        kl_loss=functools.partial(losses.kl_loss, kind=rl.kl_kind, coef=rl.kl_coef) if in_loss
        else None,
        entropy_bonus=functools.partial(losses.entropy_bonus, coef=rl.entropy_coef)
        if rl.entropy_coef > 0 else None,
        aggregate=functools.partial(_aggregate, mode=rl.aggregation),
        value_loss=functools.partial(losses.value_loss, clip=rl.value_clip or None)
        if rl.needs_value else None,
        process_rewards=functools.partial(
            adv.process_token_rewards, weight=rl.process_weight, form=rl.process_form,
            temperature=rl.process_temperature) if rl.process and per_token_process else None,
        process_advantages=functools.partial(process_advantages, rl=rl)
        if rl.process and not per_token_process else None,
        entropy_tokens=losses.low_entropy_complement if rl.entropy_mask_invert
        else (lambda mask, high_entropy: high_entropy),
        turn_advantages=None if rl.turn_advantage == "none" else functools.partial(
            adv.turn_token_advantages, mode=rl.turn_advantage, gamma=rl.turn_discount,
            lam=rl.turn_lambda, eps=rl.advantage_eps),
        tree_advantages=None if rl.tree_advantage == "none" else functools.partial(
            _tree_advantages, mode=rl.tree_advantage, scale=rl.advantage_scale,
            eps=rl.advantage_eps, exponent=rl.tree_exponent))


def _group_estimator(rl: RLConfig) -> Callable:
    estimator = {
        "grpo": functools.partial(adv.grpo, scale=rl.advantage_scale, eps=rl.advantage_eps),
        "rloo": adv.rloo,
        "grpo_passk": adv.grpo_passk,
        "ngrpo": functools.partial(adv.ngrpo, eps=rl.advantage_eps),
        "gpg": functools.partial(adv.gpg, alpha=rl.gpg_alpha),
        "w_reinforce": functools.partial(_w_reinforce, positive_weight=rl.positive_weight,
                                         negative_weight=rl.negative_weight),
    }[rl.advantage]
    # W-REINFORCE weighs its own samples (+λ / −μ); the others may be sign-weighted after.
    weighted = rl.advantage != "w_reinforce" and (rl.positive_weight, rl.negative_weight) != (
        1.0, 1.0)

    def group_advantages(rewards, valid):
        a = estimator(rewards, group_mask=valid)
        if weighted:
            a = adv.sign_weighted(a, positive_weight=rl.positive_weight,
                                  negative_weight=rl.negative_weight)
        return jnp.where(valid[:, None], a, 0.0)
    return group_advantages


def _tree_advantages(rewards, valid, exp, **kw):
    """`Algorithm.tree_advantages`: the update's advantages stage for rl.tree_advantage."""
    if exp.fork_parent is None or exp.fork_at is None:
        raise ValueError("rl.tree_advantage needs the lineage of tree rollouts (sampling.tree); "
                         "this rollout has none")
    # The leaves are the rows with tokens (a row without any scores no sample of the policy;
    # the sampler leaves none: a spare row no fork claims is an ordinary sample).
    leaves = jnp.any(exp.mask > 0, axis=1).reshape(rewards.shape)
    a = adv.tree_advantages(rewards, exp.fork_parent, exp.fork_at, exp.mask, group_mask=valid,
                            leaves=leaves, **kw)
    return (exp.replace(advantages=a, fork_parent=None, fork_at=None),
            advantage_metrics(a, exp.mask))


def _w_reinforce(rewards, *, group_mask, positive_weight, negative_weight):
    del group_mask  # Invalid groups are zeroed by the caller.
    return adv.w_reinforce(rewards, positive_weight=positive_weight,
                           negative_weight=negative_weight)


def _token_estimator(rl: RLConfig) -> Callable:
    return {
        "reinforce_pp": functools.partial(reinforce_pp_advantages, gamma=rl.gamma),
        "reinforce_pp_baseline": reinforce_pp_baseline_advantages,
        "gae": functools.partial(gae_advantages, gamma=rl.gamma, lam=rl.lam,
                                 whiten=rl.whiten_advantages),
    }[rl.advantage]


def process_advantages(values, ends, mask, valid, *, rl: RLConfig):
    """α × DeepSeekMath's group-normalised process advantages [B, N] (`rl.process_form`),
    added to a group estimator's outcome advantages (outcome + process mix)."""
    return rl.process_weight * adv.group_process_advantages(
        values, ends, mask, num_samples=mask.shape[0] // valid.shape[0], group_mask=valid,
        form=rl.process_form, eps=rl.advantage_eps, scale=rl.process_scale)


def reinforce_pp_advantages(rewards, mask, valid, *, kl=None, kl_coef=0.0, old_values=None,
                            gamma=1.0, process_rewards=None):
    """REINFORCE++ [B, N]: outcome at the last token (− β·KL_t, + the process rewards at
    the step ends), returns, batch-whitened."""
    del old_values
    per_token = adv.token_rewards(rewards.reshape(-1), mask, kl=kl, kl_coef=kl_coef)
    if process_rewards is not None:
        per_token = per_token + process_rewards
    row_valid = jnp.repeat(valid, rewards.shape[1])
    return adv.reinforce_plus_plus(per_token, mask, gamma=gamma, sequence_mask=row_valid), None


def reinforce_pp_baseline_advantages(rewards, mask, valid, *, kl=None, kl_coef=0.0,
                                     old_values=None):
    """REINFORCE++-baseline [B, N]: group-mean baseline, then batch whitening."""
    del kl, kl_coef, old_values
    return adv.reinforce_plus_plus_baseline(rewards, mask, group_mask=valid), None


def gae_advantages(rewards, mask, valid, *, kl=None, kl_coef=0.0, old_values=None, gamma=1.0,
                   lam=1.0, whiten=True, process_rewards=None):
    """GAE advantages and returns [B, N] from the outcome (− β·KL_t, + the process rewards
    at the step ends) and the old values."""
    per_token = adv.token_rewards(rewards.reshape(-1), mask, kl=kl, kl_coef=kl_coef)
    if process_rewards is not None:
        per_token = per_token + process_rewards
    a, returns = adv.gae(per_token, old_values, mask, gamma=gamma, lam=lam)
    if whiten:
        row_valid = jnp.repeat(valid, rewards.shape[1])
        a = adv.whiten(a, mask.astype(bool) & row_valid[:, None])
    return a, returns


def _policy_loss(rl: RLConfig) -> Callable:
    eps = dict(eps_low=rl.eps_low, eps_high=rl.eps_high)
    fn = {
        "ppo_clip": functools.partial(losses.ppo_clip, **eps, dual_clip=rl.dual_clip or None),
        "gspo": functools.partial(losses.gspo, **eps),
        "luspo": functools.partial(losses.luspo, **eps),
        "cispo": functools.partial(losses.cispo, eps_high=rl.eps_high),
        "reinforce": reinforce_loss,
        "sapo": functools.partial(losses.sapo, tau_pos=rl.sapo_tau_pos, tau_neg=rl.sapo_tau_neg),
        "dppo": functools.partial(losses.dppo, **eps, divergence=rl.dppo_divergence,
                                  ratio_cap=rl.dppo_ratio_cap),
        "dcpo": functools.partial(losses.dcpo, **eps, ratio_cap=rl.dcpo_ratio_cap),
        "nft": functools.partial(losses.nft_from_advantages,
                                 negative_weight=rl.nft_negative_weight, eps=rl.nft_eps,
                                 prompt_weight=rl.nft_prompt_weight),
    }[rl.policy_loss]
    return fn if rl.policy_loss in _CLIPPING else functools.partial(_with_clip_metrics, fn=fn)


# Losses whose metrics already hold clip_frac_low / _high / clip_frac.
_CLIPPING = ("ppo_clip", "gspo", "luspo", "cispo", "reinforce", "dppo", "dcpo")


def _with_clip_metrics(logp, old_logp, advantages, mask, *, fn):
    """`fn`'s loss with the clip fractions every run logs (all 0: nothing is clipped)."""
    per_token, metrics = fn(logp, old_logp, advantages, mask)
    zero = jnp.zeros((), jnp.float32)
    return per_token, dict(metrics, clip_frac_low=zero, clip_frac_high=zero, clip_frac=zero)


def reinforce_loss(logp, old_logp, advantages, mask):
    """`losses.reinforce` with the clip metrics of the clipped losses (all 0: nothing clips)."""
    del old_logp
    per_token, metrics = losses.reinforce(logp, advantages, mask)
    zero = jnp.zeros((), jnp.float32)
    return per_token, dict(metrics, clip_frac_low=zero, clip_frac_high=zero, clip_frac=zero)


def _aggregate(per_token, mask, counts, max_len, *, mode):
    # Dr.GRPO's B counts the rows of groups in the update, not those dynamic sampling dropped.
    rows = counts["num_rows"] if mode == "seq-mean-token-sum-norm" else counts["num_sequences"]
    return losses.aggregate(per_token, mask, mode, num_tokens=counts["num_tokens"],
                            num_sequences=rows, max_len=max_len)
