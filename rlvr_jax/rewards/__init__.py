"""Leaf verifiers: math, code (and its sandbox), format, length, and the pool.

Host verifiers map ``(completion: str, reference) -> float`` (or a dict with named
components) and run batched in a :class:`RewardPool`; the overlong penalty works on ``[B]``
arrays, also inside jit. How a run combines them into its reward (weighted components,
majority votes, noise and its correction) is `rlvr_jax.scoring`.
``close_sandboxes()`` stops the code sandbox's servers and every program they run (it also
runs at exit; the next code reward starts a new one).
"""
from rlvr_jax.rewards._sandbox import close_sandboxes
from rlvr_jax.rewards.code import (SandboxConfig, SandboxResult, code_reward, code_rewards,
                                   extract_code, program_rewards, run_tests, run_tests_batch)
from rlvr_jax.rewards.format import extract_tag, format_reward
from rlvr_jax.rewards.length import overlong_penalty, overlong_penalty_jnp
from rlvr_jax.rewards.math import (answers_equivalent, extract_answer, extract_boxed,
                                   get_math_verifier, math_reward, math_verify_available,
                                   math_verify_reward, normalize_answer)
from rlvr_jax.rewards.pool import RewardPool

__all__ = [
    "SandboxConfig", "SandboxResult", "close_sandboxes", "code_reward", "code_rewards",
    "extract_code", "program_rewards", "run_tests", "run_tests_batch",
    "extract_tag", "format_reward",
    "overlong_penalty", "overlong_penalty_jnp",
    "answers_equivalent", "extract_answer", "extract_boxed", "get_math_verifier", "math_reward",
    "math_verify_available", "math_verify_reward", "normalize_answer",
    "RewardPool",
]
