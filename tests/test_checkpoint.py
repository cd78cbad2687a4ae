"""Checkpoints: exact resume of a run, a SIGKILL during a save, a NaN stop, the wrapper."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax.train import build, loop
from rlvr_jax.train import state as state_lib
from rlvr_jax.train.checkpoint import Checkpointer, nonfinite_leaves
from rlvr_jax.train.config import default_config
from rlvr_jax.train.logging import read_metrics
from rlvr_jax.train.errors import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")


def _tiny_config(**checkpoint):
    """A few-second run: tiny model on one device, 2 SFT steps, 5 RL steps of 4 x 4 samples.

    A random model rarely answers right, so a length penalty (DAPO overlong shaping), an
    entropy bonus and a KL term make the gradients non-zero; the KL term also puts the
    reference parameters into the checkpoint.
    """
    config = default_config()
    config.mesh.num_devices = 1
    config.data.max_prompt_len = 10
    config.sampling.max_new_tokens = 16
    config.rl.overlong_buffer = 8
    config.rl.entropy_coef = 1e-3
    config.rl.kl_coef = 1e-2
    config.sft.steps = 2
    config.sft.batch_size = 8
    config.rl.steps = 5
    config.rl.num_prompts = 4
    config.rl.num_samples = 4
    config.eval.num_prompts = 8
    config.eval.batch_size = 8
    config.eval.every = 2
    config.checkpoint.every = 2
    config.checkpoint.keep = 2
    for key, value in checkpoint.items():
        config.checkpoint[key] = value
    return config


def _comparable(records):
    """(phase, step, metrics) of each line, without wall-clock values."""
    return [(r["phase"], r["step"],
             {k: v for k, v in r.items() if k != "time" and not k.startswith("perf/")})
            for r in records]


def _state_leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


@pytest.mark.slow
def test_interrupted_and_resumed_run_matches_uninterrupted(tmp_path):
    """A run resumed from its step-2 checkpoint logs what the uninterrupted run logged.

    The interrupted run is the uninterrupted run's directory with the checkpoints after
    step 2 removed: what a run that died after step 2's save leaves behind (a death during
    a later save leaves only a tmp directory, see the kill test below). Its metrics.jsonl
    still holds the lines of steps 3-5 and the final evaluation; resuming must cut them
    and write them again, once, bitwise equal (same program, same inputs, CPU).
    """
    config = _tiny_config(keep=10)
    # The RL prompts: a set of 6 under the online filter (docs/data.md), so the checkpoints
    # also hold its per-prompt pass rates. The random policy solves nothing (rate < 0.2):
    # every prompt is skipped after its first visit and later batches are "forced" — the
    # resumed run must draw them in the same order.
    config.data.size = 6
    config.data.filter.enabled = True
    config.data.filter.low = 0.2
    config.data.filter.readmit_epochs = 0
    full_dir, workdir = str(tmp_path / "full"), str(tmp_path / "resumed")
    full = loop.run(config, full_dir, progress=False)
    # Saved at 0 (after the warm-up), every 2 steps, and the last step.
    assert Checkpointer(os.path.join(full_dir, "checkpoints")).all_steps() == (0, 2, 4, 5)

    shutil.copytree(full_dir, workdir)
    for step in ("4", "5"):
        shutil.rmtree(os.path.join(workdir, "checkpoints", step))
    os.remove(os.path.join(workdir, "summary.json"))
    resumed = loop.run(config, workdir, progress=False)

    # Same lines in the same order (no SFT or step-3 line twice), bitwise-equal values.
    want = _comparable(read_metrics(os.path.join(full_dir, "metrics.jsonl")))
    got = _comparable(read_metrics(os.path.join(workdir, "metrics.jsonl")))
    assert [(p, s) for p, s, _ in got] == [(p, s) for p, s, _ in want]
    assert [p for p, _, _ in got].count("sft") == config.sft.steps
    assert got == want
    assert any(m["train/update_norm"] > 0 for p, _, m in want if p == "rl")
    last_rl = [m for p, _, m in want if p == "rl"][-1]  # The filter acted (and resumed).
    assert last_rl["data/visited_fraction"] == 1.0 and last_rl["data/forced"] > 0
    assert _state_leaves_equal(resumed["state"], full["state"])
    assert resumed["after_rl"] == full["after_rl"]
    assert resumed["after_warmup"] == full["after_warmup"]
    with open(os.path.join(workdir, "summary.json")) as f:
        assert json.load(f)["after_rl"] == full["after_rl"]
    assert Checkpointer(os.path.join(workdir, "checkpoints")).all_steps() == (0, 2, 4, 5)

    # Killed during the warm-up (before any checkpoint): the same command starts it again
    # and ends with the uninterrupted run's file and results.
    killed = str(tmp_path / "killed")
    shutil.copytree(full_dir, killed)
    shutil.rmtree(os.path.join(killed, "checkpoints"))
    os.remove(os.path.join(killed, "summary.json"))
    with open(os.path.join(killed, "metrics.jsonl")) as f:
        first = f.readline()
    with open(os.path.join(killed, "metrics.jsonl"), "w") as f:
        f.write(first)
    again = loop.run(config, killed, progress=False)
    assert _comparable(read_metrics(os.path.join(killed, "metrics.jsonl"))) == want
    assert again["after_rl"] == full["after_rl"]

    # A finished run refuses the same command (nothing written), and trains on when asked.
    before = open(os.path.join(full_dir, "metrics.jsonl")).read()
    with pytest.raises(ConfigError, match="holds a finished run"):
        loop.run(config, full_dir, progress=False)
    assert open(os.path.join(full_dir, "metrics.jsonl")).read() == before
    config.rl.steps = 6
    loop.run(config, full_dir, progress=False)
    rows = [(r["phase"], r["step"]) for r in read_metrics(os.path.join(full_dir, "metrics.jsonl"))]
    assert len(rows) == len(set(rows)) and rows[-2:] == [("rl", 6), ("eval", 6)]
    assert rows[:-2] == [(p, s) for p, s, _ in want][:-1]  # Step 5's final eval: now 6's.


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    # The learning rate becomes NaN at the third update: steps 1 and 2 are good.
    make_optimizer = state_lib.make_optimizer

    def poisoned(**kwargs):
        return optax.chain(make_optimizer(**kwargs), optax.scale_by_schedule(
            lambda count: jnp.where(count >= 2, jnp.nan, 1.0)))

    monkeypatch.setattr(state_lib, "make_optimizer", poisoned)
    config = _tiny_config(every=1)
    config.sft.steps = 0
    config.eval.every = 0
    workdir = str(tmp_path / "nan")
    with pytest.raises(FloatingPointError, match=r"RL step 3.*last good checkpoint is step 2"):
        loop.run(config, workdir, progress=False)
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), max_to_keep=2)
    assert ckpt.latest_step() == 2
    abstract = jax.eval_shape(lambda: _fresh_rl_state(config))
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(
        x.shape, x.dtype, sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0])),
        abstract)
    state, extra = ckpt.restore(None, abstract)
    assert nonfinite_leaves(state) == []
    assert extra["loader"]["index"] == 2 * config.rl.num_prompts
    ckpt.close()
    rl_steps = [r["step"] for r in read_metrics(os.path.join(workdir, "metrics.jsonl"))
                if r["phase"] == "rl"]
    assert rl_steps == [1, 2]


def _fresh_rl_state(config):
    from rlvr_jax import models
    from rlvr_jax.data.tokenizers import load_tokenizer
    model_config = build.build_model_config(config, load_tokenizer(config.tokenizer))
    params = models.init_params(model_config, jax.random.PRNGKey(0))
    tx = state_lib.make_optimizer(learning_rate=config.rl.learning_rate)
    return state_lib.create_train_state(params, tx, jax.random.PRNGKey(0), ref_params=params)


_KILL_CHILD = textwrap.dedent("""
    import sys, time
    import jax, jax.numpy as jnp
    from orbax.checkpoint._src.path import atomicity
    from rlvr_jax.train.checkpoint import Checkpointer

    def state(scale):  # 48 MB of incompressible values in 24 arrays.
        return {f"w{i}": scale * jax.random.normal(jax.random.PRNGKey(i), (512, 1024))
                for i in range(24)}

    ckpt = Checkpointer(sys.argv[1], max_to_keep=1)
    ckpt.save(1, state(1.0), {"step": 1})
    ckpt.wait()
    slow_commit = atomicity.AtomicRenameTemporaryPath.finalize
    async def hang_before_commit(self, *args, **kwargs):  # the kill always lands mid-save
        time.sleep(600)
        return await slow_commit(self, *args, **kwargs)
    atomicity.AtomicRenameTemporaryPath.finalize = hang_before_commit
    ckpt.save(2, state(2.0), {"step": 2})
    print("saving", flush=True)
    time.sleep(600)
""")


def _bytes_under(path):
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path)
               for f in files)


def test_kill_during_save_keeps_the_previous_checkpoint(tmp_path):
    """SIGKILL a process while it writes step 2 (keep = 1): step 1 survives intact.

    The parent kills as soon as 1 MB of step 2's arrays is on disk, usually in the middle
    of the writes; the child's commit (the rename) is made to hang so that the kill lands
    before it even on a loaded machine.
    """
    directory = str(tmp_path / "ckpt")
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["RLVR_JAX_TEST_XLA_FLAGS"])
    child = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, directory], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        tmp = []
        while time.monotonic() < deadline and child.poll() is None:
            tmp = [n for n in os.listdir(directory) if n.startswith("2.")] \
                if os.path.isdir(directory) else []
            if tmp and _bytes_under(os.path.join(directory, tmp[0])) > 2**20:
                break
            time.sleep(0.01)
        assert tmp, f"step 2 never started (child exit code {child.poll()})"
        assert child.poll() is None
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    names = sorted(os.listdir(directory))
    assert "1" in names and "2" not in names, names
    assert any(n.startswith("2.") for n in names), names   # The partial save is on disk...

    ckpt = Checkpointer(directory, max_to_keep=1)
    assert ckpt.all_steps() == (1,)                          # ...but not a step.
    abstract = {f"w{i}": jax.ShapeDtypeStruct((512, 1024), jnp.float32,
                                              sharding=jax.sharding.SingleDeviceSharding(
                                                  jax.devices()[0])) for i in range(24)}
    state, extra = ckpt.restore(None, abstract)
    assert extra == {"step": 1}
    for i in range(24):
        want = np.asarray(jax.random.normal(jax.random.PRNGKey(i), (512, 1024)))
        assert np.array_equal(np.asarray(state[f"w{i}"]), want)
    # The directory is usable again: the next save lands and `keep` = 1 drops step 1.
    ckpt.save(2, state, {"step": 2}, force=True)
    ckpt.close()
    assert Checkpointer(directory).all_steps() == (2,)
    assert not [n for n in os.listdir(directory) if ".orbax-checkpoint-tmp" in n]  # Cleaned.


def test_checkpointer_keep_interval_sharding_and_checks(tmp_path):
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    params = {"w": jax.device_put(jnp.arange(8.0).reshape(4, 2), sharded), "b": jnp.ones(3)}
    tx = state_lib.make_optimizer(learning_rate=1e-2)
    state = state_lib.create_train_state(params, tx, jax.random.PRNGKey(0))
    with Checkpointer(tmp_path / "c", max_to_keep=2, save_interval_steps=2) as ckpt:
        assert ckpt.latest_step() is None
        started = [ckpt.save(s, state.replace(step=jnp.asarray(s, jnp.int32)), {"s": s})
                   for s in range(1, 6)]
        assert started == [True, True, False, True, False]  # The first save always writes.
        assert ckpt.save(5, state, {"s": 5}, force=True)
        ckpt.wait()
        assert ckpt.all_steps() == (4, 5)
        assert not ckpt.save(5, state, force=True)  # Already saved: a no-op.
        bad = state.replace(params={"w": params["w"] * jnp.nan, "b": params["b"]})
        with pytest.raises(FloatingPointError, match=r"\['w'\].*stays step 5"):
            ckpt.save(6, bad, force=True)
        assert ckpt.all_steps() == (4, 5)
        with pytest.raises(FileNotFoundError):
            ckpt.restore(2, state)
        # Restore onto a different layout: replicated instead of sharded over x.
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        target = state.replace(params={"w": jax.device_put(jnp.zeros((4, 2)), replicated),
                                       "b": params["b"]})
        restored, extra = ckpt.restore(4, target)
        assert extra == {"s": 4} and int(restored.step) == 4
        assert restored.params["w"].sharding == replicated
        assert _state_leaves_equal(restored.replace(step=state.step), state)
        # ... and onto a single device (a run written on 2 devices, resumed on 1).
        one = jax.sharding.SingleDeviceSharding(jax.devices()[3])
        single, _ = ckpt.restore(4, jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one), state))
        assert single.params["w"].sharding == one
        assert _state_leaves_equal(single.replace(step=state.step), state)
        assert json.loads(json.dumps(ckpt.read_extra())) == {"s": 5}
    with pytest.raises(ValueError, match="max_to_keep"):
        Checkpointer(tmp_path / "d", max_to_keep=0)


def test_restore_params_alone_and_metadata(tmp_path):
    params = {"w": jnp.arange(6.0).reshape(3, 2), "b": jnp.ones(2, jnp.bfloat16)}
    tx = state_lib.make_optimizer(learning_rate=1e-2)
    state = state_lib.create_train_state(params, tx, jax.random.PRNGKey(0), ref_params=params)
    with Checkpointer(tmp_path / "c") as ckpt:
        ckpt.save(3, state, {"phase": "rl"})
        ckpt.wait()
        meta = ckpt.metadata()
        assert meta["params"]["w"] == jax.ShapeDtypeStruct((3, 2), jnp.float32)
        assert meta["ref_params"]["b"] == jax.ShapeDtypeStruct((2,), jnp.bfloat16)
        alone = ckpt.restore_params()   # Saved shapes and dtypes, first device.
        assert jax.tree.structure(alone) == jax.tree.structure(params)
        assert alone["b"].dtype == jnp.bfloat16
        assert _state_leaves_equal(alone, params)
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
        on_mesh = jax.tree.map(lambda x: jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=jax.sharding.NamedSharding(
                mesh, jax.sharding.PartitionSpec())), params)
        ref = ckpt.restore_params(3, on_mesh, field="ref_params")
        assert ref["w"].sharding.mesh == mesh and _state_leaves_equal(ref, params)
        with pytest.raises(KeyError, match="value"):
            ckpt.restore_params(field="value")
