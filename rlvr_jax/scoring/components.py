"""The components `config.reward.components` may list that are not terms of their own
module: the per-completion (sample) terms (task, math, math_verify, code, format; their
picklable host functions, summed in the host pool by `scoring.Scorer`), the verifier that
decides correctness in a run with components, and the reward model's config checks.

    config.reward.components = "task,format"     # comma-separated names ("" = one verifier)
    config.reward.weights = "1.0,0.2"            # as many floats ("" = all 1.0)

The reward of a completion is Σ_k w_k · c_k of its terms (`scoring.terms`); each listed
component's mean is logged as `reward/<name>`. Correctness (`reward/correct`, eval pass@k,
maj@k) is decided by the first correctness component (token, task, math, math_verify,
code), else by `reward.verifier`. Parsing and validation: `scoring.scorer.parse_components`
and `check_reward_config`.
"""
import functools
import os

from rlvr_jax.scoring import host_reward
from rlvr_jax.scoring.reward_model import check_reward_model_path
from rlvr_jax.scoring.verifiers import Verifier, math_verifier, task_verifier

CORRECTNESS = ("verifier", "token", "task", "math", "math_verify", "code")


def _paired_path(reward, names, component: str, what: str) -> str:
    """`reward.<component>_path`, which comes with the `component` component and only with it
    (one-line errors naming the field); `what` says what it must be."""
    field = f"{component}_path"
    path = reward.get(field, "")
    if component in names and not path:
        raise ValueError(f"reward.{field}: is empty; the {component!r} component needs {what}")
    if path and component not in names:
        raise ValueError(f"reward.{field}: is set but {component!r} is not in "
                         f"reward.components ({reward.components!r}); add it, e.g. "
                         f"reward.components={component}")
    return path


def check_reward_model(reward, names) -> None:
    """The `reward_model` component and `reward.reward_model_path` come together; the
    directory must hold a reward model this library reads (`check_reward_model_path`)."""
    path = _paired_path(reward, names, "reward_model",
                        "a local Hugging Face *ForSequenceClassification directory")
    if path:
        try:
            check_reward_model_path(path)
        except (OSError, ValueError) as e:
            raise ValueError(f"reward.reward_model_path: {e}") from None
    if reward.get("reward_model_microbatches", 1) < 1:
        raise ValueError(f"reward.reward_model_microbatches: must be >= 1, got "
                         f"{reward.reward_model_microbatches}")


def check_prm(reward, names) -> None:
    """The `prm` component and `reward.prm_path` come together; one frozen or learned
    scoring model per run (`reward_model`, `judge`, `prm`, `implicit_prm`: one of them)."""
    path = _paired_path(reward, names, "prm", "a PRM directory (scripts/train_prm.py)")
    models = [n for n in ("reward_model", "judge", "prm", "implicit_prm") if n in names]
    if len(models) > 1:
        raise ValueError(f"reward.components: {' and '.join(models)} do not go together (one "
                         "scoring model per run, state.reward_params)")
    if path:
        try:
            check_reward_model_path(path)
        except (OSError, ValueError) as e:
            raise ValueError(f"reward.prm_path: {e}") from None
    if reward.get("prm_form", "sum") not in ("sum", "min", "progress"):
        raise ValueError(f"reward.prm_form: must be sum, min or progress, got "
                         f"{reward.prm_form!r}")


def check_judge(reward, names) -> None:
    """The `judge` component and `reward.judge_path` come together, without `reward_model`
    (one frozen scoring model per run); the template parses (`judge.split_template`)."""
    from rlvr_jax.scoring.judge import split_template
    path = _paired_path(reward, names, "judge",
                        "a scripts/train.py run directory or a local HF *ForCausalLM directory")
    if "judge" in names and "reward_model" in names:
        raise ValueError("reward.components: 'judge' and 'reward_model' do not go together "
                         "(one frozen scoring model per run, state.reward_params)")
    if "judge" in names:
        try:
            split_template(reward.judge_template)
        except ValueError as e:
            raise ValueError(f"reward.judge_template: {e}") from None
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"reward.judge_path: {path} has no config.json (a scripts/train.py "
                             "run directory or a local HF *ForCausalLM directory)")
        if not 0.0 < reward.judge_unique_fraction <= 1.0:
            raise ValueError(f"reward.judge_unique_fraction: must be in (0, 1], got "
                             f"{reward.judge_unique_fraction}")
        if reward.judge_microbatches < 1:
            raise ValueError(f"reward.judge_microbatches: must be >= 1, got "
                             f"{reward.judge_microbatches}")
        if isinstance(reward.judge_samples, bool) or reward.judge_samples < 0:
            raise ValueError(f"reward.judge_samples: must be an int >= 0 (0: P(yes)), got "
                             f"{reward.judge_samples!r}")


def host_component(name: str, task):
    """The picklable host fn(text, example) -> float of sample component `name` (task,
    math, math_verify, code, format)."""
    from rlvr_jax import rewards
    if name == "task":
        if task is None:
            raise ValueError(f"reward.components: {name!r} needs data.source='task'")
        return functools.partial(host_reward.task_verdict, task=task)
    if name in ("math", "math_verify"):
        kind = "rule" if name == "math" else "math_verify"
        return functools.partial(host_reward.on_answer, reward=rewards.get_math_verifier(kind))
    if name == "code":
        return functools.partial(host_reward.code_component, task=task)
    return host_reward.format_component


def sample_term(setup, weight, *, name: str):
    """The sample term of component `name` (`host_component`), or None when unlisted."""
    return None if weight is None else host_component(name, setup.task)


def correctness_verifier(name: str, task, tokenizer) -> Verifier:
    """The eval / `reward/correct` verifier of correctness component `name`."""
    if name in ("math", "math_verify"):
        return math_verifier("rule" if name == "math" else name)
    if name == "code":
        return Verifier(verify=functools.partial(host_reward.code_component, task=task),
                        answer_key=lambda text: None)
    if task is None:
        raise ValueError(f"reward.components: {name!r} needs data.source='task'")
    verifier = task_verifier(task, tokenizer if name == "token" else None)
    if name == "token" and verifier.token is None:
        raise ValueError(f"reward.components: 'token' needs a task with an on-device "
                         f"verifier; {task.name!r} has none (use 'task')")
    return verifier


def on_device_verifier(task, tokenizer) -> Verifier:
    """The task's on-device verifier beside device terms only (e.g. a `reward_model` or
    `cosine_length`): it decides correctness, scored in the same program."""
    verifier = None if task is None else task_verifier(task, tokenizer)
    if verifier is None or verifier.token is None:
        raise ValueError("reward.components: device components alone (reward_model, "
                         "cosine_length, ...) are scored beside the task's on-device verifier "
                         "(data.source=task with a token verifier, e.g. arithmetic); "
                         f"{'no task' if task is None else repr(task.name)} has none: add a "
                         "host component for correctness, e.g. "
                         "reward.components=math,reward_model with reward.weights=0,1")
    return verifier
