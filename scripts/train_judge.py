"""Fine-tune a tiny generative judge to say Y / N on verifier labels, and export it.

    python scripts/train_judge.py --out runs/judge_arithmetic [--steps 600]

Rows come from the task itself (`rlvr_jax.train.bradley_terry.preference_batch`): for each
1-2 digit addition, its worked solution (the verifier says 1: label Y) and a corruption the
verifier scores 0 (a wrong answer, a wrong column sum with the answer it spells, no marker,
another problem's solution: label N). Each is laid out as the judge reads it inside the RL
step (`scoring.judge.judge_inputs` with `--template`), and the judge, a `tiny` LM (builtin
tokenizer; fresh, or `--init-run` a scripts/train.py run's policy), is trained with the
binary cross-entropy of sigmoid(l_Y − l_N) on the label. No "one token" answer (the audit's
attack) is ever shown to it. `--out` then holds a Hugging Face `Qwen2ForCausalLM` directory
for `--config.reward.judge_path`, judge.json (template, verdict tokens) and metrics.json
(held-out FN / FP on test-split prompts).
"""
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax import models, sampling, scoring, tasks  # noqa: E402
from rlvr_jax.data import datasets  # noqa: E402
from rlvr_jax.data.tokenizers import load_tokenizer  # noqa: E402
from rlvr_jax.models import hf, presets  # noqa: E402
from rlvr_jax.scoring import judge as judge_lib  # noqa: E402
from rlvr_jax.train import bradley_terry  # noqa: E402
from rlvr_jax.train.state import make_optimizer  # noqa: E402

TEMPLATE = "{question} ref {reference} ans {answer} ok? "
TP = 8


def rows(batch, answers, tp: int):
    """The pairs' `Rollout` (2P rows: chosen then rejected), answers [2P] and labels [2P]."""
    t, a = batch["tokens"], batch["attention"]
    r = sampling.Rollout(tokens=jnp.asarray(t[:, tp:]), mask=jnp.asarray(a[:, tp:]),
                         logprobs=jnp.zeros(t[:, tp:].shape), lengths=jnp.asarray(a[:, tp:].sum(1)),
                         finished=jnp.ones(t.shape[0], bool), prompt_tokens=jnp.asarray(t[:, :tp]),
                         prompt_mask=jnp.asarray(a[:, :tp]))
    n = t.shape[0] // 2
    return r, jnp.asarray(np.concatenate([answers] * 2), jnp.int32), \
        jnp.asarray(np.arange(2 * n) < n, jnp.float32)


def margin(params, rollout, answers, judge):
    """l_Y − l_N [B] float32 of each judge row."""
    tokens, mask = judge_lib.judge_inputs(judge, rollout, answers)
    logits = judge_lib.judge_logits(params, tokens, mask, config=judge.config)
    return logits[:, judge.yes] - logits[:, judge.no]


class _Recording:
    """A prompt loader that keeps its last batch (for the pairs' reference answers)."""

    def __init__(self, loader):
        self.loader, self.tokenizer, self.last = loader, loader.tokenizer, None

    def __next__(self):
        self.last = next(self.loader)
        return self.last


def batches(task, tokenizer, split, seed, args):
    """Endless (pairs batch, answers [P]) of `split`."""
    loader = _Recording(datasets.PromptLoader(datasets.TaskSource(task, seed=seed, split=split),
                                              tokenizer, batch_size=args.batch_pairs,
                                              max_prompt_len=TP, seed=seed))
    rng = np.random.default_rng(seed)
    while True:
        batch = bradley_terry.preference_batch(loader, rng, task=task,
                                               max_new_tokens=args.max_new_tokens)
        yield batch, np.array([ex.answer_value for ex in loader.last.examples], np.int32)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-pairs", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--template", default=TEMPLATE)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    tokenizer = load_tokenizer("builtin")
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2, style="steps")
    config = presets.get("tiny", vocab_size=tokenizer.vocab_size, dtype="float32")
    judge = scoring.make_judge(config, tokenizer, template=args.template)
    params = models.init_params(config, jax.random.PRNGKey(args.seed))
    tx = make_optimizer(learning_rate=args.learning_rate, warmup_steps=50, max_grad_norm=1.0)
    opt_state = tx.init(params)

    def loss_fn(params, rollout, answers, labels):
        d = margin(params, rollout, answers, judge)
        loss = jnp.mean(labels * jax.nn.softplus(-d) + (1 - labels) * jax.nn.softplus(d))
        return loss, jnp.mean((d > 0) == (labels > 0))

    @jax.jit
    def step(params, opt_state, rollout, answers, labels):
        (loss, acc), g = jax.value_and_grad(loss_fn, has_aux=True)(params, rollout, answers,
                                                                   labels)
        updates, opt_state = tx.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, acc

    train, t0 = batches(task, tokenizer, "train", args.seed, args), time.perf_counter()
    for i in range(args.steps):
        batch, answers = next(train)
        params, opt_state, loss, acc = step(params, opt_state, *rows(batch, answers, TP))
        if (i + 1) % 100 == 0 or i + 1 == args.steps:
            print(f"step {i + 1}: loss {float(loss):.4f} train accuracy {float(acc):.3f}",
                  flush=True)
    metrics = held_out(params, judge, batches(task, tokenizer, "test", args.seed + 1, args),
                       args.eval_batches)
    metrics.update(train_seconds=time.perf_counter() - t0, steps=args.steps)
    print("held-out:", json.dumps(metrics, indent=1), flush=True)
    hf.save_hf_checkpoint(params, config, args.out)
    with open(os.path.join(args.out, "judge.json"), "w") as f:
        json.dump({"template": args.template, "yes": "Y", "no": "N"}, f, indent=1)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    print(f"wrote {args.out} (Qwen2ForCausalLM, {config.num_params()} parameters)")


def held_out(params, judge, test, n_batches):
    """FN (a verified-correct solution judged N) and FP (a corruption judged Y) rates."""
    fn = jax.jit(lambda p, r, a: margin(p, r, a, judge))
    says, labels, kinds = [], [], []
    for _ in range(n_batches):
        batch, answers = next(test)
        r, a, lab = rows(batch, answers, TP)
        says.append(np.asarray(fn(params, r, a)) > 0)
        labels.append(np.asarray(lab) > 0)
        kinds.append(np.concatenate([np.full(len(answers), -1), batch["kinds"]]))
    says, labels, kinds = map(np.concatenate, (says, labels, kinds))
    out = {"fn_rate": float(np.mean(~says[labels])), "fp_rate": float(np.mean(says[~labels])),
           "rows": int(len(says))}
    for k, name in enumerate(bradley_terry.CORRUPTIONS):
        out[f"fp_rate/{name}"] = float(np.mean(says[kinds == k]))
    return out


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
