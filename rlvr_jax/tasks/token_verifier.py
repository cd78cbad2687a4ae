"""On-device, token-level verifier for integer answers (arithmetic), pure jnp and jittable.

It reproduces `rlvr_jax.tasks.base.extract_int_answer(text) == answer` on token ids: the
host rule (one ``####``; after it only ``ws* -? [0-9]{1,9} ws*``) is a small character
automaton, lifted to tokens by running every vocabulary entry's surface text through it
from every state once, on the host, when the verifier is built:

  next_state[S, V]  automaton state after reading token v from state s
  num_digits[S, V]  digits of the answer the token appends in that transition (capped at 10)
  digit_value[S, V] their value (the answer register becomes ``r * 10**k + value``)
  sets_neg[S, V]    the token contains the answer's minus sign

So tokens that hold several characters (``" 12"``, ``"####"``) are handled exactly. The
completion is the tokens with mask 1 before the first EOS; other special ids (pad, bos) have
empty text and change nothing. Agreement with the host verifier on generated right and wrong
completions is tested in tests/test_tasks_token_verifier.py.

Usage inside a jitted step:

    verify = make_token_verifier(tokenizer)              # once, on the host
    rewards = verify(tokens, mask, answers)              # [B,N] i32, [B,N], [B] i32 -> [B] f32
    # answers per sequence: jnp.repeat(prompt_answers, G) for G samples per prompt.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax.tasks import base

# automaton states
_H0, _H3 = 0, 3          # before the marker; H_k = k trailing '#'
_A_WS, _A_NEG, _A_DIG, _A_TRAIL, _DEAD = 4, 5, 6, 7, 8
NUM_STATES = 9
_MAX_DIGITS = base.MAX_ANSWER_DIGITS


def _step_char(state: int, c: str) -> int:
    if state <= _H3:
        if c == "#":
            return state + 1 if state < _H3 else _A_WS
        return _H0
    ws, digit = c in base.WHITESPACE, "0" <= c <= "9"
    if state == _A_WS:
        return _A_WS if ws else _A_NEG if c == "-" else _A_DIG if digit else _DEAD
    if state == _A_NEG:
        return _A_DIG if digit else _DEAD
    if state == _A_DIG:
        return _A_DIG if digit else _A_TRAIL if ws else _DEAD
    if state == _A_TRAIL:
        return _A_TRAIL if ws else _DEAD
    return _DEAD


def build_tables(token_texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The [S, V] transition tables for a vocabulary's surface texts (see module docstring)."""
    vocab = len(token_texts)
    next_state = np.zeros((NUM_STATES, vocab), np.int32)
    num_digits = np.zeros((NUM_STATES, vocab), np.int32)
    digit_value = np.zeros((NUM_STATES, vocab), np.int32)
    sets_neg = np.zeros((NUM_STATES, vocab), bool)
    for s in range(NUM_STATES):
        for v, text in enumerate(token_texts):
            state, k, value, neg = s, 0, 0, False
            for c in text:
                new = _step_char(state, c)
                if new == _A_DIG:
                    k += 1
                    value = (value * 10 + ord(c) - 48) % 10**_MAX_DIGITS if k <= _MAX_DIGITS else 0
                if state == _A_WS and new == _A_NEG:
                    neg = True
                state = new
            next_state[s, v] = state
            num_digits[s, v] = min(k, _MAX_DIGITS + 1)
            digit_value[s, v] = value
            sets_neg[s, v] = neg
    return dict(next_state=next_state, num_digits=num_digits, digit_value=digit_value,
                sets_neg=sets_neg)


def make_token_verifier(tokenizer, *, require_eos: bool = False
                        ) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """A jittable ``fn(tokens, mask, answers) -> rewards`` for integer-answer tasks.

    Args:
      tokenizer: a `rlvr_jax.data.tokenizers.Tokenizer` (needs `token_texts()`, `eos_id`).
      require_eos: if True, a completion with no EOS inside its mask (truncated) scores 0.
    Returns:
      fn(tokens [B, N] int, mask [B, N] bool/int, answers [B] int32) -> rewards [B] float32,
      1.0 where the completion's final answer equals `answers`, else 0.0.
    """
    tables = {k: jnp.asarray(v) for k, v in build_tables(tokenizer.token_texts()).items()}
    vocab = tables["next_state"].shape[1]
    eos_id = int(tokenizer.eos_id)
    powers = jnp.asarray([10**k for k in range(_MAX_DIGITS + 1)], jnp.int32)

    def verify(tokens, mask, answers):
        tokens = jnp.asarray(tokens, jnp.int32)
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [B, N], got shape {tokens.shape}")
        mask = jnp.asarray(mask).astype(bool)
        is_eos = mask & (tokens == eos_id)
        before_eos = jnp.cumsum(is_eos.astype(jnp.int32), axis=1) == 0
        live = mask & before_eos
        tok = jnp.clip(tokens, 0, vocab - 1)
        batch = tokens.shape[0]

        def body(carry, xs):
            state, value, digits, neg = carry
            t, on = xs
            new_state = tables["next_state"][state, t]
            k = tables["num_digits"][state, t]
            new_digits = jnp.minimum(digits + k, _MAX_DIGITS + 1)
            new_value = value * powers[jnp.minimum(k, _MAX_DIGITS)] + tables["digit_value"][state, t]
            new_neg = neg | tables["sets_neg"][state, t]
            keep = lambda new, old: jnp.where(on, new, old)  # noqa: E731
            return (keep(new_state, state), keep(new_value, value), keep(new_digits, digits),
                    keep(new_neg, neg)), None

        init = (jnp.zeros((batch,), jnp.int32), jnp.zeros((batch,), jnp.int32),
                jnp.zeros((batch,), jnp.int32), jnp.zeros((batch,), bool))
        (state, value, digits, neg), _ = jax.lax.scan(body, init, (tok.T, live.T))
        ok = ((state == _A_DIG) | (state == _A_TRAIL)) & (digits >= 1) & (digits <= _MAX_DIGITS)
        signed = jnp.where(neg, -value, value)
        ok = ok & (signed == jnp.asarray(answers, jnp.int32))
        if require_eos:
            ok = ok & jnp.any(is_eos, axis=1)
        return ok.astype(jnp.float32)

    return verify


def answers_array(examples: Sequence[base.Example]) -> np.ndarray:
    """[P] int32 integer answers of a batch of examples (ValueError if one has none)."""
    values = []
    for ex in examples:
        if ex.answer_value is None:
            raise ValueError(f"example {ex.key!r} has no integer answer for the token verifier")
        if not -(2**31) <= ex.answer_value < 2**31:
            raise ValueError(f"answer {ex.answer_value} of {ex.key!r} does not fit int32")
        values.append(ex.answer_value)
    return np.asarray(values, np.int32)
