"""Decoder-only transformers (Llama 3, Qwen2/2.5, Qwen3) as pure functions of params."""
from rlvr_jax.models import hf, presets, reward_model
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.models.logprobs import chunked_logprobs, completion_logprobs, sequence_logprobs
from rlvr_jax.models.transformer import (default_positions, forward, head_matrix, init_cache,
                                         init_params, jit_forward, param_logical_axes)
from rlvr_jax.models.reward_model import (init_reward_params, jit_reward_forward,
                                          reward_forward, reward_logical_axes)
from rlvr_jax.models.value import init_value_params, value_forward, value_logical_axes

__all__ = [
    "ModelConfig", "presets", "hf", "forward", "init_params", "init_cache", "param_logical_axes",
    "default_positions", "head_matrix", "jit_forward", "chunked_logprobs", "completion_logprobs",
    "sequence_logprobs",
    "init_value_params", "value_forward", "value_logical_axes",
    "reward_model", "init_reward_params", "reward_forward", "jit_reward_forward",
    "reward_logical_axes",
]
