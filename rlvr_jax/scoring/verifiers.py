"""Which verifier scores a run: chosen once from `config.reward.verifier` and the task.

A task exposes its verifiers through methods (`verify`, `check_steps`, `answer_key`,
`token_verifier`); nothing here tests a task's name. Data without a task (JSONL, Parquet,
TFDS math problems) is scored by a math verifier on the reference answer.
"""
import dataclasses
import functools
from typing import Callable, Optional, Tuple

from rlvr_jax.scoring import host_reward

VERIFIERS = ("auto", "token", "task", "math", "math_verify")


@dataclasses.dataclass(frozen=True)
class Verifier:
    """Whether a completion is correct: what `reward/correct`, pass@k, maj@k and CoT-pass@k
    read. The training reward is the scorer's terms (`scoring.terms`), which start from it.

    Attributes:
      verify: fn(completion_text, example) -> float on the host; >= 1 is correct.
      answer_key: fn(completion_text) -> hashable answer or None (the votes of maj@k).
      token: jittable fn(tokens [B, N], mask [B, N], answers [B] int32) -> [B] float32, the
        same verdict on device, or None (then it is scored on the host with `verify`).
      check_steps: optional fn(completion_text, example) -> bool (CoT-pass@k).
      step_scores: optional fn(completion_text, example) -> [(end_char, score), ...] or
        None: the task's per-step checker (process rewards, `scoring.process`).
      preload: modules a host-scoring worker imports before it is ready.
    """
    verify: Callable
    answer_key: Callable
    token: Optional[Callable] = None
    check_steps: Optional[Callable] = None
    step_scores: Optional[Callable] = None
    preload: Tuple[str, ...] = ()


def task_verifier(task, tokenizer=None) -> Verifier:
    """A task's verifiers; the on-device one only when a tokenizer is given and the task has
    one. A `tasks.base.ProgramTask`'s verdict is its program run in the code sandbox
    (`host_reward.task_verdict`); every other task's is its own `verify`."""
    token = None if tokenizer is None else task.token_verifier(tokenizer)
    return Verifier(verify=functools.partial(host_reward.task_verdict, task=task),
                    answer_key=task.answer_key, token=token,
                    check_steps=functools.partial(host_reward.task_steps, task=task),
                    step_scores=task.step_scores)


def math_verifier(kind: str = "rule") -> Verifier:
    """A math verifier on `example.answer` (`rewards.get_math_verifier(kind)`: "rule",
    "math_verify" or "auto"); maj@k votes on normalised extracted answers."""
    from rlvr_jax import rewards  # Lazily: the rule verifier pulls in sympy-free parsing only.
    reward = rewards.get_math_verifier(kind)
    preload = ("math_verify",) if reward is rewards.math_verify_reward else ()
    # A partial of module-level functions: picklable, so a RewardPool worker can run it.
    return Verifier(verify=functools.partial(host_reward.on_answer, reward=reward),
                    answer_key=math_answer_key, preload=preload)


def math_answer_key(text):
    """The normalised extracted answer of a completion, or None (maj@k votes)."""
    from rlvr_jax import rewards
    answer = rewards.extract_answer(text)
    return None if answer is None else rewards.normalize_answer(answer)


def choose_verifier(name: str, task, tokenizer) -> Verifier:
    """The verifier of a run: `name` is `config.reward.verifier`.

    "auto": the task's on-device verifier when it has one, else its host verifier, else
    (no task) the math rule verifier; "token": the task's on-device verifier (an error if
    it has none); "task": the task's host verifier; "math": the math rule verifier;
    "math_verify": math-verify (the `math` extra) on the extracted answer.
    """
    if name not in VERIFIERS:
        raise ValueError(f"reward.verifier must be one of {VERIFIERS}; got {name!r}")
    if name == "math_verify":
        return math_verifier("math_verify")
    if name == "math" or (task is None and name == "auto"):
        return math_verifier("rule")
    if task is None:
        raise ValueError(f"reward.verifier={name!r} needs data.source='task'")
    verifier = task_verifier(task, tokenizer if name in ("auto", "token") else None)
    if name == "token" and verifier.token is None:
        raise ValueError(f"reward.verifier='token' needs a task with an on-device verifier; "
                         f"{task.name!r} has none (use 'task' or 'auto')")
    return verifier


def token_term(setup, weight):
    """The device term adding weight · the verifier's on-device verdicts (`x.verdicts`),
    logged as `reward/token`; None when `reward.components` does not list `token`."""
    if weight is None:
        return None
    return functools.partial(weighted_verdicts, weight=float(weight), log=True)


def weighted_verdicts(rewards, x, *, weight: float, log: bool):
    """rewards + weight · x.verdicts (with log: the verdicts' mean as `reward/token`)."""
    import jax.numpy as jnp
    metrics = {"reward/token": jnp.mean(x.verdicts)} if log else {}
    return rewards + weight * x.verdicts, metrics
