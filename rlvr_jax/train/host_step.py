"""The split RL step for host verifiers: sample (jitted) → decode and score on the host →
update (jitted), with the same keys as the one program (`step.step_keys`). With a
multi-turn environment, sampling plays its episodes (`rlvr_jax.multiturn`): an on-device
environment inside the jitted sampler, a host environment between compiled segments."""
import functools
from typing import Callable, Optional

import jax
import optax

from rlvr_jax import multiturn, sampling, scoring
from rlvr_jax.models import ModelConfig
from rlvr_jax.train.rl_config import RLConfig
from rlvr_jax.train.state import TrainState
from rlvr_jax.scoring.reward_model import reward_model_shaper
from rlvr_jax.train.step import Batch, decode_layout, make_sample_fn, make_update_fn, step_keys


def make_episode_sampler(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                         env, *, tools=None, decode_shardings=None):
    """fn(params, batch, rng, examples) -> (Rollout, Episodes or None): plain sampling
    (env None), device episodes (jitted) or host episodes (`multiturn.play_on_host` with
    `tools`, a `multiturn.HostTools`)."""
    if env is None:
        sample_fn = make_sample_fn(model_config, sampling_config,
                                   decode_shardings=decode_shardings)
        return lambda params, batch, rng, examples: (sample_fn(params, batch, rng), None)
    if not getattr(env, "on_host", False):
        @jax.jit
        def device_fn(params, batch, rng):
            return multiturn.generate_episodes(
                decode_layout(params, decode_shardings, model_config.compute_dtype),
                batch["prompt_tokens"],
                batch["prompt_mask"], batch["answers"], rng, model_config=model_config,
                sampling_config=sampling_config, env=env)
        return lambda params, batch, rng, examples: device_fn(params, batch, rng)
    if tools is None:
        raise ValueError("a host environment needs its tools (multiturn.HostTools)")

    def host_fn(params, batch, rng, examples):
        return multiturn.play_on_host(
            params, batch["prompt_tokens"], batch["prompt_mask"], batch["answers"], rng,
            model_config=model_config, sampling_config=sampling_config, env=env, tools=tools,
            examples=examples)
    return host_fn


def make_host_rl_step(model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                      rl: RLConfig, tx: optax.GradientTransformation, verify: Callable,
                      tokenizer, *, value_tx: Optional[optax.GradientTransformation] = None,
                      decode_shardings=None, shapers=(),
                      reward_model: Optional[scoring.RewardModel] = None,
                      text_scoring: Optional[Callable] = None, env=None, tools=None):
    """`make_rl_step`'s twin for host verifiers: sample (jitted) → decode and score on the
    host (`scoring.score_on_host`) → update (jitted), with the same keys (`step_keys`).

    Args:
      verify: fn(completion_text, example) -> float reward (>= 1 is correct), scored in
        this process; or a `scoring.HostScorer` (e.g. a process pool with per-sample
        timeouts, a weighted sum of reward components).
      tokenizer: decodes the completions for `verify`.
      shapers: the reward components' shapers, applied before `rl`'s.
      reward_model: a reward model (`scoring.RewardModel`, parameters in
        `state.reward_params`) scored on device by a jitted call between sampling and the
        host scoring; its weighted score is added after `shapers` (`reward_model_shaper`).
      text_scoring: `scoring.host_text_scoring`'s fn(texts, examples, rollout) -> (shapers
        applied first, process rewards for the update, metrics), or None.
      env, tools: a multi-turn environment (`multiturn.DeviceEnv` or `HostEnv`, with its
        `HostTools`): episodes are sampled, `verify` reads the model's tokens only, the
        environment's rewards are added and its `tool/...` metrics logged.

    Returns:
      step(state, batch, examples) -> (state, metrics, {"tokens" [B', N], "mask" [B', N],
      "rewards" [B'], "correct" [B'] bool}) with `examples` the batch's P' examples. The
      state is donated.
    """
    sample = make_episode_sampler(model_config, sampling_config, env, tools=tools,
                                  decode_shardings=decode_shardings)
    update_fn = make_update_fn(model_config, sampling_config, rl, tx, value_tx=value_tx)
    g = sampling_config.num_samples
    rm_shaper = reward_model_shaper(reward_model)
    env_shaper = functools.partial(scoring.add_scores, weight=1.0)

    def host_rl_step(state: TrainState, batch: Batch, examples):
        rng, sample_rng, update_rng = step_keys(state.rng)
        before = (tools.calls, tools.seconds, tools.segments) if tools is not None else None
        rollout, episodes = sample(state.params, batch, sample_rng, examples)
        texts = scoring.decode_completions(tokenizer, rollout.tokens, rollout.model_mask)
        exs = [ex for ex in examples for _ in range(g)]
        first, steps, text_metrics = (text_scoring or (lambda *_: ((), None, {})))(
            texts, exs, rollout)
        extra = () if episodes is None else (
            functools.partial(env_shaper, scores=episodes.env_reward),)
        rewards, reward_metrics, correct = scoring.score_rows_on_host(
            rollout, texts, exs, verify=verify, rl=rl,
            max_new_tokens=sampling_config.max_new_tokens,
            shapers=tuple(first) + tuple(shapers) + rm_shaper(state, rollout) + extra)
        state, metrics = update_fn(state.replace(rng=rng), rollout, rewards, update_rng, steps)
        metrics.update(reward_metrics, **text_metrics)
        if episodes is not None:
            metrics.update(multiturn.episode_metrics(rollout, episodes, rewards))
        if before is not None:
            metrics.update(multiturn.host.cost_metrics(tools, before))
        return state, metrics, {"tokens": rollout.tokens, "mask": rollout.mask,
                                "rewards": rewards, "correct": correct}
    return host_rl_step
