"""Training a small reward model on task data (pairwise Bradley-Terry), for `scripts/
train_reward_model.py`: no downloads, the preferences come from the task itself.

A pair is (chosen, rejected) completions of one prompt: chosen is the task's worked solution,
rejected a corruption of it that the task's verifier scores 0 (`CORRUPTIONS`). Sequences are
laid out as in RL (left-padded prompt ++ right-padded completion with EOS), so the trained
model scores rollouts exactly as `scoring.reward_model` feeds them.

    loss = -mean log σ(r(chosen) − r(rejected))      (Bradley & Terry 1952; Ouyang et al. 2022)
"""
import functools
from typing import Dict, List, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlvr_jax.data import datasets
from rlvr_jax.models import ModelConfig
from rlvr_jax.models.reward_model import jit_reward_forward, reward_forward
from rlvr_jax.tasks.arithmetic import column_steps
from rlvr_jax.tasks.base import MARKER

CORRUPTIONS = ("answer", "steps", "no_marker", "other_problem")


def _consistent_answer(steps: List[int]) -> int:
    """The sum an addition's column sums spell (digit s % 10 per column, last carry)."""
    digits = "".join(str(s % 10) for s in reversed(steps))
    return int(str(steps[-1] // 10) + digits) if steps[-1] >= 10 else int(digits)


def corrupt(example, kind: str, rng: np.random.Generator, other) -> str:
    """A wrong completion of an arithmetic ("add", style "steps") `example`.

    answer: right steps, the answer off by 1..10; steps: one column sum off by 1..2 and the
    answer those wrong steps spell (the error a policy makes); no_marker: the solution
    without its ``####``; other_problem: the worked solution of `other`.
    """
    m = example.meta
    steps = column_steps("add", m["a"], m["b"])
    if kind == "answer":
        d = int(rng.integers(1, 11))
        value = example.answer_value
        wrong = value - d if rng.random() < 0.5 and value >= d else value + d
        return f"{' '.join(map(str, steps))} {MARKER} {wrong}"
    if kind == "steps":
        i = int(rng.integers(len(steps)))
        delta = int(rng.choice([-2, -1, 1, 2]))
        steps[i] = steps[i] + delta if 0 <= steps[i] + delta <= 19 else steps[i] - delta
        return f"{' '.join(map(str, steps))} {MARKER} {_consistent_answer(steps)}"
    if kind == "no_marker":
        return example.solution.replace(MARKER + " ", "")
    if kind == "other_problem":
        return other.solution
    raise ValueError(f"unknown corruption {kind!r}; known: {CORRUPTIONS}")


def preference_batch(loader: datasets.PromptLoader, rng: np.random.Generator, *,
                     max_new_tokens: int, task) -> Dict[str, np.ndarray]:
    """One batch of P pairs: tokens / attention [2P, Tp + N] (rows 0..P-1 chosen, P..2P-1
    rejected), and kinds [P] int32 (index into `CORRUPTIONS`)."""
    pb = next(loader)
    width = pb.tokens.shape[1]
    pmask = (np.arange(width)[None, :] >= width - pb.lengths[:, None]).astype(np.int32)
    n = len(pb.examples)
    kinds = rng.integers(len(CORRUPTIONS), size=n)
    rejected = []
    for i, ex in enumerate(pb.examples):
        text = corrupt(ex, CORRUPTIONS[kinds[i]], rng, pb.examples[(i + 1) % n])
        if task.verify(text, ex) != 0.0 or text == ex.solution:  # E.g. a repeated problem.
            text = corrupt(ex, "answer", rng, None)
        rejected.append(text)
    texts = [ex.solution for ex in pb.examples] + rejected
    comp, cmask = datasets.completion_arrays(texts, loader.tokenizer, max_len=max_new_tokens)
    prompt, pmask = np.concatenate([pb.tokens] * 2), np.concatenate([pmask] * 2)
    return {"tokens": np.concatenate([prompt, comp], 1),
            "attention": np.concatenate([pmask, cmask.astype(np.int32)], 1),
            "kinds": kinds.astype(np.int32)}


def bradley_terry_loss(params, batch, *, config: ModelConfig) -> Tuple[jax.Array, Dict]:
    """(-mean log σ(r_chosen − r_rejected), {"loss", "accuracy", "margin"}) of a
    `preference_batch` (label 0 of the reward model's scores)."""
    scores = reward_forward(params, batch["tokens"], batch["attention"], config=config)[:, 0]
    chosen, rejected = jnp.split(scores, 2)
    margin = chosen - rejected
    loss = -jnp.mean(jax.nn.log_sigmoid(margin))
    return loss, {"loss": loss, "accuracy": jnp.mean((margin > 0).astype(jnp.float32)),
                  "margin": jnp.mean(margin)}


def make_train_step(config: ModelConfig, tx: optax.GradientTransformation):
    """Jitted (params, opt_state, batch) -> (params, opt_state, metrics)."""
    grad_fn = jax.value_and_grad(functools.partial(bradley_terry_loss, config=config),
                                 has_aux=True)

    @jax.jit
    def step(params, opt_state, batch):
        (_, metrics), grads = grad_fn(params, {k: batch[k] for k in ("tokens", "attention")})
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, metrics
    return step


def pairwise_accuracy(params, batches, *, config: ModelConfig) -> Dict[str, float]:
    """Held-out accuracy: the fraction of pairs where the chosen completion scores higher,
    overall ("accuracy") and per corruption ("accuracy/<kind>")."""
    right, kinds = [], []
    for batch in batches:
        scores = np.asarray(jit_reward_forward(params, batch["tokens"], batch["attention"],
                                               config=config))[:, 0]
        chosen, rejected = np.split(scores, 2)
        right.append(chosen > rejected)
        kinds.append(batch["kinds"])
    right, kinds = np.concatenate(right), np.concatenate(kinds)
    out = {"accuracy": float(np.mean(right)), "pairs": float(len(right))}
    for k, name in enumerate(CORRUPTIONS):
        if np.any(kinds == k):
            out[f"accuracy/{name}"] = float(np.mean(right[kinds == k]))
    return out
