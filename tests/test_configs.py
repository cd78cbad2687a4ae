"""Every `configs/*.py` loads, is locked, and runs one RL step end to end (tiny sizes).

Loading mimics `ml_collections.config_flags.DEFINE_config_file`: import the file by path
and call `get_config()`. The run goes through `rlvr_jax.train.loop.run` with the sizes
overridden small (`SMALL`); compile time dominates, so each config runs once per session
(`_run`) and the tests read its metrics.jsonl.

The task configs scored on the host (`BUILD_ONLY`: code, countdown, sorting, format_arithmetic)
have their own shapes, so a run would compile new programs: they are loaded, validated and
built, and their own worked solutions must earn full reward from the run's host scoring (in
its process pool; no compilation). The split path's step with weighted components in a pool
is run in tests/test_train_step.py with the shapes compiled there already; the learning
runs are documented commands (docs/tasks.md).
"""
import dataclasses
import glob
import importlib.util
import json
import os

import numpy as np
import pytest

from rlvr_jax import scoring, tree_rollouts
from rlvr_jax.data import datasets
from rlvr_jax.data.tokenizers import load_tokenizer
from rlvr_jax.train import build, loop, rl_config
from rlvr_jax.train import placer as placer_lib
from rlvr_jax.train.errors import ConfigError
from rlvr_jax.train.logging import read_metrics
from rlvr_jax.train.rl_config import from_config as rl_from_config


def _scorer(config, task, tok, reward_model=None, env=None):
    return scoring.scorer_from_config(config, task, tok, rl=rl_from_config(config),
                                      reward_model=reward_model, env=env)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_FILES = sorted(glob.glob(os.path.join(ROOT, "configs", "*.py")))
NAMES = [os.path.splitext(os.path.basename(p))[0] for p in CONFIG_FILES]

# Overrides that make one RL step cheap on CPU (also used by tests/test_train_loop.py, whose
# subprocess run of the quickstart then hits the persistent compile cache).
SMALL = {
    "sft.steps": 2, "sft.batch_size": 8,
    "rl.steps": 1, "rl.num_prompts": 4, "rl.num_samples": 2,
    "sampling.max_new_tokens": 16,
    "eval.num_prompts": 8, "eval.batch_size": 8, "eval.every": 0,
    "mesh.num_devices": 1, "model.preset": "tiny",
}

# Built and scored on the host, not run (see the module docstring).
BUILD_ONLY = ("code_grpo", "countdown_grpo", "format_arithmetic", "sorting_grpo",
              "tree_countdown")
# Need a trained reward model (scripts/train_reward_model.py): validated and built with a
# tiny exported one instead of run (test_reward_model_config_validates_and_builds).
REWARD_MODEL = ("reward_model_arithmetic",)
# Needs a trained judge (scripts/train_judge.py): validated and built with the quickstart's
# small run as the judge (a run directory) instead of run (test_judge_config_validates_...).
JUDGE = ("judge_arithmetic",)
# Learned process rewards (docs/process_rewards.md): a PRM config needs a trained PRM
# (scripts/train_prm.py): both are validated and their scoring model opened and placed, a
# tiny exported PRM standing in (test_learned_process_config_opens_its_step_scorer); the
# RL step with a learned step scorer in the process path runs in tests/test_prm.py.
LEARNED_PROCESS = ("implicit_prm_arithmetic", "prm_arithmetic")
# Beyond one outcome reward (process rewards, a noisy verifier, label-free rewards): validated,
# built and scored on their own worked solutions (no RL step; the steps with these features
# run in tests/test_process_step.py and tests/test_noise_label_free.py).
REWARD_FEATURES = ("noisy_verifier_arithmetic", "process_min_arithmetic",
                   "self_certainty_arithmetic", "ttrl_arithmetic")

# Adaptive data (docs/data.md): their RL update is the quickstart's (no new program), their
# data schemes run in tests/test_adaptive_data.py (a real filtered run, killed and resumed);
# here they are validated and built, and their batches and worked solutions must fit.
ADAPTIVE = ("curriculum_arithmetic", "filter_arithmetic", "mixture_arithmetic")
# Multi-turn with an on-device tool (docs/multiturn.md): its RL step (sampling with the tool
# inside the program) runs in tests/test_multiturn.py; here the config is validated, built,
# and its warm-up traces replayed against the tool and scored.
MULTITURN = ("guess_number", "tool_calculator")
# Need a teacher run (rl.teacher): run with the small quickstart run of this session as the
# teacher (test_distill_config_runs_with_a_teacher_run).
TEACHER = ("distill_arithmetic",)

# Asynchronous rollouts on two devices (docs/async.md): run for 3 RL steps instead of one
# (test_async_config_trains_each_batch_one_step_late).
ASYNC = ("async_arithmetic",)

# Tree rollouts (docs/tree_rollouts.md): SMALL's 2 samples per prompt leave room for one fork
# (one root, one copy), so they run with that tree (test_tree_config_trains_one_step).
TREE = ("tree_arithmetic",)

# Keys every RL record of metrics.jsonl must have (the list).
RL_KEYS = ("step", "rollout/reward_mean", "reward/correct", "loss/clip_frac_low",
           "loss/clip_frac_high", "rollout/response_length", "rollout/truncation_rate",
           "rollout/zero_variance_fraction", "advantages/mean", "train/loss",
           "train/grad_norm", "perf/tokens_per_s", "perf/step_time_s",
           "rollout/response_length_correct", "rollout/response_length_incorrect")
EVAL_KEYS = ("step", "eval/pass@1", "eval/pass@1_ci_low", "eval/pass@1_ci_high")


def load_config(path):
    """`get_config()` of a config file imported by path (as config_flags does)."""
    name = "config_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


def small(config):
    """`config` with the SMALL overrides applied (through the locked config's own checks)."""
    for dotted, value in SMALL.items():
        section, key = dotted.split(".")
        setattr(config[section], key, value)
    return config


def test_there_are_configs():
    for name in ("quickstart", "grpo_arithmetic", "dapo_arithmetic", "drgrpo_arithmetic",
                 "gspo_arithmetic", "rloo_arithmetic"):
        assert name in NAMES


@pytest.mark.parametrize("path", CONFIG_FILES, ids=NAMES)
def test_config_loads_and_is_locked(path):
    config = load_config(path)
    assert config.is_locked
    assert rl_config.from_config(config).num_prompts == config.rl.num_prompts  # Valid RLConfig.
    for section in (config, config.rl, config.model, config.sampling):
        with pytest.raises(AttributeError, match="not_a_key.*locked"):
            section.not_a_key = 1
    with pytest.raises(TypeError, match="steps"):
        config.rl.steps = "many"
    # The file's docstring says what it runs.
    with open(path, encoding="utf-8") as f:
        assert f.read().lstrip().startswith('"""')


_RUNS = {}


def _run(name, tmp_path_factory, **overrides):
    """(summary, metrics records) of one small run of configs/<name>.py, once per session
    (overrides: config.rl fields)."""
    if name not in _RUNS:
        workdir = str(tmp_path_factory.mktemp(name))
        config = small(load_config(os.path.join(ROOT, "configs", name + ".py")))
        config.rl.update(overrides)
        config.log_samples_every = 1
        if config.mesh.sampler_devices:  # Asynchronous rollouts: a device for the trainer too.
            config.mesh.num_devices = config.mesh.sampler_devices + 1
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RLVR_JAX_NO_PROGRESS", "1")
            summary = loop.run(config, workdir, progress=False)
        _RUNS[name] = (summary, read_metrics(os.path.join(workdir, "metrics.jsonl")), workdir)
    return _RUNS[name]


@pytest.mark.parametrize("name", NAMES)
def test_config_runs_one_rl_step(name, tmp_path_factory):
    if load_config(os.path.join(ROOT, "configs", name + ".py")).model.hf_checkpoint:
        pytest.skip("real-model config (placeholder paths): tests/test_algorithms.py runs one "
                    "step of it with a tiny random checkpoint")
    if name in BUILD_ONLY:
        pytest.skip("host-scored task config: test_task_config_builds_and_scores_solutions")
    if name in ADAPTIVE:
        pytest.skip("adaptive-data config: test_adaptive_config_builds (its data schemes run "
                    "in tests/test_adaptive_data.py)")
    if name in REWARD_MODEL:
        pytest.skip("reward-model config: test_reward_model_config_validates_and_builds (the "
                    "on-device scoring runs in tests/test_reward_model_step.py)")
    if name in REWARD_FEATURES:
        pytest.skip("reward-feature config: test_reward_feature_config_builds_and_scores")
    if name in LEARNED_PROCESS:
        pytest.skip("learned process rewards: test_learned_process_config_opens_its_step_scorer")
    if name in JUDGE:
        pytest.skip("judge config: test_judge_config_validates_and_builds (the on-device "
                    "scoring runs in tests/test_judge.py)")
    if name in MULTITURN:
        pytest.skip("multi-turn config: test_multiturn_config_builds_and_replays_its_traces")
    if name in TEACHER:
        pytest.skip("distillation config: test_distill_config_runs_with_a_teacher_run")
    if name in ASYNC:
        pytest.skip("asynchronous config: test_async_config_trains_each_batch_one_step_late")
    if name in TREE:
        pytest.skip("tree-rollout config: test_tree_config_trains_one_step")
    summary, records, workdir = _run(name, tmp_path_factory)
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    rl_records = [r for r in records if r["phase"] == "rl"]
    assert [r["step"] for r in rl_records] == [1]
    rec = rl_records[0]
    missing = [k for k in RL_KEYS if k not in rec]
    assert not missing, f"{name}: metrics.jsonl lacks {missing}"
    for key in RL_KEYS:
        assert rec[key] is not None and np.isfinite(rec[key]), (key, rec[key])
    assert 0.0 <= rec["rollout/truncation_rate"] <= 1.0
    assert 0.0 <= rec["rollout/zero_variance_fraction"] <= 1.0
    assert 1.0 <= rec["rollout/response_length"] <= SMALL["sampling.max_new_tokens"]
    samples = read_metrics(os.path.join(workdir, "samples.jsonl"))  # What the policy wrote.
    assert len(samples) == config.log_num_samples
    assert {"step", "prompt", "answer", "completion", "reward"} <= set(samples[0])
    assert all(s["step"] == 1 and isinstance(s["completion"], str) for s in samples)
    assert rec["perf/step_time_s"] > 0.0
    if config.rl.kl_coef > 0:
        assert "loss/kl" in rec and np.isfinite(rec["loss/kl"])
    if config.rl.dynamic_sampling:
        assert "rollout/kept_group_fraction" in rec
    if config.rl.overlong_buffer > 0:
        assert "reward/overlong" in rec
    if config.rl.hint_mode != "off":  # The hint pass ran inside the step (#41).
        assert 0.0 <= rec["hint/hinted_group_fraction"] <= 1.0
    if config.rl.offpolicy_per_group:  # Expert rows: the worked solutions, scored.
        assert rec["offpolicy/reward_off"] > 0.0 and "rollout/all_wrong_fraction" in rec
    if "cosine_length" in config.reward.components:  # The term ran inside the step.
        assert -10.0 <= rec["reward/cosine_length"] <= 2.0 and "reward/token" in rec
    # Held-out evaluation after the warm-up (step 0) and after RL (step 1).
    evals = [r for r in records if r["phase"] == "eval"]
    assert [r["step"] for r in evals] == [0, 1]
    for r in evals:
        assert all(k in r for k in EVAL_KEYS), r
        assert 0.0 <= r["eval/pass@1"] <= 1.0
        assert r["eval/num_prompts"] == SMALL["eval.num_prompts"]
    assert [r["step"] for r in records if r["phase"] == "sft"] == [1, 2]
    assert summary["after_rl"]["eval/pass@1"] == evals[-1]["eval/pass@1"]
    with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["rl"]["algorithm"] == config.rl.algorithm
    assert os.path.exists(os.path.join(workdir, "summary.json"))


def test_max_staleness_0_is_the_synchronous_run_bit_for_bit(tmp_path_factory):
    """rl.max_staleness=0 and mesh.sampler_devices=0 given explicitly: the quickstart's small
    run (the default path, `step.make_step`'s one program) again, metrics.jsonl equal to the
    last bit but for the wall-clock fields (its programs are this session's: no compile)."""
    _, want, _ = _run("quickstart", tmp_path_factory)
    config = small(load_config(os.path.join(ROOT, "configs", "quickstart.py")))
    config.rl.max_staleness, config.mesh.sampler_devices = 0, 0
    config.log_samples_every = 1
    workdir = str(tmp_path_factory.mktemp("staleness0"))
    loop.run(config, workdir, progress=False)
    got = read_metrics(os.path.join(workdir, "metrics.jsonl"))
    def clock_free(r):  # The record less its wall-clock fields.
        return {k: v for k, v in r.items() if k != "time" and not k.startswith("perf/")}
    assert [clock_free(r) for r in got] == [clock_free(r) for r in want]
    assert not any(k.startswith(("async/", "mismatch/")) for r in got for k in r)


@pytest.mark.parametrize("name", ASYNC)
def test_async_config_trains_each_batch_one_step_late(name, tmp_path_factory):
    """configs/async_arithmetic.py (the sampler on device 1, the trainer on device 0) for 3 RL
    steps: batch i is trained at step i + 1, sampled with the weights of step i − 1 after
    the first (async/staleness 0, 1, 1), the queue holds one batch between steps, every step
    syncs the same bytes, and the correction's metrics are logged and finite."""
    summary, records, _ = _run(name, tmp_path_factory, steps=3)
    rl = [r for r in records if r["phase"] == "rl"]
    assert [r["async/staleness"] for r in rl] == [0.0, 1.0, 1.0]
    assert [r["async/queue"] for r in rl] == [1.0, 1.0, 1.0]
    assert len({r["async/weight_sync_bytes"] for r in rl}) == 1 and rl[0][
        "async/weight_sync_bytes"] > 0
    for r in rl:
        for key in RL_KEYS + ("mismatch/kl", "tis/is_weight_mean", "async/weight_sync_s"):
            assert np.isfinite(r[key]), (key, r[key])
    assert [r["step"] for r in records if r["phase"] == "eval"] == [0, 3]
    assert summary["after_rl"]["eval/pass@1"] == records[-1]["eval/pass@1"]


@pytest.mark.parametrize("name", TEACHER)
def test_distill_config_runs_with_a_teacher_run(name, tmp_path_factory):
    """configs/distill_arithmetic.py with this session's small quickstart run (its step-1
    checkpoint) as the teacher: one RL step logs the per-token reverse KL to the teacher; a
    missing teacher is a one-line ConfigError naming rl.teacher."""
    teacher = _run("quickstart", tmp_path_factory)[2]
    bad = small(load_config(os.path.join(ROOT, "configs", name + ".py")))
    bad.rl.teacher = str(tmp_path_factory.mktemp("no_teacher"))
    with pytest.raises(ConfigError, match="rl.teacher"):
        loop.run(bad, str(tmp_path_factory.mktemp("bad")), progress=False)
    _, records, _ = _run(name, tmp_path_factory, teacher=teacher)
    rec = [r for r in records if r["phase"] == "rl"][0]
    assert np.isfinite(rec["distill/reverse_kl"]) and rec["distill/teacher_logp"] < 0.0
    assert all(np.isfinite(rec[k]) for k in RL_KEYS)


@pytest.mark.parametrize("name", BUILD_ONLY)
def test_task_config_builds_and_scores_solutions(name):
    """A host-scored task config: valid, its prompts fit, and the host scoring the run
    would use (in a process pool) gives its own worked solutions full reward."""
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    scoring.check_reward_config(config.reward)
    # What is checked is the verdict, not the speed: a busy 2-core machine can take longer
    # than the config's per-sample budget to start a sandboxed program (a timeout scores 0).
    config.reward.timeout_s = max(config.reward.timeout_s, 60.0)
    tokenizer = load_tokenizer(config.tokenizer)
    task, train, test = build.build_task_and_sources(config)
    scorer = _scorer(config, task, tokenizer)
    assert not scorer.traceable
    loader = build.prompt_loader(config, train, tokenizer, 16, seed=0)
    pb = next(loader)
    assert loader.state()["dropped"] == 0  # Every prompt fits data.max_prompt_len.
    solutions = [ex.solution for ex in pb.examples]
    _, mask = datasets.completion_arrays(solutions, tokenizer,
                                         max_len=config.sampling.max_new_tokens)
    assert mask.shape == (16, config.sampling.max_new_tokens)  # They fit the budget.
    with scorer.host_scorer() as pool:
        verdicts, components, info = pool(solutions, pb.examples)
    full = sum(w for _, w in scoring.parse_components(config.reward)) or 1.0
    np.testing.assert_allclose(verdicts, np.full(16, full, np.float32), rtol=1e-6)
    for name_, values in components.items():  # Every component (and correctness) is 1.
        np.testing.assert_array_equal(values, np.ones(16, np.float32), err_msg=name_)
    assert info["errors"] == info["timeouts"] == 0
    assert not {ex.key for ex in pb.examples} & {test[i].key for i in range(20)}


@pytest.mark.parametrize("name", ADAPTIVE)
def test_adaptive_config_builds(name):
    """Valid; the quickstart's update (RLConfig equal: no program of its own); batches of
    every stage fit the prompt width and the warm-up's solutions fit max_new_tokens; the
    loop attaches the right scheme, which accepts a step's results."""
    from rlvr_jax.data import adaptive as adaptive_data
    from rlvr_jax.train import adaptive, validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    validate.validate(config)
    quick = load_config(os.path.join(ROOT, "configs", "quickstart.py"))
    assert rl_config.from_config(config) == rl_config.from_config(quick)
    tokenizer = load_tokenizer(config.tokenizer)
    task, train, test, warmup = build.build_sources(config)
    for source in (warmup, test):
        loader = build.prompt_loader(config, source, tokenizer, 64, shuffle=False)
        pb = next(loader)
        assert loader.state()["dropped"] == 0
        datasets.completion_arrays([ex.solution for ex in pb.examples], tokenizer,
                                   max_len=config.sampling.max_new_tokens)
        assert all(task.verify(ex.solution, ex) == 1.0 for ex in pb.examples)
    loader = build.prompt_loader(config, train, tokenizer, 16, seed=0)
    scheme = adaptive.attach(config, train, loader)
    kind = {"filter_arithmetic": adaptive_data.PromptFilter,
            "curriculum_arithmetic": adaptive_data.Curriculum,
            "mixture_arithmetic": adaptive_data.Mixture}[name]
    assert isinstance(scheme, kind)
    pb = next(loader)
    scheme.observe(pb, np.ones((16, config.rl.num_samples), bool))
    assert scheme.metrics() and json.loads(json.dumps(scheme.state()))
    assert task.token_verifier(tokenizer) is not None  # The one-program path.


def test_tokens_per_second_counts_tokens(tmp_path_factory):
    """perf/tokens_per_s must be positive: every step trains on some response tokens."""
    _, records, _ = _run("quickstart", tmp_path_factory)
    rec = [r for r in records if r["phase"] == "rl"][0]
    assert rec["perf/tokens_per_s"] > 0.0, {k: v for k, v in rec.items() if "perf" in k}


def test_check_key_names_the_unknown_part_and_suggests():
    from rlvr_jax.train.config import check_key
    config = load_config(os.path.join(ROOT, "configs", "quickstart.py"))
    check_key(config, "rl.steps")
    check_key(config, "data.task_kwargs.max_digits")
    with pytest.raises(ValueError, match=r"config.rl has no field 'stepz'; did you mean steps"):
        check_key(config, "rl.stepz")
    with pytest.raises(ValueError, match="config has no field 'rll'"):
        check_key(config, "rll.steps")


@pytest.mark.parametrize("name", JUDGE)
def test_judge_config_validates_and_builds(name, tmp_path, tmp_path_factory):
    """A missing judge is a one-line error before anything compiles; a run directory (the
    quickstart's small run) validates, loads (its checkpoint's parameters, born placed) and
    gives the on-device judge term (the token verifier at weight 0 beside it) — no RL step."""
    import jax
    from rlvr_jax.train.checkpoint import load_run
    from rlvr_jax.train.validate import validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    config.reward.judge_path = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"^reward\.judge_path: .*has no config\.json"):
        validate(config)
    judge_run = _run("quickstart", tmp_path_factory)[2]
    config.reward.judge_path = judge_run
    validate(config)
    tok = load_tokenizer(config.tokenizer)
    from rlvr_jax.train import judges
    spec = judges.scoring_model(config, tok)
    assert isinstance(spec, scoring.Judge) and spec.weight == 1.0 and spec.no >= 0
    mesh, rules = build.build_mesh(config)
    placed = judges.scoring_model_params(config, spec, placer_lib.Placer(mesh, rules, spec.config))
    _, want = load_run(judge_run, tokenizer=tok)
    for a, b in zip(jax.tree.leaves(placed), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    task, _, _ = build.build_task_and_sources(config)
    scorer = _scorer(config, task, tok, spec)
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token", "judge"]
    assert scorer.terms[0].fn.keywords == {"weight": 0.0, "log": True}


@pytest.mark.parametrize("name", REWARD_MODEL)
def test_reward_model_config_validates_and_builds(name, tmp_path):
    """A missing reward model is a one-line error before anything compiles; a tiny one
    exported to Hugging Face format validates, loads, fits the tokenizer and gives the
    on-device reward (the token verifier at weight 0 beside it) — no RL step."""
    import jax
    from rlvr_jax.models import presets, reward_model
    from rlvr_jax.train.errors import ConfigError
    from rlvr_jax.train.validate import validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    config.reward.reward_model_path = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"^reward\.reward_model_path: no such directory"):
        validate(config)
    tok = load_tokenizer(config.tokenizer)
    rm_config = presets.get("tiny", vocab_size=tok.vocab_size)
    params = reward_model.init_reward_params(rm_config, jax.random.PRNGKey(0))
    reward_model.save_hf_reward_model(params, rm_config, tmp_path / "rm", pad_token_id=tok.pad_id)
    config.reward.reward_model_path = str(tmp_path / "rm")
    validate(config)
    assert scoring.parse_components(config.reward) == (("reward_model", 1.0),)
    spec = build.build_reward_model(config, tok)
    assert spec.config == rm_config and spec.weight == 1.0
    mesh, rules = build.build_mesh(config)
    placed = build.reward_model_params(config, spec, placer_lib.Placer(mesh, rules, rm_config))
    np.testing.assert_array_equal(np.asarray(placed["score"]["kernel"]),
                                  params["score"]["kernel"])
    task, _, _ = build.build_task_and_sources(config)
    scorer = _scorer(config, task, tok, build.build_reward_model(config, tok))
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token", "reward_model"]
    assert scorer.terms[0].fn.keywords == {"weight": 0.0, "log": True}
    small_vocab = rm_config.replace(vocab_size=tok.vocab_size - 1)
    reward_model.save_hf_reward_model(
        reward_model.init_reward_params(small_vocab, jax.random.PRNGKey(0)), small_vocab,
        tmp_path / "other")
    config.reward.reward_model_path = str(tmp_path / "other")
    with pytest.raises(ConfigError, match=r"^reward\.reward_model_path: .*not this tokenizer"):
        build.build_reward_model(config, tok)
    config.reward.reward_model_path = str(tmp_path / "rm")
    # Beside a host component: the split path, the reward model a device term after the
    # seam, never in the host pool.
    config.reward.components, config.reward.weights = "task,reward_model", "1,0.5"
    validate(config)
    rm = build.build_reward_model(config, tok)
    scorer = _scorer(config, task, tok, rm)
    assert not scorer.traceable and rm.weight == 0.5
    assert [(t.name, t.where) for t in scorer.terms] == [("task", "sample"),
                                                        ("reward_model", "device")]
    with scorer.host_scorer() as pool:
        assert pool.names == ("task", "correct")
    config.reward.components, config.reward.weights = "token", ""
    with pytest.raises(ConfigError, match=r"^reward\.reward_model_path: is set but "
                                          r"'reward_model' is not in reward.components"):
        validate(config)
    config.reward.components, config.reward.reward_model_path = "reward_model", ""
    with pytest.raises(ConfigError, match=r"^reward\.reward_model_path: is empty"):
        validate(config)


@pytest.mark.parametrize("name", REWARD_FEATURES)
def test_reward_feature_config_builds_and_scores(name):
    """Valid; the run's scorer carries the feature; its host terms (process rewards,
    label-free terms) give the config's own worked solutions full marks. No compilation."""
    from rlvr_jax.train.validate import validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    validate(config)
    tok = load_tokenizer(config.tokenizer)
    task, train, _ = build.build_task_and_sources(config)
    rl = rl_config.from_config(config)
    scorer = scoring.scorer_from_config(config, task, tok, rl=rl)
    if name == "noisy_verifier_arithmetic":  # Noise, then the correction, on device.
        assert scorer.traceable
        assert [t.fn.func for t in scorer.device_terms[1:3]] == [scoring.noisy,
                                                                 scoring.backward_corrected]
        return
    assert not scorer.traceable and scorer.host_terms
    examples = [train[i] for i in range(4) for _ in range(2)]  # G = 2 copies per prompt.
    texts = [ex.solution for ex in examples]
    tokens, mask = datasets.completion_arrays(texts, tok, max_len=config.sampling.max_new_tokens)
    import jax.numpy as jnp
    from rlvr_jax import sampling
    rollout = sampling.Rollout(tokens=jnp.asarray(tokens), mask=jnp.asarray(mask),
                               logprobs=jnp.zeros(tokens.shape), lengths=jnp.sum(mask, 1),
                               finished=jnp.ones((8,), bool), prompt_tokens=jnp.asarray(tokens),
                               prompt_mask=jnp.asarray(mask))
    texts = scoring.decode_completions(tok, tokens, mask)
    x = scoring.Inputs(rollout, group_size=2, texts=texts, examples=examples)
    rewards, steps, metrics = scorer.apply_host_terms(jnp.zeros((8,)), x)
    if rl.process:
        assert metrics["process/step_accuracy"] == 1.0 and steps.ends.any()
    else:  # Majority: every pair agrees; self-certainty: log-probs 0 -> exp(0) = 1.
        np.testing.assert_allclose(rewards, np.ones(8), rtol=1e-6)


@pytest.mark.parametrize("name", LEARNED_PROCESS)
def test_learned_process_config_opens_its_step_scorer(name, tmp_path):
    """A missing PRM is a one-line error before anything compiles; with a tiny exported one
    (or PRIME's copies of the policy) the run's scoring model opens and is placed, and the
    scorer ends in the learned per-step device term. No compilation."""
    import jax
    from rlvr_jax.models import presets, reward_model
    from rlvr_jax.train import judges
    from rlvr_jax.train.validate import validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    tok = load_tokenizer(config.tokenizer)
    if name == "prm_arithmetic":
        config.reward.prm_path = str(tmp_path / "missing")
        with pytest.raises(ConfigError, match=r"^reward\.prm_path: no such directory"):
            validate(config)
        rm_config = presets.get("tiny", vocab_size=tok.vocab_size)
        params = reward_model.init_reward_params(rm_config, jax.random.PRNGKey(0))
        reward_model.save_hf_reward_model(params, rm_config, tmp_path / "prm",
                                          pad_token_id=tok.pad_id)
        config.reward.prm_path = str(tmp_path / "prm")
    validate(config)
    model = judges.scoring_model(config, tok)
    mesh, rules = build.build_mesh(config)
    placer = build.Placer(mesh, rules, build.build_model_config(config, tok))
    policy = {"w": np.zeros((2,), np.float32)}  # PRIME copies whatever the policy is.
    placed = judges.scoring_model_params(config, model, placer, policy)
    assert set(placed) == ({"trunk", "score"} if name == "prm_arithmetic"
                           else {"phi", "ref", "opt"})
    task, _, _ = build.build_task_and_sources(config)
    scorer = _scorer(config, task, tok, model)
    assert scorer.device_terms[-1].per_step
    assert scorer.device_terms[-1].name == name.split("_arithmetic")[0]


@pytest.mark.parametrize("name", MULTITURN)
def test_multiturn_config_builds_and_replays_its_traces(name):
    """The tool config: valid; its warm-up traces agree with the tool (their observations are
    what it writes, and are left out of the warm-up's targets); the on-device verifier gives
    the model's tokens of every trace full reward; a trace with a wrong observation is a
    one-line error naming env.name."""
    from rlvr_jax.train import loop, validate
    config = load_config(os.path.join(ROOT, "configs", name + ".py"))
    validate.validate(config)
    tokenizer = load_tokenizer(config.tokenizer)
    task, _, _, warmup = build.build_sources(config)
    env = build.build_env(config, tokenizer)
    verifier = _scorer(config, task, tokenizer, env=env).verifier
    mesh, rules = build.build_mesh(config)
    model_config = build.build_model_config(config, tokenizer)
    sampler = build.build_sampler(config, model_config, tokenizer,
                                  placer_lib.Placer(mesh, rules, model_config), env)
    assert (sampler.tools is not None) == (not sampler.traceable)
    pb = next(build.prompt_loader(config, warmup, tokenizer, 32, seed=0))
    comp, cmask = datasets.completion_arrays([ex.solution for ex in pb.examples], tokenizer,
                                             max_len=config.sampling.max_new_tokens)
    pmask = build.prompt_mask(pb.lengths, pb.tokens.shape[1])
    targets = loop.warmup_loss_mask(sampler, tokenizer, pb, pmask, comp, cmask)
    tool = np.array([ex.meta.get("tool_trace", True) for ex in pb.examples])
    observed = (cmask.astype(np.int32) - targets).sum(axis=1)
    assert (observed[tool] > 0).all() and (observed[~tool] == 0).all()
    texts = scoring.decode_completions(tokenizer, comp, targets)  # The model's tokens only.
    if verifier.token is not None:
        assert tool.any() and (~tool).any()
        np.testing.assert_array_equal(np.asarray(verifier.token(comp, targets, pb.answers)), 1.0)
    else:  # The worked traces that find the number within the budget score 1.
        solved = [task.verify(ex.solution, ex) for ex in pb.examples]
        assert 0 < sum(solved) < len(solved)
        np.testing.assert_array_equal([task.verify(t, ex) for t, ex in zip(texts, pb.examples)],
                                      solved)
    i = int(np.flatnonzero(tool)[0])
    first_obs = "=" if verifier.token is not None else "]"
    wrong = pb.examples[i].solution.replace(first_obs, first_obs + "1", 1)
    comp2, cmask2 = datasets.completion_arrays([wrong] + [ex.solution for ex in pb.examples[1:]],
                                               tokenizer, max_len=config.sampling.max_new_tokens)
    pb2 = dataclasses.replace(pb, examples=[pb.examples[i]] + list(pb.examples[1:]),
                              tokens=np.concatenate([pb.tokens[i:i + 1], pb.tokens[1:]]))
    pmask2 = np.concatenate([pmask[i:i + 1], pmask[1:]])
    with pytest.raises(ConfigError, match="env.name: the warm-up solution"):
        loop.warmup_loss_mask(sampler, tokenizer, pb2, pmask2, comp2, cmask2)


def test_decode_settings_reach_the_sampling_config():
    from rlvr_jax.train.config import default_config
    config = default_config()
    tok = load_tokenizer(config.tokenizer)
    auto = build.sampling_config(config, tok)
    assert auto.compact_ratio is None and auto.attention_impl is None  # -1 and "": automatic
    config.sampling.compact_ratio, config.sampling.decode_attention = 0.5, "plain"
    chosen = build.sampling_config(config, tok)
    assert chosen.compact_ratio == 0.5 and chosen.attention_impl == "plain"
    assert auto.tree is None  # sampling.tree.mode "": independent samples.
    config.sampling.tree.mode, config.sampling.tree.depths = "depth", (3, 5)
    assert build.sampling_config(config, tok).tree == tree_rollouts.TreeConfig(
        mode="depth", depths=(3, 5), branches=2, max_forks=1, every=8)


@pytest.mark.parametrize("name", TREE)
def test_tree_config_trains_one_step(name, tmp_path_factory):
    """One RL step of a tree-rollout config (its tree shrunk to SMALL's G = 2): rows fork,
    the prefix-tree advantages and the update run, the decoded and shared tokens add up."""
    config = small(load_config(os.path.join(ROOT, "configs", name + ".py")))
    config.sampling.tree.max_forks = 1
    assert config.rl.tree_advantage != "none"
    workdir = str(tmp_path_factory.mktemp(name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLVR_JAX_NO_PROGRESS", "1")
        loop.run(config, workdir, progress=False)
    rec, = [r for r in read_metrics(os.path.join(workdir, "metrics.jsonl")) if r["phase"] == "rl"]
    assert all(rec[k] is not None and np.isfinite(rec[k]) for k in RL_KEYS)
    assert rec["rollout/shared_prefix_tokens"] > 0
    assert rec["rollout/shared_prefix_tokens"] + rec["rollout/decoded_tokens"] == \
        rec["rollout/valid_tokens"]
