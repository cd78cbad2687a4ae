"""MetricsWriter: JSONL lines, TensorBoard scalars beside them, process-0-only writing."""
import importlib.util
import json
import logging
import math
import os
import sys

import pytest

from rlvr_jax.train.logging import MetricsWriter, read_metrics, read_tensorboard_scalars

HAS_TBX = importlib.util.find_spec("tensorboardX") is not None


def _events(path):
    return [n for n in os.listdir(path) if n.startswith("events.out.tfevents")]


def test_jsonl_lines_and_non_finite_as_null(tmp_path):
    w = MetricsWriter(str(tmp_path), tensorboard=False)
    w.write(1, {"train/loss": 0.5, "reward/mean": float("nan")})
    w.write(2, {"train/loss": 0.25}, phase="sft")
    w.close()
    recs = read_metrics(str(tmp_path / "metrics.jsonl"))
    assert [(r["step"], r["phase"]) for r in recs] == [(1, "rl"), (2, "sft")]
    assert recs[0]["train/loss"] == 0.5 and recs[0]["reward/mean"] is None
    assert recs[1]["train/loss"] == 0.25
    assert _events(str(tmp_path)) == []


def test_disabled_writer_writes_nothing(tmp_path):
    w = MetricsWriter(str(tmp_path), enabled=False)
    w.write(1, {"a": 1.0})
    w.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not HAS_TBX, reason="tensorboardX (viz extra) not installed")
def test_tensorboard_scalars_match_jsonl(tmp_path):
    w = MetricsWriter(str(tmp_path))
    assert w.tensorboard is not None
    steps = [1, 2, 5]
    for s in steps:
        w.write(s, {"train/loss": 1.0 / s, "eval/pass@1": 0.1 * s}, phase="rl")
    w.write(6, {"bad": float("inf")})
    w.close()
    assert len(_events(str(tmp_path))) == 1
    scalars = read_tensorboard_scalars(str(tmp_path))
    recs = read_metrics(str(tmp_path / "metrics.jsonl"))
    for tag in ("train/loss", "eval/pass@1"):
        expected = [(r["step"], r[tag]) for r in recs if tag in r]
        got = scalars[tag]
        assert [s for s, _ in got] == [s for s, _ in expected]
        assert all(math.isclose(a, b, rel_tol=1e-6) for (_, a), (_, b) in zip(got, expected))
    assert scalars["bad"][0][0] == 6 and math.isinf(scalars["bad"][0][1])
    assert recs[-1]["bad"] is None


def test_missing_tensorboardx_falls_back_to_jsonl(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)   # import now raises ImportError
    with caplog.at_level(logging.INFO, logger="rlvr_jax"):   # shown by train.py --verbose
        w = MetricsWriter(str(tmp_path))
    assert w.tensorboard is None
    assert any("tensorboardX is not installed" in r.getMessage() for r in caplog.records)
    w.write(3, {"x": 2.0})
    w.close()
    assert _events(str(tmp_path)) == []
    with open(tmp_path / "metrics.jsonl") as f:
        assert json.loads(f.readline())["x"] == 2.0


@pytest.mark.skipif(not HAS_TBX, reason="tensorboardX (viz extra) not installed")
def test_reopened_writer_mirrors_a_cut_back_jsonl(tmp_path):
    """A resumed run cuts metrics.jsonl back to the checkpoint; the events follow it."""
    w = MetricsWriter(str(tmp_path))
    w.write(1, {"sft/loss": 2.0}, phase="sft")
    for s in (1, 2, 3):
        w.write(s, {"train/loss": float(s)})
    w.close()
    path = tmp_path / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]))              # checkpoint taken after RL step 2
    w = MetricsWriter(str(tmp_path))
    w.write(3, {"train/loss": 30.0})                  # step 3 again, a different value
    w.write(4, {"train/loss": 40.0, "eval/pass@1": 0.5})
    w.close()
    assert len(_events(str(tmp_path))) == 1
    scalars = read_tensorboard_scalars(str(tmp_path))
    assert scalars["train/loss"] == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]
    assert scalars["sft/loss"] == [(1, 2.0)] and scalars["eval/pass@1"] == [(4, 0.5)]
    assert [r["step"] for r in read_metrics(str(path))] == [1, 1, 2, 3, 4]


def test_foreign_event_files_are_kept(tmp_path):
    other = tmp_path / "events.out.tfevents.123.host"
    other.write_bytes(b"")
    w = MetricsWriter(str(tmp_path))
    w.write(1, {"a": 1.0})
    w.close()
    assert other.exists()


def test_progress_bar_is_compact_where_stderr_is_not_a_terminal(monkeypatch):
    """A log file or a notebook cell gets a few lines per phase, not one per step: the
    postfix set every step waits for the next (30 s) redraw instead of forcing one."""
    import io

    from rlvr_jax.train.logging import progress_bar
    monkeypatch.delenv("RLVR_JAX_NO_PROGRESS", raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    bar = progress_bar(300, "RL")
    for i in range(300):
        bar.set_postfix(reward=f"{i / 300:.3f}")
        bar.update(1)
    bar.close()
    draws = err.getvalue().count("\r")
    assert 1 <= draws <= 3, err.getvalue()[:500]
    assert "300/300" in err.getvalue() and "reward=0.997" in err.getvalue()


def test_progress_eta_ignores_the_compile_step_and_resumed_steps(monkeypatch):
    """Resumed at step 25 of 40: the 25 steps done by the earlier run are not in the rate,
    nor is the first step (compile + run: 60 s), not even on the line drawn right after it
    (which said "~2 hours" when it was); after it, 1 s/step x 10 steps left = 10 s."""
    import io

    from rlvr_jax.train.logging import progress_bar
    monkeypatch.delenv("RLVR_JAX_NO_PROGRESS", raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    now = [1000.0]
    bar = progress_bar(40, "RL", initial=25)
    bar._time = lambda: now[0]
    bar.start_t = bar.last_print_t = now[0]
    now[0] += 60.0      # step 26: compile + run
    bar.update(1)
    d = bar.format_dict
    assert d["n"] == 26 and d["initial"] == 26 and d["elapsed"] == 0.0
    assert "26/40 [00:00<?" in err.getvalue().split("\r")[-1]   # no ETA yet, not 14 min
    for _ in range(4):  # steps 27-30: 1 s each
        now[0] += 1.0
        bar.update(1)
    d = bar.format_dict
    rate = (d["n"] - d["initial"]) / d["elapsed"]
    assert abs(rate - 1.0) < 1e-6 and abs((d["total"] - d["n"]) / rate - 10.0) < 1e-6
    bar.close()


def test_library_info_logs_hidden_unless_verbose():
    """train.py's default: orbax (absl) and jax INFO lines hidden even where the root logger
    is at INFO (a notebook, a user's basicConfig); `--verbose` shows them."""
    from rlvr_jax.train.logging import configure_library_logs
    saved = {n: logging.getLogger(n).level for n in ("absl", "jax", "orbax", "rlvr_jax")}
    root = logging.getLogger().level
    try:
        logging.getLogger().setLevel(logging.INFO)
        configure_library_logs(verbose=False)
        for name in ("absl", "jax._src.xla_bridge", "orbax.checkpoint", "rlvr_jax"):
            assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
            assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
        configure_library_logs(verbose=True)
        for name in ("absl", "jax._src.xla_bridge", "rlvr_jax"):
            assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        logging.getLogger().setLevel(root)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_closed_event_loop_reports_hidden_unless_verbose():
    """After a failed save (a full disk) tensorstore's threads report "Event loop is closed"
    through sys.unraisablehook; the command line hides exactly those, nothing else."""
    import sys
    import types

    from rlvr_jax.train.logging import configure_library_logs
    saved, seen = sys.unraisablehook, []
    try:
        sys.unraisablehook = lambda unraisable: seen.append(str(unraisable.exc_value))
        configure_library_logs(verbose=False)
        configure_library_logs(verbose=False)  # Installed once, not wrapped twice.
        for message in ("Event loop is closed", "something else"):
            sys.unraisablehook(types.SimpleNamespace(exc_value=RuntimeError(message)))
        assert seen == ["something else"]
    finally:
        sys.unraisablehook = saved


def test_wandb_offline_gets_every_record_and_a_resume_keeps_the_run(tmp_path, monkeypatch):
    """`log_wandb` in W&B's offline mode (no network): each record lands in the W&B run (its
    summary holds the last values) and the run id survives a resume of the workdir."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    writer = MetricsWriter(str(tmp_path), tensorboard=False, wandb_project="rlvr-test")
    writer.write(0, {"sft/loss": 2.5}, phase="sft")
    writer.write(1, {"train/reward": 0.25, "eval/pass@1": 0.5})
    summary, run_id = dict(writer.wandb.run.summary), writer.wandb.run.id
    assert (summary["sft/loss"], summary["train/reward"], summary["step"]) == (2.5, 0.25, 1)
    writer.close()
    assert any(name.endswith(run_id) for name in os.listdir(tmp_path / "wandb"))
    resumed = MetricsWriter(str(tmp_path), tensorboard=False, wandb_project="rlvr-test")
    resumed.write(2, {"train/reward": 0.75})
    assert resumed.wandb.run.id == run_id
    resumed.close()
    assert len(read_metrics(str(tmp_path / "metrics.jsonl"))) == 3
