"""Train a process reward model (PRM) on a policy's own traces and export it for transformers.

    python scripts/train_prm.py --finding learned_process_rewards --labels mc \
        --work runs/findings/learned_process_rewards/work --out runs/prm/sorting_mc
    python scripts/train_prm.py --config configs/process_min_arithmetic.py --labels oracle \
        --work runs/prm_work --out runs/prm/arith_oracle

The policy is a lab warm-up (`rlvr_jax.lab.runner.warmup_params`: the finding's or the
config's, seed `--seed`, read from `--work` or trained there once). It samples `--samples`
completions of `--train-prompts` training prompts; each step (the RL term's step ends:
`reward.prm_boundary` / `prm_marker` of the config) is labelled by the task's step checker
(`--labels oracle`) or by Monte-Carlo continuations of the policy (`--labels mc`: good when
>= `--mc-threshold` of `--continuations` reach the answer). The PRM (the policy's trunk, a
`score` head) is fit with binary cross-entropy; on held-out traces (test-split prompts) its
step-level AUROC against the oracle checker is printed as JSON (with the MC labels' own
agreement with the oracle on the training traces). `--out` holds a
`*ForSequenceClassification` directory for `reward.prm_path`, and `metrics.json`.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("RLVR_JAX_NO_PROGRESS", "1")


def _config(args):
    if args.finding:
        from rlvr_jax import lab
        finding = lab.load(args.finding)
        return finding.base(), finding.warmup
    from rlvr_jax.train.cli import load_config_file
    return load_config_file(args.config), None


def policy(config, seed: int, work: str, criterion):
    """(the warm-up params of `config` at `seed`, the `loop.Run` that holds its parts)."""
    from rlvr_jax.lab import runner
    from rlvr_jax.train import loop
    from rlvr_jax.train import workdir as workdir_lib
    config.seed = seed
    config.reward.components, config.reward.prm_path = "", ""
    config.rl.process_source, config.rl.process_weight = "oracle", 0.0
    run_dir = tempfile.mkdtemp(prefix="train_prm_")
    r, _ = loop.setup(config, workdir_lib.plan(config, run_dir), progress=False)
    loop.open_logs(r)  # A warm-up trained here logs to run_dir (as the lab's pairs do).
    params, _ = runner.warmup_params(r, work, criterion=criterion)
    return params, r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--finding", default="", help="a configs/repro/ finding: its base config")
    src.add_argument("--config", default="", help="a configs/*.py file")
    p.add_argument("--work", required=True, help="the lab work dir holding the warm-ups")
    p.add_argument("--out", required=True)
    p.add_argument("--labels", choices=("oracle", "mc"), default="mc")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-prompts", type=int, default=128)
    p.add_argument("--test-prompts", type=int, default=128)
    p.add_argument("--samples", type=int, default=4, help="completions per prompt")
    p.add_argument("--continuations", type=int, default=4, help="MC rollouts per step")
    p.add_argument("--mc-threshold", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    args = p.parse_args(argv)

    from rlvr_jax import tasks
    from rlvr_jax.models import reward_model
    from rlvr_jax.train import prm_training as pt
    config, criterion = _config(args)
    params, r = policy(config, args.seed, args.work, criterion)
    task = tasks.get(config.data.task, **dict(config.data.task_kwargs))
    tok, mc = r.tokenizer, r.model_config
    kw = dict(model_config=mc, max_prompt_len=config.data.max_prompt_len,
              max_new_tokens=config.sampling.max_new_tokens, num_samples=args.samples)
    t0 = time.perf_counter()
    train = pt.sample_traces(params, task.generate(args.train_prompts, seed=args.seed + 11,
                                                   split="train"), tok, seed=1, **kw)
    test = pt.sample_traces(params, task.generate(args.test_prompts, seed=args.seed + 12,
                                                  split="test"), tok, seed=2, **kw)
    bounds = dict(boundary=config.reward.prm_boundary, marker=config.reward.prm_marker)
    oracle, oracle_ends = pt.oracle_labels(train, task.step_scores, tok)
    metrics = {"labels": args.labels, "train_traces": len(train.texts),
               "test_traces": len(test.texts)}
    if args.labels == "mc":
        ends = pt.step_ends(train, tok, **bounds)
        labels, frac, p0 = pt.mc_labels(params, train, ends, task.verify, tok, model_config=mc,
                                        continuations=args.continuations,
                                        threshold=args.mc_threshold, seed=3)
        metrics["mc_labels_vs_oracle"] = pt.agreement(frac, oracle, oracle_ends & ends)
        lab_arrays = pt.label_arrays(train, labels, ends, p0)
    else:
        lab_arrays = pt.label_arrays(train, oracle, oracle_ends)
    metrics["label_seconds"] = time.perf_counter() - t0
    prm = pt.init_prm(mc, params, seed=args.seed)
    prm = pt.fit_prm(prm, train, *lab_arrays, config=mc, steps=args.steps,
                     batch_size=args.batch_size, learning_rate=args.learning_rate,
                     seed=args.seed)
    t_oracle, t_ends = pt.oracle_labels(test, task.step_scores, tok)
    metrics["heldout_vs_oracle"] = pt.agreement(pt.prm_step_scores(prm, test, config=mc),
                                                t_oracle, t_ends)
    metrics["seconds"] = time.perf_counter() - t0
    print(json.dumps(metrics, indent=1), flush=True)
    reward_model.save_hf_reward_model(prm, mc, args.out, pad_token_id=tok.pad_id)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
