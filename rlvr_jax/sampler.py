"""The one rollout choice of a run: plain sampling, device episodes or host episodes.

    sampler = Sampler(model_config, sampling_config, env=env, tools=tools)   # env: optional
    rollout, episodes = sampler.trace(params, batch, rng)        # inside a compiled program
    rollout, episodes, metrics = sampler(params, batch, rng, examples)   # from the host
    rollout = sampler.sample(params, prompt_tokens, prompt_mask, rng, answers=..., examples=...)
    model_mask, agrees = sampler.replay(tokenizer, completions, mask, prompts, answers, examples)

Built once from the config (`train/build.py`) and used by the RL step, the evaluator and
the warm-up's replay of worked solutions. The constructor is the one place that asks
whether the rollout runs on the host (`traceable`): `env` None samples with
`sampling.generate` (tree rollouts too, `SamplingConfig.tree`), a `multiturn.DeviceEnv`
plays episodes inside the compiled program (`multiturn.generate_episodes`), a
`multiturn.HostEnv` plays them between compiled segments with its `multiturn.HostTools`
(`multiturn.play_on_host`); episodes do not fork.

Shapes: P prompts [P, Tp] (left-padded), G = sampling_config.num_samples, B = P·G rows,
N = max_new_tokens. `batch` = {"prompt_tokens" [P, Tp], "prompt_mask" [P, Tp],
"answers" [P] int32}.
"""
import dataclasses
from typing import Dict, Optional, Sequence

import flax.linen as nn
import jax
import numpy as np

from rlvr_jax import multiturn, sampling
from rlvr_jax.models import decoding
from rlvr_jax.models.config import ModelConfig


def decode_layout(params, decode_shardings=None, compute_dtype=None):
    """The parameters laid out for decoding (`decode_shardings`: a pytree of
    `NamedSharding`s like the params, e.g. replicated or tensor-parallel, so that decoding
    pays one re-layout per rollout instead of an all-gather per step, or a function of the
    parameter tree giving them (a tree with LoRA adapters or a quantized base has other
    leaves than the model's); None keeps them). With `compute_dtype` the weights are cast
    first, on their training shards (`decoding.cast_weights`), so the re-layout moves
    compute-dtype bytes."""
    if decode_shardings is None:
        return params
    if compute_dtype is not None:
        params = decoding.cast_weights(params, compute_dtype)
    if callable(decode_shardings):
        decode_shardings = decode_shardings(params)
    return jax.lax.with_sharding_constraint(params, decode_shardings)


class Sampler:
    """Rollouts of a policy (see the module docstring).

    Args:
      model_config, sampling_config: static, as for `sampling.generate`.
      env: None, a `multiturn.DeviceEnv` or a `multiturn.HostEnv`.
      tools: a host environment's `multiturn.HostTools`; without them they are made here
        from `tokenizer` (`tool_workers` calls at a time).
      decode_shardings: optional parameter layout for decoding (`decode_layout`: shardings
        or a function of the parameter tree giving them).
      decode_rules: logical-axis rules (`sharding.get_rules`) that `trace` constrains the
        rollout's activations and KV cache by (the decode layout's; None: the active ones).
        A tensor-parallel layout needs its own ("tp"), else XLA gathers its weights to meet
        batch-split activations.
    """

    def __init__(self, model_config: ModelConfig, sampling_config: sampling.SamplingConfig, *,
                 env=None, tools=None, tokenizer=None, tool_workers: int = 4,
                 decode_shardings=None, decode_rules=None):
        if env is not None:
            multiturn.rollout.single_turn_only(sampling_config)
        self.model_config, self.sampling_config = model_config, sampling_config
        self.env, self.decode_shardings, self.decode_rules = env, decode_shardings, decode_rules
        if decode_rules:  # The instance's trace runs under them.
            self.trace = _under_rules(self.trace, decode_rules)
        # The one question: does the rollout leave the compiled program (host episodes)?
        self.traceable = env is None or not env.on_host
        if not self.traceable and tools is None:
            if tokenizer is None:
                raise ValueError("a host environment needs its tools (multiturn.HostTools) "
                                 "or the tokenizer to make them")
            tools = multiturn.HostTools(env, tokenizer, num_workers=tool_workers)
        self.tools = tools if not self.traceable else None
        self._jitted = jax.jit(self.trace) if self.traceable else None

    def fuses_with(self, scorer) -> bool:
        """Whether one compiled program can sample and score (`train.step.make_step`): this
        sampler and `scorer` (a `scoring.Scorer`) are both traceable."""
        return self.traceable and scorer.traceable

    def replace(self, sampling_config: sampling.SamplingConfig) -> "Sampler":
        """The same rollout kind (environment, tools, layout) with another sampling config
        (e.g. the evaluator's greedy decoding)."""
        return Sampler(self.model_config, sampling_config, env=self.env, tools=self.tools,
                       decode_shardings=self.decode_shardings, decode_rules=self.decode_rules)

    def trace(self, params, batch: Dict, rng: jax.Array):
        """(Rollout [B rows], Episodes or None); traceable (raises for host episodes)."""
        if not self.traceable:
            raise ValueError(f"{type(self.env).__name__} runs on the host: call the sampler "
                             "outside jit")
        params = decode_layout(params, self.decode_shardings, self.model_config.compute_dtype)
        kw = dict(model_config=self.model_config, sampling_config=self.sampling_config)
        if self.env is None:
            return sampling.generate(params, batch["prompt_tokens"], batch["prompt_mask"], rng,
                                     **kw), None
        return multiturn.generate_episodes(params, batch["prompt_tokens"], batch["prompt_mask"],
                                           batch["answers"], rng, env=self.env, **kw)

    def __call__(self, params, batch: Dict, rng: jax.Array, examples: Sequence = ()):
        """(Rollout, Episodes or None, metrics) from the host: compiled (`trace` under jit),
        or host episodes on the P `examples` (metrics: the tools' cost per call)."""
        if self.traceable:
            rollout, episodes = self._jitted(params, batch, rng)
            return rollout, episodes, {}
        tools = self.tools
        before = (tools.calls, tools.seconds, tools.segments)
        rollout, episodes = multiturn.play_on_host(
            params, batch["prompt_tokens"], batch["prompt_mask"], batch["answers"], rng,
            model_config=self.model_config, sampling_config=self.sampling_config,
            env=self.env, tools=tools, examples=examples)
        return rollout, episodes, multiturn.host.cost_metrics(tools, before)

    def sample(self, params, prompt_tokens, prompt_mask, rng: jax.Array, *, answers=None,
               examples: Sequence = (), buckets: Optional[Sequence[int]] = None
               ) -> sampling.Rollout:
        """The Rollout of host arrays [P, Tp] (checked, `sampling.validate_prompts`); plain
        sampling pads Tp up to `buckets` (None: as given); `answers` [P] reach `env.reset`
        (default 0), `examples` [P] a host environment's `start`."""
        p = len(prompt_tokens)
        answers = np.zeros((p,), np.int32) if answers is None else np.asarray(answers, np.int32)
        kw = dict(model_config=self.model_config, sampling_config=self.sampling_config)
        if self.env is None:
            return sampling.sample(params, prompt_tokens, prompt_mask, rng, buckets=buckets, **kw)
        if self.traceable:
            return multiturn.sample_episodes(params, prompt_tokens, prompt_mask, answers, rng,
                                             env=self.env, **kw)[0]
        return multiturn.play_on_host(params, prompt_tokens, prompt_mask, answers, rng,
                                      env=self.env, tools=self.tools, examples=examples, **kw)[0]

    def replay(self, tokenizer, tokens, mask, prompt_tokens, prompt_mask, answers,
               examples: Sequence = ()):
        """(model_mask [B, N] int32, agrees [B] bool) of traces [B, N] (e.g. the warm-up's
        worked solutions, observations included): 1 on the tokens the model writes, and
        whether every observation is the environment's (`multiturn.trace_model_mask`; a
        host environment answers on `examples`). Without an environment: `mask`, all agree."""
        stops = self.sampling_config.stop_token_ids
        if self.env is None:
            return np.asarray(mask).astype(np.int32), np.ones((len(tokens),), bool)
        if self.traceable:
            return multiturn.trace_model_mask(self.env, stops, self.sampling_config.pad_id,
                                              tokens, mask, prompt_tokens, prompt_mask, answers)
        return multiturn.host.host_trace_model_mask(self.env, tokenizer, stops, tokens, mask,
                                                    examples)


def _under_rules(fn, rules):
    """`fn` traced under the logical-axis rules `rules` (Flax's, read by the models)."""
    def traced(*args, **kwargs):
        with nn.logical_axis_rules(rules):
            return fn(*args, **kwargs)
    return traced


def with_sampling(sampler: Sampler, **changes) -> Sampler:
    """`sampler` with some `SamplingConfig` fields changed."""
    return sampler.replace(dataclasses.replace(sampler.sampling_config, **changes))


__all__ = ["Sampler", "decode_layout", "with_sampling"]
