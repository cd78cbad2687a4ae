"""Rewards from the config: named components with weights (`config.reward`).

    config.reward.components = "task,format"     # comma-separated names ("" = one verifier)
    config.reward.weights = "1.0,0.2"            # as many floats ("" = all 1.0)

On the command line: `--config.reward.components=task,format --config.reward.weights=1,0.2`.
The reward of a completion is Σ_k w_k · c_k; each component's mean is logged as
`reward/<name>`. Correctness (`reward/correct`, eval pass@k, maj@k) is decided by the first
correctness component (token, task, math, math_verify, code), else by `reward.verifier`.

With `reward_model` among the components a reward model from `reward.reward_model_path` is
scored on device: inside the one RL step beside `token` / `overlong` (the task's token
verifier decides correctness even when `token` is not a component: its weight is then 0),
or between sampling and the update on the split path beside host components (e.g.
`math,reward_model` with weights `0,1` for file data).

`check_reward_config(config.reward)` validates the section without touching a device;
`reward_from_config(config, task, tokenizer)` builds the `Verifier` of a run. With no
components it is exactly `choose_verifier(config.reward.verifier, ...)`.
"""
import dataclasses
import functools
from typing import Tuple

from rlvr_jax.scoring import shaping
from rlvr_jax.scoring.verifiers import VERIFIERS, Verifier, choose_verifier, math_verifier, \
    task_verifier

# name -> what it scores (docs/verifiers.md has the failure modes and costs).
COMPONENTS = {
    "token": "the task's on-device token verifier (arithmetic): 1 for the right answer",
    "task": "the task's host verifier (Task.verify): 1 for the right final answer",
    "math": "the rule math verifier on example.answer (rewards.math_reward)",
    "math_verify": "math-verify on the extracted answer (rewards.math_verify_reward)",
    "code": "pass fraction of the example's unit tests in the sandbox (rewards.code_reward)",
    "format": "1 for exactly <think>...</think><answer>...</answer> (rewards.format_reward)",
    "overlong": "DAPO soft overlong penalty in [-1, 0] on the completion length",
    "reward_model": "a learned reward model's score of prompt + completion, on device "
                    "(reward.reward_model_path; scoring.reward_model)",
    "majority": "label-free (TTRL): 1 where the completion's answer (the verifier's "
                "answer_key) is the majority answer of its group of G (scoring.label_free)",
    "self_certainty": "label-free: exp(mean log-prob of the answer span's tokens) under the "
                      "sampling policy (scoring.label_free)",
}
CORRECTNESS = ("token", "task", "math", "math_verify", "code")
LABEL_FREE = ("majority", "self_certainty")  # Scored from the texts and the rollout (host).
ON_DEVICE = ("token", "overlong", "reward_model")  # Jittable: the one-program path.


def _names(text: str) -> Tuple[str, ...]:
    return tuple(p.strip() for p in str(text).split(",") if p.strip())


def parse_components(reward) -> Tuple[Tuple[str, float], ...]:
    """((name, weight), ...) of `config.reward` (validated); () without components."""
    check_reward_config(reward)
    names = _names(reward.components)
    weights = [float(w) for w in _names(reward.weights)] or [1.0] * len(names)
    return tuple(zip(names, weights))


def check_reward_config(reward) -> None:
    """Raises ValueError, naming the field (`reward.components: ...`), for a bad
    `config.reward`: an unknown verifier or component, a repeated component, weights that
    are not numbers or not one per component, `token` mixed with host components,
    num_workers < 0, timeout_s <= 0. Cheap: no compilation, no device."""
    if reward.verifier not in VERIFIERS:
        raise ValueError(f"reward.verifier: unknown verifier {reward.verifier!r}; known: "
                         f"{', '.join(VERIFIERS)}")
    names = _names(reward.components)
    for name in names:
        if name not in COMPONENTS:
            raise ValueError(f"reward.components: unknown component {name!r}; known: "
                             f"{', '.join(COMPONENTS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"reward.components: a component is repeated in {reward.components!r}")
    weights = _names(reward.weights)
    try:
        [float(w) for w in weights]
    except ValueError:
        raise ValueError(f"reward.weights: not a comma-separated list of numbers: "
                         f"{reward.weights!r}") from None
    if weights and len(weights) != len(names):
        raise ValueError(f"reward.weights: {len(weights)} weights for {len(names)} components "
                         f"({', '.join(names) or 'none'})")
    if "token" in names and set(names) - set(ON_DEVICE):
        raise ValueError("reward.components: 'token' scores on device and combines only with "
                         f"'overlong' and 'reward_model'; got {reward.components!r} (use "
                         "'task' for the host)")
    _check_reward_model(reward, names)
    if names and not set(names) - {"overlong"}:
        raise ValueError("reward.components: 'overlong' alone is no reward; add a "
                         "correctness or format component")
    if reward.num_workers < 0:
        raise ValueError(f"reward.num_workers: must be >= 0, got {reward.num_workers}")
    if reward.timeout_s <= 0:
        raise ValueError(f"reward.timeout_s: must be > 0, got {reward.timeout_s}")
    from rlvr_jax.scoring.noise import check_noise_config
    check_noise_config(reward)


def _check_reward_model(reward, names) -> None:
    """The `reward_model` component and `reward.reward_model_path` come together; the
    directory must hold a reward model this library reads (`check_reward_model_path`)."""
    from rlvr_jax.scoring.reward_model import check_reward_model_path
    path = reward.get("reward_model_path", "")
    if "reward_model" in names and not path:
        raise ValueError("reward.reward_model_path: is empty; the 'reward_model' component "
                         "needs a local Hugging Face *ForSequenceClassification directory")
    if path and "reward_model" not in names:
        raise ValueError(f"reward.reward_model_path: is set but 'reward_model' is not in "
                         f"reward.components ({reward.components!r}); add it, e.g. "
                         "reward.components=reward_model")
    if path:
        try:
            check_reward_model_path(path)
        except (OSError, ValueError) as e:
            raise ValueError(f"reward.reward_model_path: {e}") from None
    if reward.get("reward_model_microbatches", 1) < 1:
        raise ValueError(f"reward.reward_model_microbatches: must be >= 1, got "
                         f"{reward.reward_model_microbatches}")


def host_component(name: str, task):
    """The picklable host fn(text, example) -> float of component `name`."""
    from rlvr_jax import rewards
    from rlvr_jax.rewards import components as comp
    if name in ("task", "token"):
        if task is None:
            raise ValueError(f"reward.components: {name!r} needs data.source='task'")
        return task.verify
    if name in ("math", "math_verify"):
        kind = "rule" if name == "math" else "math_verify"
        return functools.partial(comp.on_answer, reward=rewards.get_math_verifier(kind))
    return {"format": comp.format_component, "code": comp.code_component}[name]


def _correctness_verifier(name: str, task, tokenizer) -> Verifier:
    """The eval / `reward/correct` verifier of correctness component `name`."""
    if name in ("math", "math_verify"):
        return math_verifier("rule" if name == "math" else name)
    if name == "code":
        from rlvr_jax.rewards import components as comp
        return Verifier(verify=comp.code_component, answer_key=lambda text: None)
    if task is None:
        raise ValueError(f"reward.components: {name!r} needs data.source='task'")
    verifier = task_verifier(task, tokenizer if name == "token" else None)
    if name == "token" and not verifier.on_device:
        raise ValueError(f"reward.components: 'token' needs a task with an on-device "
                         f"verifier; {task.name!r} has none (use 'task')")
    return verifier


def _on_device_verifier(task, tokenizer) -> Verifier:
    """The task's on-device verifier beside a `reward_model` component (it decides
    correctness; the reward model is scored in the same program)."""
    verifier = None if task is None else task_verifier(task, tokenizer)
    if verifier is None or not verifier.on_device:
        raise ValueError("reward.components: 'reward_model' alone is scored beside the task's "
                         "on-device verifier (data.source=task with a token verifier, e.g. "
                         f"arithmetic); {'no task' if task is None else repr(task.name)} has "
                         "none: add a host component for correctness, e.g. "
                         "reward.components=math,reward_model with reward.weights=0,1")
    return verifier


def _overlong_shaper(config, weight: float):
    n = config.sampling.max_new_tokens
    if config.rl.overlong_buffer > 0:
        raise ValueError("reward.components: 'overlong' and rl.overlong_buffer > 0 would "
                         "apply the DAPO penalty twice; use one of them")
    return functools.partial(shaping.overlong, max_length=n, buffer=max(1, n // 4), coef=weight)


def reward_from_config(config, task, tokenizer) -> Verifier:
    """The `Verifier` of a run from `config.reward` (and `config.sampling.max_new_tokens`,
    `config.rl.overlong_buffer`, `config.rl.process_weight`): `choose_verifier(
    config.reward.verifier, ...)` without components, else the weighted components (on
    device when every one is); the noisy-verifier / backward-correction shapers first
    (`scoring.noise`). Process rewards (`rl.process_weight > 0`) and label-free components
    are scored on the host: the verifier then has no on-device `token`."""
    from rlvr_jax.scoring.noise import noise_shapers
    verifier = _components_verifier(config, task, tokenizer)
    changes = dict(shapers=noise_shapers(config.reward) + verifier.shapers)
    process = config.rl.get("process_weight", 0.0) > 0
    if process or verifier.label_free:
        if process and verifier.step_scores is None:
            raise ValueError("rl.process_weight: process rewards need a task with step "
                             "checkers (data.source=task)")
        changes["token"] = None  # The split path: step checkers and votes run on the host.
    return dataclasses.replace(verifier, **changes)


def _components_verifier(config, task, tokenizer) -> Verifier:
    """`reward_from_config` before the noise shapers and the choice of path."""
    from rlvr_jax.rewards.components import HostReward
    pairs = parse_components(config.reward)
    if not pairs:
        return choose_verifier(config.reward.verifier, task, tokenizer)
    names = tuple(n for n, _ in pairs)
    correct = next((n for n in names if n in CORRECTNESS), None)
    if correct:
        base = _correctness_verifier(correct, task, tokenizer)
    else:  # E.g. format or label-free only: reward.verifier's host verifier decides.
        name = config.reward.verifier
        base = choose_verifier("task" if name in ("auto", "token") and task is not None
                               else name, task, None)
    shapers = tuple(_overlong_shaper(config, w) for n, w in pairs if n == "overlong")
    if set(names) <= set(ON_DEVICE):  # Every component is on device.
        if correct != "token":  # The token verifier measures; weight 0 in the reward.
            base = _on_device_verifier(task, tokenizer)
        weight = dict(pairs).get("token", 0.0)
        return dataclasses.replace(
            base, shapers=(functools.partial(shaping.weighted, name="token",
                                             weight=weight),) + shapers, components=names)
    terms = [(n, host_component(n, task), w) for n, w in pairs
             if n not in ON_DEVICE + LABEL_FREE]
    if not terms:  # Label-free only: the verifier measures (reward/verifier), weight 0.
        terms, correct = [("verifier", base.verify, 0.0)], "verifier"
    host = HostReward(terms, correct=correct, correct_fn=None if correct else base.verify)
    preload = ("math_verify",) if "math_verify" in names else ()
    return dataclasses.replace(
        base, token=None, host=host, shapers=shapers, components=names, preload=preload,
        label_free=tuple((n, w) for n, w in pairs if n in LABEL_FREE))
