"""Multi-turn episodes with tools on the host, the KV cache kept on the device.

Most real tools — a Python interpreter, a search over a corpus, a game — cannot be JAX
functions. `play_on_host` runs the same decode loop as `generate_episodes` in compiled
segments: a segment stops as soon as some row's model turn ends with a call (its row is
marked `pending`, `advance`) or every episode is over; the host then reads the calling rows'
turns, runs the tool calls in parallel threads, writes the observations into the loop state
(`answer`, compiled) and the next segment continues from the same cache. The rows that did
not call only pause. With the same seed, an environment gives the same episodes on either
path (tested with the calculator).

    env = HostCalculator(call_end_ids=(close_id,), max_turns=2, max_turn_tokens=16,
                         max_obs_tokens=10)
    tools = HostTools(env, tokenizer, num_workers=4)
    rollout, episodes = play_on_host(params, prompt_tokens, prompt_mask, answers, rng,
                                     model_config=mc, sampling_config=sc, env=env,
                                     tools=tools, examples=examples)

A tool that raises, or runs past `timeout_s`, answers with `error_text` (counted in
`tool/error_rate`) and the episode goes on. A thread cannot be killed: a hung pure-Python
call keeps its (daemon) thread; tools that run untrusted code should run it in a killable
process, as `PythonTool` does (the sandbox of `rlvr_jax.rewards.code`).
"""
import dataclasses
import functools
import threading
import time
from typing import Any, ClassVar, List, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import distributed, sampling
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.multiturn.env import DeviceEnv, EnvStep
from rlvr_jax.multiturn.rollout import Episodes, answer, begin, decode, finish


@dataclasses.dataclass
class HostReply:
    """A host tool's answer to one call: observation text, the row's new state, reward,
    done (end the episode), error (a failed call)."""
    text: str
    state: Any = None
    reward: float = 0.0
    done: bool = False
    error: bool = False


@dataclasses.dataclass(frozen=True)
class HostEnv(DeviceEnv):
    """Base class of host environments (same limits as `DeviceEnv`; hashable, so it is a
    static argument of the compiled segments).

    Subclasses implement `respond` (and `start` for per-episode state). Attributes besides
    `DeviceEnv`'s: timeout_s (per call), error_text (the observation of a failed call).
    """
    on_host: ClassVar[bool] = True
    timeout_s: float = 5.0
    error_text: str = " error"

    def start(self, example) -> Any:
        """The state of a new episode on `example` (a task `Example`, or None)."""
        del example
        return None

    def respond(self, state: Any, turn_text: str) -> HostReply:
        """Answers one call: `turn_text` is the model's turn (close tag included)."""
        raise NotImplementedError

    def step(self, state, turn, turn_len):
        raise ValueError(f"{type(self).__name__} runs on the host: use multiturn.play_on_host "
                         "(or a rlvr_jax.sampler.Sampler)")


class HostTools:
    """Runs a `HostEnv`'s calls for a batch of episodes: `num_workers` calls at a time, each
    in its own daemon thread with the env's `timeout_s` (a hung call never blocks the run or
    the interpreter's exit), or the env's own `respond_batch` when it has one (e.g. the
    Python tool's batch of sandboxed programs).

    Args:
      env: the environment; tokenizer: decodes the turns and encodes the observations
      (cut to `env.max_obs_tokens`); num_workers: parallel calls.
    Attributes: calls, seconds (host time spent answering them), segments (compiled decode
    segments run): running totals, for the cost per call (`cost_metrics`).
    """

    def __init__(self, env: HostEnv, tokenizer, *, num_workers: int = 4):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.env, self.tokenizer, self.num_workers = env, tokenizer, num_workers
        self.calls, self.seconds, self.segments = 0, 0.0, 0

    def close(self) -> None:
        """Nothing to stop (calls run in daemon threads); kept for `with` blocks."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, state, text) -> Tuple[threading.Thread, dict]:
        box = {}

        def run():
            try:
                box["reply"] = self.env.respond(state, text)
            except BaseException as e:  # noqa: BLE001  (the row gets an error observation)
                box["error"] = e
        thread = threading.Thread(target=run, daemon=True, name="host-tool")
        thread.start()
        return thread, box

    def _replies(self, states, texts) -> List[HostReply]:
        if hasattr(self.env, "respond_batch"):
            return self.env.respond_batch(states, texts, parallel=self.num_workers)
        replies = []
        for start in range(0, len(texts), self.num_workers):
            calls = [self._call(st, tx) for st, tx in zip(states[start:start + self.num_workers],
                                                          texts[start:start + self.num_workers])]
            deadline = time.monotonic() + self.env.timeout_s
            for thread, box in calls:
                thread.join(max(0.0, deadline - time.monotonic()))
                reply = box.get("reply")
                replies.append(reply if isinstance(reply, HostReply)
                               else HostReply(self.env.error_text, _KEEP, error=True))
        return replies

    def answer(self, states: List[Any], turn: np.ndarray, turn_len: np.ndarray,
               pending: np.ndarray) -> EnvStep:
        """Runs the pending rows' calls; updates `states` in place; returns the `EnvStep`
        ([B, O] observation ids and lengths, rewards, done, error) for every row."""
        b, o = turn.shape[0], self.env.max_obs_tokens
        rows = [int(i) for i in np.flatnonzero(pending)]
        t0 = time.monotonic()
        texts = [self.tokenizer.decode([int(x) for x in turn[i, :turn_len[i]]]) for i in rows]
        replies = self._replies([states[i] for i in rows], texts)
        obs, lengths = np.zeros((b, o), np.int32), np.zeros((b,), np.int32)
        reward, done, error = (np.zeros((b,), np.float32), np.zeros((b,), bool),
                               np.zeros((b,), bool))
        for i, reply in zip(rows, replies):
            if reply.state is not _KEEP:
                states[i] = reply.state
            ids = list(self.tokenizer.encode(reply.text))[:o]
            obs[i, :len(ids)], lengths[i] = ids, len(ids)
            reward[i], done[i], error[i] = reply.reward, reply.done, reply.error
        self.calls += len(rows)
        self.seconds += time.monotonic() - t0
        return EnvStep(obs=obs, obs_len=lengths, reward=reward, done=done, error=error)


_KEEP = object()  # A failed call leaves the row's state as it was.


def cost_metrics(tools: HostTools, before: Tuple[int, float, int]) -> dict:
    """tool/host_ms_per_call and tool/segments since `before` = (calls, seconds, segments)
    read from `tools` earlier."""
    calls, seconds, segments = (tools.calls - before[0], tools.seconds - before[1],
                                tools.segments - before[2])
    return {"tool/host_ms_per_call": 1000.0 * seconds / max(calls, 1),
            "tool/segments": float(segments)}


@functools.partial(jax.jit, static_argnames=("env",))
def _answer_pending(state, out: EnvStep, *, env: HostEnv):
    turns = state[4]
    return state[:4] + (answer(env, turns, turns.pending, turns.env, out),) + state[5:]


_begin = jax.jit(functools.partial(begin, host=True),
                 static_argnames=("model_config", "sampling_config", "env"))
_decode = jax.jit(functools.partial(decode, host=True),
                  static_argnames=("model_config", "sampling_config", "env"))
_finish = jax.jit(finish)


def play_on_host(params, prompt_tokens, prompt_mask, answers, rng, *, model_config: ModelConfig,
                 sampling_config: sampling.SamplingConfig, env: HostEnv, tools: HostTools,
                 examples: Sequence = ()) -> Tuple[sampling.Rollout, Episodes]:
    """G episodes for each of P prompts with a host environment (see the module docstring).

    Args: as `generate_episodes`, plus tools (runs the calls) and examples (the P prompts'
    examples, given to `env.start`; default None each). Not traceable: call it outside jit.

    Returns: (Rollout, Episodes), the same layout as `generate_episodes`.
    """
    sampling.validate_prompts(*distributed.to_host((prompt_tokens, prompt_mask)),
                              model_config=model_config,
                              sampling_config=sampling_config)
    kw = dict(model_config=model_config, sampling_config=sampling_config, env=env)
    g = sampling_config.num_samples
    examples = list(examples) or [None] * len(prompt_tokens)
    if len(examples) != len(prompt_tokens):
        raise ValueError(f"{len(examples)} examples for {len(prompt_tokens)} prompts")
    states = [env.start(ex) for ex in examples for _ in range(g)]
    prepared, key, state = _begin(params, jnp.asarray(prompt_tokens, jnp.int32),
                                  jnp.asarray(prompt_mask, jnp.int32),
                                  jnp.asarray(answers, jnp.int32), rng, **kw)
    while True:
        turns = state[4]
        # Every process reads all rows and runs the tools on all of them (the calls must be
        # deterministic: the answers are fed back as the same value on every process).
        pending, turn, turn_len, done = distributed.to_host(
            (turns.pending, turns.turn, turns.turn_len, turns.done))
        if pending.any():
            out = tools.answer(states, turn, turn_len, pending)
            state = _answer_pending(state, out, env=env)
            done = distributed.to_host(state[4].done)
        if int(state[0]) >= sampling_config.max_new_tokens or done.all():
            return _finish(state)
        state = _decode(prepared, key, state, **kw)
        tools.segments += 1


def host_trace_model_mask(env: HostEnv, tokenizer, stop_ids: Sequence[int], tokens, mask,
                          examples: Sequence = ()) -> Tuple[np.ndarray, np.ndarray]:
    """`trace_model_mask` for a host environment (the same turn rules as `advance`, on the
    host): (model_mask [B, N] int32, agrees [B] bool) of traces [B, N] (right-padded, mask
    [B, N]) whose observations must be what `env.respond` answers on `examples` [B]."""
    tokens, mask = np.asarray(tokens), np.asarray(mask).astype(bool)
    model = np.zeros(tokens.shape, np.int32)
    agrees = np.ones((tokens.shape[0],), bool)
    examples = list(examples) or [None] * tokens.shape[0]
    stops, closes = set(int(t) for t in stop_ids), set(env.call_end_ids)
    for row, ex in enumerate(examples):
        ids = [int(t) for t in tokens[row][mask[row]]]
        state, turn, turns, i = env.start(ex), [], 0, 0
        while i < len(ids):
            tok = ids[i]
            model[row, i], i = 1, i + 1
            turn.append(tok)
            if tok in stops or (tok not in closes and len(turn) >= env.max_turn_tokens):
                break
            if tok not in closes:
                continue
            turns, text = turns + 1, tokenizer.decode(turn)
            if turns >= env.max_turns:
                break
            reply = env.respond(state, text)
            obs = list(tokenizer.encode(reply.text))[:env.max_obs_tokens]
            agrees[row] &= ids[i:i + len(obs)] == obs
            i, state, turn = i + len(obs), reply.state, []
            if reply.done:
                break
        agrees[row] &= i >= len(ids)
    return model, agrees
