"""A sandbox that holds against its siblings: each attack a program can make on the other
programs of its batch, of its GRPO group or of its host (issue 47), through the public
code-reward API only. Each hostile program scores 0 (or is contained) while an honest one in
the same batch still scores 1.

Assumes what CI and these machines have (x86-64, run as root, user namespaces allowed, a
writable cgroup `pids` hierarchy); the tests that need root skip without it.
"""
import ctypes
import os
import platform
import shutil
import socket
import stat
import tempfile
import threading

import pytest

from rlvr_jax import rewards, tasks
from rlvr_jax.multiturn.tools import PythonTool
from rlvr_jax.rewards import _sandbox
from rlvr_jax.rewards import code as rc
from rlvr_jax.scoring import host_reward as components

IS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not IS_ROOT, reason="the sandbox's user drop needs root")
# A per-program process budget needs a writable cgroup-v1 pids hierarchy (these machines);
# elsewhere the sandbox reports pids="rlimit" (docs/verifiers.md) and siblings share one.
PIDS_CGROUP = IS_ROOT and os.access("/sys/fs/cgroup/pids", os.W_OK)
# Programs that end by themselves get a budget they cannot hit on a loaded machine.
CFG = rc.SandboxConfig(timeout_s=600.0, memory_mb=256)
INPUTS = (4, 7, 11)
TESTS = [f"assert f({x}) == {5 * x + 3}" for x in INPUTS]
NAMING = "import ctypes\nctypes.CDLL(None).prctl(15, {!r}, 0, 0, 0)\n"
_libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture(scope="module")
def isolation():
    """What the sandbox reports it holds here (`CodeResult.isolation` of an honest run)."""
    return rc.run_tests(honest("probe"), TESTS, config=CFG).isolation


def honest(tag):
    """A right program, distinct per test (no result cached from another test)."""
    return f"def f(x):\n    return x * 5 + 3  # honest {tag}\n"


def fenced(program):
    return f"```python\n{program}```\n"


def score(programs, tests=TESTS, mode="assert", config=CFG, parallel=2):
    """`code_rewards` of each program (one batch, `parallel` at once)."""
    return [float(r) for r in rc.code_rewards([fenced(p) for p in programs],
                                              [{"tests": tests, "mode": mode}] * len(programs),
                                              config=config, parallel=parallel)]


# Scans the readable memory of its own process for `pattern` (bytes regex with one group)
# and returns the last match, else "".
# Python objects first (gc: the server's pending jobs, before issue 47), then raw memory
# (after making itself dumpable, so that /proc/self/mem is its own to read).
SCAN = """
import ctypes, gc, re
def scan(pattern):
    found = ''
    for obj in gc.get_objects():
        for v in (obj.values() if isinstance(obj, dict) else ()):
            if isinstance(v, str):
                for m in re.finditer(pattern, v.encode()):
                    found = m.group(1).decode()
    if found:
        return found
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb') as mem:
        for line in maps:
            addr, perms, rest = line.split(None, 2)
            lo, hi = addr.split('-')
            lo, hi = int(lo, 16), int(hi, 16)
            if 'r' not in perms or hi - lo > 1 << 26:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            for m in re.finditer(pattern, data):
                found = m.group(1).decode()
    return found
"""


@pytest.fixture
def visible_dir():
    """A root-owned directory every sandboxed program can see (not under /tmp, which each
    program gets fresh), removed afterwards."""
    if not IS_ROOT:
        pytest.skip("needs root")
    try:
        path = tempfile.mkdtemp(prefix="rlvr_test47_", dir="/")
    except OSError as e:  # A read-only /: no place outside /tmp that programs all see.
        pytest.skip(f"cannot make a directory in /: {e}")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- theft from a sibling

def test_memory_theft_in_a_code_rewards_batch():
    thief = SCAN + ("EXPR = scan(rb'return (x \\* \\d+ \\+ \\d+)  # honest')\n"
                    "def f(x):\n    return eval(EXPR) if EXPR else 0\n")
    # The honest program first: before issue 47 the thief's process (a fork of the server)
    # held its text; now no process of a program ever held another job's data.
    assert score([honest("batch"), thief]) == [1.0, 0.0]
    assert score([thief, honest("batch2")]) == [0.0, 1.0]


def test_memory_theft_in_the_synthesis_training_path():
    task = tasks.get("synthesis")
    ex = task.generate(1, seed=47)[0]
    steal = SCAN + "EXPR = scan(rb'return (x\\*\\d+\\+\\d+)')\n"
    # A fixed one-line answer, the same for every prompt: what a policy could learn.
    answer = (f"(lambda g: exec({steal!r}, g) or "
              "(eval(g['EXPR'], {'x': x}) if g['EXPR'] else 0))({})")
    texts = [ex.solution, f"#### {answer}", ex.solution.replace("####", "#### 0+")]
    # The trainer's host scoring with num_workers=0: `code_component` per sample in turn.
    got = [components.code_component(t, ex, task=task) for t in texts]
    assert got == [1.0, 0.0, 1.0]


def test_memory_theft_between_python_tool_calls():
    tool = PythonTool(call_end_ids=(98,), max_obs_tokens=16, timeout_s=60.0)
    thief = SCAN.replace("[", "(").replace("]", ")") + "print(scan(rb'(secret-\\d+)') or 'none')\n"
    assert "[" not in thief and "]" not in thief  # the call's body is after the last "["
    replies = tool.respond_batch([None, None], ["[print('secret-4711')]", f"[{thief}]"])
    assert replies[0].text == " secret-4711"
    assert not replies[1].error and replies[1].text == " none"


# ---------------------------------------------------------------- process containment

def _named(name):
    """Live (non-zombie) processes called `name`."""
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                comm, rest = f.read().split("(", 1)[1].rsplit(")", 1)
            n += comm == name and rest.split()[0] != "Z"
        except OSError:
            pass
    return n


@pytest.mark.timeout(120)
def test_no_process_survives_its_verdict(isolation):
    if not (isolation.get("pid") and isolation.get("init")):
        pytest.skip("no PID namespace with the sandbox's init here: nothing kills a "
                    "program's detached children at its verdict")
    name = f"rlvr47s{os.getpid()}"[:15]
    # The program clears its parent-death signal (and so does its child) and sleeps: killed
    # at the timeout, nothing of it may be left once the verdict is back.
    survivor = (NAMING.format(name.encode()) + "import os, time\n"
                "ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
                "if os.fork() == 0:\n    os.setsid()\n    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
                "time.sleep(600)\n")
    # 5 s: the survivor's budget (it never ends by itself); the honest program needs ms.
    cfg = rc.SandboxConfig(timeout_s=5.0, memory_mb=256)
    try:
        assert score([survivor, honest("survivor")], config=cfg) == [0.0, 1.0]
        assert _named(name) == 0  # right after the verdict: no waiting
        for s in _sandbox._SESSIONS.values():  # and no job's cgroup is left: the only
            if s.cgroup:  # children left are idle spares, whose pids.max no job has set yet
                for child in os.listdir(s.cgroup):
                    if os.path.isdir(os.path.join(s.cgroup, child)):
                        with open(os.path.join(s.cgroup, child, "pids.max")) as f:
                            assert f.read().strip() == "max", child
        rewards.close_sandboxes()
        assert _named(name) == 0
    finally:  # Before issue 47 they survived: do not leave them on the host.
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        os.kill(int(pid), 9)
            except OSError:
                pass


@pytest.mark.skipif(not PIDS_CGROUP, reason="no writable cgroup-v1 pids hierarchy")
@pytest.mark.timeout(120)
def test_fork_bomb_does_not_starve_its_siblings():
    # The bomb holds every process it can get for 2 s; the honest program forks four times
    # per case meanwhile (and its harness once). Each job has its own process budget.
    bomb = ("import os, time\nn = 0\nfor _ in range(400):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(600)\n"
            "        os._exit(0)\n    n += 1\ntime.sleep(2)\nprint(n)\n")
    sibling = ("import os, time\nx = int(input())\nfor _ in range(4):\n    pid = os.fork()\n"
               "    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n"
               "    time.sleep(0.25)\nprint(5 * x + 3)  # honest starve\n")
    io = [{"input": f"{x}\n", "output": f"{5 * x + 3}\n"} for x in INPUTS]
    cfg = rc.SandboxConfig(timeout_s=60.0, memory_mb=256, processes=16)
    assert score([bomb, sibling], tests=io, mode="io", config=cfg) == [0.0, 1.0]
    res = rc.run_tests("print(1)", [{"input": "", "output": "1"}], config=cfg, mode="io")
    assert res.all_passed and res.isolation["pids"] == "cgroup", res.isolation


# ---------------------------------------------------------------- isolation gaps

KEY_SPEC_SESSION, KEY_SPEC_USER = -3, -4
KEYS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def add(ring, data):
    return libc.syscall(248, b'user', b'rlvr47', data, len(data), ring)
def read():
    kid = libc.syscall(249, b'user', b'rlvr47', None, 0)
    buf = ctypes.create_string_buffer(64)
    n = libc.syscall(250, 11, kid, buf, 64)
    return buf.raw[:n].decode() if kid > 0 and n > 0 else ''
"""


@root_only
def test_keyrings_are_not_shared():
    # The caller's session keyring holds an answer; a program leaves one in its user's
    # keyring for the next program.
    if _libc.syscall(250, 1, b"rlvr47_test") < 0:  # KEYCTL_JOIN_SESSION_KEYRING
        pytest.skip("keyrings are refused here (e.g. a container's seccomp profile)")
    assert _libc.syscall(248, b"user", b"rlvr47", b"5,3", 3, KEY_SPEC_SESSION) > 0
    rewards.close_sandboxes()  # the next server starts in this session keyring
    reader = KEYS + ("A, B = (int(v) for v in (read() or '0,0').split(','))\n"
                     "def f(x):\n    return A * x + B\n")
    writer = KEYS + f"add({KEY_SPEC_USER}, b'5,3')\n" + honest("keyring")
    assert score([reader, honest("keyring0")]) == [0.0, 1.0]
    assert score([writer, reader.replace("A, B", "A,B")], parallel=1) == [1.0, 0.0]


@root_only
def test_no_shared_writable_directory(visible_dir, monkeypatch):
    # TMPDIR outside /tmp: before issue 47 the session's work directory sat there, writable
    # by every program of the session.
    os.chmod(visible_dir, 0o1777)
    monkeypatch.setenv("TMPDIR", visible_dir)
    monkeypatch.setattr(tempfile, "tempdir", None)
    rewards.close_sandboxes()
    spots = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run", visible_dir]
    writer = (f"import glob, os\nSPOTS = {spots!r}\n"
              f"for d in SPOTS + glob.glob({visible_dir!r} + '/*/'):\n"
              "    try:\n        open(os.path.join(d, 'answer47'), 'w').write('5,3')\n"
              "    except OSError:\n        pass\n" + honest("dir"))
    reader = (f"import glob, os\nSPOTS = {spots!r}\nA = B = 0\n"
              f"for d in SPOTS + glob.glob({visible_dir!r} + '/*/'):\n"
              "    try:\n        A, B = map(int, open(os.path.join(d, 'answer47'))"
              ".read().split(','))\n"
              "    except (OSError, ValueError):\n        pass\n"
              "def f(x):\n    return A * x + B\n")
    try:
        assert score([writer, reader], parallel=1) == [1.0, 0.0]
        assert score([writer.replace("dir", "dir2"), reader.replace("A = B", "A=B")]) == [1.0, 0.0]
    finally:
        rewards.close_sandboxes()  # no session left with this TMPDIR


@root_only
@pytest.mark.timeout(120)
def test_unix_sockets_are_unreachable(visible_dir):
    path = os.path.join(visible_dir, "answer.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(8)
    srv.settimeout(0.5)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"5,3")
            conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    thief = ("import socket\nA = B = 0\ntry:\n"
             "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             f"    s.connect({path!r})\n    A, B = map(int, s.recv(16).split(b','))\n"
             "except OSError:\n    pass\ndef f(x):\n    return A * x + B\n")
    try:
        assert score([thief, honest("socket")]) == [0.0, 1.0]
    finally:
        stop.set()
        server.join()
        srv.close()


@root_only
def test_setuid_binaries_run_unprivileged(visible_dir):
    # A root-only answer file and a setuid-root `cat` that could read it.
    answer = os.path.join(visible_dir, "answer")
    with open(answer, "w") as f:
        f.write("5,3")
    os.chmod(answer, 0o600)
    cat = os.path.join(visible_dir, "cat")
    shutil.copy(shutil.which("cat"), cat)
    os.chmod(cat, 0o755 | stat.S_ISUID)
    thief = ("import subprocess\nA = B = 0\ntry:\n"
             f"    out = subprocess.run([{cat!r}, {answer!r}], capture_output=True).stdout\n"
             "    A, B = map(int, out.split(b','))\nexcept (OSError, ValueError):\n    pass\n"
             "def f(x):\n    return A * x + B\n")
    assert score([thief, honest("setuid")]) == [0.0, 1.0]


def test_close_sandboxes_is_public_and_idempotent():
    assert score([honest("close")], parallel=1) == [1.0]
    rewards.close_sandboxes()
    rewards.close_sandboxes()
    assert score([honest("close2")], parallel=1) == [1.0]  # a new session starts on demand


@root_only
@pytest.mark.skipif(platform.machine() != "x86_64",
                    reason="the seccomp filter and the syscall numbers below are x86-64's")
def test_minimal_root_and_seccomp_hold():
    prog = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "def errno_of(ret):\n    return ctypes.get_errno() if ret == -1 else 0\n"
            "DEV = sorted(os.listdir('/dev'))\nRUN = os.listdir('/run')\n"
            "PTRACE = errno_of(libc.syscall(101, 0, 0, 0, 0))\n"       # PTRACE_TRACEME
            "UNSHARE = errno_of(libc.unshare(0x10000000))\n"           # CLONE_NEWUSER
            "MOUNT = errno_of(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))\n"
            "try:\n    open('/rlvr47', 'w')\n    ROOT = 'written'\nexcept OSError as e:\n"
            "    ROOT = type(e).__name__\n"
            "open('/dev/null', 'w').write('x')\nopen('/tmp/sandbox/mine', 'w').write('x')\n"
            "NNP = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith("
            "('NoNewPrivs', 'Seccomp:'))]\n")
    tests = ["assert DEV == ['fd', 'null', 'random', 'stderr', 'stdin', 'stdout', 'urandom', "
             "'zero']", "assert RUN == []", "assert PTRACE == 1", "assert UNSHARE == 1",
             "assert MOUNT == 1", "assert ROOT == 'OSError'", "assert NNP == ['1', '2']"]
    res = rc.run_tests(prog, tests, config=CFG)
    assert (res.passed, res.total) == (len(tests), len(tests)), res
    assert all(res.isolation[k] for k in ("pid", "init", "fs", "ro_root", "dev", "proc",
                                          "keyring", "no_new_privs", "seccomp", "net"))
    assert res.isolation["pids"] == ("cgroup" if PIDS_CGROUP else "rlimit")
    assert res.isolation["uid"] != 0
