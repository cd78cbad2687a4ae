r"""Evaluate a policy: pass@k, maj@k, CoT-pass@k with bootstrap intervals; prints JSON.

    python scripts/evaluate.py --task arithmetic --split test --num-prompts 200 \
        --task-kwargs '{"min_digits": 2, "max_digits": 3}' --params-dir ORBAX_DIR  # hf-to-orbax output
    python scripts/evaluate.py --jsonl math.jsonl --prompt-field problem --answer-field answer \
        --hf-dir ~/models/Qwen2.5-0.5B-Instruct --chat-template --max-new-tokens 512 --k 1,8
    python scripts/evaluate.py --task arithmetic --preset tiny --num-prompts 8   # smoke test
    python scripts/evaluate.py --run-dir runs/quickstart --k 1,8

With `--run-dir` (a `scripts/train.py` workdir) every option left out is the run's own: its
task and knobs (`data.task`, `data.task_kwargs`), its held-out stream (`seed + 1` of the
test split) and size (`eval.num_prompts`), its tokenizer, `eval.k` samples at
`eval.temperature`, `sampling.max_new_tokens`: the run's final held-out evaluation again.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    data = p.add_mutually_exclusive_group()
    data.add_argument("--task", help="synthetic task: arithmetic | countdown | sorting | "
                      "synthesis (default with --run-dir: the run's)")
    data.add_argument("--jsonl", help="JSONL file of math problems")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--hf-dir", default="", help="local Hugging Face checkpoint directory")
    model.add_argument("--params-dir", default="", help="convert_checkpoint.py hf-to-orbax output")
    model.add_argument("--run-dir", default="", help="a scripts/train.py workdir (latest checkpoint)")
    model.add_argument("--preset", default="", help="randomly initialised preset (tests)")
    p.add_argument("--split", default="test")
    p.add_argument("--task-kwargs", default=None, help="JSON difficulty knobs of the task "
                   "(default: {}, with --run-dir the run's)")
    p.add_argument("--task-seed", type=int, default=None,
                   help="example stream of the split (default: 1, with --run-dir the run's)")
    p.add_argument("--prompt-field", default="prompt")
    p.add_argument("--answer-field", default="answer")
    p.add_argument("--verifier", default="rule", help="math verifier: rule | math_verify | auto")
    p.add_argument("--num-prompts", type=int, default=None,
                   help="default: 200 (with --run-dir the run's); 0 = the whole JSONL file")
    p.add_argument("--tokenizer", default="",
                   help="default: the run's, the HF dir, else builtin")
    p.add_argument("--chat-template", action="store_true", help="wrap prompts in the template")
    p.add_argument("--num-samples", type=int, default=None,
                   help="N sampled completions per prompt (default: 8)")
    p.add_argument("--k", default="", help="comma-separated k values (default: 1 and N)")
    p.add_argument("--no-greedy", action="store_true", help="skip greedy pass@1")
    p.add_argument("--temperature", type=float, default=None, help="default: 1.0")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: 16")
    p.add_argument("--batch-size", type=int, default=32, help="prompts per sampler call")
    p.add_argument("--dtype", default="float32", help="compute dtype (bfloat16 on accelerators)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-resamples", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--samples-out", default="", help="write completions here (JSONL)")
    p.add_argument("--env", default=None,
                   help="multi-turn environment (docs/multiturn.md): calculator, "
                        "calculator_host, python, lookup, guess_number; its limits from "
                        "--run-dir's config (else the defaults); default: the run's env.name")
    p.add_argument("--out", default="", help="also write the JSON report here")
    args = p.parse_args(argv)
    if not (args.task or args.jsonl or args.run_dir):
        p.error("one of the arguments --task --jsonl is required (or --run-dir)")
    return args


_DEFAULTS = dict(task_kwargs="{}", task_seed=1, num_prompts=200, num_samples=8,
                 temperature=1.0, max_new_tokens=16)


def run_defaults(args) -> None:
    """Fills the options left out (None) from `args.run_dir`'s config.json, else from
    `_DEFAULTS`."""
    if args.run_dir:
        path = os.path.join(args.run_dir, "config.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} not found (expected a scripts/train.py workdir)")
        with open(path) as f:
            run = json.load(f)
        data = run["data"]
        if not (args.task or args.jsonl):
            if data.get("source", "task") != "task" or data.get("mixture"):
                raise ValueError(f"--run-dir {args.run_dir}: the run trained on "
                                 f"{data.get('path') or data.get('mixture')}; "
                                 "name the evaluation data with --task or --jsonl")
            args.task = data["task"]
        if args.task == data.get("task") and args.task_kwargs is None:
            args.task_kwargs = json.dumps(data.get("task_kwargs") or {})
        own = dict(task_seed=run["seed"] + 1, num_prompts=run["eval"]["num_prompts"],
                   num_samples=run["eval"]["k"], temperature=run["eval"]["temperature"],
                   max_new_tokens=run["sampling"]["max_new_tokens"])
        for key, value in own.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
        args.tokenizer = args.tokenizer or run.get("tokenizer") or ""
        args.env_config = run.get("env") or {}
        if args.env is None:
            args.env = args.env_config.get("name", "")
    for key, value in _DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def main(argv=None):
    """Parses `argv`, evaluates, prints the JSON report. A missing file or directory, or a
    bad argument value, ends with one `error:` line on stderr and exit status 2."""
    args = parse_args(argv)
    try:
        run_defaults(args)
        data, tokenizer, config, params = _load(args)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
              file=sys.stderr)
        sys.exit(2)
    _evaluate(args, data, tokenizer, config, params)


def _load(args):
    """(eval data, tokenizer, model config, params) from the arguments."""
    from rlvr_jax import evaluation
    from rlvr_jax.data.tokenizers import load_tokenizer

    if args.task:
        knobs = _knobs(args.task_kwargs)
        try:
            data = evaluation.task_data(args.task, split=args.split,
                                        num_prompts=args.num_prompts, seed=args.task_seed,
                                        **knobs)
        except TypeError as e:  # An unknown knob: the task's __init__ names it.
            raise ValueError(f"--task-kwargs: {e}") from None
    else:
        data = evaluation.jsonl_data(args.jsonl, prompt_field=args.prompt_field,
                                     answer_field=args.answer_field,
                                     num_prompts=args.num_prompts, verifier=args.verifier)
    tokenizer = load_tokenizer(args.tokenizer or args.hf_dir or "builtin")
    if args.run_dir:  # A training run's checkpoint: read by the training code.
        from rlvr_jax.train.checkpoint import load_run
        config, params = load_run(args.run_dir, tokenizer=tokenizer)
        config = config.replace(dtype=args.dtype)
    else:
        config, params = evaluation.load_policy(tokenizer=tokenizer, hf_dir=args.hf_dir,
                                                params_dir=args.params_dir, preset=args.preset,
                                                dtype=args.dtype, seed=args.seed)
    return data, tokenizer, config, params


def _sampler(args, tokenizer, config):
    """The policy's `Sampler`: plain sampling, or episodes of --env (its tools:
    env.num_workers calls at a time), completions of --max-new-tokens."""
    from rlvr_jax import multiturn, sampling
    from rlvr_jax.sampler import Sampler
    sc = sampling.SamplingConfig(max_new_tokens=args.max_new_tokens,
                                 stop_token_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id,
                                 vocab_limit=tokenizer.vocab_size)
    if not args.env:
        return Sampler(config, sc)
    from rlvr_jax.train.config import default_config
    e = dict(default_config().env.to_dict(), **getattr(args, "env_config", {}))
    env = multiturn.build_env(args.env, tokenizer, max_turns=e["max_turns"],
                              max_turn_tokens=e["max_turn_tokens"],
                              max_obs_tokens=e["max_obs_tokens"], timeout_s=e["timeout_s"],
                              corpus_path=e["corpus_path"])
    return Sampler(config, sc, env=env, tokenizer=tokenizer, tool_workers=e["num_workers"])


def _evaluate(args, data, tokenizer, config, params):
    from rlvr_jax import evaluation, sampling
    try:
        sampler = _sampler(args, tokenizer, config)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: --env: {e}", file=sys.stderr)
        sys.exit(2)
    tokens, mask = evaluation.encode_prompts(data.examples, tokenizer,
                                             apply_chat_template=args.chat_template)
    evaluator = evaluation.Evaluator(sampler, tokenizer, tokens, mask, data,
                                     batch_size=args.batch_size,
                                     buckets=sampling.DEFAULT_BUCKETS)
    ks = [int(k) for k in args.k.split(",")] if args.k else ()
    report = evaluator.report(
        params, num_samples=args.num_samples, ks=ks, greedy=not args.no_greedy,
        temperature=args.temperature, top_p=args.top_p, seed=args.seed,
        num_resamples=args.num_resamples, confidence=args.confidence,
        samples_out=args.samples_out)
    report["model"] = args.hf_dir or args.params_dir or args.run_dir or args.preset
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


def _knobs(text: str) -> dict:
    try:
        knobs = json.loads(text)
    except ValueError as e:
        raise ValueError(f"--task-kwargs: not JSON ({e}): {text}") from None
    if not isinstance(knobs, dict):
        raise ValueError(f"--task-kwargs: a JSON object is needed, got {text}")
    return knobs


if __name__ == "__main__":
    main()
