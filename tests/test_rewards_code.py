"""Code sandbox: results, and containment of hostile programs (each must score 0, caller lives)."""
import os
import socket
import stat
import time

import pytest

from rlvr_jax.rewards import code as rc

# For programs that end by themselves (honest or not): a budget they cannot hit on a loaded
# machine. Only the tests of a program that must be killed use a short timeout.
CFG = rc.SandboxConfig(timeout_s=600.0, memory_mb=256)
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
IS_ROOT = os.geteuid() == 0


# A program's first lines: it takes the name (prctl PR_SET_NAME), and every process it forks
# inherits it.
NAMING = "import ctypes\nctypes.CDLL(None).prctl(15, {!r}, 0, 0, 0)\n"


def _named(name):
    """Live (non-zombie) processes called `name` (``/proc/PID/comm``)."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() != name:
                        continue
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                n += state != "Z"
            except OSError:
                pass
    return n


def _escapee_name(tag):
    """A name for this test's sandboxed processes (other tests' sandboxes come and go), after
    checking that a sandboxed program can take it."""
    name = f"rlvr{os.getpid()}{tag}"[:15]
    prog = NAMING.format(name.encode()) + "name = open('/proc/self/comm').read().strip()\n"
    res = rc.run_tests(prog, [f"assert name == {name!r}"], config=CFG)
    assert res.passed == 1, res
    return name


def _wait_until_none_named(name):
    """Returns once no process is called `name`. Killed with their program's PID namespace,
    a program's processes are gone a moment after it; escaped, they would sleep (10 min)
    past the test's hang guard."""
    while _named(name):
        time.sleep(0.2)


def test_correct_partial_and_io():
    ok = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=CFG)
    assert (ok.passed, ok.total, ok.status, ok.all_passed) == (2, 2, "ok", True)
    half = rc.run_tests("def add(a, b):\n    return 3\n", ADD_TESTS, config=CFG)
    assert half.pass_fraction == 0.5 and not half.all_passed
    io = rc.run_tests("a, b = map(int, input().split())\nprint(a * b)\n",
                      [{"input": "3 4\n", "output": "12"}, {"input": "2 5", "output": "11"}],
                      config=CFG, mode="io")
    assert (io.passed, io.total) == (1, 2)
    completion = "Here:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    assert rc.code_reward(completion, ADD_TESTS, config=CFG) == 1.0
    assert rc.code_reward("```python\ndef add(a, b):\n    return 3\n```", ADD_TESTS, config=CFG,
                          partial_credit=False) == 0.0


def test_isolation_is_reported():
    res = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=CFG)
    iso = res.isolation
    if IS_ROOT:  # CI and these machines: every layer must be active
        assert iso["user_dropped"] and iso["uid"] != 0
        assert iso["net"] and iso["fs"] and iso["pid"], iso
        strict = rc.SandboxConfig(timeout_s=600.0, require_isolation=True)
        assert rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=strict).all_passed
    else:
        assert iso["uid"] == os.getuid()


def test_bad_arguments():
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", [], config=CFG)
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", ["assert x"], config=CFG, mode="stdin")
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", [{"input": ""}], config=CFG, mode="io")
    with pytest.raises(ValueError):
        rc.SandboxConfig(timeout_s=0)


# ---------------------------------------------------------------- containment

def test_infinite_loop_times_out():
    res = rc.run_tests("while True:\n    pass\n", ["assert True"],
                       config=rc.SandboxConfig(timeout_s=1.0))
    assert res.status == "timeout" and res.passed == 0
    # Killed by the sandbox server at its own timeout (the server's reply carries the
    # isolation report), not given up by the caller's overall deadline (no reply).
    assert res.isolation


@pytest.mark.timeout(240)  # The hang guard: escaped children would never be gone.
def test_sleeping_children_are_killed():
    name = _escapee_name("s")
    prog = (NAMING.format(name.encode()) + "import os, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
            "time.sleep(600)\n")
    res = rc.run_tests(prog, ["assert True"], config=rc.SandboxConfig(timeout_s=1.0))
    assert res.status == "timeout" and res.passed == 0
    _wait_until_none_named(name)


@pytest.mark.timeout(240)  # The hang guard: escaped children would never be gone.
def test_fork_bomb_is_bounded():
    # Bounded on purpose: at most 200 sleeping children even if containment failed.
    name = _escapee_name("f")
    prog = (NAMING.format(name.encode()) + "import os, time\n"
            "spawned = 0\n"
            "for _ in range(200):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n"
            "    spawned += 1\n")
    # The program ends by itself once a fork fails (its pids cgroup, else RLIMIT_NPROC),
    # within any budget.
    res = rc.run_tests(prog, ["assert spawned >= 200"],
                       config=rc.SandboxConfig(timeout_s=600.0, processes=16))
    assert res.status == "ok" and res.passed == 0
    _wait_until_none_named(name)


def test_huge_allocation_fails():
    prog = "x = bytearray(10 * 1024 ** 3)\ndef f():\n    return 1\n"
    res = rc.run_tests(prog, ["assert f() == 1"], config=CFG)
    assert res.passed == 0


def test_writes_outside_workdir_fail(tmp_path):
    os.chmod(tmp_path, 0o777)  # even a world-writable directory of the caller is out of reach
    targets = [str(tmp_path / "escape.txt"), "/tmp/rlvr_escape.txt", "/var/tmp/rlvr_escape.txt",
               "/dev/shm/rlvr_escape.txt", os.path.join(os.path.dirname(__file__), "escape.txt")]
    prog = ("import os\nwrote = []\n"
            f"for p in {targets!r}:\n"
            "    try:\n        open(p, 'w').write('x')\n        wrote.append(p)\n"
            "    except OSError:\n        pass\n"
            "open('inside.txt', 'w').write('ok')\n"
            "inside = open('inside.txt').read()\n")
    res = rc.run_tests(prog, ["assert wrote", "assert inside == 'ok'"], config=CFG)
    assert res.status == "ok"
    if IS_ROOT:
        assert res.passed == 1  # only the write inside its own directory worked
    for p in targets:
        assert not os.path.exists(p), p


def test_parent_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("RLVR_TEST_SECRET", "hunter2-do-not-leak")
    prog = ("import os, glob\n"
            "found = 'RLVR_TEST_SECRET' in os.environ\n"
            "for p in glob.glob('/proc/*/environ'):\n"
            "    try:\n        found = found or b'RLVR_TEST_SECRET' in open(p, 'rb').read()\n"
            "    except OSError:\n        pass\n"
            "keys = sorted(os.environ)\n")
    res = rc.run_tests(prog, ["assert found", "assert [k for k in keys if k not in {'PATH', "
                              "'HOME', 'LANG', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED', "
                              "'LC_CTYPE'}] == []"],
                       config=CFG)
    assert res.status == "ok"
    assert res.passed == 1  # the secret is not found; only the minimal environment is present


def test_output_flood_is_cut():
    # Cut by the file-size limit (the write fails), not by the clock: a budget out of reach.
    flood_cfg = rc.SandboxConfig(timeout_s=600.0, output_bytes=1 << 16)
    res = rc.run_tests("while True:\n    print('x' * 10000)\n", ["assert True"],
                       config=flood_cfg)
    assert res.passed == 0 and res.status != "timeout"
    assert len(res.output_tail) <= 2000
    flood_io = rc.run_tests("while True:\n    print('y' * 10000)\n",
                            [{"input": "", "output": "y"}], config=flood_cfg, mode="io")
    assert flood_io.passed == 0 and flood_io.status != "timeout"


def test_network_is_blocked():
    if not IS_ROOT:
        pytest.skip("network namespace needs root (or unprivileged user namespaces)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    prog = ("import socket\nconnected = False\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
            "    connected = True\n"
            "except OSError:\n    pass\n")
    try:
        res = rc.run_tests(prog, ["assert connected"], config=CFG)
    finally:
        server.close()
    assert res.status == "ok" and res.passed == 0


def test_forged_results_and_exit_tricks_score_zero():
    forge = ("import os, sys\n"
             "for i in range(5):\n    print(f'ok {i}')\n"
             "for fd in range(3, 20):\n"
             "    try:\n        os.write(fd, b'ok 0\\nok 1\\ndone\\n')\n    except OSError:\n        pass\n"
             "os._exit(0)\n")
    res = rc.run_tests(forge, ADD_TESTS, config=CFG)
    assert res.passed == 0 and res.status == "crashed"
    exit_in_test = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    assert rc.run_tests(exit_in_test, ADD_TESTS, config=CFG).passed == 0


def test_caller_keeps_working_after_hostile_runs():
    rc.run_tests("import os\nos.kill(os.getppid(), 9)\n", ["assert True"], config=CFG)
    res = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=CFG)
    assert res.all_passed


@pytest.mark.skipif(not IS_ROOT, reason="the interpreter check applies to root callers")
def test_interpreter_must_be_usable_by_the_sandbox_user(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    exe = private / "python3"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    with pytest.raises(RuntimeError, match="no Python interpreter"):
        rc.find_sandbox_python(rc.SandboxConfig(python=str(exe)))
    assert rc._world_executable(rc.find_sandbox_python())
