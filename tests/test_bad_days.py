"""Bad days of a run: a second process on a live workdir (the lock), a damaged checkpoint
(checksums, fall back, moved aside), SIGTERM (save, exit 143, exact rerun), a full disk."""
import errno
import os
import signal
import socket
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import pytest

from rlvr_jax.train import cli, integrity, lock, loop, preempt
from rlvr_jax.train import workdir as workdir_lib
from rlvr_jax.train.checkpoint import Checkpointer, checked_step, load_run
from rlvr_jax.train.logging import read_metrics
from rlvr_jax.train.errors import ConfigError
from tests.files import snapshot
from tests.test_checkpoint import _comparable, _state_leaves_equal, _tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.path.join(REPO, "configs", "quickstart.py")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ----------------------------------------------------------------------------- the lock

def test_lock_refuses_a_live_holder_and_takes_over_a_dead_one(tmp_path):
    work = str(tmp_path)
    release = lock.acquire(work)
    with pytest.raises(ConfigError, match=rf"in use by a running process \(pid {os.getpid()} "
                                          rf"on {socket.gethostname()}\)"):
        lock.acquire(work)
    release()
    assert os.listdir(work) == []  # Released: nothing left behind.
    # A killed run's lock (its pid is gone on this host) is stale: taken over.
    with open(os.path.join(work, lock.LOCK), "w") as f:
        f.write(f"{_dead_pid()} {socket.gethostname()}\n")
    lock.check(work)
    release = lock.acquire(work)
    with open(os.path.join(work, lock.LOCK)) as f:
        assert f.read().split()[0] == str(os.getpid())
    release()
    # Another host's lock cannot be checked from here: it counts as live.
    with open(os.path.join(work, lock.LOCK), "w") as f:
        f.write("1234 some-other-host\n")
    with pytest.raises(ConfigError, match="pid 1234 on some-other-host"):
        lock.check(work)


def test_second_process_on_a_live_workdir_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    work = str(tmp_path / "run")
    os.makedirs(work)
    with open(os.path.join(work, "config.json"), "w") as f:
        f.write("{}")
    release = lock.acquire(work)  # "The live run": this process holds the lock.
    before = snapshot(work)
    status = cli.main(["--config", QUICK, "--workdir", work])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and len(err) == 1, err
    assert f"pid {os.getpid()} on {socket.gethostname()}" in err[0]
    assert snapshot(work) == before
    release()
    # An invalid command on a free workdir: refused before the lock, nothing left behind.
    before = snapshot(work)
    assert cli.main(["--config", QUICK, "--workdir", work, "--config.rl.steps=-1"]) == 2
    assert snapshot(work) == before


def test_sigterm_exit_status_is_143_with_one_line(monkeypatch, capsys):
    def preempted(config, workdir):
        raise preempt.Preempted("terminated (SIGTERM): RL step 3 is saved in X; rerun", 3)
    monkeypatch.setattr(loop, "run", preempted)
    assert cli.main(["--config", QUICK, "--workdir", "unused"]) == 143
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["terminated (SIGTERM): RL step 3 is saved in X; rerun"]


# ----------------------------------------------------------------------------- integrity

def _save_steps(directory, steps=(1, 2)):
    state = {"w": jnp.arange(64.0).reshape(8, 8), "b": jnp.ones(3)}
    with Checkpointer(directory, max_to_keep=5, async_save=False) as ckpt:
        for s in steps:
            ckpt.save(s, jax.tree.map(lambda x: x * s, state), {"s": s}, force=True)
    return state


def _largest_array_file(step_dir):
    files = [os.path.join(b, n) for b, _, ns in os.walk(step_dir) for n in ns
             if "/d/" in os.path.join(b, n)]
    return max(files, key=os.path.getsize)


def _damage(step_dir, kind):
    if kind == "truncated":
        path = _largest_array_file(step_dir)
        os.truncate(path, os.path.getsize(path) // 2)
    elif kind == "deleted":
        os.remove(_largest_array_file(step_dir))
    elif kind == "empty-extra-metadata":
        open(os.path.join(step_dir, "extra", "metadata"), "w").close()
    elif kind == "missing-state-metadata":
        os.remove(os.path.join(step_dir, "state", "_METADATA"))
    elif kind == "flipped":
        path = _largest_array_file(step_dir)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0x01]))


KINDS = ("truncated", "deleted", "empty-extra-metadata", "missing-state-metadata", "flipped")


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_newest_checkpoint_falls_back_and_is_set_aside(tmp_path, kind, capsys):
    directory = str(tmp_path / "checkpoints")
    _save_steps(directory)
    assert os.path.isfile(os.path.join(directory, "2", integrity.CHECKSUMS))  # Sealed at save.
    assert integrity.newest_good(directory) == (2, [])
    _damage(os.path.join(directory, "2"), kind)
    good, damaged = integrity.newest_good(directory)
    assert good == 1 and [s for s, _ in damaged] == [2], damaged
    # evaluate.py / convert_checkpoint.py (load_run): a one-line notice, the older step.
    assert checked_step(directory) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged checkpoint step 2" in err[0] and "using step 1" in err[0]
    with pytest.raises(ValueError, match="step-2 checkpoint is damaged"):
        checked_step(directory, 2)
    _damage(os.path.join(directory, "1"), "empty-extra-metadata")
    with pytest.raises(ValueError, match="step 1: extra/metadata is empty; no intact checkpoint"):
        checked_step(directory)
    integrity.set_aside(directory, 2)
    assert sorted(os.listdir(directory)) == ["1", "2.damaged"]  # Kept, not deleted.
    assert Checkpointer(directory).all_steps() == (1,)  # orbax does not see 2.damaged.


def test_workdir_plan_falls_back_and_prepare_moves_aside_and_cleans(tmp_path):
    config = _tiny_config()
    work = str(tmp_path / "run")
    release = workdir_lib.prepare(workdir_lib.plan(config, work), config)  # config.json
    release()
    directory = os.path.join(work, "checkpoints")
    _save_steps(directory)
    os.makedirs(os.path.join(directory, "3.orbax-checkpoint-tmp-17"))  # A killed save's.
    _damage(os.path.join(directory, "2"), "flipped")
    p = workdir_lib.plan(config, work)
    assert p.mode == "resume" and p.resume_step == 1 and [s for s, _ in p.damaged] == [2]
    first = p.notice.splitlines()[0]
    assert "step 2: state/" in first and "does not match its checksum" in first
    assert "using step 1" in first and "new --workdir" not in p.notice
    assert sorted(os.listdir(directory)) == ["1", "2", "3.orbax-checkpoint-tmp-17"]  # Read only.
    workdir_lib.prepare(p, config)()
    assert sorted(os.listdir(directory)) == ["1", "2.damaged"]
    # Every step damaged: the run starts again (the damaged ones are kept).
    _damage(os.path.join(directory, "1"), "deleted")
    p = workdir_lib.plan(config, work)
    assert p.mode == "restart" and "no intact checkpoint is left" in p.notice


def test_disk_full_during_a_save_is_one_line_and_leaves_no_tmp(tmp_path, monkeypatch):
    directory = str(tmp_path / "c")
    _save_steps(directory, (1,))
    ckpt = Checkpointer(directory, async_save=False)

    def full(step, **kwargs):  # As orbax reports it: wrapped, after a partial write.
        os.makedirs(os.path.join(directory, f"{step}.orbax-checkpoint-tmp-3", "state"))
        raise ValueError("Error writing: [Errno 28] No space left on device")
    monkeypatch.setattr(ckpt._manager, "save", full)
    with pytest.raises(OSError) as e:
        ckpt.save(2, {"w": jnp.ones(3)}, force=True)
    assert e.value.errno == errno.ENOSPC and "\n" not in str(e.value)
    assert "latest complete step is 1" in str(e.value)
    assert sorted(os.listdir(directory)) == ["1"]


# ----------------------------------------------------------------------------- SIGTERM

@pytest.mark.slow
@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers need the main thread")
def test_sigterm_saves_the_step_and_the_rerun_matches_an_uninterrupted_run(tmp_path,
                                                                          monkeypatch):
    """SIGTERM during RL step 2 of a run with periodic checkpoints off: step 2 finishes, is
    checkpointed, the run stops (Preempted); the same command resumes from it and logs
    exactly what an uninterrupted run logs (same program, same inputs, CPU: bitwise)."""
    config = _tiny_config(every=0)
    config.rl.steps, config.eval.every = 4, 0  # (The programs of test_checkpoint's runs.)
    full_dir, work = str(tmp_path / "full"), str(tmp_path / "run")
    full = loop.run(config, full_dir, progress=False)

    after_rl_step = loop.after_rl_step

    def signalled(r, step, *args):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return after_rl_step(r, step, *args)
    monkeypatch.setattr(loop, "after_rl_step", signalled)
    with pytest.raises(preempt.Preempted, match="RL step 2 is saved") as stopped:
        loop.run(config, work, progress=False)
    monkeypatch.setattr(loop, "after_rl_step", after_rl_step)
    assert stopped.value.step == 2
    assert sorted(os.listdir(os.path.join(work, "checkpoints"))) == ["2"]
    assert lock.LOCK not in os.listdir(work)  # Released.
    assert signal.getsignal(signal.SIGTERM) is not preempt._on_sigterm  # Handler restored.

    resumed = loop.run(config, work, progress=False)
    want = _comparable(read_metrics(os.path.join(full_dir, "metrics.jsonl")))
    assert _comparable(read_metrics(os.path.join(work, "metrics.jsonl"))) == want
    assert _state_leaves_equal(resumed["state"], full["state"])
    assert resumed["after_rl"] == full["after_rl"]
    # The finished run's last step is checkpointed too: its rerun refuses, nothing redone.
    assert integrity.steps(os.path.join(work, "checkpoints"))[-1] == config.rl.steps
    with pytest.raises(ConfigError, match="holds a finished run"):
        loop.run(config, work, progress=False)
    # evaluate.py / convert_checkpoint.py on the run with its newest step damaged: step 2.
    _damage(os.path.join(work, "checkpoints", str(config.rl.steps)), "truncated")
    from rlvr_jax.data.tokenizers import load_tokenizer
    _, params = load_run(work, tokenizer=load_tokenizer(config.tokenizer))
    assert jax.tree.structure(params) == jax.tree.structure(full["state"].params)
