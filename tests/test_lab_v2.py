"""Lab v2: the few-seed statistics of rlvr_jax.lab.stats against SciPy / loop references
(tests/reference/lab_stats_ref.py), the v2 verdict rules, gates, the seed schedule, the
pre-registered verdict and the static audit of the arms."""
import dataclasses
import json
import os

import numpy as np
import pytest

from rlvr_jax import lab
from rlvr_jax.lab import audit, report, stats, verdict
from rlvr_jax.lab.spec import Check, EvalSpec, Finding, Gate, Prereg
from rlvr_jax.train.config import arithmetic_config
from tests.reference import lab_stats_ref as ref

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Float64 closed forms / bisection against SciPy's float64 routines: a few ulp of the
# result plus the series' rounding (≤ df terms), far below 1e-12.
SAMPLES = [np.random.default_rng(s).normal(0.01 * s, 0.02, n)
           for s, n in ((0, 2), (1, 3), (2, 5), (3, 5), (4, 8), (5, 10))]


# ----------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("d", SAMPLES, ids=[f"n{len(s)}" for s in SAMPLES])
def test_t_interval_pvalues_and_tost_against_scipy(d):
    for level in (0.9, 0.95):
        np.testing.assert_allclose(stats.paired_t_interval(d, level), ref.t_interval(d, level),
                                   rtol=0, atol=1e-12)
    for mu0 in (0.0, -0.01, 0.02):
        for alt in ("greater", "less", "two-sided"):
            assert stats.t_pvalue(d, mu0, alt) == pytest.approx(ref.t_pvalue(d, mu0, alt),
                                                                abs=1e-12)
    for margin in (0.005, 0.02, 0.1):
        assert stats.equivalence_pvalue(d, margin) == pytest.approx(ref.tost(d, margin),
                                                                    abs=1e-12)


@pytest.mark.parametrize("d", SAMPLES + [np.array([0.01, -0.01, 0.02, -0.02, 0.0]),
                                         np.array([0.003] * 4)],
                         ids=[f"n{len(s)}" for s in SAMPLES] + ["ties", "equal"])
def test_sign_flip_against_enumeration(d):
    for alt in ("greater", "less", "two-sided"):
        # Both count patterns: the same rational number k / 2^n.
        assert stats.sign_flip_pvalue(d, alt) == ref.sign_flip(d, alt)
    n = len(d)
    if np.all(d > 0):  # Every sign agrees: the smallest p there is.
        assert stats.sign_flip_pvalue(d, "greater") == 1 / 2 ** n
        assert stats.sign_flip_pvalue(d, "two-sided") == 2 / 2 ** n


def test_holm_against_its_definition():
    rng = np.random.default_rng(3)
    cases = [[0.01, 0.04, 0.03, 0.5], [0.2, 0.2, 0.01], [0.9], [0.04, 0.01, 0.6, 0.6, 0.002]]
    cases += [list(rng.random(7) ** 3) for _ in range(5)]
    for p in cases:
        got = stats.holm(p)
        np.testing.assert_allclose(got, ref.holm(p), rtol=0, atol=1e-15)
        order = np.argsort(p, kind="stable")
        assert all(np.diff(np.asarray(got)[order]) >= 0) and max(got) <= 1.0
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_seed_prompt_bootstrap_spread_matches_the_two_stage_variance():
    rng = np.random.default_rng(7)
    x = rng.random((5, 40)) < rng.random((5, 1))  # Per-seed success rates, 40 prompts.
    # The resampled means' sd against the exact two-stage formula: 20000 resamples leave a
    # relative Monte Carlo error of ~1/sqrt(2·20000) = 0.5% on an sd; 4 of those: 2%.
    s, p = x.shape
    seeds = np.random.default_rng(1).integers(0, s, (20000, s))
    prompts = np.random.default_rng(2).integers(0, p, (20000, s, p))
    direct = x.astype(float)[seeds[:, :, None], prompts].mean(axis=(1, 2))
    assert direct.std() == pytest.approx(ref.two_stage_bootstrap_sd(x), rel=0.02)
    big = stats.seed_prompt_bootstrap(x.astype(float), num_resamples=20000, seed=3)
    assert big["value"] == pytest.approx(x.mean()) and big["low"] < x.mean() < big["high"]
    # A 95% percentile interval of a near-normal mean: ±1.96 sd, to the same 2% (+ the
    # percentiles' own Monte Carlo error, ~1.5% at 20000 resamples): 5%.
    half = 0.5 * (big["high"] - big["low"])
    assert half == pytest.approx(1.96 * ref.two_stage_bootstrap_sd(x), rel=0.05)


# ----------------------------------------------------------------------------- verdicts

def _finding(**kw):
    args = dict(name="t", paper="p", claim="c", base=lambda: arithmetic_config("grpo"),
                arms={lab.WARMUP: {"rl.steps": 0}, "rl": {}, "ngrpo": {"rl.advantage": "ngrpo"}},
                checks=[Check("pass@4", "rl", lab.WARMUP, ">", margin=0.01)], seeds=5,
                eval=EvalSpec(num_prompts=8, num_samples=4, ks=(1, 4), batch_size=8))
    args.update(kw)
    return Finding(**args)


def _per_seed(arms):
    return {a: [{"seed": s, **{m: v[s] for m, v in metrics.items()}} for s in range(5)]
            for a, metrics in arms.items()}


BASE = [0.30, 0.25, 0.40, 0.35, 0.20]


def test_outcomes_supported_contradicted_null_undecided():
    up = [b + 0.05 + 0.004 * i for i, b in enumerate(BASE)]
    down = [b - 0.05 - 0.004 * i for i, b in enumerate(BASE)]
    flat = [b + e for b, e in zip(BASE, (0.001, -0.001, 0.002, -0.002, 0.0))]
    noisy = [b + e for b, e in zip(BASE, (0.08, -0.07, 0.05, -0.06, 0.01))]
    for arm, want in ((up, "supported"), (down, "contradicted"), (flat, "no effect ≥ m"),
                      (noisy, "undecided")):
        per = _per_seed({lab.WARMUP: {"pass@4": BASE}, "rl": {"pass@4": arm},
                         "ngrpo": {"pass@4": BASE}})
        out = verdict.judge(_finding(), per)
        assert out["checks"][0]["outcome"] == want
        assert out["verdict"] == {"supported": "reproduced", "contradicted": "not reproduced",
                                  "no effect ≥ m": "no effect at this scale",
                                  "undecided": "inconclusive"}[want]
        assert out["alpha_look"] == 0.05


def test_holm_across_checks_and_the_schedule():
    """Two checks each at one-sided p ≈ 0.03: alone each is supported at α = 0.05, with Holm
    (×2) neither is; a (5, 10) schedule halves α per look and asks for the next look."""
    d = np.array([0.02, 0.01, 0.03, -0.005, 0.015])
    p = stats.t_pvalue(d, 0.0, "greater")
    assert 0.025 < p < 0.05
    arm = [b + x for b, x in zip(BASE, d)]
    per = _per_seed({lab.WARMUP: {"pass@1": BASE, "pass@4": BASE},
                     "rl": {"pass@1": arm, "pass@4": arm}, "ngrpo": {"pass@1": BASE,
                                                                      "pass@4": BASE}})
    one = _finding(checks=[Check("pass@4", "rl", lab.WARMUP, ">", margin=0.001)])
    assert verdict.judge(one, per)["verdict"] == "reproduced"
    two = _finding(checks=[Check("pass@4", "rl", lab.WARMUP, ">", margin=0.001),
                           Check("pass@1", "rl", lab.WARMUP, ">", margin=0.001)])
    out = verdict.judge(two, per)
    assert [c["holm"]["support"] for c in out["checks"]] == pytest.approx([2 * p, 2 * p])
    assert out["verdict"] == "inconclusive" and out["next_stage"] is None
    staged = _finding(checks=one.checks, schedule=(5, 10))
    out = verdict.judge(staged, per)
    assert out["alpha_look"] == 0.025 and out["verdict"] == "inconclusive"
    assert out["next_stage"] == 10
    assert verdict.next_stage(staged, 10, "inconclusive") is None
    assert verdict.next_stage(staged, 5, "reproduced") is None
    with pytest.raises(ValueError, match="schedule"):
        _finding(schedule=(3, 10))
    with pytest.raises(ValueError, match="smallest effect"):
        _finding(checks=[Check("pass@4", "rl", lab.WARMUP, ">")])


def test_gate_makes_checks_not_testable_and_names_itself():
    per = _per_seed({lab.WARMUP: {"pass@1": BASE, "pass@4": [0.9] * 5},
                     "rl": {"pass@1": [b + 0.1 for b in BASE], "pass@4": [0.95] * 5},
                     "ngrpo": {"pass@1": BASE, "pass@4": BASE}})
    gate = Gate("room at k = 4", "pass@4", lab.WARMUP, "<=", 0.8, checks=(1,))
    f = _finding(checks=[Check("pass@1", "rl", lab.WARMUP, ">", margin=0.01),
                         Check("pass@4", "rl", lab.WARMUP, "<=", margin=0.01)], gates=[gate])
    out = verdict.judge(f, per)
    assert out["gates"][0]["value"] == pytest.approx(0.9) and not out["gates"][0]["passed"]
    assert [c["outcome"] for c in out["checks"]] == ["supported", "not testable here"]
    assert out["verdict"] == "not testable here" and "room at k = 4" in out["reason"]
    # The gated check leaves Holm's family: the other is adjusted alone.
    assert out["checks"][0]["holm"]["support"] == pytest.approx(
        stats.t_pvalue([0.1] * 4 + [0.1 + 1e-9], 0, "greater"), abs=1e-6)
    trace = Gate("trace", "pass@1", "rl", ">=", 0.05, minus="pass@4")
    f = dataclasses.replace(f, gates=[trace])
    g = verdict.judge(f, per)["gates"][0]
    assert g["value"] == pytest.approx(np.mean(BASE) + 0.1 - 0.95) and not g["passed"]
    with pytest.raises(ValueError, match="not measured"):
        _finding(gates=[Gate("x", "pass@64", "rl", ">=", 0.0)])


def test_preregistered_verdict_reads_the_registered_checks_and_seeds():
    per = _per_seed({lab.WARMUP: {"pass@1": BASE}, "ngrpo": {"pass@1": BASE},
                     "rl": {"pass@1": [b + (0.05 if s < 3 else -0.2)
                                       for s, b in enumerate(BASE)]}})
    f = _finding(checks=[Check("pass@1", "rl", lab.WARMUP, ">", margin=0.01)],
                 prereg=Prereg(seeds=3, note="registered with 3"))
    pre = verdict.preregistered(f, per)
    assert pre["seeds"] == 3 and pre["verdict"] == "reproduced"
    assert pre["checks"][0]["mean"] == pytest.approx(0.05)
    moved = dataclasses.replace(f, prereg=Prereg(checks=[
        Check("pass@1", "ngrpo", lab.WARMUP, ">")]))
    pre = verdict.preregistered(moved, per)
    assert pre["seeds"] == 5 and pre["checks"][0]["a"] == "ngrpo"
    assert pre["verdict"] == "inconclusive at this scale"  # A zero difference.
    under_v2 = dataclasses.replace(f, prereg=Prereg(rule="v2"))
    pre = verdict.preregistered(under_v2, per)
    assert pre["rule"] == "v2" and pre["seeds"] == 5
    assert pre["verdict"] == verdict.judge(under_v2, per)["verdict"]
    with pytest.raises(ValueError, match="rule"):
        Prereg(rule="v3")


# ----------------------------------------------------------------------------- audit

def test_audit_refuses_identical_advantages_and_flags_confounds():
    f = lab.load("noisy_rewards")
    problems = audit.audit(f)
    assert [(p.check, p.kind) for p in problems] == [(3, "refuse")]
    assert "identical advantages" in problems[0].message
    # A real difference in the estimator is not refused (NGRPO's virtual sample).
    ca, cb = audit.arm_configs(_finding(), "rl", "ngrpo")
    assert not audit.identical_advantages(ca, cb)
    assert audit.identical_advantages(ca, ca)
    kinds = {p.message.split(":")[0] for p in audit.audit(lab.load("lite_ppo"))}
    assert kinds == {"rl.eps_high differ(s) but cannot act",
                     "lite_ppo and dapo differ in more than one key",
                     "samples per RL step differ"}
    for name in ("entropy_8020", "group_size", "ngrpo", "process_rewards",
                 "dapo_clip_higher", "nsr_vs_psr"):
        assert audit.audit(lab.load(name)) == [], name


def test_every_committed_finding_reports_both_verdicts(capsys):
    """`reproduce.py report NAME` on the committed results: the pre-registered and the v2
    verdict, re-judged from the stored per-seed numbers, equal to the committed ones
    (results.json as written by `report --write`); without --write nothing is modified."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "reproduce", os.path.join(ROOT, "scripts", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out_dir = os.path.join(ROOT, "docs", "findings")
    for name in ("rl_vs_base", "ngrpo"):
        path = os.path.join(out_dir, name, "results.json")
        with open(path) as f:
            before = f.read()
        assert module.main(["report", name, "--out", out_dir]) == 0
        text = capsys.readouterr().out
        assert "**Pre-registered verdict:" in text and "**v2 verdict:" in text
        with open(path) as f:
            assert f.read() == before
        summary = json.loads(before)
        assert f"**v2 verdict: {summary['v2']['verdict']}**" in text
        assert f"**Pre-registered verdict: {summary['preregistered']['verdict']}**" in text
    assert "room at k = 64" in report.markdown(verdict.attach(
        lab.load("rl_vs_base"), json.loads(open(os.path.join(
            out_dir, "rl_vs_base", "results.json")).read())))


def test_run_refuses_a_finding_the_audit_refuses(tmp_path, capsys):
    """`run noisy_rewards` stops before any training (exit 2, nothing written) and says how
    to run it anyway; `audit` lists the refusal."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "reproduce", os.path.join(ROOT, "scripts", "reproduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "out"
    assert module.main(["run", "noisy_rewards", "--quick", "--out", str(out)]) == 2
    assert "--allow-untestable" in capsys.readouterr().err
    assert not out.exists()
    assert module.main(["audit", "noisy_rewards"]) == 0
    text = capsys.readouterr().out
    assert "refuse: check 4 (pass@1: flip40_corrected − flip40)" in text


# ----------------------------------------------------------------------------- the ladder

def test_ladder_rungs_validate_and_findings_name_them():
    from rlvr_jax.lab import ladder
    from rlvr_jax.train.validate import validate
    known = set(lab.names())
    for r in ladder.RUNGS:
        config = r.config("grpo")
        validate(config)
        assert (config.model.preset, config.data.task_kwargs.max_digits,
                config.sampling.max_new_tokens) == (r.preset, r.max_digits, r.max_new_tokens)
        assert set(r.findings) <= known, r.name
    # The hard and long rungs are the settings of the findings that first used them.
    for name, finding in (("hard", "lite_ppo_hard"), ("long", "drgrpo_length"),
                          ("easy", "lite_ppo")):
        assert ladder.rung(name).config().to_dict() == lab.load(finding).base().to_dict()
    assert "| hard |" in ladder.table()
    with pytest.raises(ValueError, match="unknown rung"):
        ladder.rung("nope")
