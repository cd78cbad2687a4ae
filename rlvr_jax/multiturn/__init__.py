"""Multi-turn rollouts with tools (docs/multiturn.md).

On the device, in one compiled program (a `DeviceEnv` written in JAX):

    env = multiturn.Calculator.for_tokenizer(tokenizer, max_turns=2)
    rollout, episodes = multiturn.generate_episodes(params, prompt_tokens, prompt_mask,
                                                    answers, rng, model_config=mc,
                                                    sampling_config=sc, env=env)
    # rollout.mask: every real token (observations too); rollout.loss_mask: the model's.

On the host, between compiled segments (a `HostEnv`: Python tools, a sandbox, a game):

    rollout, episodes = multiturn.play_on_host(..., env=host_env,
                                               tools=multiturn.HostTools(host_env, tokenizer))

A `rlvr_jax.sampler.Sampler(..., env=env)` draws either kind for the RL step (device
episodes in one program, host episodes split at one seam), the evaluator and the warm-up:
observations are attended to but get no gradient and no KL; rewards are scored on the
model's tokens only.
"""
from rlvr_jax.multiturn.calculator import Calculator, evaluate_call
from rlvr_jax.multiturn.env import DeviceEnv, EnvStep
from rlvr_jax.multiturn.host import HostEnv, HostReply, HostTools, play_on_host
from rlvr_jax.multiturn.metrics import episode_metrics
from rlvr_jax.multiturn.rollout import (Episodes, advance, generate_episodes,
                                        jit_generate_episodes, replay_model_mask,
                                        sample_episodes, trace_model_mask)
from rlvr_jax.multiturn.tools import (GuessNumber, HostCalculator, LookupTool, PythonTool,
                                      call_body)

ENVS = {"calculator": Calculator, "calculator_host": HostCalculator, "python": PythonTool,
        "lookup": LookupTool, "guess_number": GuessNumber}
OBS_TOKENS = {"python": 32, "lookup": 32, "guess_number": 12}  # Default observation budgets.


def build_env(name: str, tokenizer, *, max_turns: int, max_turn_tokens: int,
              max_obs_tokens: int = 0, timeout_s: float = 5.0, corpus_path: str = "",
              turn_reward: float = 0.0):
    """An environment by name, for `tokenizer`'s token ids (close tag ``]``).

    name: "calculator" (on device), "calculator_host", "python", "lookup", "guess_number"
    (on the host). max_obs_tokens: 0 = the environment's default budget. turn_reward:
    guess_number's per-guess reward scale (0: none).
    """
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; known: {sorted(ENVS)}")
    if turn_reward and name != "guess_number":
        raise ValueError(f"env.turn_reward: only guess_number has a per-turn reward, not {name!r}")
    if name == "calculator":
        return Calculator.for_tokenizer(tokenizer, max_turns=max_turns,
                                        max_turn_tokens=max_turn_tokens)
    close = tokenizer.encode("]")
    if len(close) != 1:
        raise ValueError(f"the close tag ']' must be one token of the tokenizer, got {close}")
    kw = dict(call_end_ids=tuple(close), max_turns=max_turns, max_turn_tokens=max_turn_tokens,
              max_obs_tokens=max_obs_tokens or OBS_TOKENS.get(name, 10), timeout_s=timeout_s)
    if name == "lookup":
        kw["corpus_path"] = corpus_path
    if turn_reward:
        kw["turn_reward"] = float(turn_reward)
    return ENVS[name](**kw)


__all__ = ["Calculator", "DeviceEnv", "ENVS", "EnvStep", "Episodes", "GuessNumber",
           "HostCalculator", "HostEnv", "HostReply", "HostTools", "LookupTool", "PythonTool",
           "advance", "build_env", "call_body", "episode_metrics", "evaluate_call",
           "generate_episodes", "jit_generate_episodes", "play_on_host",
           "replay_model_mask", "sample_episodes", "trace_model_mask"]
