"""Multi-turn rollouts in ONE compiled program: the model's turns, the environment's
observations and the KV cache all stay on the device.

    rollout, episodes = generate_episodes(params, prompt_tokens, prompt_mask, answers, rng,
                                          model_config=mc, sampling_config=sc, env=env)

Each row is one episode, written into the N = `max_new_tokens` completion columns in order:
model turn, observation, model turn, ... The decode loop is `sampling.generate`'s (prefill
once per prompt, G rows per prompt, one token per row per step) with one change: the token
of column t comes from `advance`, which takes the sampled token while the row is in a model
turn and the next observation token while it is in an observation. Observation tokens are
thus fed through the decode loop one per step and land in the cache like any token; when a
model turn ends with a close tag the environment's `step` (a pure JAX function, under a
`lax.cond` that skips it when no row called) writes the next observation.

The `Rollout` carries `mask` (every real token, observations included: what attention sees),
`loss_mask` (the model's tokens only: what is trained on and scored) and `turn_ids`.
`replay_model_mask` runs the same `advance` over a given trace (the warm-up's worked
solutions) to find its observation tokens, and checks them against the environment.
"""
from typing import Tuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling
from rlvr_jax.models import decoding
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.multiturn.env import DeviceEnv, EnvStep


@flax.struct.dataclass
class Episodes:
    """Per-episode statistics of a multi-turn rollout (B rows).

    Attributes:
      turns: [B] int32 model turns written (ended by a stop token, a call or truncation).
      calls: [B] int32 tool calls the environment answered.
      errors: [B] int32 of those calls, the ones the tool reported as errors.
      env_reward: [B] float32 the environment's per-turn rewards, summed.
      turn_reward: [B, K] float32 the environment's reward of each model turn (K =
        `env.max_turns`; the reward of the call that ended turn k, 0 without one).
      turn_error: [B, K] int32, 1 where the call that ended turn k was a tool error.
    """
    turns: jax.Array
    calls: jax.Array
    errors: jax.Array
    env_reward: jax.Array
    turn_reward: jax.Array
    turn_error: jax.Array


@flax.struct.dataclass
class TurnState:
    """Where each row is in its episode (B rows; O observation slots, M turn slots)."""
    obs: jax.Array        # [B, O] the observation being written
    obs_len: jax.Array    # [B]
    obs_pos: jax.Array    # [B] next observation token to write
    in_obs: jax.Array     # [B] bool: the next column is an observation token
    turn: jax.Array       # [B, M] the current model turn's tokens
    turn_len: jax.Array   # [B]
    done: jax.Array       # [B] bool
    cut: jax.Array        # [B] bool: ended by a full turn (truncated)
    pending: jax.Array    # [B] bool: called a host environment, not answered yet
    stats: Episodes
    env: object           # the environment's per-row state


def init_turns(env: DeviceEnv, env_state, batch: int) -> TurnState:
    """Every row at the start of its first model turn."""
    zi = jnp.zeros((batch,), jnp.int32)
    return TurnState(obs=jnp.zeros((batch, env.max_obs_tokens), jnp.int32), obs_len=zi,
                     obs_pos=zi, in_obs=jnp.zeros((batch,), bool),
                     turn=jnp.zeros((batch, env.max_turn_tokens), jnp.int32), turn_len=zi,
                     done=jnp.zeros((batch,), bool), cut=jnp.zeros((batch,), bool),
                     pending=jnp.zeros((batch,), bool),
                     stats=Episodes(turns=zi, calls=zi, errors=zi,
                                    env_reward=jnp.zeros((batch,), jnp.float32),
                                    turn_reward=jnp.zeros((batch, env.max_turns), jnp.float32),
                                    turn_error=jnp.zeros((batch, env.max_turns), jnp.int32)),
                     env=env_state)


def _member(tok, ids):
    """[B] bool: tok [B] is one of `ids` (a static tuple)."""
    if not ids:
        return jnp.zeros(tok.shape, bool)
    return jnp.any(tok[:, None] == jnp.asarray(ids, jnp.int32)[None, :], axis=-1)


def _where_rows(rows, new, old):
    """Per row: new where rows [B] else old, over matching pytrees of [B, ...] arrays."""
    return jax.tree.map(lambda n, o: jnp.where(rows.reshape((-1,) + (1,) * (n.ndim - 1)), n, o),
                        new, old)


def _call_env(env: DeviceEnv, s: TurnState, ask):
    """(env state, EnvStep) of the rows in `ask`; the env runs only if some row asks."""
    def run(_):
        return env.step(s.env, s.turn, s.turn_len)

    def skip(_):
        b = ask.shape[0]
        return s.env, env.reply(jnp.zeros((b, env.max_obs_tokens), jnp.int32),
                                jnp.zeros((b,), jnp.int32))

    new_env, out = jax.lax.cond(jnp.any(ask), run, skip, None)
    return _where_rows(ask, new_env, s.env), out


def advance(env: DeviceEnv, stop_ids: Tuple[int, ...], pad_id: int, s: TurnState,
            proposed: jax.Array, *, host: bool = False
            ) -> Tuple[TurnState, jax.Array, jax.Array, jax.Array]:
    """One column of every episode: the model's proposed token or the next observation token.

    A turn that ends with a call is answered at once by an on-device `env.step` (`answer`);
    with `host` (a host environment's loop, `multiturn.play_on_host`) the row is marked
    `pending` instead and the caller answers it before the next column.

    Args:
      s: the rows' state before this column.
      proposed: [B] int32, the token the model would write (sampled, or a trace's token).

    Returns:
      (the state after this column, token [B] written (pad_id in finished rows), is_model
      [B] bool (the model wrote it), live [B] bool (the row was not finished), turn_id [B]).
    """
    live = ~s.done
    in_obs = s.in_obs & live
    obs_tok = jnp.take_along_axis(
        s.obs, jnp.clip(s.obs_pos, 0, env.max_obs_tokens - 1)[:, None], axis=1)[:, 0]
    token = jnp.where(live, jnp.where(in_obs, obs_tok, proposed), pad_id).astype(jnp.int32)
    is_model = live & ~in_obs
    turn_id = s.stats.turns - in_obs.astype(jnp.int32)

    # The model's turn: record the token; a stop token, a close tag or a full turn ends it.
    slot = jax.lax.broadcasted_iota(jnp.int32, s.turn.shape, 1) == s.turn_len[:, None]
    turn = jnp.where(is_model[:, None] & slot, token[:, None], s.turn)
    turn_len = s.turn_len + is_model
    stop = is_model & _member(token, stop_ids)
    call = is_model & _member(token, env.call_end_ids) & ~stop
    full = is_model & ~stop & ~call & (turn_len >= env.max_turn_tokens)
    turns = s.stats.turns + (stop | call | full)
    last_turn = call & (turns >= env.max_turns)
    ask = call & ~last_turn
    obs_pos = s.obs_pos + in_obs
    s = s.replace(turn=turn, turn_len=jnp.where(stop | full | last_turn, 0, turn_len),
                  obs_pos=obs_pos, in_obs=in_obs & (obs_pos < s.obs_len),
                  done=s.done | stop | full | last_turn, cut=s.cut | full,
                  stats=s.stats.replace(turns=turns))
    if host:
        return s.replace(pending=ask), token, is_model, live, turn_id
    env_state, out = _call_env(env, s, ask)
    return answer(env, s, ask, env_state, out), token, is_model, live, turn_id


def answer(env: DeviceEnv, s: TurnState, ask: jax.Array, env_state, out: EnvStep) -> TurnState:
    """The rows in `ask` [B] get the environment's answer `out`: their next columns are its
    observation (if any), their turn restarts, its reward / error / done are recorded."""
    obs_len = jnp.clip(out.obs_len, 0, env.max_obs_tokens)
    stats = s.stats
    k = jax.lax.broadcasted_iota(jnp.int32, stats.turn_reward.shape, 1)
    this_turn = ask[:, None] & (k == stats.turns[:, None] - 1)  # The call ended turn turns−1.
    return s.replace(
        obs=jnp.where(ask[:, None], out.obs.astype(jnp.int32), s.obs),
        obs_len=jnp.where(ask, obs_len, s.obs_len), obs_pos=jnp.where(ask, 0, s.obs_pos),
        in_obs=jnp.where(ask, obs_len > 0, s.in_obs), turn_len=jnp.where(ask, 0, s.turn_len),
        done=s.done | (ask & out.done), pending=s.pending & ~ask, env=env_state,
        stats=stats.replace(calls=stats.calls + ask, errors=stats.errors + (ask & out.error),
                            env_reward=stats.env_reward + jnp.where(ask, out.reward, 0.0),
                            turn_reward=stats.turn_reward + jnp.where(
                                this_turn, out.reward[:, None].astype(jnp.float32), 0.0),
                            turn_error=stats.turn_error + (this_turn & out.error[:, None])))


def _write(buffers, t, columns):
    """Writes columns [B] at column t of the first len(columns) [B, N] buffers (the rest are
    passed through)."""
    return tuple(jax.lax.dynamic_update_slice_in_dim(buf, col[:, None].astype(buf.dtype), t,
                                                     axis=1)
                 for buf, col in zip(buffers, columns)) + tuple(buffers[len(columns):])


def _start(params, prompt_tokens, prompt_mask, answers, *, model_config: ModelConfig,
           sampling_config: sampling.SamplingConfig, env: DeviceEnv):
    """Prefill the P prompts once and share them over G rows each: (prepared params, a cache
    of Tp + N - 1 slots for B = P·G rows (the prompts' KV copied or `share_prompt_kv`),
    first-token logits [B, V], (prompt tokens, prompt mask) [B, Tp], the rows' TurnState
    after `env.reset`)."""
    g, n = sampling_config.num_samples, sampling_config.max_new_tokens
    tp = prompt_tokens.shape[1]
    prompt_tokens = prompt_tokens.astype(jnp.int32)
    prompt_mask = (prompt_mask != 0).astype(jnp.int32)
    prepared, cache, first_logits = sampling.prefill(params, prompt_tokens, prompt_mask,
                                                     model_config=model_config,
                                                     sampling_config=sampling_config)
    cache = decoding.resize_cache(cache, tp + n - 1, g, sampling_config.share_prompt_kv)
    rows = (jnp.repeat(prompt_tokens, g, axis=0), jnp.repeat(prompt_mask, g, axis=0))
    env_state = env.reset(*rows, jnp.repeat(jnp.asarray(answers, jnp.int32), g))
    return (prepared, cache, jnp.repeat(first_logits, g, axis=0), rows,
            init_turns(env, env_state, rows[0].shape[0]))


def _column(t, logits, key, turns, buffers, *, sampling_config, env, host=False):
    """Samples a token for every row, `advance`s, writes column t of the [B, N] buffers
    (tokens, log-probs, mask, loss mask, turn ids)."""
    sc = sampling_config
    proposed, logp = sampling.sample_token(logits, key, sc)
    turns, tok, is_model, live, turn_id = advance(env, sc.stop_token_ids, sc.pad_id, turns,
                                                  proposed, host=host)
    buffers = _write(buffers, t, (tok, jnp.where(is_model, logp, 0.0), live, is_model,
                                  jnp.where(live, turn_id, -1)))
    return turns, tok, live, buffers


def single_turn_only(sampling_config: sampling.SamplingConfig) -> None:
    """ValueError when `sampling_config` asks for tree rollouts: episodes do not fork."""
    if sampling_config.tree is not None:
        raise ValueError("tree rollouts (sampling_config.tree) fork single-turn samples "
                         "only; an environment's episodes do not fork")


def begin(params, prompt_tokens, prompt_mask, answers, rng, *, model_config: ModelConfig,
          sampling_config: sampling.SamplingConfig, env: DeviceEnv, host: bool = False):
    """(prepared params, step key, loop state) after the prefill and column 0; the loop
    state is (t, cache, token fed next [B], live [B], TurnState, buffers). host: the
    environment answers between segments (`advance`)."""
    single_turn_only(sampling_config)
    sc, n = sampling_config, sampling_config.max_new_tokens
    prepared, cache, first_logits, prompts, turns = _start(
        params, prompt_tokens, prompt_mask, answers, model_config=model_config,
        sampling_config=sc, env=env)
    b = first_logits.shape[0]
    rngs = jax.random.split(rng, 2)
    buffers = (jnp.full((b, n), sc.pad_id, jnp.int32), jnp.zeros((b, n), jnp.float32),
               jnp.zeros((b, n), jnp.int32), jnp.zeros((b, n), jnp.int32),
               jnp.full((b, n), -1, jnp.int32), prompts[0], prompts[1])
    turns, tok, live, buffers = _column(0, first_logits, rngs[0], turns, buffers,
                                        sampling_config=sc, env=env, host=host)
    return prepared, rngs[1], (jnp.ones((), jnp.int32), cache, tok, live, turns, buffers)


def decode(prepared, step_key, state, *, model_config: ModelConfig,
           sampling_config: sampling.SamplingConfig, env: DeviceEnv, host: bool = False):
    """Runs the decode loop from `state` until every episode is over, the N columns are
    written, or (`host`: a host environment) some row waits for an answer; returns the loop
    state."""
    mc, sc = model_config, sampling_config

    def body(state):  # Step t feeds column t - 1 (cache slot Tp + t - 1), writes column t.
        t, cache, tok, live, turns, buffers = state
        prep, t = jax.lax.optimization_barrier((prepared, t))  # As in `sampling.decode_step`.
        logits, cache = decoding.forward(prep, tok[:, None], config=mc, cache=cache,
                                         attention_mask=live[:, None].astype(jnp.int32))
        turns, tok, live, buffers = _column(t, logits[:, 0], jax.random.fold_in(step_key, t),
                                            turns, buffers, sampling_config=sc, env=env,
                                            host=host)
        return t + 1, cache, tok, live, turns, buffers

    def cond(state):
        turns = state[4]
        return (state[0] < sc.max_new_tokens) & ~jnp.all(turns.done) & ~jnp.any(turns.pending)

    return jax.lax.while_loop(cond, body, state)


def finish(state) -> Tuple[sampling.Rollout, Episodes]:
    """(Rollout, Episodes) of a finished loop state."""
    turns = state[4]
    tokens, logps, masks, loss_masks, turn_ids, prompt_tokens, prompt_mask = state[5]
    rollout = sampling.Rollout(
        tokens=tokens, mask=masks, logprobs=logps,
        lengths=jnp.sum(masks, axis=1, dtype=jnp.int32), finished=turns.done & ~turns.cut,
        prompt_tokens=prompt_tokens, prompt_mask=prompt_mask, loss_mask=loss_masks,
        turn_ids=turn_ids)
    return rollout, turns.stats


def generate_episodes(params, prompt_tokens: jax.Array, prompt_mask: jax.Array,
                      answers: jax.Array, rng: jax.Array, *, model_config: ModelConfig,
                      sampling_config: sampling.SamplingConfig, env: DeviceEnv
                      ) -> Tuple[sampling.Rollout, Episodes]:
    """G episodes for each of P prompts; traceable under an outer `jax.jit`.

    Args:
      params: model parameters.
      prompt_tokens, prompt_mask: [P, Tp] left-padded prompts (>= 1 real token each).
      answers: [P] int32 reference answers (given to `env.reset`, one per row).
      rng: PRNG key; the same key gives the same episodes.
      model_config, sampling_config: static, as for `sampling.generate`
        (`cache_window` is not used: one loop over the full cache).
      env: the on-device environment (static).

    Returns:
      (Rollout with B = P·G rows, N = max_new_tokens columns, `loss_mask` and
      `turn_ids` (`finished`: the episode ended by a stop token, the environment or a call
      in its last turn, not by a full turn or the column budget); Episodes).
    """
    sampling.check_shapes(prompt_tokens, prompt_mask, model_config, sampling_config)
    kw = dict(model_config=model_config, sampling_config=sampling_config, env=env)
    prepared, step_key, state = begin(params, prompt_tokens, prompt_mask, answers, rng, **kw)
    return finish(decode(prepared, step_key, state, **kw))


def replay_model_mask(env: DeviceEnv, stop_ids: Tuple[int, ...], pad_id: int,
                      tokens: jax.Array, mask: jax.Array, prompt_tokens: jax.Array,
                      prompt_mask: jax.Array, answers: jax.Array
                      ) -> Tuple[jax.Array, jax.Array]:
    """Runs `advance` over given traces (e.g. the warm-up's worked solutions, which hold the
    observations the environment would write), jittable.

    Args:
      tokens, mask: [B, N] the traces (right-padded completions, observations included).
      prompt_tokens, prompt_mask: [B, Tp]; answers: [B] int32 (for `env.reset`).

    Returns:
      (model_mask [B, N] int32: 1 on the tokens the model writes, 0 on observations;
       agrees [B] bool: every observation token in the trace is the environment's, and the
       episode ends where the trace does).
    """
    b = tokens.shape[0]
    turns = init_turns(env, env.reset(prompt_tokens, prompt_mask, answers), b)
    tokens = tokens.astype(jnp.int32)
    mask = mask.astype(bool)

    def body(turns, xs):
        tok, real = xs
        turns, written, is_model, live, _ = advance(env, stop_ids, pad_id, turns, tok)
        ok = jnp.where(real, live & (written == tok), ~live)
        return turns, (is_model & real, ok)

    _, (model, ok) = jax.lax.scan(body, turns, (tokens.T, mask.T))
    return model.T.astype(jnp.int32), jnp.all(ok.T, axis=1)


_jit_replay = jax.jit(replay_model_mask, static_argnums=(0, 1, 2))


def trace_model_mask(env: DeviceEnv, stop_ids: Tuple[int, ...], pad_id: int, tokens, mask,
                     prompt_tokens, prompt_mask, answers=None) -> Tuple[np.ndarray, np.ndarray]:
    """Host-side `replay_model_mask` (compiled once per shape): (model_mask [B, N] int32,
    agrees [B] bool) as numpy arrays; `answers` default to 0."""
    tokens = np.asarray(tokens)
    answers = np.zeros((tokens.shape[0],), np.int32) if answers is None else answers
    model, agrees = _jit_replay(env, tuple(stop_ids), int(pad_id), jnp.asarray(tokens),
                                jnp.asarray(np.asarray(mask)), jnp.asarray(prompt_tokens),
                                jnp.asarray(prompt_mask), jnp.asarray(answers, jnp.int32))
    return np.asarray(model), np.asarray(agrees)


jit_generate_episodes = jax.jit(generate_episodes,
                                static_argnames=("model_config", "sampling_config", "env"))


def sample_episodes(params, prompt_tokens, prompt_mask, answers, rng, *,
                    model_config: ModelConfig, sampling_config: sampling.SamplingConfig,
                    env: DeviceEnv) -> Tuple[sampling.Rollout, Episodes]:
    """Host-side `generate_episodes`: checks the prompts (`sampling.validate_prompts`), then
    runs the compiled program at the prompts' own width."""
    sampling.validate_prompts(prompt_tokens, prompt_mask, model_config=model_config,
                              sampling_config=sampling_config)
    return jit_generate_episodes(
        params, jnp.asarray(np.asarray(prompt_tokens), jnp.int32),
        jnp.asarray(np.asarray(prompt_mask), jnp.int32), jnp.asarray(answers, jnp.int32), rng,
        model_config=model_config, sampling_config=sampling_config, env=env)


__all__ = ["Episodes", "EnvStep", "TurnState", "advance", "generate_episodes",
           "jit_generate_episodes", "replay_model_mask", "sample_episodes", "init_turns",
           "trace_model_mask"]
