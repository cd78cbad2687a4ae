"""Which verifier scores a run: chosen once from `config.reward.verifier` and the task.

A task exposes its verifiers through methods (`verify`, `check_steps`, `answer_key`,
`token_verifier`); nothing here tests a task's name. Data without a task (JSONL, Parquet,
TFDS math problems) is scored by a math verifier on the reference answer.
"""
import dataclasses
import functools
from typing import Callable, Optional, Tuple

VERIFIERS = ("auto", "token", "task", "math", "math_verify")


@dataclasses.dataclass(frozen=True)
class Verifier:
    """How the completions of one data source are scored.

    Attributes:
      verify: fn(completion_text, example) -> float reward on the host; >= 1 is correct.
      answer_key: fn(completion_text) -> hashable answer or None (the votes of maj@k).
      token: jittable fn(tokens [B, N], mask [B, N], answers [B] int32) -> [B] float32
        scoring on device, or None (the run then scores on the host with `verify`).
      check_steps: optional fn(completion_text, example) -> bool (CoT-pass@k).
      host: the training reward on the host when it is not `verify` (a weighted sum of
        `reward.components`: fn(text, example) -> {"reward", name..., "correct"}), or None.
      shapers: the components' shapers (weights of on-device components, `overlong`),
        applied to the verdicts before the `RLConfig`'s (`scoring.shaping`).
      components: the names of the configured components (each logged as `reward/<name>`).
      preload: modules a host-scoring worker imports before it is ready.
      step_scores: optional fn(completion_text, example) -> [(end_char, score), ...] or
        None: the task's per-step checker (process rewards, `scoring.process`).
      label_free: ((name, weight), ...) of the label-free components ("majority",
        "self_certainty"): scored on the host from the texts and the rollout, no reference
        answer needed (`scoring.label_free`).

    `verify`, `answer_key` and `check_steps` define correctness (pass@k, `reward/correct`);
    the training reward is `token` on device, else `host` or `verify` on the host.
    """
    verify: Callable
    answer_key: Callable
    token: Optional[Callable] = None
    check_steps: Optional[Callable] = None
    host: Optional[Callable] = None
    shapers: Tuple[Callable, ...] = ()
    components: Tuple[str, ...] = ()
    preload: Tuple[str, ...] = ()
    step_scores: Optional[Callable] = None
    label_free: Tuple[Tuple[str, float], ...] = ()

    @property
    def on_device(self) -> bool:
        return self.token is not None

    @property
    def host_reward(self) -> Callable:
        """The training reward on the host: `host` when set, else `verify`."""
        return self.host if self.host is not None else self.verify


def task_verifier(task, tokenizer=None) -> Verifier:
    """A task's verifiers; the on-device one only when a tokenizer is given and the task has
    one."""
    token = None if tokenizer is None else task.token_verifier(tokenizer)
    return Verifier(verify=task.verify, answer_key=task.answer_key, token=token,
                    check_steps=task.check_steps, step_scores=task.step_scores)


def math_verifier(kind: str = "rule") -> Verifier:
    """A math verifier on `example.answer` (`rewards.get_math_verifier(kind)`: "rule",
    "math_verify" or "auto"); maj@k votes on normalised extracted answers."""
    from rlvr_jax import rewards  # Lazily: the rule verifier pulls in sympy-free parsing only.
    from rlvr_jax.rewards.components import on_answer
    reward = rewards.get_math_verifier(kind)
    preload = ("math_verify",) if reward is rewards.math_verify_reward else ()
    # A partial of module-level functions: picklable, so a RewardPool worker can run it.
    return Verifier(verify=functools.partial(on_answer, reward=reward),
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
    if name == "token" and not verifier.on_device:
        raise ValueError(f"reward.verifier='token' needs a task with an on-device verifier; "
                         f"{task.name!r} has none (use 'task' or 'auto')")
    return verifier
