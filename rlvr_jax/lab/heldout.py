"""The lab's held-out prompt sets and its per-prompt evaluation (lab v2, "less noisy
evaluation"):

  whole_test_split(config)     every problem of a small task's fixed test split, once each
  evaluator_for(r, examples)   an `evaluation.Evaluator` of run `r` on given examples
  per_prompt(...)              pass@k / maj@k / CoT-pass@k / mean@n per prompt ([P] each)
  criterion_stop(...)          the `stop` of `loop.warm_up` for a `WarmupCriterion`
"""
import hashlib
from typing import Callable, Dict, List

import jax
import numpy as np

from rlvr_jax import evaluation, tasks
from rlvr_jax.data import datasets
from rlvr_jax.lab.spec import CRITERION_STREAM, EvalSpec, WarmupCriterion
from rlvr_jax.tasks.base import Example, split_of
from rlvr_jax.train import build

# "Small": a test split the lab evaluates whole at every arm x seed (1-2 digit addition's
# is ~1000 problems; 3-digit addition's ~100 000 is not).
MAX_SPLIT = 4096
MAX_SPACE = 2_000_000  # Problems hashed to find the split (about a second per 10^6).


def _operands(digits_lo: int, digits_hi: int) -> range:
    return range(0 if digits_lo == 1 else 10 ** (digits_lo - 1), 10 ** digits_hi)


def whole_test_split(config) -> List[Example]:
    """Every problem of `config.data`'s task whose key hashes to the test split, in a fixed
    order (op, then a, then b): the same prompts for every seed. Only a plain arithmetic
    task (`data.source="task"`, no mixture or curriculum) can be enumerated; its operands
    are every number of min_digits..max_digits digits (each problem once: unlike the test
    stream, which draws the digit count first, so short operands are over-represented).
    Raises ValueError (one line) otherwise or when the split exceeds MAX_SPLIT problems."""
    d = config.data
    if d.source != "task" or d.mixture or d.curriculum.knob:
        raise ValueError("EvalSpec(prompts='all') needs data.source='task' without a mixture "
                         "or curriculum")
    task = tasks.get(d.task, **d.task_kwargs.to_dict())
    if type(task) is not tasks.Arithmetic:
        raise ValueError(f"EvalSpec(prompts='all'): the lab enumerates the arithmetic task's "
                         f"test split only, not {d.task!r}")
    a_range = _operands(task.min_digits, task.max_digits)
    space = sum(len(a_range) * len(_operands(task.min_digits, task.mul_max_digits if op == "mul"
                                             else task.max_digits)) for op in task.ops)
    if space > MAX_SPACE:
        raise ValueError(f"EvalSpec(prompts='all'): {space} problems to enumerate (more than "
                         f"{MAX_SPACE}); evaluate on the test stream instead")
    out = []
    for op in task.ops:
        b_range = _operands(task.min_digits, task.mul_max_digits if op == "mul"
                            else task.max_digits)
        for a in a_range:
            for b in b_range:
                if op == "sub" and a < b:
                    continue  # Drawn as (b, a): that problem is enumerated there.
                ex = task.make(op, a, b, split="test")
                if split_of(ex.key, test_fraction=task.test_fraction) == "test":
                    out.append(ex)
                    if len(out) > MAX_SPLIT:
                        raise ValueError(f"EvalSpec(prompts='all'): the test split has more "
                                         f"than {MAX_SPLIT} problems; use the test stream")
    return out


def prompts_digest(examples) -> str:
    """A short hash of the prompts' texts in order: two arms' per-prompt values pair up
    only when their digests agree."""
    h = hashlib.sha1("\n".join(ex.prompt for ex in examples).encode()).hexdigest()
    return h[:12]


def evaluator_for(r, examples, *, batch_size: int, temperature: float = 1.0
                  ) -> evaluation.Evaluator:
    """An `Evaluator` of run `r` (its sampler, tokenizer, verifier) on `examples` [E], all of
    them (the last batch padded), `batch_size` prompts per compiled call."""
    config = r.config
    source = datasets.ExampleList(examples, name=f"{config.data.task}/test")
    pb = next(build.prompt_loader(config, source, r.tokenizer, len(examples), shuffle=False))
    if len(pb.examples) != len(examples):
        raise ValueError(f"{len(examples) - len(pb.examples)} held-out prompts are longer than "
                         f"data.max_prompt_len = {config.data.max_prompt_len}")
    data = evaluation.EvalData.scored_by(source.name, pb.examples, r.scorer.verifier)
    return evaluation.Evaluator(r.sampler, r.tokenizer, pb.tokens,
                                build.prompt_mask(pb.lengths, config.data.max_prompt_len),
                                data, batch_size=min(batch_size, len(examples)),
                                temperature=temperature)


def per_prompt(evaluator: evaluation.Evaluator, params, spec: EvalSpec, seed: int
               ) -> Dict[str, np.ndarray]:
    """{metric: [P]}: pass@k, maj@k, CoT-pass@k (k in spec.ks) and mean@n per held-out
    prompt from `spec.num_samples` samples each at `spec.temperature`; the sampling key
    depends on the seed only (every arm of a seed is scored on the same draws). Their means
    over prompts are the lab's metrics."""
    rng = jax.random.fold_in(jax.random.PRNGKey(seed), 424242)
    return evaluator.sampled(params, rng, num_samples=spec.num_samples, ks=spec.ks,
                             temperature=spec.temperature, batch_size=spec.batch_size)


def criterion_examples(config, num_prompts: int) -> List[Example]:
    """The warm-up criterion's `num_prompts` held-out prompts: the test split's stream at
    seed config.seed + 1 + CRITERION_STREAM (the evaluation's is config.seed + 1)."""
    _, _, test, _ = build.build_sources(config)
    source = datasets.TaskSource(test.task, seed=test.seed + CRITERION_STREAM, split="test")
    return [source[i] for i in range(num_prompts)]


def criterion_stop(crit: WarmupCriterion, pass1: Callable[[object], float], max_steps: int,
                   record: Dict[str, list], log: Callable[[str], None] = print):
    """`stop(step, params)` for `loop.warm_up`: at every `crit.every`-th step measures
    `pass1(params)` (greedy pass@1 on the criterion's prompts), appends (step, value) to
    `record["checks"]`, and is true once the value is ≥ crit.until_pass1. `record["steps"]`
    is the last step seen (`max_steps` when never met), `record["reached"]` whether it was."""
    record.update(checks=[], steps=0, reached=False)

    def stop(step: int, params) -> bool:
        record["steps"] = step
        if step % crit.every and step < max_steps:
            return False
        value = float(pass1(params))
        record["checks"].append([step, value])
        log(f"    warm-up step {step}: held-out greedy pass@1 {value:.3f} "
            f"(criterion ≥ {crit.until_pass1})")
        record["reached"] = value >= crit.until_pass1
        return record["reached"]
    return stop
