"""Held-out problems with the functions that score them (from `rlvr_jax.scoring`)."""
import dataclasses
from typing import Callable, Optional

from rlvr_jax import scoring, tasks


@dataclasses.dataclass
class EvalData:
    """Held-out problems with their scoring functions.

    Attributes:
      name: a label for the report ("arithmetic/test", a JSONL path).
      examples: P `rlvr_jax.tasks.Example`s.
      verify: fn(completion, example) -> reward; >= 1 counts as correct.
      answer_key: fn(completion) -> hashable answer or None (votes for maj@k).
      check_steps: optional fn(completion, example) -> bool (CoT-pass@k).
    """
    name: str
    examples: list
    verify: Callable
    answer_key: Callable
    check_steps: Optional[Callable] = None

    @classmethod
    def scored_by(cls, name: str, examples, verifier: scoring.Verifier) -> "EvalData":
        """`examples` scored by a `scoring.Verifier` (its host functions)."""
        return cls(name, list(examples), verifier.verify, verifier.answer_key,
                   verifier.check_steps)


def task_data(name: str, *, split: str = "test", num_prompts: int, seed: int = 1,
              **task_kwargs) -> EvalData:
    """The first `num_prompts` examples of a synthetic task's split (stream `seed`; the
    trainer evaluates on stream `config.seed + 1` of the test split)."""
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
    task = tasks.get(name, **task_kwargs)
    examples = task.generate(num_prompts, seed=seed, split=split)
    return EvalData.scored_by(f"{name}/{split}", examples, scoring.task_verifier(task))


def jsonl_data(path: str, *, prompt_field: str = "prompt", answer_field: str = "answer",
               num_prompts: int = 0, verifier: str = "rule") -> EvalData:
    """Math problems from a JSONL file (the first `num_prompts`, 0 = all), scored by the math
    verifier `verifier` ("rule", "math_verify" or "auto"); maj@k votes on normalised answers."""
    from rlvr_jax.data import files
    data = files.read_jsonl(path, prompt_field=prompt_field, answer_field=answer_field)
    examples = [data[i] for i in range(len(data))]
    if num_prompts:
        examples = examples[:num_prompts]
    return EvalData.scored_by(path, examples, scoring.math_verifier(verifier))
