"""`scripts/train.py` on bad input: exit status 2, ONE stderr line naming the field / file /
data line, no traceback, nothing compiled (a JAX compile-event listener), and the workdir's
files byte-identical afterwards. Most cases run `cli.main` in-process (cheap); two run the
real script in a subprocess to see the exit status and the last stderr line."""
import json
import os
import subprocess
import sys

import jax
import pytest

from rlvr_jax.train import cli, integrity
from rlvr_jax.train import workdir as workdir_lib
from rlvr_jax.train.errors import ConfigError
from tests.files import snapshot

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.path.join(REPO, "configs", "quickstart.py")
SMALL = ["--config.sft.steps=2", "--config.rl.steps=2", "--config.eval.num_prompts=8",
         "--config.eval.batch_size=8"]

_COMPILE_EVENTS = []


def _on_event(event, *args, **kwargs):
    if event.startswith("/jax/core/compile"):
        _COMPILE_EVENTS.append(event)


@pytest.fixture(autouse=True)
def _compile_listener():
    jax.monitoring.register_event_duration_secs_listener(_on_event)
    yield
    jax.monitoring.unregister_event_duration_listener(_on_event)


# Workdir set-ups (written by hand: `workdir.plan` only reads the files).
def _run_files(workdir, argv, *, summary=False, steps=(), config_edit=None):
    config, _ = cli.parse(argv + ["--workdir", workdir])
    stored = workdir_lib._as_dict(config)
    if config_edit:
        config_edit(stored)
    os.makedirs(workdir, exist_ok=True)
    workdir_lib.write_json_atomic(os.path.join(workdir, "config.json"), stored)
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        f.write(json.dumps({"step": 1, "phase": "sft", "time": 0.0, "sft/loss": 4.0}) + "\n")
    if summary:
        with open(os.path.join(workdir, "summary.json"), "w") as f:
            json.dump({"after_rl": {"eval/pass@1": 0.5}}, f)
    for step in steps:  # A step's shape as `integrity.verify` checks it (unsealed).
        for rel in integrity.REQUIRED:
            path = os.path.join(workdir, "checkpoints", str(step), rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("{}")


def _jsonl(tmp, lines):
    path = os.path.join(tmp, "data.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


# (id, extra argv (may use {tmp}), workdir set-up or None, text the error must contain)
CASES = [
    ("missing-config", ["--config", "{tmp}/nope.py"], None, "--config: no such file"),
    ("config-is-dir", ["--config", "{tmp}"], None, "--config: is a directory"),
    ("config-syntax", ["--config", "{tmp}/broken.py"], None, "broken.py: cannot be imported"),
    ("config-no-get-config", ["--config", "{tmp}/empty.py"], None, "has no get_config()"),
    ("unknown-key", ["--config.rl.lr=1"], None, "--config.rl.lr: unknown key"),
    ("bad-type", ["--config.rl.steps=abc"], None, "--config.rl.steps=abc"),
    ("unknown-flag", ["--workdirr", "x"], None, "workdirr"),
    ("num-samples", ["--config.rl.num_samples=-8"], None, "rl.num_samples: must be >= 1"),
    ("eval-batch", ["--config.eval.batch_size=-250"], None, "eval.batch_size: must be >= 1"),
    ("eval-multiple", ["--config.eval.num_prompts=20", "--config.eval.batch_size=8"], None,
     "eval.num_prompts: 20 must be a multiple of eval.batch_size=8"),
    ("sft-batch", ["--config.sft.batch_size=-8"], None, "sft.batch_size: must be >= 1"),
    ("temperature", ["--config.sampling.temperature=0.0"], None, "sampling.temperature"),
    ("top-p", ["--config.sampling.top_p=1.5"], None, "sampling.top_p"),
    ("cache-window", ["--config.sampling.cache_window=-2"], None,
     "sampling.cache_window: must be -1 (automatic), 0 (one phase)"),
    ("advantage", ["--config.rl.advantage=grpoo"], None, "rl.advantage: must be one of"),
    ("aggregation", ["--config.rl.aggregation=mean"], None, "rl.aggregation"),
    ("algorithm", ["--config.rl.algorithm=ppo2"], None, "rl.algorithm: unknown algorithm"),
    ("task", ["--config.data.task=calculus"], None, "data.task: unknown task 'calculus'"),
    ("task-knob", ["--config.data.task_kwargs.ops=add,pow"], None, "data.task_kwargs: ops"),
    ("verifier", ["--config.reward.verifier=llm"], None, "reward.verifier: unknown verifier"),
    ("component", ["--config.reward.components=task,mathh"], None,
     "reward.components: unknown component 'mathh'; known:"),
    ("weights", ["--config.reward.components=task,format", "--config.reward.weights=1"], None,
     "reward.weights: 1 weights for 2 components"),
    ("timeout", ["--config.reward.timeout_s=0"], None, "reward.timeout_s: must be > 0"),
    ("rm-no-path", ["--config.reward.components=reward_model"], None,
     "reward.reward_model_path: is empty"),
    ("rm-missing", ["--config.reward.components=reward_model",
                    "--config.reward.reward_model_path={tmp}/rm"], None,
     "reward.reward_model_path: no such directory"),
    ("rm-not-a-reward-model", ["--config.reward.components=reward_model",
                               "--config.reward.reward_model_path={tmp}"], None,
     "reward.reward_model_path: "),
    ("noise-rate", ["--config.reward.noise_fn_rate=1.5"], None,
     "reward.noise_fn_rate: must be in [0, 1]"),
    ("correction-rates", ["--config.reward.correction_fn_rate=0.6",
                          "--config.reward.correction_fp_rate=0.5"], None,
     "reward.correction_fn_rate: with reward.correction_fp_rate the sum must be < 1"),
    ("label-free-on-device", ["--config.reward.components=token,majority"], None,
     "reward.components: 'token' scores on device"),
    ("process-form", ["--config.rl.process_form=max"], None, "rl.process_form: must be one of"),
    ("entropy-invert", ["--config.rl.entropy_mask_invert=True"], None,
     "rl.entropy_mask_invert: needs entropy_keep_fraction < 1"),
    ("process-weight", ["--config.rl.process_weight=-1"], None,
     "rl.process_weight: must be >= 0"),
    ("process-gspo", ["--config.rl.process_weight=0.5", "--config.rl.policy_loss=gspo"], None,
     "rl.process_weight: > 0 gives per-token advantages"),
    ("process-file-data", ["--config.data.source=jsonl", "--config.data.path={tmp}/data.jsonl",
                           "--config.reward.verifier=math", "--config.sft.steps=0",
                           "--config.rl.process_weight=0.5"], None,
     "rl.process_weight: process rewards need a task's step checkers"),
    ("source", ["--config.data.source=csv"], None, "data.source: must be one of"),
    ("env-name", ["--config.env.name=calculater"], None, "env.name: unknown environment"),
    ("env-turn-budget", ["--config.env.name=calculator", "--config.env.max_turn_tokens=64"],
     None, "env.max_turn_tokens: 64 exceeds sampling.max_new_tokens"),
    ("env-turns", ["--config.env.max_turns=0"], None, "env.max_turns: must be >= 1"),
    ("env-lookup-corpus", ["--config.env.name=lookup", "--config.reward.verifier=task"], None,
     "env.corpus_path: no such file"),
    ("env-timeout", ["--config.env.name=guess_number", "--config.env.timeout_s=0"], None,
     "env.timeout_s: must be > 0"),
    ("eval-path", ["--config.data.source=jsonl", "--config.data.path={tmp}/data.jsonl",
                   "--config.data.eval_path={tmp}/held.jsonl", "--config.sft.steps=0"], None,
     "data.eval_path: no such file"),
    ("jsonl-no-path", ["--config.data.source=jsonl", "--config.sft.steps=0"], None,
     "data.path: is empty"),
    ("jsonl-missing", ["--config.data.source=jsonl", "--config.data.path={tmp}/no.jsonl",
                       "--config.sft.steps=0"], None, "data.path: no such file"),
    ("jsonl-malformed", ["--config.data.source=jsonl", "--config.data.path={tmp}/data.jsonl",
                         "--config.reward.verifier=math", "--config.sft.steps=0"], None,
     "data.jsonl line 3: not JSON"),
    ("tokenizer-missing", ["--config.tokenizer={tmp}/tok.model"], None,
     "tokenizer: no such file or directory"),
    ("hf-missing", ["--config.model.hf_checkpoint={tmp}/qwen"], None,
     "model.hf_checkpoint: no such directory"),
    ("preset", ["--config.model.preset=huge"], None, "model.preset: unknown preset"),
    ("attention", ["--config.model.attention=flash"], None, "model.attention: must be one of"),
    ("compact-ratio", ["--config.sampling.compact_ratio=1.0"], None,
     "sampling.compact_ratio: must be -1 (automatic), 0 (off) or in (0, 1)"),
    ("decode-attention", ["--config.sampling.decode_attention=flash"], None,
     "sampling.decode_attention: must be"),
    ("tree-mode", ["--config.sampling.tree.mode=width"], None,
     "sampling.tree.mode: must be one of depth, every, entropy"),
    ("tree-roots", ["--config.sampling.tree.mode=every", "--config.sampling.tree.max_forks=9"],
     None, "sampling.tree.max_forks: must leave a root"),
    ("tree-depths", ["--config.sampling.tree.mode=depth"], None,
     "sampling.tree.depths: must be positions >= 1"),
    ("tree-env", ["--config.sampling.tree.mode=every", "--config.env.name=calculator"], None,
     "sampling.tree.mode: tree rollouts ('every') cannot be combined with env.name"),
    ("tree-verify", ["--config.sampling.tree.mode=every", "--config.rl.verify_groups=2"], None,
     "sampling.tree.mode: tree rollouts ('every') cannot be combined with rl.verify_groups"),
    ("verify-groups", ["--config.rl.verify_groups=99"], None,
     "rl.verify_groups: 99 verification groups do not fit"),
    ("verify-fraction", ["--config.sft.verify_fraction=0.2"], None,
     "sft.verify_fraction: teaches self-verification's verdicts"),
    ("verify-hints", ["--config.rl.verify_groups=2", "--config.rl.hint_mode=on_fail"], None,
     "rl.verify_groups: > 0 (self-verification) takes neither hint_mode"),
    ("kv-heads", ["--config.model.n_heads=4", "--config.model.n_kv_heads=3"], None,
     "model.n_kv_heads: must divide"),
    ("vocab-too-small", ["--config.model.vocab_size=8"], None,
     "model.vocab_size: the tokenizer"),
    ("prompts-too-long", ["--config.data.max_prompt_len=2"], None,
     "data.max_prompt_len: all of the first 64 prompts are longer than 2 tokens"),
    ("prompt-overflow-error", ["--config.data.max_prompt_len=3", "--config.data.overflow=error"],
     None, "data.max_prompt_len: prompt"),
    ("positions", ["--config.sampling.max_new_tokens=40000"], None,
     "sampling.max_new_tokens: data.max_prompt_len + sampling.max_new_tokens = 40008"),
    ("num-devices", ["--config.mesh.num_devices=99"], None, "mesh.num_devices: 99 but"),
    ("mesh-rules", ["--config.mesh.rules=zero3"], None, "mesh.rules: unknown rules preset"),
    ("mesh-two-rest", ["--config.mesh.data=-1"], None, "mesh: at most one"),
    ("minibatches", ["--config.rl.minibatches=3"], None, "rl.minibatches: 3 does not divide"),
    ("keep", ["--config.checkpoint.keep=0"], None, "checkpoint.keep: must be >= 1"),
    ("warm-up-too-long", ["--config.sampling.max_new_tokens=4"], None,
     "sampling.max_new_tokens: the warm-up's worked solution"),
    ("data-size", ["--config.data.size=-1"], None, "data.size: must be >= 0"),
    ("filter-stream", ["--config.data.filter.enabled=True"], None,
     "data.filter.enabled: filtering needs a finite prompt set"),
    ("filter-thresholds", ["--config.data.size=8", "--config.data.filter.enabled=True",
                           "--config.data.filter.low=0.9", "--config.data.filter.high=0.5"],
     None, "data.filter: need low < high"),
    ("curriculum-knob", ["--config.data.curriculum.knob=digits",
                         "--config.data.curriculum.levels=1,2"], None,
     "data.curriculum.knob: 'digits' is not among data.task_kwargs"),
    ("curriculum-no-levels", ["--config.data.curriculum.knob=max_digits"], None,
     "data.curriculum.levels: is empty"),
    ("curriculum-bad-level", ["--config.data.curriculum.knob=max_digits",
                              "--config.data.curriculum.levels=0,2"], None,
     "data.curriculum.levels: need 1 <= min_digits <= max_digits"),
    ("mixture-weight", ["--config.data.mixture=arithmetic:x"], None,
     "data.mixture: 'arithmetic:x' is not name:weight"),
    ("mixture-unknown", ["--config.data.mixture=algebra:1"], None,
     "data.mixture: 'algebra' is neither a task"),
    ("two-schemes", ["--config.data.curriculum.knob=max_digits",
                     "--config.data.curriculum.levels=1,2", "--config.data.mixture=sorting"],
     None, "data.mixture: cannot be combined with data.curriculum"),
    ("workdir-is-file", [], "file", "--workdir: {work} is a file"),
    ("finished-no-ckpt", [], "finished", "holds a finished run (summary.json)"),
    ("finished-ckpt", ["--config.checkpoint.every=1"], "finished-ckpt",
     "holds a finished run (2 RL steps); raise rl.steps"),
    ("other-config-ckpt", ["--config.checkpoint.every=1"], "other-ckpt",
     "checkpoints of another config (model.d_model 32 -> 0)"),
    ("other-config-interrupted", [], "other-interrupted",
     "interrupted run of another config (rl.learning_rate 0.5 -> 0.0001)"),
    ("steps-below-ckpt", ["--config.checkpoint.every=1"], "ckpt-at-5",
     "rl.steps: 2 is below the latest checkpoint's RL step 5"),
    ("no-resume", ["--config.checkpoint.every=1", "--config.checkpoint.resume=False"],
     "ckpt-at-1", "checkpoint.resume: is False"),
    ("foreign-files", [], "foreign", "without its config.json"),
]


def _set_up(kind, work, argv):
    if kind == "file":
        with open(work, "w") as f:
            f.write("not a directory\n")
    elif kind == "finished":
        _run_files(work, argv, summary=True)
    elif kind == "finished-ckpt":
        _run_files(work, argv, summary=True, steps=(0, 1, 2))
    elif kind == "other-ckpt":
        _run_files(work, argv, steps=(0, 1), config_edit=lambda c: c["model"].update(d_model=32))
    elif kind == "other-interrupted":
        _run_files(work, argv, config_edit=lambda c: c["rl"].update(learning_rate=0.5))
    elif kind == "ckpt-at-5":
        _run_files(work, argv, steps=(0, 5))
    elif kind == "ckpt-at-1":
        _run_files(work, argv, steps=(0, 1))
    elif kind == "foreign":
        os.makedirs(work)
        with open(os.path.join(work, "metrics.jsonl"), "w") as f:
            f.write("{}\n")


@pytest.mark.parametrize("name,extra,setup,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_before_any_compilation(tmp_path, capsys, monkeypatch,
                                                            name, extra, setup, expected):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    tmp, work = str(tmp_path), str(tmp_path / "run")
    (tmp_path / "broken.py").write_text("def get_config(:\n")
    (tmp_path / "empty.py").write_text("X = 1\n")
    _jsonl(tmp, ['{"prompt": "1+1=", "answer": "2"}', '{"prompt": "2+2=", "answer": "4"}',
                 '{"prompt": "3+3=", "answer": '])
    argv = [a.format(tmp=tmp) for a in extra]
    base = argv if "--config" in argv else ["--config", QUICK] + SMALL + argv
    if setup:
        _set_up(setup, work, [a for a in base if not a.startswith("--config.model.")])
    before = snapshot(tmp)
    capsys.readouterr()
    _COMPILE_EVENTS.clear()

    status = cli.main(base + ["--workdir", work])

    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected.format(work=work) in lines[0]
    assert "Traceback" not in err
    assert _COMPILE_EVENTS == [], "compiled before the error"
    assert snapshot(tmp) == before


def _script(args, cwd):
    env = dict(os.environ, RLVR_JAX_NO_PROGRESS="1")
    return subprocess.run([sys.executable, os.path.join(REPO, "scripts", "train.py")] + args,
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_script_exit_status_and_last_stderr_line(tmp_path):
    """The real script: exit status 2 and the error as the last stderr line (no shutdown
    noise after it, e.g. orbax's event loop), a traceback only with --debug; --help is 0."""
    work = str(tmp_path / "run")
    argv = ["--config", QUICK] + SMALL + ["--config.checkpoint.every=1"]
    _run_files(work, argv, steps=(0, 1), config_edit=lambda c: c["model"].update(d_model=32))
    proc = _script(argv + ["--workdir", work], REPO)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("error: --workdir: ")
    assert "model.d_model 32 -> 0" in proc.stderr and "Traceback" not in proc.stderr

    proc = _script(argv + ["--workdir", work, "--debug"], REPO)
    assert proc.returncode == 2 and "Traceback" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("error: --workdir: ")

    proc = _script(["--help", "--config", QUICK], REPO)
    assert proc.returncode == 0 and "--workdir DIR" in proc.stdout and proc.stderr == ""
    assert "--verbose" in proc.stdout
    assert "--config.checkpoint.every=100" in proc.stdout  # The file's value.
    assert "--config.rl.aggregation='seq-mean-token-mean'\n      how per-token" in proc.stdout


def test_every_config_field_has_help():
    from rlvr_jax.train.config import default_config
    from rlvr_jax.train.config_help import field_help
    fields = field_help(default_config())
    assert len(fields) > 100
    assert [name for name, _, text in fields if not text] == []


def test_missing_config_or_workdir_flag(capsys):
    assert cli.main(["--config", QUICK]) == 2
    assert capsys.readouterr().err.strip() == "error: --workdir: missing (a directory for the " \
        "run's files)"
    assert cli.main(["--workdir", "x"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --config: missing")


def test_comma_list_override_becomes_a_tuple(tmp_path):
    config, work = cli.parse(["--config", QUICK, "--config.data.task_kwargs.ops=add, mul",
                              "--workdir", str(tmp_path)])
    assert tuple(config.data.task_kwargs.ops) == ("add", "mul")
    assert work == str(tmp_path)
    config, _ = cli.parse(["--config", QUICK, "--config.data.task_kwargs.ops=('sub',)",
                           "--workdir", str(tmp_path)])
    assert tuple(config.data.task_kwargs.ops) == ("sub",)


def test_a_run_saved_before_new_fields_existed_still_resumes(tmp_path):
    """Fields added to the config after a run was saved (absent from its config.json) count
    as unchanged at their defaults: the run resumes; set to another value, it is refused."""
    work = str(tmp_path / "old")
    argv = ["--config", os.path.join(REPO, "configs", "quickstart.py"),
            "--config.checkpoint.every=1"]

    def drop_new_fields(stored):
        del stored["data"]["filter"], stored["data"]["mixture_tasks"], stored["data"]["size"]
        del stored["rl"]["process_weight"]

    _run_files(work, argv, steps=(0, 1), config_edit=drop_new_fields)
    config, _ = cli.parse(argv + ["--workdir", work])
    assert workdir_lib.plan(config, work).resume_step == 1
    config, _ = cli.parse(argv + ["--workdir", work, "--config.data.size=8"])
    with pytest.raises(ConfigError, match=r"data.size \"<absent>\" -> 8"):
        workdir_lib.plan(config, work)


def test_other_scripts_bad_input_is_one_line(capsys, monkeypatch):
    """scripts/{benchmark,memory_plan,audit_verifier,train_tokenizer,train_reward_model,
    sampler_microbench,attention_cost,decode_step_time}.py run their main through
    `cli.script_main`: a missing file or a bad value is one `error:` line and exit status 2
    (RLVR_JAX_DEBUG=1: the traceback too)."""
    def missing():
        open("/nonexistent/pairs.jsonl")

    def bad_preset():
        from rlvr_jax.models import presets
        presets.get("nope")

    for main, expected in ((missing, "error: [Errno 2] No such file or directory: "
                            "'/nonexistent/pairs.jsonl'"),
                           (bad_preset, "error: unknown model preset 'nope'")):
        monkeypatch.delenv("RLVR_JAX_DEBUG", raising=False)
        with pytest.raises(SystemExit) as e:
            cli.script_main(main)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and err[0].startswith(expected), err
        monkeypatch.setenv("RLVR_JAX_DEBUG", "1")
        with pytest.raises(SystemExit):
            cli.script_main(main)
        assert "Traceback" in capsys.readouterr().err
    for name in ("benchmark", "memory_plan", "audit_verifier", "train_tokenizer",
                 "train_reward_model", "sampler_microbench", "train_prm", "prm_audit",
                 "attention_cost", "decode_step_time"):
        with open(os.path.join(REPO, "scripts", f"{name}.py")) as f:
            assert "script_main(main)" in f.read(), name


def test_resume_and_restart_say_so(tmp_path):
    """The first line of a rerun says what it does: resume from step N, continue a finished
    run, or start an interrupted one again (loop.setup prints `plan.notice`)."""
    argv = ["--config", QUICK] + SMALL + ["--config.checkpoint.every=1"]
    work = str(tmp_path / "run")
    _run_files(work, argv, steps=(0, 1))
    config, _ = cli.parse(argv + ["--workdir", work])
    assert workdir_lib.plan(config, work).notice == (
        f"{work}: resuming the run from its RL step 1 checkpoint (to RL step 2)")
    done = str(tmp_path / "done")
    _run_files(done, argv, summary=True, steps=(0, 2))
    config, _ = cli.parse(argv + ["--workdir", done, "--config.rl.steps=4"])
    assert workdir_lib.plan(config, done).notice == (
        f"{done}: continuing the finished run from its RL step 2 checkpoint (to RL step 4)")
    early = str(tmp_path / "early")
    _run_files(early, argv)
    config, _ = cli.parse(argv + ["--workdir", early])
    assert "interrupted before its first checkpoint; starting it again" in \
        workdir_lib.plan(config, early).notice
