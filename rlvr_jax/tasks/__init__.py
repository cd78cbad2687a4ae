"""Synthetic verifiable tasks: seeded generators, host verifiers, step checkers, and an
on-device token-level verifier for integer answers.

    task = tasks.get("arithmetic", ops=("add",), max_digits=3)
    examples = task.generate(64, seed=0, split="train")      # list[Example]
    task.verify(completion_text, examples[0])                 # -> 0.0 / 1.0
    task.check_steps(completion_text, examples[0])            # -> bool (for CoT-pass@k)
    # A ProgramTask (synthesis) defines a program and hidden tests instead; the sandboxed
    # verdict is `rlvr_jax.scoring.task_verifier(task).verify` (works for every task).
    verify = tasks.make_token_verifier(tokenizer)             # jittable
    rewards = verify(tokens, mask, answers)                   # [B,N], [B,N], [B] -> [B] f32

See docs/tasks.md for the formats.
"""
from rlvr_jax.tasks.arithmetic import Arithmetic
from rlvr_jax.tasks.base import (MARKER, Example, ProgramTask, Task, extract_int_answer,
                                 split_of)
from rlvr_jax.tasks.countdown import Countdown
from rlvr_jax.tasks.sorting import Sorting
from rlvr_jax.tasks.synthesis import Synthesis
from rlvr_jax.tasks.token_verifier import answers_array, make_token_verifier
from rlvr_jax.tasks.tool_arithmetic import ToolArithmetic
from rlvr_jax.tasks.guess_number import GuessNumberTask

TASKS = {"arithmetic": Arithmetic, "countdown": Countdown, "sorting": Sorting,
         "synthesis": Synthesis, "tool_arithmetic": ToolArithmetic,
         "guess_number": GuessNumberTask}


def get(name: str, **knobs) -> Task:
    """A task by name with its difficulty knobs (keyword arguments of its class)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name](**knobs)


__all__ = ["Arithmetic", "Countdown", "Sorting", "Synthesis", "ToolArithmetic", "GuessNumberTask",
           "Example", "ProgramTask", "Task", "MARKER", "TASKS", "get", "split_of",
           "extract_int_answer", "make_token_verifier", "answers_array"]
