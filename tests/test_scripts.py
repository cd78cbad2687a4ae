"""scripts/evaluate.py (and its library rlvr_jax.evaluation) and scripts/plot.py."""
import importlib.util
import json
import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from rlvr_jax.data.tokenizers import load_tokenizer
from rlvr_jax import evaluation
from rlvr_jax.sampler import Sampler
from rlvr_jax.sampling import SamplingConfig
from rlvr_jax.train.checkpoint import load_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAS_MPL = importlib.util.find_spec("matplotlib") is not None


def _run_script(name, *args, timeout=300):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["RLVR_JAX_TEST_XLA_FLAGS"],
               JAX_COMPILATION_CACHE_DIR=jax.config.jax_compilation_cache_dir or "",
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1")
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("builtin")


# ----------------------------------------------------------------------------- evaluate.py

def test_evaluate_script_tiny_preset_json(tmp_path):
    samples = tmp_path / "samples.jsonl"
    out = tmp_path / "report.json"
    proc = _run_script("evaluate.py", "--task", "arithmetic", "--split", "test",
                       "--preset", "tiny", "--num-prompts", "3", "--num-samples", "2",
                       "--batch-size", "2", "--max-new-tokens", "6", "--num-resamples", "50",
                       "--samples-out", str(samples), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report == json.loads(out.read_text())
    assert report["data"] == "arithmetic/test" and report["model"] == "tiny"
    assert report["num_prompts"] == 3 and report["num_samples"] == 2
    expected = {"greedy_pass@1", "greedy_cot_pass@1", "mean@2", "pass@1", "pass@2", "maj@1",
                "maj@2", "cot_pass@1", "cot_pass@2"}
    assert set(report["metrics"]) == expected
    for name, m in report["metrics"].items():
        assert set(m) == {"value", "ci_low", "ci_high"}, name
        assert 0.0 <= m["ci_low"] <= m["value"] <= m["ci_high"] <= 1.0, (name, m)
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 3 and all(len(r["completions"]) == 2 for r in rows)
    assert [r["answer"] for r in rows] == [ex.answer for ex in evaluation.task_data(
        "arithmetic", split="test", num_prompts=3).examples]


def test_evaluate_script_rejects_two_models():
    proc = _run_script("evaluate.py", "--task", "arithmetic", "--preset", "tiny",
                       "--params-dir", "x", timeout=60)
    assert proc.returncode != 0 and "not allowed with" in proc.stderr


def test_scores_and_metrics_match_the_formulas(tokenizer):
    data = evaluation.task_data("arithmetic", num_prompts=3, min_digits=2, max_digits=2)
    ex = data.examples
    right = [e.solution for e in ex]
    wrong = [e.solution.rsplit("####", 1)[0] + "#### " + str(int(e.answer) + 1) for e in ex]
    # A right answer with wrong worked steps: answer counts, CoT does not.
    bad_steps = ["junk\n#### " + e.answer for e in ex]
    texts = [[right[0], wrong[0], wrong[0], "no answer"],      # 1 right of 4
             [bad_steps[1], bad_steps[1], right[1], wrong[1]],  # 3 right, 1 with good steps
             [wrong[2], wrong[2], wrong[2], wrong[2]]]          # 0 right
    scores = evaluation.score(texts, data)
    np.testing.assert_array_equal(scores["correct"], [[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]])
    # Arithmetic's step check also needs the right answer.
    np.testing.assert_array_equal(scores["steps"], [[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])
    assert scores["answer_ids"][0].tolist() == [0, 1, 1, -1]
    report = evaluation.summarize(scores, ks=(1, 2, 4), num_resamples=200)
    c = np.array([1, 3, 0])
    for k in (1, 2, 4):
        exact = np.mean([1 - math.comb(4 - ci, k) / math.comb(4, k) for ci in c])
        assert report[f"pass@{k}"]["value"] == pytest.approx(exact, abs=1e-6)
    cot = np.array([1, 1, 0])
    assert report["cot_pass@4"]["value"] == pytest.approx(np.mean(cot), abs=1e-6)
    # maj@4: prompt 0's vote is the wrong answer (2 votes), prompt 1's the right one.
    assert report["maj@4"]["value"] == pytest.approx(1 / 3, abs=1e-6)
    assert report["mean@4"]["value"] == pytest.approx(4 / 12, abs=1e-6)
    for m in report.values():
        assert m["ci_low"] <= m["value"] <= m["ci_high"]
    with pytest.raises(ValueError, match="k must be in"):
        evaluation.summarize(scores, ks=(5,))


def test_jsonl_math_data(tmp_path):
    path = tmp_path / "math.jsonl"
    path.write_text("\n".join(json.dumps({"q": q, "a": a}) for q, a in
                              [("What is 1/2+1/4?", "3/4"), ("2^10?", "1024")]) + "\n")
    data = evaluation.jsonl_data(str(path), prompt_field="q", answer_field="a")
    assert [e.prompt for e in data.examples] == ["What is 1/2+1/4?", "2^10?"]
    texts = [["so \\boxed{0.75}", "\\boxed{\\frac{3}{4}}", "the answer is 1"],
             ["\\boxed{1000}", "\\boxed{1024}", "\\boxed{1000}"]]
    scores = evaluation.score(texts, data)
    np.testing.assert_array_equal(scores["correct"], [[1, 1, 0], [0, 1, 0]])
    assert "steps" not in scores
    assert scores["answer_ids"][1].tolist() == [0, 1, 0]
    report = evaluation.summarize(scores, ks=(3,), num_resamples=100)
    assert report["maj@3"]["value"] == pytest.approx(0.5)   # 0.75 ~ 3/4 vote together
    assert report["pass@3"]["value"] == pytest.approx(1.0)


def test_params_dir_and_hf_dir_load_the_same_policy(tokenizer, tmp_path):
    from rlvr_jax.models import hf
    config, params = evaluation.load_policy(tokenizer=tokenizer, preset="tiny", seed=3)
    spec = importlib.util.spec_from_file_location(
        "convert_checkpoint", os.path.join(ROOT, "scripts", "convert_checkpoint.py"))
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    convert.save_orbax(params, config, str(tmp_path / "orbax"))
    hf.save_hf_checkpoint(params, config, tmp_path / "hf")
    data = evaluation.task_data("arithmetic", num_prompts=3)
    tokens, mask = evaluation.encode_prompts(data.examples, tokenizer)
    assert tokens.shape[0] == 3 and (mask[:, -1] == 1).all()
    rng = jax.random.PRNGKey(0)
    sc = SamplingConfig(max_new_tokens=6, stop_token_ids=(tokenizer.eos_id,),
                        pad_id=tokenizer.pad_id, vocab_limit=tokenizer.vocab_size)
    outputs = []
    for source in ({"preset": "tiny", "seed": 3}, {"params_dir": str(tmp_path / "orbax")},
                   {"hf_dir": str(tmp_path / "hf")}):
        cfg, p = evaluation.load_policy(tokenizer=tokenizer, **source)
        assert cfg.vocab_size == config.vocab_size and cfg.n_layers == config.n_layers
        outputs.append(evaluation.generate_texts(p, Sampler(cfg, sc), tokenizer, tokens, mask,
                                                 rng, num_samples=1, greedy=True,
                                                 batch_size=2))
    assert outputs[0] == outputs[1] == outputs[2]
    # One batch of 3 == batches of 2 with the last one padded by a copy.
    assert outputs[0] == evaluation.generate_texts(params, Sampler(config, sc), tokenizer,
                                                   tokens, mask, rng, num_samples=1,
                                                   greedy=True, batch_size=3)
    assert len(outputs[0]) == 3 and all(len(t) == 1 for t in outputs[0])
    with pytest.raises(ValueError, match="exactly one"):
        evaluation.load_policy(tokenizer=tokenizer, preset="tiny", hf_dir="x")
    with pytest.raises(FileNotFoundError, match="model_config.json"):
        evaluation.load_policy(tokenizer=tokenizer, params_dir=str(tmp_path))


# ----------------------------------------------------------------------------- plot.py

def _synthetic_metrics(path):
    with open(path, "w") as f:
        for s in range(1, 4):
            f.write(json.dumps({"step": s, "phase": "sft", "time": 0.0, "sft/loss": 1.0 / s})
                    + "\n")
        for s in range(1, 21):
            f.write(json.dumps({"step": s, "phase": "rl", "time": 0.0,
                                "rollout/reward_mean": s / 20, "loss/kl": 0.01 * s,
                                "train/entropy": None if s == 5 else 2.0 - s / 20,
                                "rollout/response_length": 10.0 + s % 3}) + "\n")
            if s % 10 == 0:
                f.write(json.dumps({"step": s, "phase": "eval", "time": 0.0,
                                    "eval/pass@1": 0.1 * s / 10, "eval/pass@1_ci_low": 0.0,
                                    "eval/pass@1_ci_high": 0.5}) + "\n")


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib (viz extra) not installed")
def test_plot_script_writes_png(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _synthetic_metrics(run / "metrics.jsonl")
    proc = _run_script("plot.py", str(run), "--smooth", "0.5", timeout=120)  # The real CLI.
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "6 curves" in proc.stdout
    png = (run / "metrics.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # The other two invocations call its main() in-process (no second interpreter start).
    plot = _script_module("plot.py")
    out = tmp_path / "two.png"
    capsys.readouterr()
    plot.main([str(run / "metrics.jsonl"), "--keys", "eval/pass@1,loss/kl", "--out", str(out)])
    assert "2 curves" in capsys.readouterr().out and out.stat().st_size > 5_000
    with pytest.raises(SystemExit) as e:
        plot.main([str(run), "--keys", "no/such"])
    assert e.value.code != 0 and "no/such" in capsys.readouterr().err


def test_evaluate_from_a_training_runs_checkpoint(tokenizer, tmp_path, monkeypatch):
    from rlvr_jax.train import run
    from rlvr_jax.train.config import arithmetic_config
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    config = arithmetic_config("grpo")
    config.rl.kl_coef = 0.0
    config.sft.steps = 2
    config.sft.batch_size = 8
    config.rl.steps = 1
    config.rl.num_prompts = 4
    config.rl.num_samples = 2
    config.eval.num_prompts = 8
    config.eval.batch_size = 8
    config.checkpoint.every = 1
    summary = run(config, str(tmp_path), progress=False)
    model_config, params = load_run(str(tmp_path), tokenizer=tokenizer)
    assert model_config.vocab_size == tokenizer.vocab_size
    jax.tree.map(np.testing.assert_array_equal, params, jax.device_get(summary["state"].params))
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_run(str(tmp_path / "missing"), tokenizer=tokenizer)
    # A run without checkpoints: a clear error, and no empty checkpoints/ left behind.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((tmp_path / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="no complete checkpoint; train with"):
        load_run(str(bare), tokenizer=tokenizer)
    assert sorted(os.listdir(bare)) == ["config.json"]
    # `evaluate.py --run-dir RUN` alone: the run's task, knobs, held-out stream and size, so
    # the greedy pass@1 is the one the run printed after RL.
    evaluate = _script_module("evaluate.py")
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        evaluate.main(["--run-dir", str(tmp_path), "--num-samples", "0",
                       "--num-resamples", "50"])
    report = json.loads(out.getvalue())
    assert report["data"] == "arithmetic/test" and report["num_prompts"] == 8
    assert report["max_new_tokens"] == config.sampling.max_new_tokens
    assert report["metrics"]["greedy_pass@1"]["value"] == pytest.approx(
        summary["after_rl"]["eval/pass@1"])
    # `convert_checkpoint.py orbax-to-hf RUN HF_DIR`: the run's policy, exactly.
    from rlvr_jax.models import hf
    _script_module("convert_checkpoint.py").main(["orbax-to-hf", str(tmp_path),
                                                  str(tmp_path / "hf")])
    _, exported = hf.load_hf_checkpoint(str(tmp_path / "hf"))
    jax.tree.map(np.testing.assert_array_equal, exported, params)
    umask = os.umask(0)
    os.umask(umask)
    modes = {n: os.stat(tmp_path / "hf" / n).st_mode & 0o777 for n in os.listdir(tmp_path / "hf")}
    assert set(modes.values()) == {0o666 & ~umask}, modes  # Ordinary files, not 0600.


def test_export_copies_the_runs_hugging_face_tokenizer(tmp_path):
    """A run trained with an HF tokenizer directory: the export gets its tokenizer files and
    chat template, so `AutoTokenizer.from_pretrained(export)` works; the builtin tokenizer
    is said to have nothing to copy."""
    convert = _script_module("convert_checkpoint.py")
    tok_dir, run, out = tmp_path / "tok", tmp_path / "run", tmp_path / "out"
    for d in (tok_dir, run, out):
        d.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (tok_dir / name).write_text(name)
    (run / "config.json").write_text(json.dumps({"tokenizer": str(tok_dir)}))
    line = convert.copy_tokenizer(str(run), str(out))
    assert sorted(os.listdir(out)) == ["chat_template.jinja", "tokenizer.json",
                                       "tokenizer_config.json"], line
    assert (out / "chat_template.jinja").read_text() == "chat_template.jinja"
    (run / "config.json").write_text(json.dumps({"tokenizer": "builtin"}))
    assert convert.copy_tokenizer(str(run), str(tmp_path / "none")).startswith(
        "no Hugging Face tokenizer to copy")


def _script_module(name):
    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(ROOT, "scripts", name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_evaluate_and_convert_bad_input_is_one_line(tmp_path, capsys):
    """A wrong knob, a run trained on file data, a missing directory: one `error:` line and
    exit status 2, nothing written."""
    evaluate, convert = _script_module("evaluate.py"), _script_module("convert_checkpoint.py")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": {"source": "jsonl", "path": "x.jsonl",
                                                          "task": "arithmetic"}}))
    cases = [(evaluate, ["--task", "arithmetic", "--preset", "tiny", "--task-kwargs",
                         '{"max_digit": 2}'], "error: --task-kwargs: "),
             (evaluate, ["--run-dir", str(run)], "name the evaluation data with --task or"),
             (convert, ["orbax-to-hf", str(tmp_path / "none"), str(tmp_path / "out")],
              str(tmp_path / "none")),
             (convert, ["hf-to-orbax", str(tmp_path / "none"), str(tmp_path / "out")],
              str(tmp_path / "none"))]
    for module, argv, expected in cases:
        with pytest.raises(SystemExit) as e:
            module.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1, (argv, err)
        assert err[0].startswith("error: ") and expected in err[0], (argv, err)
    assert sorted(os.listdir(tmp_path)) == ["run"]
