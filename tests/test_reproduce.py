"""The reproduction lab: statistics and verdicts (against NumPy), the finding specs, and one
`--quick` smoke run of scripts/reproduce.py (results.json structure, resume)."""
import importlib.util
import json
import math
import os
import sys

import numpy as np
import pytest

from rlvr_jax import lab
from rlvr_jax.lab import runner, stats
from rlvr_jax.lab.spec import Check, EvalSpec, Finding
from rlvr_jax.train.config import arithmetic_config
from rlvr_jax.train.errors import ConfigError
from rlvr_jax.train.validate import validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location(
        "reproduce", os.path.join(ROOT, "scripts", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("expect,margin,low,high,outcome", [
    (">", 0, 0.01, 0.2, "supported"), (">", 0, -0.1, 0.2, "undecided"),
    (">", 0, -0.3, -0.1, "contradicted"), ("<", 0, -0.3, -0.1, "supported"),
    ("<", 0, 0.1, 0.3, "contradicted"), (">=", 0.02, -0.01, 0.1, "supported"),
    (">=", 0.02, -0.05, 0.1, "undecided"), (">=", 0.02, -0.09, -0.03, "contradicted"),
    ("<=", 0.01, -0.2, 0.005, "supported"), ("<=", 0.01, 0.02, 0.05, "contradicted"),
    ("~", 0.03, -0.02, 0.02, "supported"), ("~", 0.03, -0.05, 0.02, "undecided"),
    ("~", 0.03, 0.04, 0.06, "contradicted")])
def test_judge_reads_the_interval(expect, margin, low, high, outcome):
    check = Check("pass@1", "a", "b", expect, margin=margin)
    assert stats.judge(check, low, high) == outcome


def test_verdict_rule():
    S, C, U = stats.SUPPORTED, stats.CONTRADICTED, stats.UNDECIDED
    assert stats.verdict([S, S]) == "reproduced"
    assert stats.verdict([S, C]) == "not reproduced"
    assert stats.verdict([S, U]) == "inconclusive at this scale"


def test_paired_difference_against_numpy_bootstrap():
    rng = np.random.default_rng(0)
    a = rng.random(5)
    b = a - 0.1 + 0.01 * rng.standard_normal(5)
    d = stats.paired_difference(a, b, name="x")
    diffs = a - b
    np.testing.assert_allclose(d["mean"], diffs.mean(), rtol=1e-5)
    np.testing.assert_allclose(d["per_seed"], diffs, rtol=1e-6)
    # An independent percentile bootstrap of the mean over seeds (NumPy, 20000 resamples).
    idx = rng.integers(0, 5, (20000, 5))
    ref = np.percentile(diffs[idx].mean(1), [2.5, 97.5])
    np.testing.assert_allclose(d["ci95"], ref, atol=0.004)
    assert d["wins"] == 5 and d["seeds"] == 5
    # Identical arms: exactly zero, whatever the seed-to-seed spread.
    same = stats.paired_difference(a, a)
    assert same["mean"] == 0.0 and same["ci95"] == [0.0, 0.0]


def test_arm_summary_mean_interval_and_iqm():
    per_seed = [{"seed": s, "pass@1": v} for s, v in enumerate([0.1, 0.2, 0.3, 0.4, 1.0])]
    out = stats.arm_summary(per_seed, ["pass@1"], "arm")
    assert out["mean"]["pass@1"] == pytest.approx(0.4)
    assert out["iqm"]["pass@1"] == pytest.approx(np.mean([0.2, 0.3, 0.4]))  # trims 1 each end
    low, high = out["ci95"]["pass@1"]
    assert 0.1 <= low < 0.4 < high <= 1.0


# ----------------------------------------------------------------------------- specs

def _finding(**kw):
    args = dict(name="t", paper="p", claim="c", base=lambda: arithmetic_config("grpo"),
                arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}},
                checks=[Check("pass@4", "rl", lab.WARMUP, ">", margin=0.01)],
                eval=EvalSpec(num_prompts=8, num_samples=4, ks=(1, 4), batch_size=8))
    args.update(kw)
    return Finding(**args)


def test_finding_spec_checks_its_arms_and_metrics():
    with pytest.raises(ValueError, match="unknown arm 'nope'"):
        _finding(checks=[Check("pass@1", "nope", "rl", ">", margin=0.01)])
    with pytest.raises(ValueError, match="not measured"):
        _finding(checks=[Check("pass@64", "rl", lab.WARMUP, ">", margin=0.01)])
    # CoT-pass@k is measured.
    _finding(checks=[Check("cot_pass@4", "rl", lab.WARMUP, ">", margin=0.01)])
    with pytest.raises(ValueError, match="expect"):
        Check("pass@1", "a", "b", "!=")
    with pytest.raises(ValueError, match="ks must lie"):
        EvalSpec(num_samples=4, ks=(8,))
    f = _finding(quick={"rl.steps": 2, "sft.steps": 3},
                 arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}, "long": {"rl.steps": 300}})
    assert f.is_warmup(lab.WARMUP) and not f.is_warmup("rl")
    q = f.quick_version()
    assert q.arms["rl"]["rl.steps"] == q.arms["long"]["rl.steps"] == 2
    assert q.arms[lab.WARMUP]["rl.steps"] == 0
    assert q.arms["rl"]["sft.steps"] == q.arms[lab.WARMUP]["sft.steps"] == 3  # One warm-up.


def test_train_metric_checks_name_recorded_curves_of_rl_arms():
    curves = ("rollout/reward_mean", "train/entropy")
    f = _finding(checks=[Check("train:train/entropy", "rl", "long", ">", margin=0.01),
                         Check("train_avg:rollout/reward_mean", "rl", "long", "<",
                               margin=0.01)],
                 arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}, "long": {"rl.steps": 300}},
                 curves=curves)
    assert [c.metric for c in f.quick_version().checks] == [
        "train:train/entropy", "train_avg:rollout/reward_mean"]
    with pytest.raises(ValueError, match="not measured"):
        _finding(checks=[Check("train:loss/clip_frac", "rl", lab.WARMUP, ">", margin=0.01)],
                 curves=curves)
    with pytest.raises(ValueError, match="warm-up arm"):
        _finding(checks=[Check("train:train/entropy", "rl", lab.WARMUP, ">", margin=0.01)],
                 curves=curves)


def test_train_metrics_against_numpy():
    rng = np.random.default_rng(1)
    ent = rng.random(23)
    rows = [{"step": i + 1, "phase": "rl", "train/entropy": float(e),
             "loss/clip_frac": None if i % 5 == 0 else float(i)} for i, e in enumerate(ent)]
    out = runner.train_metrics(rows, ["train/entropy", "loss/clip_frac", "absent"])
    # The last 10% of 23 lines: round(2.3) = 2 lines.
    np.testing.assert_allclose(out["train:train/entropy"], ent[-2:].mean(), rtol=1e-12)
    np.testing.assert_allclose(out["train_avg:train/entropy"], ent.mean(), rtol=1e-12)
    clip = [float(i) for i in range(23) if i % 5]  # None values are skipped.
    np.testing.assert_allclose(out["train_avg:loss/clip_frac"], np.mean(clip), rtol=1e-12)
    np.testing.assert_allclose(out["train:loss/clip_frac"], np.mean([21.0, 22.0]), rtol=1e-12)
    assert not any("absent" in k for k in out)
    one = runner.train_metrics(rows[:3], ["train/entropy"])  # At least one line.
    np.testing.assert_allclose(one["train:train/entropy"], ent[2], rtol=1e-12)
    assert runner.train_metrics([], ["train/entropy"]) == {}


def test_summary_and_report_with_training_metrics():
    """A training metric lives in the RL arms only: the warm-up arm's summary leaves it out,
    the check on it is judged, the arms table gets a column for it ("—" for the warm-up)."""
    from rlvr_jax.lab import report
    f = _finding(checks=[Check("train:train/entropy", "rl", "rl2", ">", margin=0.01)],
                 arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}, "rl2": {"rl.steps": 300}})
    def pair(arm, seed, p1, ent=None):
        m = {"pass@1": p1, "pass@4": min(1.0, 2 * p1)}
        if ent is not None:
            m["train:train/entropy"] = ent
        return {"seed": seed, "metrics": m, "wall_s": 1.0,
                "curves": {} if ent is None else {"step": [1, 2], "train/entropy": [ent, ent]}}
    results = {lab.WARMUP: [pair(lab.WARMUP, s, 0.2) for s in range(3)],
               "rl": [pair("rl", s, 0.3, 0.5 + 0.01 * s) for s in range(3)],
               "rl2": [pair("rl2", s, 0.3, 0.4) for s in range(3)]}
    summary = stats.summarize(f, results)
    assert "train:train/entropy" not in summary["arms"][lab.WARMUP]["mean"]
    assert summary["arms"]["rl"]["mean"]["train:train/entropy"] == pytest.approx(0.51)
    check = summary["checks"][0]
    assert check["difference"]["per_seed"] == pytest.approx([0.1, 0.11, 0.12])
    assert check["outcome"] == "supported" and summary["verdict"] == "reproduced"
    table = report.arms_table(summary)
    assert "| arm | pass@1 | pass@4 | train:train/entropy | seeds |" in table
    assert f"| {lab.WARMUP} | 0.200 (0.200–0.200) | 0.400 (0.400–0.400) | — | 3 |" in table


def test_a_stored_pair_lacking_a_checked_metric_is_not_finished(tmp_path):
    """runner._finished: a stored RL pair gets its training metrics from its metrics.jsonl
    when it has none; one lacking a metric a check reads on that arm is run again."""
    f = _finding(checks=[Check("cot_pass@4", "rl", lab.WARMUP, ">", margin=0.01)],
                 arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}, "other": {}})
    pair = tmp_path / "pair"
    (pair / "run").mkdir(parents=True)
    with open(pair / "run" / "metrics.jsonl", "w") as fh:
        for step in (1, 2):
            fh.write(json.dumps({"step": step, "phase": "rl", "train/entropy": 0.1 * step,
                                 "rollout/reward_mean": 0.5}) + "\n")
    def store(metrics):
        with open(pair / "result.json", "w") as fh:
            json.dump({"seed": 0, "metrics": metrics, "curves": {}, "wall_s": 1.0}, fh)
    assert runner._finished(f, "rl", str(pair)) is None  # Nothing stored yet.
    store({"pass@1": 0.2, "pass@4": 0.5})
    assert runner._finished(f, "rl", str(pair)) is None  # No cot_pass@4: run again.
    got = runner._finished(f, "other", str(pair))  # No check reads it on "other".
    assert got["skipped"] and got["metrics"]["train:train/entropy"] == pytest.approx(0.2)
    assert got["metrics"]["train_avg:train/entropy"] == pytest.approx(0.15)
    store({"pass@1": 0.2, "pass@4": 0.5, "cot_pass@4": 0.4})
    assert runner._finished(f, "rl", str(pair))["metrics"]["cot_pass@4"] == 0.4


def test_arm_config_overrides_and_shared_warmup_key():
    f = _finding(arms={"a": {"rl.learning_rate": 3e-4}, "b": {"rl.entropy_keep_fraction": 0.2}},
                 checks=[Check("pass@1", "a", "b", ">", margin=0.01)])
    ca, cb = runner.arm_config(f, "a", 2), runner.arm_config(f, "b", 2)
    assert ca.seed == cb.seed == 2 and ca.rl.learning_rate == 3e-4
    assert ca.eval.every == 0 and ca.checkpoint.every == 0
    assert runner.warmup_key(ca) == runner.warmup_key(cb)  # RL settings: same warm-up.
    assert runner.warmup_key(ca) != runner.warmup_key(runner.arm_config(f, "a", 3))
    with pytest.raises(ValueError, match="unknown key"):
        runner.apply_overrides(arithmetic_config(), {"rl.lr": 1.0})


def test_every_repro_config_loads(capsys):
    names = lab.names()
    assert {"rl_vs_base", "nsr_vs_psr", "entropy_8020", "dapo_clip_higher", "noisy_rewards",
            "group_size", "lite_ppo", "lite_ppo_hard", "ngrpo", "process_rewards"} <= set(names)
    for name in names:
        f = lab.load(name)
        assert f.seeds >= 3 and f.checks and f.paper
        for spec in (f, f.quick_version()):
            for arm in spec.arms:  # Every override is a real config key, every arm valid.
                config = runner.arm_config(spec, arm, 0)
                path = config.reward.get("prm_path", "")
                if path and not os.path.isdir(path):  # Its PRM is trained first (docstring).
                    with pytest.raises(ConfigError, match=r"^reward\.prm_path: no such dir"):
                        validate(config)
                    continue
                validate(config)
    assert _script().main(["list"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == len(names)
    with pytest.raises(ValueError, match="unknown finding"):
        lab.load("no_such_finding")


# ----------------------------------------------------------------------------- the smoke run

def _finite(x):
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return not isinstance(x, float) or math.isfinite(x)


def test_quick_run_writes_results_and_resumes(tmp_path, capsys, monkeypatch):
    """`run rl_vs_base --quick --seeds 1` (the warm-up arm and one RL pair; the warm-up
    has no supervised steps here: its training is tested in test_train_loop): results.json
    as documented, finite; a second invocation skips every finished pair; a removed pair is
    the only one redone, with the same numbers."""
    from rlvr_jax.lab import common
    monkeypatch.setitem(common.QUICK, "sft.steps", 0)  # Saves compiling the SFT step.
    main = _script().main
    out = str(tmp_path / "out")
    cmd = ["run", "rl_vs_base", "--quick", "--seeds", "1", "--out", out]
    with monkeypatch.context() as m:  # Without the viz extra: results and verdicts, no plots.
        m.setitem(sys.modules, "matplotlib", None)
        assert main(cmd) == 0
    printed = capsys.readouterr().out
    assert "plots skipped: they need the viz extra" in printed
    assert "pre-registered verdict:" in printed and "v2:" in printed
    assert not os.path.exists(os.path.join(out, "rl_vs_base", "passk.png"))
    path = os.path.join(out, "rl_vs_base", "results.json")
    with open(path) as f:
        res = json.load(f)
    assert {"finding", "paper", "claim", "verdict", "arms", "checks", "preregistered",
            "v2"} <= set(res)
    assert res["verdict"] in ("reproduced", "not reproduced", "inconclusive at this scale")
    assert res["v2"]["seeds"] == 1 and res["preregistered"]["seeds"] == 1
    arms = lab.load("rl_vs_base").arms
    assert set(res["arms"]) == set(arms) and {lab.WARMUP, "grpo"} <= set(arms)
    for arm in res["arms"].values():
        assert [r["seed"] for r in arm["per_seed"]] == [0]
        for part in ("mean", "ci95", "iqm"):
            assert {"pass@1", "pass@4", "cot_pass@4"} <= set(arm[part])
        assert all(0.0 <= r["pass@1"] <= r["pass@2"] <= r["pass@4"] <= 1.0
                   for r in arm["per_seed"])
        assert all(r["cot_pass@4"] <= r["pass@4"] for r in arm["per_seed"])
    assert _finite(res["arms"]) and _finite(res["checks"])
    assert res["curves"]["grpo"][0]["step"] == [1, 2]  # The RL arm's training curves...
    rl_seed = res["arms"]["grpo"]["per_seed"][0]  # ...and their summaries (RL arms only).
    assert {"train:train/entropy", "train_avg:rollout/reward_mean"} <= set(rl_seed)
    assert not any(k.startswith("train") for k in res["arms"][lab.WARMUP]["per_seed"][0])

    capsys.readouterr()
    assert main(["report", "rl_vs_base", "--out", out]) == 0
    table = capsys.readouterr().out
    assert "| grpo |" in table and f"**v2 verdict: {res['v2']['verdict']}**" in table
    assert f"**Pre-registered verdict: {res['preregistered']['verdict']}**" in table
    # A pair finished before training metrics were recorded gets them from its log.
    work = os.path.join(out, "rl_vs_base", "work")
    quick = lab.load("rl_vs_base").quick_version()
    pair_json = os.path.join(runner.pair_path(quick, "grpo", 0, work), "result.json")
    with open(pair_json) as f:
        old = json.load(f)
    old["metrics"] = {k: v for k, v in old["metrics"].items() if not k.startswith("train")}
    with open(pair_json, "w") as f:
        json.dump(old, f)
    assert main(cmd) == 0
    log = capsys.readouterr().out
    assert log.count("done before") == len(arms)
    assert os.path.exists(os.path.join(out, "rl_vs_base", "passk.png"))  # matplotlib back.
    with open(path) as f:
        assert json.load(f)["arms"] == res["arms"]

    os.remove(pair_json)
    assert main(cmd) == 0
    log = capsys.readouterr().out
    assert log.count("done before") == len(arms) - 1 and "grpo seed 0: 2 RL steps" in log
    with open(path) as f:  # Redone the same way: the same numbers.
        assert json.load(f)["arms"]["grpo"]["per_seed"] == res["arms"]["grpo"]["per_seed"]
