"""Jit-compiled sampling: prefill once per prompt, decode G completions with a KV cache.

    config = SamplingConfig(temperature=1.0, max_new_tokens=256, num_samples=8,
                            stop_token_ids=(eos,), pad_id=pad)
    rollout = generate(params, prompt_tokens, prompt_mask, rng,
                       model_config=model_config, sampling_config=config)

`generate` is a pure, traceable function (no host callbacks, no shapes that depend on
values), so a trainer can call it inside its own jitted RL step and shard the batch over a
mesh through the caller's shardings. `jit_generate` is the same function compiled on its
own; `sample` is a host-side wrapper that checks the prompts' values, pads the prompt length
up to a bucket (bounding the number of compilations) and calls `jit_generate`.

How it runs:
  1. Prefill: one forward pass over the P left-padded prompts writes their keys and values
     into a cache of Tp slots; the first new token is sampled from the hidden state of each
     prompt's last real token.
  2. The cache is repeated G times along the batch (row `p * G + g` is sample g of prompt
     p), or shared (`share_prompt_kv`), and padded with empty slots up to `Tp + N - 1`.
  3. Decode: a `lax.while_loop` feeds one token per row per step and stops when every row
     has produced a stop token or N tokens. Finished rows are fed `pad_id`, masked out of
     attention. From 128 new tokens on (or with `cache_window > 0`) it runs in phases over
     a cache that grows by `cache_window` slots per phase (`cache_phases`).
  4. Compaction (`compact_ratio`, on from 128 new tokens): once the live rows fit a smaller
     batch, the loop continues on them only, at the full cache size, each keeping its
     original row id for its sampling noise and its place in the outputs (`live_rows`).
  5. Tree rollouts (`SamplingConfig.tree`): rows fork into spare rows of their prompt
     between a step's forward and its sampling (`tree_rollouts`).

Log-probs. `Rollout.logprobs` holds log softmax(logits / temperature) of each sampled token,
*before* top-k / top-p truncation — the definition the trainer uses in
`rlvr_jax.models.sequence_logprobs(..., temperature=...)`.
"""
import dataclasses
import functools
import math
from typing import Optional, Sequence, Tuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import cache_phases, live_rows, tree_rollouts
from rlvr_jax.models import decode_attention, decoding
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.token_sampling import sample_tokens

DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


# ----------------------------------------------------------------------------- config

@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How to sample completions. Frozen and hashable: a static argument of `jax.jit`.

    Attributes:
      temperature: logits are divided by it before sampling and before the log-probs are
        taken; must be > 0 (`greedy=True` for argmax decoding; the log-probs then still
        use this temperature).
      top_k: keep only the k most likely tokens (0 = off).
      top_p: nucleus sampling: keep the smallest set of most likely tokens whose
        probability reaches top_p (1.0 = off). Applied after top_k.
      greedy: take the argmax instead of sampling.
      max_new_tokens: N, the completion length (the loop may stop earlier).
      stop_token_ids: tokens that end a completion (included in its mask).
      num_samples: G, completions per prompt.
      pad_id: token written after a completion ends (and fed to the model).
      cache_dtype: KV-cache dtype (None = the model's compute dtype).
      cache_window: if > 0, decode in phases whose cache grows by this many slots, so
        attention reads only about the filled part (one compiled loop body per phase, one
        cache copy between phases). 0 = one loop over the full cache. None (default) =
        `cache_phases.auto_cache_window(max_new_tokens)`: on CPU 4 phases from 128 new
        tokens, 8 from 512.
      max_length: optional cap on prompt + new tokens (the cache size); longer prompts are
        rejected by `validate_prompts`.
      vocab_limit: if 0 < vocab_limit < V, ids >= vocab_limit are never drawn (a model
        whose embedding is padded past its tokenizer's vocabulary); 0 = off.
      compact_ratio: r in (0, 1): once the live rows fit in r of the loop's batch
        (rounded up to a multiple of 8, `live_rows.batch_sizes`), decoding continues on
        them only; what each row samples does not change. 0 = off (every row is carried
        until the last one ends). None (default) = `live_rows.auto_ratio(max_new_tokens)`:
        from 128 new tokens 0.7 on CPU, 0.5 down to 32 rows elsewhere; off below.
      attention_impl: the decode steps' attention (`decoding.forward`), one of
        `models.decode_attention.IMPLS` ("pallas": a kernel over the valid slots only), or
        None (default: `decode_attention.default_impl`, "plain" on CPU).
      tree: a `tree_rollouts.TreeConfig`: rows fork into spare rows of their prompt inside
        the decode loop (G rows stay the leaves; compaction once no row can fork any more);
        None (default): G independent samples.
      share_prompt_kv: a prompt's KV cache is kept once for its G rows, not copied G times
        (`models.decoding`; read once per group by each decode step). Off by default: it
        does not pay on CPU (docs/performance.md, issue 52); unmeasured on GPUs."""
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    greedy: bool = False
    max_new_tokens: int = 64
    stop_token_ids: Tuple[int, ...] = ()
    num_samples: int = 1
    pad_id: int = 0
    cache_dtype: Optional[str] = None
    cache_window: Optional[int] = None
    max_length: Optional[int] = None
    vocab_limit: int = 0
    compact_ratio: Optional[float] = None
    attention_impl: Optional[str] = None
    tree: Optional[tree_rollouts.TreeConfig] = None
    share_prompt_kv: bool = False

    def __post_init__(self):
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0
                and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a finite number > 0, got {self.temperature!r} "
                             "(use greedy=True for argmax decoding)")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.num_samples < 1:
            raise ValueError(f"num_samples (G) must be >= 1, got {self.num_samples}")
        if self.pad_id < 0 or any(t < 0 for t in self.stop_token_ids):
            raise ValueError("pad_id and stop_token_ids must be non-negative token ids")
        if self.vocab_limit < 0:
            raise ValueError(f"vocab_limit must be >= 0 (0 = off), got {self.vocab_limit}")
        if self.cache_window is not None:
            if isinstance(self.cache_window, bool) or not isinstance(
                    self.cache_window, (int, np.integer)) or self.cache_window < 0:
                raise ValueError(f"cache_window must be None (automatic) or an int >= 0 "
                                 f"(0 = off), got {self.cache_window!r}")
            object.__setattr__(self, "cache_window", int(self.cache_window))
        if self.max_length is not None and self.max_length <= self.max_new_tokens:
            raise ValueError(f"max_length ({self.max_length}) must exceed max_new_tokens "
                             f"({self.max_new_tokens})")
        if self.cache_dtype is not None:
            jnp.dtype(self.cache_dtype)  # Raises on unknown names.
        live_rows.check_ratio(self.compact_ratio)
        decode_attention.check_impl(self.attention_impl)
        if self.tree is not None:
            self.tree.check(self.num_samples, self.max_new_tokens)

    def replace(self, **changes) -> "SamplingConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@flax.struct.dataclass
class Rollout:
    """Sampled completions (a pytree). B = P * G; row p * G + g is sample g of prompt p.

    Attributes:
      tokens: [B, N] int32 completion tokens (`pad_id` after the end).
      mask: [B, N] int32, 1 up to and including the stop token, 0 after.
      logprobs: [B, N] float32 log softmax(logits / temperature) of each sampled
        token, before top-k/top-p truncation; 0 where `mask` is 0.
      lengths: [B] int32 number of completion tokens (= mask.sum(-1)).
      finished: [B] bool, True if a stop token ended the row, False if it ran
        out of new tokens.
      prompt_tokens: [B, Tp] int32 left-padded prompts, each repeated G times.
      prompt_mask: [B, Tp] int32.
      loss_mask: multi-turn rollouts only (`rlvr_jax.multiturn`): [B, N] int32, 1 on the
        tokens the model wrote, 0 on the environment's observation tokens (which `mask`
        counts: they are attended to) and after the end. None for single-turn rollouts.
      turn_ids: multi-turn only: [B, N] int32, the model turn each token belongs to (an
        observation belongs to the turn it answers); None for single-turn rollouts.
      decode_steps: [B] int32, the loop steps (the first token's included) each row was
        carried through: its tokens plus the steps it idled after its end, until the loop
        ended or compaction dropped it (`live_rows.useful_fraction`); None if multi-turn.
      fork_parent: tree rollouts only (`SamplingConfig.tree`): [B] int32, the row this row
        was copied from when it was forked (a row of the same prompt), itself for a root.
      fork_at: tree rollouts only: [B] int32, the leading completion tokens (and their
        log-probs) this row shares with `fork_parent` by copy; 0 for a root."""
    tokens: jax.Array
    mask: jax.Array
    logprobs: jax.Array
    lengths: jax.Array
    finished: jax.Array
    prompt_tokens: jax.Array
    prompt_mask: jax.Array
    loss_mask: Optional[jax.Array] = None
    turn_ids: Optional[jax.Array] = None
    decode_steps: Optional[jax.Array] = None
    fork_parent: Optional[jax.Array] = None
    fork_at: Optional[jax.Array] = None

    @property
    def model_mask(self) -> jax.Array:
        """[B, N]: the tokens the model wrote — what is trained on and scored (`mask` for a
        single-turn rollout, `loss_mask` for a multi-turn one)."""
        return self.mask if self.loss_mask is None else self.loss_mask

    def sequences(self) -> Tuple[jax.Array, jax.Array]:
        """(tokens [B, Tp + N], attention mask [B, Tp + N]): prompt then completion.

        Completion token n sits at column Tp + n, so
        `sequence_logprobs(params, *rollout.sequences(), ...)[0][:, Tp:]` lines up
        with `rollout.logprobs`."""
        return (jnp.concatenate([self.prompt_tokens, self.tokens], axis=1),
                jnp.concatenate([self.prompt_mask.astype(jnp.int32),
                                 self.mask.astype(jnp.int32)], axis=1))


# ----------------------------------------------------------------------------- one step

def sample_token(logits, rng, sc: SamplingConfig, rows=None):
    """(tokens [B], log-probs [B]) from logits [B, V] as `sc` says (rows [B]: the noise's
    row counters, `token_sampling.uniform_bits`)."""
    if 0 < sc.vocab_limit < logits.shape[-1]:  # Padded ids: never drawn.
        column = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
        logits = jnp.where(column < sc.vocab_limit, logits, jnp.finfo(logits.dtype).min)
    return sample_tokens(logits, rng, temperature=sc.temperature, top_k=sc.top_k,
                         top_p=sc.top_p, greedy=sc.greedy, rows=rows)


# ----------------------------------------------------------------------------- input checks

def bucket_length(n: int, buckets: Sequence[int] = DEFAULT_BUCKETS) -> int:
    """The smallest bucket >= n; beyond the largest, the next multiple of it."""
    if n < 1:
        raise ValueError(f"length must be >= 1, got {n}")
    buckets = sorted(int(b) for b in buckets)
    if not buckets or buckets[0] < 1:
        raise ValueError(f"buckets must be positive integers, got {buckets}")
    for b in buckets:
        if n <= b:
            return b
    return -(-n // buckets[-1]) * buckets[-1]


def left_pad(tokens, mask, length: int, pad_id: int = 0):
    """Pads [P, Tp] prompts on the left to [P, length] (numpy in, numpy out)."""
    tokens, mask = np.asarray(tokens), np.asarray(mask)
    extra = length - tokens.shape[1]
    if extra < 0:
        raise ValueError(f"cannot pad prompts of length {tokens.shape[1]} down to {length}")
    return (np.pad(tokens, ((0, 0), (extra, 0)), constant_values=pad_id),
            np.pad(mask, ((0, 0), (extra, 0))))


def check_shapes(prompt_tokens, prompt_mask, model_config, sampling_config, check_total=True):
    """Raises ValueError for configs of the wrong type or prompts [P, Tp] that do not fit
    (also used by `multiturn.generate_episodes`)."""
    if not isinstance(model_config, ModelConfig):
        raise ValueError(f"model_config must be a ModelConfig, got {type(model_config)}")
    if not isinstance(sampling_config, SamplingConfig):
        raise ValueError(f"sampling_config must be a SamplingConfig, got {type(sampling_config)}")
    if prompt_tokens.ndim != 2 or prompt_mask.shape != prompt_tokens.shape:
        raise ValueError(f"prompt_tokens and prompt_mask must both be [P, Tp]; got "
                         f"{prompt_tokens.shape} and {prompt_mask.shape}")
    p, tp = prompt_tokens.shape
    if p == 0 or tp == 0:
        raise ValueError(f"empty prompt batch: shape {prompt_tokens.shape}")
    sc = sampling_config
    total = tp + sc.max_new_tokens if check_total else 0
    if sc.max_length is not None and total > sc.max_length:
        raise ValueError(f"prompt length {tp} + max_new_tokens {sc.max_new_tokens} exceeds "
                         f"max_length {sc.max_length}")
    if total > model_config.max_position_embeddings:
        raise ValueError(f"prompt length {tp} + max_new_tokens {sc.max_new_tokens} exceeds the "
                         f"model's max_position_embeddings {model_config.max_position_embeddings}")
    v = model_config.vocab_size
    if sc.pad_id >= v or any(t >= v for t in sc.stop_token_ids):
        raise ValueError(f"pad_id / stop_token_ids must be < vocab_size {v}")


def validate_prompts(prompt_tokens, prompt_mask, *, model_config: ModelConfig,
                     sampling_config: SamplingConfig) -> None:
    """Raises ValueError for prompts `generate` cannot handle (host-side, before tracing).

    Checks the shapes, that every row has at least one real token, that the
    real tokens are aligned to the end (left padding), that token ids are in
    the vocabulary, and that the longest prompt + new tokens fit `max_length`
    and the model's `max_position_embeddings` (columns of pure padding do not
    count: `sample` trims them)."""
    tokens, mask = np.asarray(prompt_tokens), np.asarray(prompt_mask)
    check_shapes(tokens, mask, model_config, sampling_config, check_total=False)
    real = mask != 0
    lengths = real.sum(axis=1)
    if (lengths == 0).any():
        raise ValueError(f"empty prompts (no real token) in rows {np.flatnonzero(lengths == 0)}")
    if (np.diff(real.astype(np.int8), axis=1) < 0).any() or not real[:, -1].all():
        raise ValueError("prompts must be left-padded: padding first, then the real tokens")
    if ((tokens < 0) | (tokens >= model_config.vocab_size))[real].any():
        raise ValueError(f"prompt token ids must be in [0, {model_config.vocab_size})")
    longest = int(lengths.max()) + sampling_config.max_new_tokens
    if longest > _length_cap(model_config, sampling_config):
        raise ValueError(f"longest prompt ({lengths.max()}) + max_new_tokens "
                         f"({sampling_config.max_new_tokens}) exceeds the cache limit "
                         f"{_length_cap(model_config, sampling_config)} (max_length / the "
                         "model's max_position_embeddings)")


def _length_cap(model_config, sampling_config) -> int:
    """The largest prompt + new tokens allowed."""
    cap = model_config.max_position_embeddings
    if sampling_config.max_length is not None:
        cap = min(cap, sampling_config.max_length)
    return cap


# ----------------------------------------------------------------------------- generate

def decode_step(prepared, state: live_rows.DecodeState, step_key, *,
                model_config: ModelConfig, sampling_config: SamplingConfig):
    """One iteration of `generate`'s decode loop: feed token t - 1, sample token t.

    Args:
      prepared: `models.decoding.prepare_params(params, model_config)`.
      state: a `live_rows.DecodeState`.
      step_key: PRNG key; step t samples with `fold_in(step_key, t)`.

    Returns: the next `DecodeState`. Rows already done are fed `pad_id`, masked out of attention,
    and get pad / log-prob 0 / mask 0 in column t."""
    state, logits = feed_step(prepared, state, model_config=model_config,
                              sampling_config=sampling_config)
    return emit_step(state, logits, step_key, sampling_config)


def feed_step(prepared, state: live_rows.DecodeState, *, model_config: ModelConfig,
              sampling_config: SamplingConfig):
    """`decode_step`'s first half: (state with the cache that holds token t - 1, logits
    [b, V] of token t); done rows are fed `pad_id`, masked out of attention."""
    sc, mc, st = sampling_config, model_config, state
    # Tie the weights to the step counter: under a sharded (e.g. FSDP) layout, XLA would
    # otherwise hoist every layer's weight all-gather out of the decode loop and keep the
    # gathered weights of ALL layers alive for the whole rollout (+~0.5 GB per layer and
    # device for an 8B model on 8 devices). A no-op on one device.
    prepared, _ = jax.lax.optimization_barrier((prepared, st.t))
    active = ~st.done
    feed = jnp.where(active, st.token, sc.pad_id)
    logits, cache = decoding.forward(prepared, feed[:, None], config=mc, cache=st.cache,
                                     attention_mask=active[:, None].astype(jnp.int32),
                                     attention_impl=sc.attention_impl)
    return st._replace(cache=cache), logits[:, 0]


def emit_step(state: live_rows.DecodeState, logits, step_key, sc: SamplingConfig):
    """`decode_step`'s second half: samples token t from logits [b, V] with each row's
    noise (`state.rows`) and writes column t; done rows get pad / log-prob 0 / mask 0."""
    st, t = state, state.t
    active = ~st.done
    new, logp = sample_token(logits, jax.random.fold_in(step_key, t), sc, st.rows)
    new = jnp.where(active, new, sc.pad_id)
    column = lambda x, v: jax.lax.dynamic_update_slice_in_dim(x, v[:, None], t, axis=1)  # noqa
    done = st.done | _is_stop(new, sc.stop_token_ids)
    if st.budgets is not None:
        done = done | (t + 1 >= st.budgets)
    return st._replace(t=t + 1, token=new, done=done, tokens=column(st.tokens, new),
                       logprobs=column(st.logprobs, jnp.where(active, logp, 0.0)),
                       mask=column(st.mask, active.astype(jnp.int32)))


def _is_stop(tok, stop_token_ids):
    """[B] bool: whether each token is one of `stop_token_ids`."""
    if not stop_token_ids:
        return jnp.zeros(tok.shape, bool)
    return jnp.any(tok[:, None] == jnp.asarray(stop_token_ids, jnp.int32)[None, :], axis=-1)


def prefill(params, prompt_tokens, prompt_mask, *, model_config: ModelConfig,
            sampling_config: SamplingConfig):
    """Runs the P prompts once: (prepared params, a cache of exactly Tp slots, logits [P, V]
    float32 of each prompt's next token, from the hidden state of its last real token).

    The layer weights are sliced out of the stacked arrays once, here
    (`decoding.prepare_params`), not in every decode step."""
    mc, sc = model_config, sampling_config
    p, tp = prompt_tokens.shape
    prepared = decoding.prepare_params(params, mc)
    cache = decoding.init_cache(mc, p, tp, dtype=sc.cache_dtype)
    hidden, cache = decoding.forward(prepared, prompt_tokens, config=mc, cache=cache,
                                     attention_mask=prompt_mask, return_hidden=True)
    last = jnp.argmax(prompt_mask * jnp.arange(1, tp + 1, dtype=jnp.int32)[None], axis=1)
    last_hidden = jnp.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
    return prepared, cache, decoding.logits_from_hidden(prepared, last_hidden, mc)


def generate(
    params,
    prompt_tokens: jax.Array,
    prompt_mask: jax.Array,
    rng: jax.Array,
    *,
    model_config: ModelConfig,
    sampling_config: SamplingConfig,
    budgets: Optional[jax.Array] = None,
) -> Rollout:
    """Samples G completions for each of P prompts; traceable under an outer `jax.jit`.

    Args:
      params: model parameters (`rlvr_jax.models.init_params` or imported).
      prompt_tokens: [P, Tp] int32, left-padded.
      prompt_mask: [P, Tp], 1 for real tokens. Every row needs >= 1 real token
        (checked by `validate_prompts` / `sample`, which cannot run under jit).
      rng: PRNG key; the same key gives the same rollout.
      model_config: the model's config (static).
      sampling_config: a `SamplingConfig` (static).
      budgets: optional [B] int32 per-row token budgets in [1, N]: row r ends after
        budgets[r] tokens unless a stop token ends it first (`finished` stays False);
        what it samples up to there does not change. The real-length benchmarks use it.

    Returns:
      A `Rollout` with B = P * G rows and N = max_new_tokens columns."""
    check_shapes(prompt_tokens, prompt_mask, model_config, sampling_config)
    sc, mc = sampling_config, model_config
    p, tp = prompt_tokens.shape
    if budgets is not None and tuple(budgets.shape) != (p * sc.num_samples,):
        raise ValueError(f"budgets must be [B] = [{p * sc.num_samples}], got shape "
                         f"{tuple(budgets.shape)}")
    prompt_tokens = prompt_tokens.astype(jnp.int32)
    prompt_mask = (prompt_mask != 0).astype(jnp.int32)
    # 1. Prefill the P prompts once into a cache of exactly Tp slots (the decode loop
    #    repeats or shares it among the G rows p * G + g, and grows it).
    prepared, cache, first_logits = prefill(params, prompt_tokens, prompt_mask, model_config=mc,
                                            sampling_config=sc)
    first_key, step_key = jax.random.split(rng, 2)
    # 2. Sample each row's first token; 3. decode: step t feeds token t - 1, samples token t.
    state = first_state(cache, first_logits, first_key, sc, budgets)
    (tokens, logps, masks, done, steps), forks = _decode(prepared, state, step_key, tp, mc, sc)
    lengths = jnp.sum(masks, axis=1, dtype=jnp.int32)
    if budgets is not None:  # A stop token, not the budget, ended the finished rows.
        last = jnp.take_along_axis(tokens, jnp.maximum(lengths - 1, 0)[:, None], axis=1)
        done = _is_stop(last[:, 0], sc.stop_token_ids)
    return Rollout(tokens=tokens, mask=masks, logprobs=logps, lengths=lengths, finished=done,
                   prompt_tokens=_repeat(prompt_tokens, sc.num_samples),
                   prompt_mask=_repeat(prompt_mask, sc.num_samples), decode_steps=steps,
                   **forks)


def _repeat(x, g: int):
    """Each row of x [P, ...] g times in a row: [P * g, ...] (row p * g + i is row p)."""
    return jnp.repeat(x, g, axis=0) if g > 1 else x


def first_state(cache, first_logits, key, sc: SamplingConfig, budgets=None):
    """The decode loop's `live_rows.DecodeState` at t = 1: each of the B = P * G rows' first
    token sampled with `key` from its prompt's logits [P, V] float32; `cache` is the
    prefill's (P rows); budgets: optional [B] token budgets."""
    tok, logp = sample_token(_repeat(first_logits, sc.num_samples), key, sc)
    b, n = tok.shape[0], sc.max_new_tokens
    done = _is_stop(tok, sc.stop_token_ids)
    if budgets is not None:
        budgets = budgets.astype(jnp.int32)
        done = done | (budgets <= 1)
    return live_rows.DecodeState(
        t=jnp.ones((), jnp.int32), cache=cache, token=tok, done=done,
        tokens=jnp.full((b, n), sc.pad_id, jnp.int32).at[:, 0].set(tok),
        logprobs=jnp.zeros((b, n), jnp.float32).at[:, 0].set(logp),
        mask=jnp.zeros((b, n), jnp.int32).at[:, 0].set(1),
        rows=jnp.arange(b, dtype=jnp.int32), budgets=budgets)


def _decode(prepared, state, step_key, tp: int, mc: ModelConfig, sc: SamplingConfig):
    """The decode loop, `decode_step` as its body: `live_rows.decode` or, with `sc.tree`,
    `tree_rollouts.decode`; ((tokens, logprobs, mask, done, decode steps), fork fields)."""
    feed = functools.partial(feed_step, prepared, model_config=mc, sampling_config=sc)
    emit = functools.partial(emit_step, step_key=step_key, sc=sc)
    n = sc.max_new_tokens
    phases = tuple((size, min(n, size - tp + 1))  # Steps t < size - Tp + 1 fit `size` slots.
                   for size in cache_phases.cache_sizes(tp, n, cache_phases.cache_window_of(sc)))
    sizes = live_rows.sizes_of(state.done.shape[0], sc)
    if sc.tree is not None:
        return tree_rollouts.decode(feed, emit, state, phases, sizes, sc)
    return live_rows.decode(lambda st: emit(*feed(st)), state, phases, sizes, sc.num_samples,
                            sc.share_prompt_kv), {}


jit_generate = jax.jit(generate, static_argnames=("model_config", "sampling_config"))
jit_generate.__doc__ = "`generate` compiled on its own (model and sampling configs are static)."


def sample(
    params,
    prompt_tokens,
    prompt_mask,
    rng: jax.Array,
    *,
    model_config: ModelConfig,
    sampling_config: SamplingConfig,
    buckets: Optional[Sequence[int]] = DEFAULT_BUCKETS,
) -> Rollout:
    """Host-side `generate`: checks the prompts, buckets Tp, then runs `jit_generate`.

    Prompts are left-padded further, up to `bucket_length(Tp, buckets)` (capped
    by `max_length - max_new_tokens`), so varying prompt lengths reuse a few
    compiled programs. `buckets=None` keeps Tp as given."""
    validate_prompts(prompt_tokens, prompt_mask, model_config=model_config,
                     sampling_config=sampling_config)
    tokens, mask = np.asarray(prompt_tokens), np.asarray(prompt_mask)
    cap = _length_cap(model_config, sampling_config) - sampling_config.max_new_tokens
    target = tokens.shape[1] if buckets is None else bucket_length(tokens.shape[1], buckets)
    target = min(target, cap)
    if target < tokens.shape[1]:  # Drop columns that are padding in every row.
        tokens, mask = tokens[:, tokens.shape[1] - target:], mask[:, mask.shape[1] - target:]
    tokens, mask = left_pad(tokens, mask, target, sampling_config.pad_id)
    return jit_generate(params, jnp.asarray(tokens, jnp.int32), jnp.asarray(mask, jnp.int32), rng,
                        model_config=model_config, sampling_config=sampling_config)
