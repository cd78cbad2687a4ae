"""Code sandbox: results, and containment of hostile programs (each must score 0, caller lives)."""
import os
import socket
import stat
import time

import pytest

from rlvr_jax.rewards import code as rc

FAST = rc.SandboxConfig(timeout_s=2.0, memory_mb=256)
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
IS_ROOT = os.geteuid() == 0


def _nobody_processes():
    """Live (non-zombie) processes of the sandbox user (root runs: uid of 'nobody')."""
    import pwd
    uid = pwd.getpwnam("nobody").pw_uid if IS_ROOT else os.getuid()
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                n += state != "Z"
            except OSError:
                pass
    return n


def _no_more_nobody_processes_than(before, within=8.0):
    """True once the sandbox user has at most `before` live processes, polling for up to
    `within` seconds: other xdist workers' sandboxes (≤ 3 s each) come and go, while an
    escaped child of these tests would sleep 20-60 s and keep the count up."""
    deadline = time.monotonic() + within
    while _nobody_processes() > before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_correct_partial_and_io():
    ok = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=FAST)
    assert (ok.passed, ok.total, ok.status, ok.all_passed) == (2, 2, "ok", True)
    half = rc.run_tests("def add(a, b):\n    return 3\n", ADD_TESTS, config=FAST)
    assert half.pass_fraction == 0.5 and not half.all_passed
    io = rc.run_tests("a, b = map(int, input().split())\nprint(a * b)\n",
                      [{"input": "3 4\n", "output": "12"}, {"input": "2 5", "output": "11"}],
                      config=FAST, mode="io")
    assert (io.passed, io.total) == (1, 2)
    completion = "Here:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    assert rc.code_reward(completion, ADD_TESTS, config=FAST) == 1.0
    assert rc.code_reward("```python\ndef add(a, b):\n    return 3\n```", ADD_TESTS, config=FAST,
                          partial_credit=False) == 0.0


def test_isolation_is_reported():
    res = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=FAST)
    iso = res.isolation
    if IS_ROOT:  # CI and these machines: every layer must be active
        assert iso["user_dropped"] and iso["uid"] != 0
        assert iso["net"] and iso["fs"] and iso["pid"], iso
        strict = rc.SandboxConfig(timeout_s=2.0, require_isolation=True)
        assert rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=strict).all_passed
    else:
        assert iso["uid"] == os.getuid()


def test_bad_arguments():
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", [], config=FAST)
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", ["assert x"], config=FAST, mode="stdin")
    with pytest.raises(ValueError):
        rc.run_tests("x = 1", [{"input": ""}], config=FAST, mode="io")
    with pytest.raises(ValueError):
        rc.SandboxConfig(timeout_s=0)


# ---------------------------------------------------------------- containment

def test_infinite_loop_times_out():
    start = time.monotonic()
    res = rc.run_tests("while True:\n    pass\n", ["assert True"],
                       config=rc.SandboxConfig(timeout_s=1.0))
    assert res.status == "timeout" and res.passed == 0
    assert time.monotonic() - start < 5.0


def test_sleeping_children_are_killed():
    before = _nobody_processes()
    prog = ("import os, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
            "time.sleep(60)\n")
    res = rc.run_tests(prog, ["assert True"], config=rc.SandboxConfig(timeout_s=1.0))
    assert res.passed == 0
    assert _no_more_nobody_processes_than(before)


def test_fork_bomb_is_bounded():
    # Bounded on purpose: at most 200 sleeping children even if containment failed.
    before = _nobody_processes()
    prog = ("import os, time\n"
            "spawned = 0\n"
            "for _ in range(200):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        time.sleep(20)\n        os._exit(0)\n"
            "    spawned += 1\n")
    res = rc.run_tests(prog, ["assert spawned >= 200"],
                       config=rc.SandboxConfig(timeout_s=3.0, processes=16))
    assert res.passed == 0
    assert _no_more_nobody_processes_than(before)


def test_huge_allocation_fails():
    prog = "x = bytearray(10 * 1024 ** 3)\ndef f():\n    return 1\n"
    res = rc.run_tests(prog, ["assert f() == 1"], config=FAST)
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
    res = rc.run_tests(prog, ["assert wrote", "assert inside == 'ok'"], config=FAST)
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
                       config=FAST)
    assert res.status == "ok"
    assert res.passed == 1  # the secret is not found; only the minimal environment is present


def test_output_flood_is_cut():
    start = time.monotonic()
    res = rc.run_tests("while True:\n    print('x' * 10000)\n", ["assert True"],
                       config=rc.SandboxConfig(timeout_s=3.0, output_bytes=1 << 16))
    assert res.passed == 0
    assert len(res.output_tail) <= 2000
    flood_io = rc.run_tests("while True:\n    print('y' * 10000)\n",
                            [{"input": "", "output": "y"}],
                            config=rc.SandboxConfig(timeout_s=3.0, output_bytes=1 << 16), mode="io")
    assert flood_io.passed == 0
    assert time.monotonic() - start < 8.0


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
        res = rc.run_tests(prog, ["assert connected"], config=FAST)
    finally:
        server.close()
    assert res.status == "ok" and res.passed == 0


def test_forged_results_and_exit_tricks_score_zero():
    forge = ("import os, sys\n"
             "for i in range(5):\n    print(f'ok {i}')\n"
             "for fd in range(3, 20):\n"
             "    try:\n        os.write(fd, b'ok 0\\nok 1\\ndone\\n')\n    except OSError:\n        pass\n"
             "os._exit(0)\n")
    res = rc.run_tests(forge, ADD_TESTS, config=FAST)
    assert res.passed == 0 and res.status == "crashed"
    exit_in_test = "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    assert rc.run_tests(exit_in_test, ADD_TESTS, config=FAST).passed == 0


def test_caller_keeps_working_after_hostile_runs():
    rc.run_tests("import os\nos.kill(os.getppid(), 9)\n", ["assert True"], config=FAST)
    res = rc.run_tests("def add(a, b):\n    return a + b\n", ADD_TESTS, config=FAST)
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
