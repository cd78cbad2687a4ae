"""Per-turn rewards of multi-turn episodes, on the device: the environment's (`turn_env`)
and the information gain about the answer (`info_gain`, IGPO: Wang et al. 2025,
"Information Gain-based Policy Optimization").

    ids, ids_mask = answer_tokens(answers, digit_ids=..., prefix=(...), suffix=(...))
    L = answer_logprobs(params, rollout, ids, ids_mask, num_turns=K,
                        model_config=mc)                         # [B, K + 1]
    gain = L[:, 1:] − L[:, :-1]                                  # [B, K]: turn k's gain

The answer of a row is its reference answer written as the model writes it
(`env.answer_format`): ``[24]`` for `guess_number` (the guess that wins), `` #### 56088``
for the calculator tasks. Cut k (k = 0..K) is the context of the prompt and the episode's
tokens of turns < k (each model turn with the observation answering it): cut 0 is the
prompt, cut K the whole episode. `L[:, k]` is log p(answer | cut k) under the policy,
teacher-forced: the episode tokens after the cut are masked out of attention (RoPE
positions skip them), so it is the log-probability of the answer right after the cut. The
gains telescope: Σ_k gain_k = log p(answer | episode) − log p(answer | prompt). The `info_gain`
term credits only the "open" turns (`open_turns`): every turn but the last, and for
guess_number not the winning guess either, so its "episode" is the context before the turn
whose credit is the outcome (the final answer, or the winning guess).
"""
from typing import Sequence

import jax
import jax.numpy as jnp

from rlvr_jax.models import ModelConfig, logprobs, transformer


def answer_tokens(answers, *, digit_ids: Sequence[int], prefix: Sequence[int] = (),
                  suffix: Sequence[int] = (), minus_id: int = -1, pad_id: int = 0,
                  width: int = 10):
    """(ids [B, A] int32, mask [B, A] int32) of `prefix ++ [-] ++ decimal digits ++ suffix`
    of each integer answer [B], left-aligned (A = len(prefix) + 1 + width + len(suffix);
    a tokenizer whose digits are single tokens, like the built-in one)."""
    a = jnp.asarray(answers, jnp.int32)
    neg = (a < 0) & (minus_id >= 0)
    mag = jnp.abs(a)
    ndig = jnp.ones_like(a)
    for j in range(1, width):
        ndig = ndig + (mag >= 10 ** j).astype(jnp.int32)
    lp, ls = len(prefix), len(suffix)
    length = lp + 1 + width + ls
    p = jnp.arange(length, dtype=jnp.int32)[None, :]
    q = p - lp - neg[:, None].astype(jnp.int32)        # index into the digits
    power = jnp.maximum(ndig[:, None] - 1 - q, 0)
    digit = (mag[:, None] // (10 ** jnp.minimum(power, 9))) % 10
    digits = jnp.asarray(digit_ids, jnp.int32)[digit]
    sfx = jnp.asarray(tuple(suffix) or (pad_id,), jnp.int32)[
        jnp.clip(q - ndig[:, None], 0, max(ls - 1, 0))]
    pre = jnp.asarray(tuple(prefix) or (pad_id,), jnp.int32)[jnp.clip(p, 0, max(lp - 1, 0))]
    ids = jnp.where(p < lp, pre,
                    jnp.where(q < 0, minus_id,
                              jnp.where(q < ndig[:, None], digits, sfx)))
    real = q < ndig[:, None] + ls
    return jnp.where(real, ids, pad_id).astype(jnp.int32), real.astype(jnp.int32)


def answer_logprobs(params, rollout, ids, ids_mask, *, num_turns: int,
                    model_config: ModelConfig, temperature: float = 1.0):
    """L [B, K + 1] float32: log p(answer | cut k) for k = 0..K (see the module docstring).

    Args:
      params: the policy's; rollout: the episodes [B, N] (`prompt_tokens`, `prompt_mask`
        [B, Tp] left-padded; `tokens`, `mask` = every real token, `turn_ids`); ids,
        ids_mask: [B, A] the answers (`answer_tokens`); num_turns: K (static).

    One forward pass of [B, Tp + N + A] per cut, under `lax.map` (one compiled forward): the
    answer's first token is predicted at the cut's last real token, the others at the answer
    token before them.
    """
    n, a = rollout.tokens.shape[1], ids.shape[1]
    tokens = jnp.concatenate([rollout.prompt_tokens, rollout.tokens, ids], 1).astype(jnp.int32)
    tp = rollout.prompt_tokens.shape[1]
    head = transformer.head_matrix(params, model_config, model_config.compute_dtype)
    t = jnp.arange(tp + n, dtype=jnp.int32)[None, :]

    def at_cut(k):
        episode = rollout.mask.astype(jnp.int32) * (rollout.turn_ids < k).astype(jnp.int32)
        context = jnp.concatenate([rollout.prompt_mask.astype(jnp.int32), episode], axis=1)
        attention = jnp.concatenate([context, ids_mask.astype(jnp.int32)], axis=1)
        hidden, _ = transformer.forward(params, tokens, config=model_config,
                                        attention_mask=attention, return_hidden=True)
        last = jnp.max(jnp.where(context > 0, t, 0), axis=1)  # the cut's last real token
        at = jnp.concatenate([last[:, None], tp + n + jnp.arange(a - 1)[None, :]
                              + jnp.zeros_like(last)[:, None]], axis=1)
        h = jnp.take_along_axis(hidden, at[:, :, None], axis=1)
        logp, _ = logprobs.chunked_logprobs(h, ids, head, temperature=temperature,
                                            chunk_size=max(a, 1))
        return jnp.sum(logp * ids_mask, axis=1)
    out = jax.lax.map(at_cut, jnp.arange(num_turns + 1, dtype=jnp.int32))
    return jax.lax.stop_gradient(out.T)


def info_gain(logprobs, num_open=None):
    """[B, K] float32: turn k's gain `L[:, k+1] − L[:, k]` of `answer_logprobs`' L [B, K+1];
    with `num_open` [B] int, the turns k >= num_open get 0, so that the gains of row i sum to
    `L[i, num_open_i] − L[i, 0]`."""
    gain = logprobs[:, 1:] - logprobs[:, :-1]
    if num_open is None:
        return gain
    k = jnp.arange(gain.shape[1])[None, :]
    return jnp.where(k < jnp.asarray(num_open)[:, None], gain, 0.0)


def open_turns(turns, verdicts, *, answer_is_call: bool):
    """[B] int32: the turns that earn an information gain — all but the episode's last turn
    (its credit is the outcome; after it comes no further guess) and, where the answer is a
    call (guess_number: the winning guess, then an EOS turn), the answering turn of a solved
    episode (after the game's " yes" the model is not expected to write the answer again)."""
    last = jnp.asarray(turns, jnp.int32) - 1
    if answer_is_call:
        last = last - (jnp.asarray(verdicts) >= 1.0).astype(jnp.int32)
    return jnp.maximum(last, 0)
