"""Train a tiny reward model on arithmetic preferences and export it for transformers.

    python scripts/train_reward_model.py --out runs/rm_arithmetic [--steps 600]

Pairs come from the task itself (`rlvr_jax.train.bradley_terry`): the worked solution of a
1-2 digit addition is preferred over a corruption the verifier scores 0 (a wrong answer, a
wrong column sum with the answer it spells, no marker, another problem's solution). The
model (the `tiny` shape, builtin tokenizer) is trained with the Bradley-Terry loss; its
pairwise accuracy is measured on held-out (test-split) prompts. `--out` then holds a
`Qwen2ForSequenceClassification` directory (config.json + model.safetensors) for
`--config.reward.reward_model_path`, and `metrics.json`.
"""
import argparse
import json
import os
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax import tasks  # noqa: E402
from rlvr_jax.data import datasets  # noqa: E402
from rlvr_jax.data.tokenizers import load_tokenizer  # noqa: E402
from rlvr_jax.models import presets, reward_model  # noqa: E402
from rlvr_jax.train import bradley_terry as rm_train  # noqa: E402
from rlvr_jax.train.state import make_optimizer  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-pairs", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    tokenizer = load_tokenizer("builtin")
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2, style="steps")
    config = presets.get("tiny", vocab_size=tokenizer.vocab_size, dtype="float32")
    rng = np.random.default_rng(args.seed)

    def batches(split, seed):
        loader = datasets.PromptLoader(datasets.TaskSource(task, seed=seed, split=split),
                                       tokenizer, batch_size=args.batch_pairs,
                                       max_prompt_len=8, seed=seed)
        while True:
            yield rm_train.preference_batch(loader, rng, task=task,
                                            max_new_tokens=args.max_new_tokens)

    params = reward_model.init_reward_params(config, jax.random.PRNGKey(args.seed))
    tx = make_optimizer(learning_rate=args.learning_rate, warmup_steps=50, max_grad_norm=1.0)
    opt_state, step = tx.init(params), rm_train.make_train_step(config, tx)
    train, t0 = batches("train", args.seed), time.perf_counter()
    for i in range(args.steps):
        batch = next(train)
        params, opt_state, m = step(params, opt_state, batch)
        if (i + 1) % 100 == 0 or i + 1 == args.steps:
            print(f"step {i + 1}: loss {float(m['loss']):.4f} train pair accuracy "
                  f"{float(m['accuracy']):.3f}", flush=True)
    test = batches("test", args.seed + 1)
    metrics = rm_train.pairwise_accuracy(params, [next(test) for _ in range(args.eval_batches)],
                                         config=config)
    metrics["train_seconds"] = time.perf_counter() - t0
    metrics["steps"] = args.steps
    print("held-out:", json.dumps(metrics, indent=1), flush=True)
    reward_model.save_hf_reward_model(params, config, args.out, pad_token_id=tokenizer.pad_id)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    print(f"wrote {args.out} (Qwen2ForSequenceClassification, {config.num_params()} "
          "trunk parameters)")


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
