"""The objective of one micro-batch: policy loss (+ KL, entropy) and value loss.

Each function is normalised by the counts of its whole minibatch, so summing it (and its
gradients) over the micro-batches of a minibatch gives exactly the minibatch's value.
Shapes: b rows in the micro-batch, Tp + N tokens, N new tokens.
"""
from typing import Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax import losses
from rlvr_jax import models
from rlvr_jax.models import ModelConfig, logprobs, transformer
from rlvr_jax.models.value import value_forward
from rlvr_jax.numerics import masked_mean
from rlvr_jax.train.algorithms import Algorithm
from rlvr_jax.train import offpolicy, packing
from rlvr_jax.train.experience import Experience

Metrics = Dict[str, jax.Array]


def completion_logprobs(params, tokens, attention, *, model_config: ModelConfig,
                        temperature: float, chunk: int, n_new: int, with_entropy: bool):
    """(log-probs [b, N], entropies [b, N] or None) of the last N tokens of each row."""
    return models.completion_logprobs(params, tokens, attention, n_new, config=model_config,
                                      temperature=temperature, chunk_size=chunk,
                                      with_entropy=with_entropy)


def packed_logprobs(params, mb: packing.Micro, *, model_config: ModelConfig,
                    temperature: float, chunk: int, with_entropy: bool):
    """(log-probs [b, N], entropies [b, N] or None) of the completion tokens of a packed
    micro-batch (0 outside it), from its [R, L] rows."""
    hidden, _ = transformer.forward(params, mb.tokens, mb.positions, config=model_config,
                                    segment_ids=mb.segments, return_hidden=True)
    head = transformer.head_matrix(params, model_config, model_config.compute_dtype)
    logp, ent = logprobs.chunked_logprobs(
        hidden[:, :-1], mb.tokens[:, 1:], head,
        temperature=temperature, chunk_size=chunk, with_entropy=with_entropy)
    pad = lambda x: jnp.pad(x, ((0, 0), (0, 1)))  # noqa: E731  (the last slot predicts nothing)
    return (packing.unpack(pad(logp), mb),
            None if ent is None else packing.unpack(pad(ent), mb))


def logprobs_of(params, mb: Experience, **kwargs):
    """(log-probs [b, N], entropies [b, N] or None) of a micro-batch, packed or not (kwargs:
    model_config, temperature, chunk, with_entropy)."""
    if mb.packed is not None:
        return packed_logprobs(params, mb.packed, **kwargs)
    return completion_logprobs(params, mb.tokens, mb.attention, n_new=mb.num_new, **kwargs)


def policy_objective(params, mb: Experience, counts: Dict[str, jax.Array], *,
                     model_config: ModelConfig, algo: Algorithm, temperature: float,
                     logprob_chunk: int, tis_cap: float = 0.0, tis_level: str = "token",
                     tis_mode: str = "truncate", offpolicy_gamma: float = 0.1,
                     mismatch: bool = False) -> Tuple[jax.Array, Metrics]:
    """Aggregated policy loss (+ KL loss, − entropy bonus) of micro-batch `mb`, and metrics.

    counts: `losses.global_counts` of the minibatch plus its valid rows ("num_rows").
    tis_cap: > 0 weighs each token by min(π_old / π_sampler, tis_cap) (tis_level "token" or
      "sequence", tis_mode "truncate" or "mask": `losses.truncated_importance_weights`);
      π_old is the proximal policy under decoupled PPO (`mb.old_logp`).
    offpolicy_gamma: LUFFY's γ on the expert rows (`mb.offpolicy`).
    mismatch: also log mismatch/kl, the k3 estimate of KL(π_sampler‖π_θ) on the sampled
      tokens (asynchronous rollouts: staleness and numerics together).
    """
    mask = mb.mask
    # The entropy is always computed: it is logged, and cheap next to the LM-head matmul.
    logp, ent = logprobs_of(params, mb, model_config=model_config, temperature=temperature,
                             chunk=logprob_chunk, with_entropy=True)
    old = mb.old_logp if mb.old_logp is not None else jax.lax.stop_gradient(logp)
    loss_mask = mask if mb.entropy_mask is None else algo.entropy_tokens(mask, mb.entropy_mask)
    per_token, metrics = algo.policy_loss(logp, old, mb.advantages, loss_mask)
    if mb.offpolicy is not None:  # Expert rows: LUFFY's shaping, CHORD's SFT (offpolicy.py).
        per_token = offpolicy.shaped_objective(per_token, logp, mb.advantages, mb.offpolicy,
                                               mb.sft_weight, gamma=offpolicy_gamma)
    metrics = {f"loss/{k}": v for k, v in metrics.items()}
    if tis_cap > 0:
        w, tis_metrics = losses.truncated_importance_weights(
            old, mb.sampler_logp, mask, cap=tis_cap, level=tis_level, mode=tis_mode)
        per_token = per_token * w
        metrics.update({f"tis/{k}": v for k, v in tis_metrics.items()})
    if algo.kl_loss is not None:  # KL(π_θ‖π_ref) as a loss term.
        kl_term, kl_metrics = algo.kl_loss(logp, mb.ref_logp, mask)
        per_token = per_token + kl_term
        metrics["loss/kl"] = kl_metrics["kl_mean"]
    elif algo.kl is not None:  # KL in the reward: only logged here.
        metrics["loss/kl"] = masked_mean(algo.kl(logp, mb.ref_logp, mask), mask)
    if algo.entropy_bonus is not None:
        per_token = per_token + algo.entropy_bonus(ent, mask)
    loss = algo.aggregate(per_token, mask, counts, mb.num_new)
    # Diagnostics on this micro-batch (means over its valid tokens).
    sampler_diff = jnp.where(mask, mb.sampler_logp - jax.lax.stop_gradient(logp), 0.0)
    metrics["train/sampler_trainer_kl"] = masked_mean(sampler_diff, mask)
    metrics["train/sampler_trainer_max_abs_diff"] = jnp.max(jnp.abs(sampler_diff))
    metrics["train/entropy"] = masked_mean(ent, mask)
    if mismatch:
        metrics["mismatch/kl"] = losses.mismatch_kl(logp, mb.sampler_logp, mask)
    return loss, metrics


def value_objective(value_params, mb: Experience, counts: Dict[str, jax.Array], *,
                    model_config: ModelConfig, algo: Algorithm) -> Tuple[jax.Array, Metrics]:
    """Clipped value loss of micro-batch `mb`, token-mean over its whole minibatch.

    The value of completion token n is the value model's output at the position before
    it (the state in which the token was chosen).
    """
    v = values_of(value_params, mb, model_config=model_config)
    per_token, metrics = algo.value_loss(v, mb.old_values, mb.returns, mb.mask)
    loss = losses.aggregate(per_token, mb.mask, "token-mean", num_tokens=counts["num_tokens"])
    return loss, {f"value/{k}": x for k, x in metrics.items()}


def values_of(value_params, mb: Experience, *, model_config: ModelConfig) -> jax.Array:
    """Value-model outputs [b, N] of a micro-batch's completion states, packed or not."""
    if mb.packed is None:
        return completion_values(value_params, mb.tokens, mb.attention,
                                 model_config=model_config, n_new=mb.num_new)
    p = mb.packed
    return packing.unpack(value_forward(value_params, p.tokens, None, config=model_config,
                                        segment_ids=p.segments, positions=p.positions), p)


def completion_values(value_params, tokens, attention, *, model_config: ModelConfig, n_new: int):
    """Value-model outputs [b, N] for the states before each of the last N tokens."""
    return value_forward(value_params, tokens, attention, config=model_config)[:, -n_new - 1:-1]
