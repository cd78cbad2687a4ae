"""The cost of the judge term per RL step (CPU or any backend); prints JSON.

    python scripts/judge_benchmark.py [--judge runs/judge_arithmetic] [--steps 20]
        [--policy runs/quickstart] [--unique-fraction 0.5]

Two compiled RL steps of the quickstart's shape (tiny policy, P = 16 prompts x G = 8
samples, 16 new tokens, GRPO): rewarded by the on-device token verifier, and by the judge
alone (the verifier measures). Each is compiled, run once, then timed over `--steps` steps
(median and quartiles, block_until_ready). Also the judge's scoring alone (its forward over
the B = 128 judge rows of one batch, jitted). The judge is `--judge` (a scripts/train_judge.py
directory) or, without it, a random model of the policy's shape (the cost does not depend
on its weights). The policy is `--policy` (a scripts/train.py run of the tiny preset) or a
random one. A third step judges each group's identical completions once
(`--unique-fraction`, `reward.judge_unique_fraction`; how often completions repeat depends on
the policy: a trained one repeats its answers, a random one never does): its time and
`reward/judge_distinct_fraction` (the share of rows it read, averaged over the timed steps).
"""
import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax import models, sampling, scoring, tasks  # noqa: E402
from rlvr_jax.data import datasets  # noqa: E402
from rlvr_jax.data.tokenizers import load_tokenizer  # noqa: E402
from rlvr_jax.models import hf, presets  # noqa: E402
from rlvr_jax.perf.benchmarks import timed  # noqa: E402
from rlvr_jax.train import step as step_lib  # noqa: E402
from rlvr_jax.train.checkpoint import load_run  # noqa: E402
from rlvr_jax.train.state import create_train_state  # noqa: E402

P, G, TP, N = 16, 8, 8, 16
TEMPLATE = "{question} ref {reference} ans {answer} ok? "


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--judge", default="")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--policy", default="", help="a scripts/train.py run (tiny preset)")
    p.add_argument("--unique-fraction", type=float, default=0.5)
    args = p.parse_args(argv)
    tok = load_tokenizer("builtin")
    mc = presets.get("tiny", vocab_size=tok.vocab_size, dtype="float32")
    if args.judge:
        jc, jp = hf.load_hf_checkpoint(args.judge)
    else:
        jc, jp = mc, models.init_params(mc, jax.random.PRNGKey(1))
    judge = scoring.make_judge(jc, tok, template=TEMPLATE)
    once = scoring.make_judge(jc, tok, template=TEMPLATE, unique_fraction=args.unique_fraction)
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    pb = next(datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                    max_prompt_len=TP))
    pmask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    batch = {"prompt_tokens": jnp.asarray(pb.tokens), "prompt_mask": jnp.asarray(pmask),
             "answers": jnp.asarray(pb.answers)}
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(tok.eos_id,),
                                 pad_id=tok.pad_id, vocab_limit=tok.vocab_size)
    verifier = scoring.Verifier(verify=None, answer_key=None, token=tasks.make_token_verifier(tok))
    tx = optax.adam(1e-4)
    params = models.init_params(mc, jax.random.PRNGKey(0))
    if args.policy:
        mc, params = load_run(args.policy, tokenizer=tok)
    out = {"backend": jax.default_backend(), "prompts": P, "samples": G, "new_tokens": N,
           "judge": args.judge or "random tiny", "judge_params": int(jc.num_params()),
           "policy": args.policy or "random tiny", "unique_fraction": args.unique_fraction,
           "steps_timed": args.steps}
    for name, weights, rm in (("verifier", {"token": 1.0}, None),
                              ("judge", {"judge": 1.0}, judge),
                              ("judge_unique", {"judge": 1.0}, once)):
        setup = scoring.Setup(verifier, reward_model=rm, num_samples=G, components=tuple(weights))
        rl_step = step_lib.make_rl_step(mc, sc, step_lib.RLConfig(num_prompts=P), tx,
                                        scorer=scoring.assemble(setup, weights))
        state = [create_train_state(jax.tree.map(jnp.copy, params), tx, jax.random.PRNGKey(3),
                                    reward_params=jax.tree.map(jnp.copy, jp) if rm else None)]

        seen = []

        def one():
            state[0], metrics = rl_step(state[0], batch)
            seen.append(metrics)
            return metrics
        out[f"step_s_{name}"] = timed(one, args.steps, quartiles=True)
        if rm is once:
            out["judge_distinct_fraction"] = float(np.mean(
                [float(m["reward/judge_distinct_fraction"]) for m in seen]))
    rollout = sampling.generate(params, batch["prompt_tokens"], batch["prompt_mask"],
                                jax.random.PRNGKey(0), model_config=mc, sampling_config=sc)
    answers = jnp.repeat(batch["answers"], G)
    for key, j in (("judge_scoring_s", judge), ("judge_scoring_s_unique", once)):
        score = jax.jit(lambda r, j=j: scoring.judge_scores(jp, r, answers, judge=j, group_size=G))
        out[key] = timed(lambda: score(rollout), args.steps, quartiles=True)
    first = scoring.judge.first_copies(rollout, G)
    out["judge_scoring_distinct_fraction"] = float(jnp.mean(first == jnp.arange(P * G)))
    out["judge_row_tokens"] = int(scoring.judge.judge_inputs(judge, rollout, answers)[0].shape[1])
    out["judge_cost_fraction"] = (out["step_s_judge"][0] - out["step_s_verifier"][0]) / \
        out["step_s_verifier"][0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
