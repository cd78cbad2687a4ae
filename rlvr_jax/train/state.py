"""`TrainState`: everything a run needs to continue, as one pytree; and the optimizer."""
from typing import Any, Optional, Tuple

import flax.struct
import jax
import jax.numpy as jnp
import optax

from rlvr_jax.models import lora

# The frozen models of a state, not checkpointed (read again from their paths on resume); a
# scoring model that learns (the implicit PRM) is: `train/resume.frozen_fields`.
FROZEN = ("reward_params", "teacher_params")


@flax.struct.dataclass
class TrainState:
    """The state of a training run (a pytree: checkpointed, sharded and donated as one).

    Attributes:
      step: int32 scalar, number of optimizer updates done.
      params: policy parameters (with LoRA: the frozen base and the adapters, one tree).
      opt_state: optax state of the policy optimizer, over `split_trainable(params)[0]`
        (with LoRA: the adapters only).
      rng: PRNG key for sampling and shuffling; split inside each step.
      ref_params: frozen reference parameters (None when no KL term is used, and with LoRA,
        whose reference is the base: `reference_of`).
      value_params / value_opt_state: the value model and its optimizer (None
        unless the algorithm uses one).
      data_position: int32 scalar, how many prompts the data iterator has
        consumed (restored on resume).
      kl_coef: float32 scalar β of an adaptive KL-in-reward coefficient (None unless
        `rl.kl_target` is set; None adds no leaf, so older checkpoints still restore).
      reward_params: the parameters of the run's one scoring model, scored inside the RL
        step: frozen (a reward model, judge or PRM: never updated) or, for PRIME's implicit
        PRM, {"phi", "ref", "opt"} updated online (`scoring.implicit_prm`); None: no leaf.
      teacher_params: a frozen distillation teacher (`train.distill.Teacher`; rl.teacher),
        or None; never checkpointed.
    """
    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array
    ref_params: Any = None
    value_params: Any = None
    value_opt_state: Any = None
    data_position: jax.Array = flax.struct.field(default_factory=lambda: jnp.zeros((), jnp.int32))
    kl_coef: Any = None
    reward_params: Any = None
    teacher_params: Any = None


def make_optimizer(*, learning_rate: float, warmup_steps: int = 0, total_steps: int = 0,
                   schedule: str = "constant", weight_decay: float = 0.0, b1: float = 0.9,
                   b2: float = 0.999, eps: float = 1e-8,
                   max_grad_norm: Optional[float] = 1.0) -> optax.GradientTransformation:
    """AdamW with global-norm gradient clipping and a warm-up + constant/cosine schedule."""
    if learning_rate <= 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    if schedule == "constant":
        lr = optax.join_schedules(
            [optax.linear_schedule(0.0, learning_rate, max(warmup_steps, 1)),
             optax.constant_schedule(learning_rate)], [max(warmup_steps, 1)]
        ) if warmup_steps > 0 else learning_rate
    elif schedule == "cosine":
        if total_steps <= warmup_steps:
            raise ValueError("a cosine schedule needs total_steps > warmup_steps")
        lr = optax.warmup_cosine_decay_schedule(0.0, learning_rate, max(warmup_steps, 1),
                                                total_steps, end_value=0.1 * learning_rate)
    else:
        raise ValueError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")
    parts = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm else []
    parts.append(optax.adamw(lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay))
    return optax.chain(*parts)


def create_train_state(params, tx: optax.GradientTransformation, rng: jax.Array, *,
                       ref_params=None, value_params=None,
                       value_tx: Optional[optax.GradientTransformation] = None,
                       kl_coef: Optional[float] = None, reward_params=None) -> TrainState:
    """A fresh `TrainState` at step 0 (kl_coef: the initial adaptive β, or None;
    reward_params: a frozen reward model's parameters, or None)."""
    if value_params is not None and value_tx is None:
        raise ValueError("value_params need a value_tx optimizer")
    return TrainState(
        step=jnp.zeros((), jnp.int32), params=params,
        opt_state=tx.init(split_trainable(params)[0]), rng=rng,
        ref_params=ref_params, value_params=value_params,
        value_opt_state=None if value_params is None else value_tx.init(value_params),
        kl_coef=None if kl_coef is None else jnp.asarray(kl_coef, jnp.float32),
        reward_params=reward_params)


def split_trainable(params) -> Tuple[Any, Any]:
    """(the leaves the optimizer updates, the frozen rest or None): a tree with LoRA adapters
    gives (adapters, base); any other all of itself and None."""
    adapters, base = lora.split(params)
    return (adapters, base) if adapters else (params, None)


def join_trainable(trainable, frozen):
    """The inverse of `split_trainable`."""
    return trainable if frozen is None else lora.attach(frozen, trainable)


def reference_of(state: TrainState):
    """The reference policy's parameters: `state.ref_params`, or with LoRA (no reference
    copy) the policy's base with the adapters off."""
    if state.ref_params is not None:
        return state.ref_params
    if lora.has_adapters(state.params):
        return lora.base_of(state.params)
    raise ValueError("a KL reference needs state.ref_params (or LoRA adapters, whose base is "
                     "the reference)")
