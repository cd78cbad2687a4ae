"""Find a hidden number in a range from the game's replies (a multi-turn host game).

  prompt     ``"17-40?"``                      (the range; the hidden target is in it)
  trace      ``"[28] down 17-27[20] up 21-27[24] yes"``: guesses ``[k]`` written by the
             model, replies (``" up lo-hi"``, ``" down lo-hi"``, ``" yes"``) written by the
             game (`rlvr_jax.multiturn.GuessNumber`, config ``env.name="guess_number"``)

Success (`verify` = 1) is a guess equal to the target within ⌈log₂ width⌉ + 1 guesses, read
from the model's own tokens only (the replies are not scored), so the game needs no reward.
The warm-up's worked traces guess uniformly inside the interval still possible (so they
succeed within the budget only about half the time): RL has a better search to find.
"""
from __future__ import annotations

import math
import re
from typing import Tuple

import numpy as np

from rlvr_jax.tasks import base

_GUESS = re.compile(r"\d{1,3}")


def guess_reply(lo: int, hi: int, target: int, guess_text: str) -> Tuple[str, int, int, bool]:
    """The game's answer to one guess: (observation text, new lo, new hi, error).

    ``" yes"`` when the guess is the target; else ``" up 17-32"`` / ``" down 1-15"`` with the
    interval still possible; ``" ?"`` (an error) when the body is not a number."""
    if not _GUESS.fullmatch(guess_text.strip()):
        return " ?", lo, hi, True
    k = int(guess_text.strip())
    if k == target:
        return " yes", k, k, False
    if k < target:
        lo = max(lo, k + 1)
        return f" up {lo}-{hi}", lo, hi, False
    hi = min(hi, k - 1)
    return f" down {lo}-{hi}", lo, hi, False


_CALL = re.compile(r"\[([^\[\]]*)\]")


def guess_budget(lo: int, hi: int) -> int:
    """Guesses allowed for the range lo..hi: ⌈log₂(hi − lo + 1)⌉ + 1."""
    return math.ceil(math.log2(hi - lo + 1)) + 1


class GuessNumberTask(base.Task):
    """Ranges of `min_width`..`max_width` numbers (≤ 32) starting at 1..`max_start`.

    Args (keyword-only): min_width, max_width, max_start, test_fraction.
    """

    name = "guess_number"
    salt = 9

    def __init__(self, *, min_width: int = 8, max_width: int = 32, max_start: int = 60,
                 test_fraction: float = 0.1, answer_format: str = "marker", style: str = "game"):
        super().__init__(test_fraction=test_fraction)
        if not 2 <= min_width <= max_width <= 32:
            raise ValueError(f"need 2 <= min_width <= max_width <= 32, got {min_width}, "
                             f"{max_width}")
        if not 1 <= max_start <= 900:
            raise ValueError(f"max_start must be in 1..900, got {max_start}")
        if answer_format != "marker" or style != "game":
            raise ValueError("guess_number has one format (answer_format='marker', style='game')")
        self.min_width, self.max_width, self.max_start = min_width, max_width, max_start

    def make(self, lo: int, hi: int, target: int, guesses=(), *, split: str = "train"):
        """The example for one game; its worked trace makes `guesses` (then ends)."""
        trace, a, b = "", lo, hi
        for k in guesses:
            reply, a, b, _ = guess_reply(a, b, target, str(k))
            trace += f"[{k}]{reply}"
        return base.Example(prompt=f"{lo}-{hi}?", answer=str(target), solution=trace,
                            task=self.name, key=f"{lo}-{hi}:{target}", split=split,
                            answer_value=target, meta={"lo": lo, "hi": hi, "target": target})

    def _sample(self, rng: np.random.Generator) -> base.Example:
        width = int(rng.integers(self.min_width, self.max_width + 1))
        lo = int(rng.integers(1, self.max_start + 1))
        hi = lo + width - 1
        target = int(rng.integers(lo, hi + 1))
        guesses, a, b = [], lo, hi
        for _ in range(guess_budget(lo, hi)):  # Uniform guesses inside what is still possible.
            k = int(rng.integers(a, b + 1))
            guesses.append(k)
            if k == target:
                break
            _, a, b, _ = guess_reply(a, b, target, str(k))
        return self.make(lo, hi, target, guesses)

    def guesses(self, completion: str) -> list[str]:
        """The bodies of the ``[...]`` calls in a completion (the model's tokens), in order."""
        return _CALL.findall(completion)

    def verify(self, completion: str, example: base.Example) -> float:
        """1.0 when one of the first ⌈log₂ width⌉ + 1 guesses is the target."""
        m = example.meta
        budget = guess_budget(m["lo"], m["hi"])
        return float(str(m["target"]) in [g.strip() for g in self.guesses(completion)[:budget]])

    def check_steps(self, completion: str, example: base.Example) -> bool:
        """Solved, and every guess was inside the interval the replies left possible."""
        if self.verify(completion, example) != 1.0:
            return False
        m = example.meta
        a, b = m["lo"], m["hi"]
        for g in self.guesses(completion):
            if not g.strip().isdigit() or not a <= int(g) <= b:
                return False
            reply, a, b, _ = guess_reply(a, b, m["target"], g)
            if reply == " yes":
                return True
        return False

    def answer_key(self, completion: str):
        """The last guess (maj@k votes on where the search ended)."""
        g = self.guesses(completion)
        return g[-1].strip() if g else None

    def step_scores(self, completion: str, example: base.Example):
        """None: no process rewards for this task."""
        return None
