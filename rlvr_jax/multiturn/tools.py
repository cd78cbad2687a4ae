"""Host environments (`HostEnv`): the calculator, a sandboxed Python interpreter, a lookup
over a local corpus, and the number-guessing game.

Each answers a call — a model turn ending with its close tag, e.g. ``]`` — from the turn's
text after the last open tag (``[``).
"""
import dataclasses
import json
import os
from typing import Any

from rlvr_jax.multiturn.calculator import evaluate_call
from rlvr_jax.multiturn.host import HostEnv, HostReply
from rlvr_jax.tasks.guess_number import guess_reply


def call_body(turn_text: str, open_tag: str = "[", close_tag: str = "]") -> str:
    """The text between the turn's last `open_tag` and its final `close_tag` ("" if none)."""
    text = turn_text[:-len(close_tag)] if turn_text.endswith(close_tag) else turn_text
    return text[text.rfind(open_tag) + len(open_tag):] if open_tag in text else ""


@dataclasses.dataclass(frozen=True)
class HostCalculator(HostEnv):
    """The calculator (`multiturn.Calculator`) on the host: the same observations
    (`evaluate_call`), so both paths give the same episodes."""
    max_operand_digits: int = 4
    error_text: str = "=?"
    answer_format = " #### {}"  # The answer as the model writes it (the `info_gain` term).

    def respond(self, state, turn_text: str) -> HostReply:
        text = evaluate_call(turn_text, self.max_operand_digits) or "=?"
        return HostReply(text, state, error=text == "=?")


@dataclasses.dataclass(frozen=True)
class PythonTool(HostEnv):
    """Runs the call's body as a Python program in the sandbox of `rlvr_jax.rewards.code`
    (a fresh namespaced process that never held another call's program or output, resource
    limits, killed at `timeout_s`); the observation is
    its stdout (stripped, cut to the observation budget), or `error_text` when it raised,
    crashed or timed out."""
    memory_mb: int = 256
    error_text: str = " error"

    def respond(self, state, turn_text: str) -> HostReply:
        return self.respond_batch([state], [turn_text], parallel=1)[0]

    def respond_batch(self, states, turn_texts, *, parallel: int = 2):
        """All of a batch's calls as one batch of sandboxed programs, `parallel` at once."""
        from rlvr_jax.rewards import code
        config = code.SandboxConfig(timeout_s=self.timeout_s * 0.8, memory_mb=self.memory_mb)
        outputs = code.run_programs_output([call_body(t) for t in turn_texts], config=config,
                                           parallel=parallel)
        return [HostReply(" " + out.strip(), st) if status == "ok"
                else HostReply(self.error_text, st, error=True)
                for st, (out, status) in zip(states, outputs)]


@dataclasses.dataclass(frozen=True)
class LookupTool(HostEnv):
    """Looks the call's body up in a local corpus: a JSONL file of {"key", "text"} lines
    (keys compared whitespace-trimmed, case-insensitively); unknown keys answer
    `missing_text` (not an error)."""
    corpus_path: str = ""
    missing_text: str = " none"

    def __post_init__(self):
        super().__post_init__()
        if not os.path.isfile(self.corpus_path):
            raise FileNotFoundError(f"lookup corpus {self.corpus_path!r}: no such file")
        _corpus(self.corpus_path)  # Read (and checked) once, here.

    def respond(self, state, turn_text: str) -> HostReply:
        key = call_body(turn_text).strip().lower()
        return HostReply(_corpus(self.corpus_path).get(key, self.missing_text), state)


_CORPORA = {}


def _corpus(path: str) -> dict:
    """{key (lower-case): " " + text} of a JSONL corpus, read once per path."""
    if path not in _CORPORA:
        table = {}
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    table[str(row["key"]).strip().lower()] = " " + str(row["text"])
                except (ValueError, KeyError, TypeError) as e:
                    raise ValueError(f"{path} line {n}: need a JSON object with \"key\" and "
                                     f"\"text\" ({e})") from None
        _CORPORA[path] = table
    return _CORPORA[path]


@dataclasses.dataclass(frozen=True)
class GuessNumber(HostEnv):
    """Find a hidden number: each call ``[16]`` is a guess, answered with the remaining
    interval (``" up 17-32"``), ``" yes"`` or ``" ?"``. The episode's example holds the
    range and the target (`tasks.GuessNumberTask`); the success check is the task's
    `verify` on the model's guesses, so the game gives no reward of its own — unless
    `turn_reward` > 0: then each answered guess earns `turn_reward` × the fraction of the
    still-possible interval it ruled out (1 for the target), a per-turn env reward
    (`reward.components=...,turn_env`; docs/multiturn.md "Turn-level credit")."""
    error_text: str = " ?"
    turn_reward: float = 0.0
    answer_format = "[{}]"  # The answer as the model writes it (the `info_gain` term).
    answer_is_call = True   # A winning guess is a call; an EOS turn follows it.

    def start(self, example) -> Any:
        m = example.meta
        return {"lo": m["lo"], "hi": m["hi"], "target": m["target"]}

    def respond(self, state, turn_text: str) -> HostReply:
        text, lo, hi, error = guess_reply(state["lo"], state["hi"], state["target"],
                                          call_body(turn_text))
        before = state["hi"] - state["lo"] + 1
        ruled_out = 1.0 if text == " yes" else (before - (hi - lo + 1)) / before
        return HostReply(text, dict(state, lo=lo, hi=hi), error=error,
                         reward=0.0 if error else self.turn_reward * ruled_out)
