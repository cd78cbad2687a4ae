"""`TrainState`: everything a run needs to continue, as one pytree; and the optimizer."""
from typing import Any, Optional

import flax.struct
import jax
import jax.numpy as jnp
import optax


@flax.struct.dataclass
class TrainState:
    """The state of a training run (a pytree: checkpointed, sharded and donated as one).

    Attributes:
      step: int32 scalar, number of optimizer updates done.
      params: policy parameters.
      opt_state: optax state of the policy optimizer.
      rng: PRNG key for sampling and shuffling; split inside each step.
      ref_params: frozen reference parameters (None when no KL term is used).
      value_params / value_opt_state: the value model and its optimizer (None
        unless the algorithm uses one).
      data_position: int32 scalar, how many prompts the data iterator has
        consumed (restored on resume).
      kl_coef: float32 scalar β of an adaptive KL-in-reward coefficient (None unless
        `rl.kl_target` is set; None adds no leaf, so older checkpoints still restore).
      reward_params: frozen parameters of a reward model scored inside the RL step
        (`scoring.RewardModel`; never updated), or None (no leaf).
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
        step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), rng=rng,
        ref_params=ref_params, value_params=value_params,
        value_opt_state=None if value_params is None else value_tx.init(value_params),
        kl_coef=None if kl_coef is None else jnp.asarray(kl_coef, jnp.float32),
        reward_params=reward_params)
