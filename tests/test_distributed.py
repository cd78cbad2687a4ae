"""`rlvr_jax.distributed`: the single-process paths, and two real CPU processes
joined by `jax.distributed` (gloo collectives) that share one mesh."""
import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from rlvr_jax import distributed, models, sharding
from rlvr_jax.train.checkpoint import Checkpointer
from tests import numerics
from tests._checkpoint_state import make_state
from tests._text_terms_case import rollout_rows, text_terms

WORKER = os.path.join(os.path.dirname(__file__), "_distributed_worker.py")
# The worker's model (tests/_distributed_worker.py).
CFG = models.presets.get("tiny", d_model=64, d_ff=128, n_heads=8, n_kv_heads=8, vocab_size=128)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gloo_available() -> bool:
    try:
        from jax._src.lib import _jax
    except ImportError:
        return False
    return hasattr(_jax, "make_gloo_tcp_collectives")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_cluster_env(monkeypatch):
    for name in distributed._CLUSTER_ENV:
        monkeypatch.delenv(name, raising=False)


def test_single_process_defaults(no_cluster_env):
    assert distributed.initialize(None) is False
    assert distributed.initialize(distributed.default_config()) is False
    assert distributed.initialize({"enabled": False}) is False
    assert distributed.is_main_process()
    assert distributed.process_count() == 1 and distributed.process_index() == 0
    distributed.sync("single")  # A no-op with one process.
    value = {"seed": np.int32(7)}
    assert distributed.broadcast_from_main(value) is value


@pytest.mark.parametrize("fields, match", [
    ({"enabled": False, "num_processes": 2}, "enabled=False"),
    ({"num_processes": 0}, ">= 1"),
    ({"num_processes": 2, "process_id": 2}, r"not in \[0, 2\)"),
    ({"coordinator_address": "127.0.0.1:1", "num_processes": 2}, "both"),
])
def test_initialize_rejects_bad_settings(no_cluster_env, fields, match):
    with pytest.raises(ValueError, match=match):
        distributed.initialize(fields)


def test_cluster_detection(monkeypatch, no_cluster_env):
    assert not distributed._cluster_detected()
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t1k-0")  # A single-host TPU VM.
    assert not distributed._cluster_detected()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    assert not distributed._cluster_detected()
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t1k-0,t1k-1")
    assert distributed._cluster_detected()


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(not _gloo_available(), reason="this jaxlib has no gloo CPU collectives")
def test_two_processes_share_one_mesh(tmp_path):
    num_processes, local_devices = 2, 4
    mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 1})  # This process: 8 devices.
    rules = sharding.get_rules("fsdp")
    state = make_state(CFG, mesh, rules)
    ckpt_in, ckpt_out = str(tmp_path / "one"), str(tmp_path / "two")
    with Checkpointer(ckpt_in) as ckpt:
        ckpt.save(1, state, {"written_by": 1}, force=True)
    np.savez(os.path.join(ckpt_in, "values.npz"), **_values(state))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["RLVR_JAX_CACHE_DIR"] = jax.config.jax_compilation_cache_dir or ""
    procs = [subprocess.Popen(
        [sys.executable, WORKER, str(port), str(num_processes), str(i), str(local_devices),
         ckpt_in, ckpt_out],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        for i in range(num_processes)]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    results = []
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-3000:]
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, out[-3000:]
        results.append(json.loads(lines[0][len("RESULT "):]))

    assert [r["process_index"] for r in results] == [0, 1]
    assert [r["main"] for r in results] == [True, False]
    for r in results:
        assert r["process_count"] == 2
        assert r["global_devices"] == num_processes * local_devices
        assert r["local_devices"] == local_devices
        # The global sum of a batch whose rows were loaded half by each process.
        # Squares of small integers (< 100) whose partial sums stay below 2^24: exact.
        assert r["sum_sq"] == r["expected_sum_sq"]
        # One hybrid mesh over both processes: fsdp crosses them, tensor stays inside.
        assert r["mesh"] == {"data": 1, "fsdp": 4, "tensor": 2}
        assert r["embed_sharding"] == "P('tensor', 'fsdp')"
        assert r["embed_local_shape"] == [128 // 2, 64 // 4]
        # Means over the logits of the same forward in two orders (mesh across processes vs
        # one device): the forward's reordering bound plus the mean's sum over every logit.
        chain = numerics.forward_chain(CFG, 16) + r["logits_size"]
        np.testing.assert_allclose(r["model_stats"], r["single_device_stats"], rtol=0,
                                   atol=numerics.reorder_atol(chain, r["max_abs_logit"]))
        # A shared-prompt rollout across the processes samples what one device samples over
        # the copied cache; log-probs: the same forward in other orders (+ the combine).
        got = r["shared_rollout"]
        assert got["tokens"] == got["want_tokens"]
        numerics.assert_forward_close(got["logprobs"], got["want_logprobs"], CFG, 6 + 6,
                                      extra=4 + numerics.TRANSCENDENTAL_U)
    # Each process loaded a disjoint half of the rows.
    assert sorted(tuple(r["rows"]) for r in results) == [(0, 16), (16, 32)]
    # Both processes computed the same sharded results.
    assert results[0]["sum_sq"] == results[1]["sum_sq"]
    assert results[0]["model_stats"] == results[1]["model_stats"]


    # Checkpoints move between process counts bit for bit: the 2 processes restored the
    # 1-process checkpoint exactly (each device holding an eighth of
    # the embedding's columns) ...
    for r in results:
        assert r["restore_1to2_exact"] and r["restore_1to2_extra"] == {"written_by": 1}
        assert r["restored_local_shape"] == [CFG.vocab_size,
                                             CFG.d_model // (num_processes * local_devices)]
    # ... and one process restores what the 2 processes wrote together, exactly.
    with Checkpointer(ckpt_out) as ckpt:
        restored, extra = ckpt.restore(None, state)
    assert extra == {"written_by": num_processes}
    saved = np.load(os.path.join(ckpt_out, "values.npz"))
    got = _values(restored)
    assert sorted(got) == sorted(saved.files)
    for name in saved.files:
        np.testing.assert_array_equal(got[name], saved[name], err_msg=name)
    # Host scoring: process 0 scored rows 0-3, process 1 rows 4-6 (`distributed.my_rows`);
    # both got every row back, and the one failing sample counted once.
    for r in results:
        assert r["scored"] == [[0, 1, 0, 3, 4, 5, 6], [0, 0, 0, 0, 1, 1, 1], 1]
        assert r["differ_error"].startswith("data.task=demo: the batch")
        assert "processes [1]" in r["differ_error"]
    # Label-free and process rewards of a rollout spread over both processes: the same
    # texts, rewards, step rewards and metrics as in one process. The same host arithmetic
    # on the same values (gathered, not recomputed): equal, bit for bit.
    from rlvr_jax.data.tokenizers import load_tokenizer
    tok = load_tokenizer("builtin")
    want = text_terms(tok, *rollout_rows(tok))
    assert want["metrics"]["reward/majority"] > 0 and any(map(any, want["step_ends"]))
    for r in results:
        assert r["text_terms_spread"]
        assert r["text_terms"] == want
        assert r["sigterm_none"] is False and r["sigterm_one"] is True  # Both stop alike.
        assert r["lock_refusal"] and "in use by" in r["lock_refusal"]


def _values(tree) -> dict:
    return {jax.tree_util.keystr(k): np.asarray(v)
            for k, v in jax.tree_util.tree_leaves_with_path(distributed.to_host(tree))}


# A quickstart-like run small enough for the suite: every batch divisible by 4 devices.
RUN_FLAGS = ["--config", os.path.join(REPO, "configs", "quickstart.py"),
             "--config.sft.steps=3", "--config.sft.batch_size=8", "--config.rl.steps=2",
             "--config.rl.num_prompts=4", "--config.rl.num_samples=2",
             "--config.sampling.max_new_tokens=16", "--config.eval.num_prompts=8",
             "--config.eval.batch_size=8", "--config.eval.every=0",
             "--config.checkpoint.every=0", "--config.log_samples_every=0",
             "--config.log_every=1", "--config.mesh.num_devices=0"]


def _run_env(devices: int = 0) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = os.environ.get("RLVR_JAX_TEST_XLA_FLAGS", "") + (
        f" --xla_force_host_platform_device_count={devices}" if devices else "")
    env["RLVR_JAX_NO_PROGRESS"] = "1"
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if jax.config.jax_compilation_cache_dir:
        env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1"
    return env


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not _gloo_available(), reason="this jaxlib has no gloo CPU collectives")
def test_two_processes_train_like_one(tmp_path):
    """scripts/launch.py: 2 processes x 2 CPU devices train as 1 process x 4 devices does."""
    from rlvr_jax.train.logging import read_metrics
    train = os.path.join(REPO, "scripts", "train.py")
    two = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "scripts", "launch.py"), "--processes", "2",
         "--devices-per-process", "2", "--", train, "--workdir", str(tmp_path / "two"),
         *RUN_FLAGS], cwd=REPO, env=_run_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    one = subprocess.run([sys.executable, train, "--workdir", str(tmp_path / "one"), *RUN_FLAGS],
                         cwd=REPO, env=_run_env(4), capture_output=True, text=True, timeout=240)
    out, _ = two.communicate(timeout=240)
    assert one.returncode == 0, one.stderr[-3000:]
    assert two.returncode == 0, out[-3000:]
    # Only process 0 wrote the run's files; both printed nothing twice.
    assert out.count("[0] [after RL]") == 1 and "[1] [after RL]" not in out
    a = read_metrics(str(tmp_path / "two" / "metrics.jsonl"))
    b = read_metrics(str(tmp_path / "one" / "metrics.jsonl"))
    assert [(r["phase"], r["step"]) for r in a] == [(r["phase"], r["step"]) for r in b]
    assert [sorted(r) for r in a] == [sorted(r) for r in b]
    assert os.path.exists(tmp_path / "two" / "summary.json")
    # The first warm-up loss: the same parameters, data and per-device programs on a 4-device
    # mesh; only the cross-device sum of the 4 per-device partial sums (gloo's all-reduce
    # between processes vs XLA's in-process one) is done in another order: a chain of 4
    # additions of terms at most the loss (all partials are NLL sums of one sign; the token
    # count is an exact integer). Later steps inherit that difference through the updates.
    first = [r["sft/loss"] for r in (a[0], b[0])]
    np.testing.assert_allclose(first[0], first[1], rtol=0,
                               atol=numerics.reorder_atol(4, abs(first[1])))
    # Greedy held-out pass@1 after RL: argmax flips need near-ties (within the accumulated
    # reordering noise) between the top two logits; the bar is a prompt or two.
    evals = [[r["eval/pass@1"] for r in m if r["phase"] == "eval"] for m in (a, b)]
    assert abs(evals[0][-1] - evals[1][-1]) * 8 <= 2, evals
    assert all(np.isfinite(r.get("train/loss", 0.0)) for r in a)


@pytest.mark.parametrize("tied", [True, False])
def test_hf_import_reads_slices_into_the_same_values(tmp_path, tied):
    """`hf_slices.load_hf_params_sharded` on an 8-device fsdp_tp mesh (heads, kv heads, MLP,
    vocabulary and layers all split) gives exactly `hf.load_hf_checkpoint`'s values."""
    from rlvr_jax.models import hf, hf_slices
    cfg = models.presets.get("qwen2.5-0.5b", d_model=64, d_ff=128, n_heads=8, n_kv_heads=2,
                             head_dim=8, n_layers=2, vocab_size=128, tie_embeddings=tied,
                             dtype="float32", param_dtype="float32")
    hf.save_hf_checkpoint(models.init_params(cfg, jax.random.PRNGKey(1)), cfg, tmp_path,
                          max_shard_bytes=40_000)  # Several files.
    _, want = hf.load_hf_checkpoint(tmp_path)
    mesh = sharding.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    shapes = hf_slices.shapes(cfg)
    shardings = sharding.logical_to_mesh_sharding(models.param_logical_axes(cfg), mesh,
                                                  sharding.get_rules("fsdp_tp"), shapes)
    got = hf_slices.load_hf_params_sharded(str(tmp_path), cfg, shardings)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    # Only slices were read: each device's callback read exactly its shard's elements.
    read = []
    reader = hf._Reader(str(tmp_path))

    class Counting:
        def __init__(self, name):
            self.view = reader.get_slice(name)

        def __getitem__(self, index):
            out = self.view[index]
            read.append(out.size)
            return out
    hf_slices._build(Counting, cfg, shardings)
    reader.close()
    assert sum(read) == sum(s.data.size for x in jax.tree.leaves(got)
                            for s in x.addressable_shards)
    for (path, a), b, s in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want),
                               jax.tree.leaves(shardings)):
        assert a.sharding == s, jax.tree_util.keystr(path)
        np.testing.assert_array_equal(np.asarray(a), b, err_msg=jax.tree_util.keystr(path))
    with pytest.raises(ValueError, match="has shape"):
        hf_slices.load_hf_params_sharded(str(tmp_path), cfg.replace(d_ff=64), shardings)


def test_reward_model_reads_slices_into_the_same_values(tmp_path):
    """The reward model of a run (`scoring.open_reward_model` + `load_reward_params` with a
    `Placer`'s shardings, as `build.reward_model_params` does) is born sharded on an
    8-device fsdp_tp mesh with exactly `load_hf_reward_model`'s whole values: trunk and a
    2-label score head."""
    from rlvr_jax import scoring
    from rlvr_jax.models import reward_model
    from rlvr_jax.train.placer import Placer
    cfg = models.presets.get("qwen2.5-0.5b", d_model=64, d_ff=128, n_heads=8, n_kv_heads=2,
                             head_dim=8, n_layers=2, vocab_size=128, tie_embeddings=True,
                             dtype="float32", param_dtype="float32")
    params = reward_model.init_reward_params(cfg, jax.random.PRNGKey(2), num_labels=2)
    reward_model.save_hf_reward_model(params, cfg, tmp_path, max_shard_bytes=40_000)
    _, want = reward_model.load_hf_reward_model(tmp_path)
    mesh = sharding.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    placer = Placer(mesh, sharding.get_rules("fsdp_tp"), cfg)
    rm = scoring.open_reward_model(str(tmp_path), vocab_size=128, max_length=64)
    got = scoring.load_reward_params(str(tmp_path), rm, placer.shardings)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    shardings = placer.shardings(want, models.reward_logical_axes(rm.config))
    for (path, a), b, s in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want),
                               jax.tree.leaves(shardings)):
        assert a.sharding == s, jax.tree_util.keystr(path)
        np.testing.assert_array_equal(np.asarray(a), b, err_msg=jax.tree_util.keystr(path))
    assert not got["score"]["kernel"].sharding.is_fully_replicated  # D split over fsdp.
    assert not got["trunk"]["embed"].sharding.is_fully_replicated


def test_launch_stops_the_others_when_one_fails():
    """scripts/launch.py: process 1 fails at once, process 0 would run for a minute: both
    end, the status is process 1's, every line carries its process's prefix."""
    code = ("import sys, time; i = [a for a in sys.argv if 'process_id=' in a][0][-1]; "
            "print('hello', flush=True); sys.exit(3) if i == '1' else time.sleep(60)")
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "launch.py"), "--processes", "2", "--",
         sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["[0] hello", "[1] hello"]
    assert "process 1 exited with status 3" in proc.stderr
