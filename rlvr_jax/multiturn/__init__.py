"""Multi-turn rollouts with on-device tools, in one compiled program (docs/multiturn.md).

    env = multiturn.Calculator.for_tokenizer(tokenizer, max_turns=2)
    rollout, episodes = multiturn.generate_episodes(params, prompt_tokens, prompt_mask,
                                                    answers, rng, model_config=mc,
                                                    sampling_config=sc, env=env)
    # rollout.mask: every real token (observations too); rollout.loss_mask: the model's.

`make_rl_step(..., env=env)` trains on such episodes: observations are attended to but
get no gradient and no KL; rewards are scored on the model's tokens only.
"""
from rlvr_jax.multiturn.calculator import Calculator, evaluate_call
from rlvr_jax.multiturn.env import DeviceEnv, EnvStep
from rlvr_jax.multiturn.metrics import episode_metrics
from rlvr_jax.multiturn.rollout import (Episodes, advance, generate_episodes,
                                        jit_generate_episodes, replay_model_mask,
                                        sample_episodes, trace_model_mask)

ENVS = {"calculator": Calculator}


def build_env(name: str, tokenizer, *, max_turns: int, max_turn_tokens: int) -> DeviceEnv:
    """An environment by name ("calculator"), for `tokenizer`'s token ids."""
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; known: {sorted(ENVS)}")
    return ENVS[name].for_tokenizer(tokenizer, max_turns=max_turns,
                                    max_turn_tokens=max_turn_tokens)


__all__ = ["Calculator", "DeviceEnv", "EnvStep", "Episodes", "ENVS", "advance", "build_env",
           "episode_metrics", "evaluate_call", "generate_episodes", "jit_generate_episodes",
           "replay_model_mask", "sample_episodes", "trace_model_mask"]
