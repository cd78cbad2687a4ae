"""An on-device calculator tool over digit tokens (a `DeviceEnv`).

A model turn that ends with ``]`` calls it: the expression after the turn's last ``[`` must
be ``<digits><op><digits>`` with op one of ``+ - *`` and at most `max_operand_digits` digits
per operand; the observation is ``=`` followed by the value (``[123*456]`` → ``=56088``),
or ``=?`` for a malformed call (a tool error). Every character is one token of the built-in
tokenizer, so parsing is a scan over the turn's M tokens and the answer a few integer ops.
"""
import dataclasses
from typing import Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.multiturn.env import DeviceEnv, EnvStep

_OPS = "+-*"
_OUTSIDE, _FIRST, _SECOND, _BAD, _CLOSED = 0, 1, 2, 3, 4


def evaluate_call(text: str, max_operand_digits: int = 4):
    """The calculator on the host, for a turn's text: the observation text (``"=56088"``,
    ``"=?"`` for a malformed call), or None when the turn does not end with ``]``. The
    reference the device version is tested against, and what warm-up traces are built from."""
    if not text.endswith("]"):
        return None
    expr = text[text.rfind("[") + 1:-1] if "[" in text else None
    for op in _OPS:
        if expr is not None and expr.count(op) == 1:
            a, b = expr.split(op)
            if (a.isdigit() and b.isdigit() and a.isascii() and b.isascii()
                    and len(a) <= max_operand_digits and len(b) <= max_operand_digits):
                x, y = int(a), int(b)
                return "=" + str({"+": x + y, "-": x - y, "*": x * y}[op])
    return "=?"


@dataclasses.dataclass(frozen=True)
class Calculator(DeviceEnv):
    """``[a op b]`` → ``=value`` on token ids (build with `Calculator.for_tokenizer`).

    Attributes (besides `DeviceEnv`'s): the token ids of the digits ``0``–``9``, of
    ``+ - *``, ``[``, ``=`` and ``?``, and `max_operand_digits` (≤ 4: values fit int32).
    """
    answer_format = " #### {}"  # The answer as the model writes it (the `info_gain` term).
    digit_ids: Tuple[int, ...] = ()
    op_ids: Tuple[int, ...] = ()
    open_id: int = -1
    equals_id: int = -1
    error_id: int = -1
    max_operand_digits: int = 4

    def __post_init__(self):
        super().__post_init__()
        if len(self.digit_ids) != 10 or len(self.op_ids) != len(_OPS):
            raise ValueError("Calculator needs the 10 digit ids and the ids of + - *")
        if not 1 <= self.max_operand_digits <= 4:
            raise ValueError(f"max_operand_digits must be in 1..4, got {self.max_operand_digits}")
        if self.max_obs_tokens < 2 + 2 * self.max_operand_digits:
            raise ValueError(f"max_obs_tokens must be >= {2 + 2 * self.max_operand_digits} "
                             "('=', a sign, and the digits of a product)")

    @classmethod
    def for_tokenizer(cls, tokenizer, *, max_turns: int = 2, max_turn_tokens: int = 16,
                      max_operand_digits: int = 4) -> "Calculator":
        """The calculator for a tokenizer in which every character it reads or writes
        (``0-9 + - * [ ] = ?``) is a single token (true of the built-in one)."""
        ids = {}
        for i, text in enumerate(tokenizer.token_texts()):
            ids.setdefault(text, i)
        missing = [c for c in "0123456789+-*[]=?" if c not in ids]
        if missing:
            raise ValueError(f"the calculator needs single-token characters; this tokenizer "
                             f"has no token for {missing}")
        return cls(call_end_ids=(ids["]"],), max_turns=max_turns,
                   max_turn_tokens=max_turn_tokens, max_obs_tokens=2 + 2 * max_operand_digits,
                   digit_ids=tuple(ids[str(d)] for d in range(10)),
                   op_ids=tuple(ids[c] for c in _OPS), open_id=ids["["], equals_id=ids["="],
                   error_id=ids["?"], max_operand_digits=max_operand_digits)

    def _parse(self, turn, turn_len):
        """(ok [B], a [B], b [B], op [B]) of each turn's last ``[...]``."""
        digit_ids = jnp.asarray(self.digit_ids, jnp.int32)
        op_ids = jnp.asarray(self.op_ids, jnp.int32)
        close = jnp.asarray(self.call_end_ids, jnp.int32)

        def body(carry, xs):
            state, a, b, na, nb, op = carry
            tok, real = xs
            is_digit = jnp.any(tok[:, None] == digit_ids[None], axis=1)
            d = jnp.argmax(tok[:, None] == digit_ids[None], axis=1).astype(jnp.int32)
            is_op = jnp.any(tok[:, None] == op_ids[None], axis=1)
            o = jnp.argmax(tok[:, None] == op_ids[None], axis=1).astype(jnp.int32)
            is_close = jnp.any(tok[:, None] == close[None], axis=1)
            first_digit = (state == _FIRST) & is_digit & (na < self.max_operand_digits)
            second_digit = (state == _SECOND) & is_digit & (nb < self.max_operand_digits)
            to_second = (state == _FIRST) & is_op & (na > 0)
            closed = (state == _SECOND) & is_close & (nb > 0)
            inside = (state == _FIRST) | (state == _SECOND)
            new_state = jnp.where(
                tok == self.open_id, _FIRST,
                jnp.where(first_digit | second_digit, state,
                          jnp.where(to_second, _SECOND,
                                    jnp.where(closed, _CLOSED,
                                              jnp.where(inside, _BAD, state)))))
            opened = tok == self.open_id
            new = (jnp.where(opened, _FIRST, new_state),
                   jnp.where(opened, 0, jnp.where(first_digit, a * 10 + d, a)),
                   jnp.where(opened, 0, jnp.where(second_digit, b * 10 + d, b)),
                   jnp.where(opened, 0, na + first_digit), jnp.where(opened, 0, nb + second_digit),
                   jnp.where(to_second, o, op))
            return tuple(jnp.where(real, n, c) for n, c in zip(new, carry)), None

        bsz, m = turn.shape
        zero = jnp.zeros((bsz,), jnp.int32)
        real = jnp.arange(m)[None, :] < turn_len[:, None]
        (state, a, b, _, _, op), _ = jax.lax.scan(
            body, (zero, zero, zero, zero, zero, zero), (turn.T.astype(jnp.int32), real.T))
        return state == _CLOSED, a, b, op

    def step(self, state, turn, turn_len) -> Tuple[dict, EnvStep]:
        """``=value`` for a well-formed last call of each turn, else ``=?`` (an error)."""
        ok, a, b, op = self._parse(turn, turn_len)
        value = jnp.where(op == 0, a + b, jnp.where(op == 1, a - b, a * b))
        neg = value < 0
        mag = jnp.abs(value)
        width = 2 * self.max_operand_digits
        powers = jnp.asarray([10**k for k in range(width)], jnp.int32)
        nd = jnp.maximum(jnp.sum(mag[:, None] >= powers[None], axis=1), 1)  # Digits of |v|.
        pos = jnp.arange(self.max_obs_tokens, dtype=jnp.int32)[None, :]
        k = pos - 1 - neg[:, None].astype(jnp.int32)  # Digit index of each position.
        exponent = jnp.clip(nd[:, None] - 1 - k, 0, width - 1)
        digit = (mag[:, None] // powers[exponent]) % 10
        digit_tok = jnp.asarray(self.digit_ids, jnp.int32)[digit]
        obs = jnp.where(pos == 0, self.equals_id,
                        jnp.where((pos == 1) & neg[:, None], self.op_ids[1], digit_tok))
        obs_len = 1 + neg.astype(jnp.int32) + nd
        err = jnp.where(pos == 0, self.equals_id, self.error_id)
        return state, self.reply(jnp.where(ok[:, None], obs, err), jnp.where(ok, obs_len, 2),
                                 error=~ok)
