"""Lab v2, less noisy evaluation: per-prompt values stored per pair and summarised, the
report's seed × prompt bootstrap intervals (against an independent NumPy bootstrap) and its
fallback, the whole fixed test split (`EvalSpec(prompts="all")`), and the warm-up trained to
a criterion (`WarmupCriterion`, `loop.warm_up(stop=...)`), end to end on a one-layer model."""
import dataclasses
import json
import os

import numpy as np
import pytest

from rlvr_jax import lab
from rlvr_jax.lab import heldout, report, runner, stats, verdict
from rlvr_jax.lab.spec import Check, EvalSpec, Finding, WarmupCriterion
from rlvr_jax.tasks.base import split_of
from rlvr_jax.train.config import arithmetic_config
from tests.reference import lab_stats_ref as ref


def _finding(**kw):
    args = dict(name="t", paper="p", claim="c", base=lambda: arithmetic_config("grpo"),
                arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}},
                checks=[Check("pass@1", "rl", lab.WARMUP, ">", margin=0.01),
                        Check("pass@4", "rl", lab.WARMUP, "<=", margin=0.01)],
                eval=EvalSpec(num_prompts=8, num_samples=4, ks=(1, 4), batch_size=8))
    args.update(kw)
    return Finding(**args)


def _pair(seed, values, digest="abc"):
    """A runner pair result whose per-prompt pass@1 / pass@4 are `values` [2, P]."""
    metrics = {"pass@1": float(np.mean(values[0])), "pass@4": float(np.mean(values[1]))}
    return {"seed": seed, "metrics": metrics, "wall_s": 1.0, "curves": {}, "warmup": None,
            "per_prompt": {"prompts": digest, "values": {
                "pass@1": [float(v) for v in values[0]], "pass@4": [float(v) for v in values[1]]}}}


def _results(rng, seeds=6, prompts=100):
    """Per-prompt differences whose seed means are a fixed offset each (every seed's row a
    permutation of the same multiset, plus the offset): the seed-level t-interval is narrow,
    the prompt noise inside the seeds is not."""
    base = rng.random((2, prompts))
    multiset = rng.choice([-1.0, 0.0, 0.0, 1.0], prompts) * 0.5
    offsets = np.linspace(0.03, 0.05, seeds)
    res = {lab.WARMUP: [], "rl": []}
    for s in range(seeds):
        d = rng.permutation(multiset) + offsets[s]
        res[lab.WARMUP].append(_pair(s, base))
        res["rl"].append(_pair(s, base + d[None, :]))
    return res


def _summary(finding, results):
    summary = stats.summarize(finding, results)
    return json.loads(json.dumps(stats.rounded(summary)))  # As results.json stores it.


def test_per_prompt_values_round_trip_through_results_json():
    rng = np.random.default_rng(0)
    f = _finding()
    results = _results(rng, seeds=3, prompts=20)
    summary = _summary(f, results)
    for arm, rows in results.items():
        got = summary["arms"][arm]["per_prompt"]
        assert got["prompts"] == ["abc"] * 3
        for m in ("pass@1", "pass@4"):
            # rounded() keeps 5 decimals: each value within 5e-6 of the stored one.
            np.testing.assert_allclose(got["values"][m],
                                       [r["per_prompt"]["values"][m] for r in rows], atol=5e-6)
    assert summary["warmup"] == [None, None, None]
    assert runner.checked_eval_metrics(f) == ["pass@1", "pass@4"]
    # A seed stored before per-prompt values were kept: the arm has none.
    del results["rl"][1]["per_prompt"]
    assert "per_prompt" not in stats.summarize(f, results)["arms"]["rl"]


def test_report_uses_the_seed_prompt_bootstrap_when_per_prompt_values_exist():
    rng = np.random.default_rng(1)
    f = _finding()
    summary = verdict.attach(f, _summary(f, _results(rng)), [])
    ci, why = report.prompt_interval(summary, "pass@1", "rl", lab.WARMUP)
    assert why == ""
    a = np.asarray(summary["arms"]["rl"]["per_prompt"]["values"]["pass@1"])
    b = np.asarray(summary["arms"][lab.WARMUP]["per_prompt"]["values"]["pass@1"])
    x = a - b  # [S, P]
    assert ci["value"] == pytest.approx(x.mean(), abs=1e-12)
    # An independent two-stage bootstrap in NumPy (40 000 resamples, its own generator).
    s, p = x.shape
    g = np.random.default_rng(123)
    means = np.empty(40000)
    for i in range(40):
        seeds = g.integers(0, s, (1000, s))
        prompts = g.integers(0, p, (1000, s, p))
        means[i * 1000:(i + 1) * 1000] = x[seeds[:, :, None], prompts].mean(axis=(1, 2))
    lo, hi = np.percentile(means, [2.5, 97.5])
    # Monte Carlo tolerance: a 2.5% / 97.5% percentile of B near-normal resamples has a
    # standard error of sqrt(q(1−q)/B)/φ(1.96)·sd = 0.038·sd at the report's B = 5000 and
    # 0.013·sd at 40 000; their difference 0.040·sd. Five of those: 0.2·sd (sd: the exact
    # two-stage formula).
    sd = ref.two_stage_bootstrap_sd(x)
    assert ci["low"] == pytest.approx(lo, abs=0.2 * sd)
    assert ci["high"] == pytest.approx(hi, abs=0.2 * sd)
    # The seed-level t-interval ignores the prompt noise here (its width is far smaller):
    # the table shows both, and the seed × prompt one is the bootstrap's.
    t_lo, t_hi = summary["v2"]["checks"][0]["t95"]
    assert (t_hi - t_lo) < 0.5 * (hi - lo)
    table = report.checks_table(summary)
    assert "seed × prompt 95%" in table.splitlines()[0]
    assert f"| {ci['low']:+.3f} to {ci['high']:+.3f} |" in table
    assert "Seed × prompt 95% intervals: two-stage" in report.evaluation_lines(summary)


def test_report_falls_back_to_seed_intervals_and_says_so():
    rng = np.random.default_rng(2)
    f = _finding()
    results = _results(rng, seeds=3, prompts=10)
    old = verdict.attach(f, _summary(f, results), [])
    for arm in old["arms"].values():  # A results.json from before per-prompt values.
        del arm["per_prompt"]
    assert "seed × prompt" not in report.checks_table(old)
    assert "Intervals over seeds only (no per-prompt values stored" in \
        report.evaluation_lines(old)
    results["rl"][2]["per_prompt"]["prompts"] = "other"
    mixed = verdict.attach(f, _summary(f, results), [])
    assert report.prompt_interval(mixed, "pass@1", "rl", lab.WARMUP) == (
        None, "the arms were evaluated on different prompts")


def test_whole_test_split_is_every_test_problem_once():
    config = arithmetic_config()
    examples = heldout.whole_test_split(config)
    keys = [ex.key for ex in examples]
    assert len(set(keys)) == len(keys) > 500  # ~10% of the 100 x 100 sums.
    assert all(split_of(k, test_fraction=0.1) == "test" for k in keys)
    # Every problem the seed's test stream draws is in it (the stream: rejection sampling
    # of the same problem space, a different generator).
    task = __import__("rlvr_jax.tasks", fromlist=["get"]).get("arithmetic", **config.data
                                                              .task_kwargs.to_dict())
    drawn = {task.example(i, seed=5, split="test").key for i in range(300)}
    assert drawn <= set(keys)
    assert heldout.prompts_digest(examples) == heldout.prompts_digest(list(examples))
    config.data.task_kwargs.max_digits = 3
    with pytest.raises(ValueError, match="more than 4096 problems"):
        heldout.whole_test_split(config)
    config.data.task = "sorting"
    config.data.task_kwargs = type(config.data.task_kwargs)({})
    with pytest.raises(ValueError, match="arithmetic task's test split only"):
        heldout.whole_test_split(config)
    with pytest.raises(ValueError, match="prompts must be one of"):
        EvalSpec(prompts="some")
    EvalSpec(prompts="all", num_prompts=7, batch_size=64)  # num_prompts unused: no error.


def test_criterion_stop_checks_every_n_steps_and_at_the_last():
    crit = WarmupCriterion(until_pass1=0.5, every=2)
    values = iter([0.3, 0.6])
    record = {}
    stop = heldout.criterion_stop(crit, lambda p: next(values), 7, record, log=lambda s: None)
    assert [stop(i, None) for i in range(1, 5)] == [False, False, False, True]
    assert record == {"checks": [[2, 0.3], [4, 0.6]], "steps": 4, "reached": True}
    values = iter([0.1, 0.2, 0.3, 0.4])
    stop = heldout.criterion_stop(crit, lambda p: next(values), 7, record, log=lambda s: None)
    assert not any(stop(i, None) for i in range(1, 8))
    assert record["checks"] == [[2, 0.1], [4, 0.2], [6, 0.3], [7, 0.4]]  # And the last step.
    assert record["steps"] == 7 and not record["reached"]
    with pytest.raises(ValueError, match="until_pass1"):
        WarmupCriterion(until_pass1=1.5)


def test_whole_split_and_warmup_criterion_end_to_end(tmp_path):
    """One seed of a one-layer finding: the warm-up stops at the criterion's first check
    (pass@1 >= 0 always holds), is evaluated on the whole test split with per-prompt values
    whose means are the metrics, and the report gives seed × prompt intervals and the
    stopping step. (Two warm-up arms, one pair: an RL arm's evaluation is the same call.)"""
    from rlvr_jax.lab import common
    ev = EvalSpec(prompts="all", num_samples=2, ks=(1, 2), batch_size=256)
    f = _finding(arms={lab.WARMUP: {"rl.steps": 0}, "again": {"rl.steps": 0}},
                 checks=[Check("pass@2", "again", lab.WARMUP, ">", margin=0.01)],
                 warmup=WarmupCriterion(until_pass1=0.0, every=2, max_steps=3, num_prompts=8),
                 eval=ev, quick=common.QUICK, quick_eval=ev)
    f = dataclasses.replace(f.quick_version(), seeds=1,
                            warmup=dataclasses.replace(f.warmup, every=2, max_steps=3))
    results = runner.run_finding(f, str(tmp_path / "work"), seeds=1, log=lambda s: None)
    res = results[lab.WARMUP][0]
    vals = res["per_prompt"]["values"]
    assert set(vals) == {"pass@2"}
    assert len(vals["pass@2"]) == len(heldout.whole_test_split(arithmetic_config()))
    assert np.mean(vals["pass@2"]) == pytest.approx(res["metrics"]["pass@2"], abs=1e-6)
    assert res["warmup"]["steps"] == 2 and res["warmup"]["reached"]
    assert res["warmup"]["checks"][0][0] == 2
    sft = [json.loads(line) for line in open(os.path.join(res["dir"], "run", "metrics.jsonl"))
           if '"sft"' in line]
    assert sft[-1]["step"] == 2  # The warm-up stopped after step 2 (of at most 3).
    summary = verdict.attach(f, stats.summarize(f, results), [])
    text = report.markdown(summary)
    assert "seed × prompt 95%" in text and "whole fixed test split" in text
    assert "stopped: seed 0 at step 2" in text


def test_eval_cost_refuses_bad_arguments(capsys):
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "reproduce", os.path.join(root, "scripts", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["eval-cost", "rl_vs_base", "--num-samples", "0"]) == 2
    assert "--num-samples and --batch-size must be >= 1" in capsys.readouterr().err
