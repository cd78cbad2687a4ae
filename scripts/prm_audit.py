"""Audit a step scorer against the oracle step checker: agreement on held-out traces, and
drift during RL (reward hacking of the PRM made visible).

    python scripts/prm_audit.py agree --prm runs/prm/sorting_mc \
        --finding learned_process_rewards --work runs/findings/learned_process_rewards/work
    python scripts/prm_audit.py drift RUN_DIR [RUN_DIR ...] [--out drift.png]

`agree`: the policy (the finding's or config's warm-up of `--seed`, read from `--work`)
samples `--samples` completions of `--prompts` test-split prompts; the PRM's step
probabilities at the oracle's step ends are compared with the oracle's verdicts (step AUROC,
accuracy at 0.5, mean score of good / bad steps), printed as JSON.

`drift`: from each RL run's metrics.jsonl (a `prm` run logs the PRM's mean step score
`prm/step_score`; with `rl.process_oracle_metrics` the oracle's step accuracy
`process/step_accuracy` and `prm/oracle_step_agreement` beside it), the series over the RL
steps, their change from the
first to the last tenth of the run, and `drift` = Δ PRM score − Δ oracle accuracy (> 0: the
PRM's score rises faster than the steps it scores get right — PRM score up, oracle step
accuracy down is the extreme); JSON, and with --out (the `viz` extra) one panel per run.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("RLVR_JAX_NO_PROGRESS", "1")

PRM_KEY, ORACLE_KEY = "prm/step_score", "process/step_accuracy"
AGREE_KEY = "prm/oracle_step_agreement"


def agree(args) -> dict:
    """Held-out agreement of the PRM at `args.prm` with the oracle (module docstring)."""
    from rlvr_jax import tasks
    from rlvr_jax.models import reward_model
    from rlvr_jax.train import prm_training as pt
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_prm
    config, criterion = train_prm._config(args)
    params, r = train_prm.policy(config, args.seed, args.work, criterion)
    task = tasks.get(config.data.task, **dict(config.data.task_kwargs))
    traces = pt.sample_traces(params, task.generate(args.prompts, seed=args.seed + 12,
                                                    split="test"), r.tokenizer,
                              model_config=r.model_config,
                              max_prompt_len=config.data.max_prompt_len,
                              max_new_tokens=config.sampling.max_new_tokens,
                              num_samples=args.samples, seed=2)
    prm_config, prm = reward_model.load_hf_reward_model(args.prm)
    labels, ends = pt.oracle_labels(traces, task.step_scores, r.tokenizer)
    scores = pt.prm_step_scores(prm, traces, config=prm_config)
    return {"prm": args.prm, "seed": args.seed,
            "heldout_vs_oracle": pt.agreement(scores, labels, ends)}


def _tenth_means(steps, values):
    pts = [(s, v) for s, v in zip(steps, values) if v is not None and not math.isnan(v)]
    if len(pts) < 2:
        return None, None
    k = max(1, len(pts) // 10)
    return (sum(v for _, v in pts[:k]) / k, sum(v for _, v in pts[-k:]) / k)


def drift(run_dirs) -> dict:
    """Per run: the PRM-score and oracle-accuracy series and their first→last-tenth change."""
    from rlvr_jax.train.logging import read_metrics
    out = {}
    for d in run_dirs:
        rows = [r for r in read_metrics(os.path.join(d, "metrics.jsonl"))
                if r.get("phase") == "rl"]
        res = {}
        for key in (PRM_KEY, ORACLE_KEY, AGREE_KEY):
            steps = [r["step"] for r in rows if key in r]
            values = [r[key] for r in rows if key in r]
            first, last = _tenth_means(steps, values)
            res[key] = {"steps": steps, "values": values, "first": first, "last": last}
        p, o = res[PRM_KEY], res[ORACLE_KEY]
        if None not in (p["first"], o["first"]):
            res["drift"] = (p["last"] - p["first"]) - (o["last"] - o["first"])
        out[d] = res
    return out


def _title(run_dir: str) -> str:
    """The run's components and seed from its config.json, else its path's tail."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            c = json.load(f)
        return f"{c['reward']['components'] or c['reward']['verifier']}, seed {c['seed']}"
    except (OSError, KeyError, ValueError):
        return "/".join(os.path.normpath(run_dir).split(os.sep)[-2:])


def plot(result: dict, path: str) -> None:
    """One panel per run: the three series, EMA-smoothed (0.8), raw values faint."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from plot import ema  # scripts/plot.py
    fig, axes = plt.subplots(1, len(result), figsize=(4 * len(result), 3), squeeze=False)
    for ax, (d, res) in zip(axes[0], result.items()):
        for key in (PRM_KEY, ORACLE_KEY, AGREE_KEY):
            values = [math.nan if v is None else v for v in res[key]["values"]]
            line, = ax.plot(res[key]["steps"], ema(values, 0.8), label=key)
            ax.plot(res[key]["steps"], res[key]["values"], color=line.get_color(), alpha=0.2)
        ax.set_title(_title(d), fontsize=7)
        ax.set_xlabel("RL step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("agree")
    a.add_argument("--prm", required=True)
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument("--finding", default="")
    src.add_argument("--config", default="")
    a.add_argument("--work", required=True)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--prompts", type=int, default=128)
    a.add_argument("--samples", type=int, default=4)
    d = sub.add_parser("drift")
    d.add_argument("run_dirs", nargs="+")
    d.add_argument("--out", default="")
    args = p.parse_args(argv)
    if args.command == "agree":
        print(json.dumps(agree(args), indent=1))
        return
    result = drift(args.run_dirs)
    summary = {k: {m: (v[m] if m == "drift" else {x: v[m][x] for x in ("first", "last")})
                   for m in v} for k, v in result.items()}
    print(json.dumps(summary, indent=1))
    if args.out:
        plot(result, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
