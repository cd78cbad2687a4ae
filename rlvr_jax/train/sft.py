"""The supervised warm-up step (`make_sft_step`): token-mean NLL of worked solutions."""
import functools
from typing import Dict

import jax
import jax.numpy as jnp
import optax

from rlvr_jax.models import ModelConfig, sequence_logprobs
from rlvr_jax.train.state import TrainState

Batch = Dict[str, jax.Array]


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
