"""Training: the state, the compiled RL / SFT steps, the builders and the run loop."""
from rlvr_jax.train import algorithms
from rlvr_jax.train.config import default_config
from rlvr_jax.train.rl_config import RLConfig
from rlvr_jax.train.sft import make_sft_step
from rlvr_jax.train.state import TrainState, create_train_state, make_optimizer
from rlvr_jax.train.step import (make_rl_step, make_sample_fn, make_split_step, make_step,
                                 make_update_fn, step_keys, update)


def run(config, workdir, **kwargs):
    """Runs an experiment from a config (see `rlvr_jax.train.loop.run`)."""
    from rlvr_jax.train import loop
    return loop.run(config, workdir, **kwargs)


__all__ = ["TrainState", "create_train_state", "make_optimizer", "RLConfig", "make_rl_step",
           "make_split_step", "make_step", "step_keys", "make_sample_fn", "make_update_fn",
           "make_sft_step", "update", "default_config", "algorithms", "run"]
