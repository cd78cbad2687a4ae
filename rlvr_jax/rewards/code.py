"""Code rewards: run a Python completion against test cases in a sandboxed process.

Containment (see docs/verifiers.md for what each layer stops):

* a separate process in its own session / process group, killed with ``SIGKILL`` at the
  end whatever happened, and a wall-clock timeout;
* ``resource.setrlimit``: address space, CPU seconds, file size (bounds output floods),
  open files, number of processes (bounds fork bombs), no core dumps;
* as root: new network namespace (no interfaces but a down loopback), new mount
  namespace (a fresh size-limited tmpfs working directory; other world-writable
  directories covered read-only), new PID namespace (every process the program starts
  dies with it) and a drop to an unprivileged user (``nobody``) running the system
  interpreter, because limits such as ``RLIMIT_NPROC`` do not bind root;
* a minimal environment (``PATH``, ``HOME``, ``LANG``): no inherited secrets.

What the kernel refuses is reported in :attr:`SandboxResult.isolation`; set
``SandboxConfig(require_isolation=True)`` to turn a missing layer into an error.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_JAIL = os.path.join(_HERE, "_jail.py")
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed run.

    Attributes:
      timeout_s: wall-clock limit of the whole run (all tests).
      memory_mb: address-space limit (RLIMIT_AS) of each sandboxed process.
      cpu_s: CPU-seconds limit; default ``ceil(timeout_s) + 1``.
      processes: RLIMIT_NPROC for the unprivileged user (counts all its processes).
      output_bytes: largest file, including captured stdout/stderr, the program may write.
      open_files: RLIMIT_NOFILE.
      disk_mb: size of the tmpfs working directory (root only).
      user: unprivileged user to run as when the caller is root.
      python: interpreter for the sandbox; default: ``sys.executable`` when not root,
        else the first system ``python3`` the unprivileged user can execute.
      require_isolation: raise RuntimeError (without running the program) when a namespace
        or the user drop could not be set up.
    """
    timeout_s: float = 5.0
    memory_mb: int = 512
    cpu_s: int | None = None
    processes: int = 32
    output_bytes: int = 1 << 20
    open_files: int = 64
    disk_mb: int = 16
    user: str = "nobody"
    python: str | None = None
    require_isolation: bool = False

    def __post_init__(self):
        for name in ("timeout_s", "memory_mb", "processes", "output_bytes", "open_files", "disk_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxConfig.{name} must be positive, got {getattr(self, name)}")


@dataclasses.dataclass
class SandboxResult:
    """Outcome of :func:`run_tests`.

    ``status``: ``"ok"`` (harness finished), ``"timeout"``, ``"crashed"`` (the process
    died before finishing: memory, CPU, ``os._exit``...). Tests not reported passed count
    as failed.
    """
    passed: int
    total: int
    status: str
    isolation: dict
    wall_s: float
    output_tail: str = ""

    @property
    def pass_fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


def _world_executable(path: str) -> bool:
    """Whether a user who is neither owner nor group can execute ``path`` (and reach it)."""
    path = os.path.realpath(path)
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not (stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_IXOTH and st.st_mode & stat.S_IROTH):
        return False
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == "/":
            return True
        d = os.path.dirname(d)


def find_sandbox_python(config: SandboxConfig = SandboxConfig()) -> str:
    """The interpreter the sandboxed program runs with.

    As root the child runs as ``config.user``, so the interpreter must be executable by
    others (a pyenv Python under ``/root`` is not): the system ``python3`` is used.
    Raises RuntimeError when there is none.
    """
    if config.python is not None:
        cands = [config.python]
    elif os.geteuid() == 0:
        cands = list(_SYSTEM_PYTHONS) + [p for p in [shutil.which("python3")] if p]
    else:
        return sys.executable
    if os.geteuid() != 0:
        return cands[0]
    for c in cands:
        if _world_executable(c):
            return c
    raise RuntimeError(
        f"no Python interpreter executable by the unprivileged user {config.user!r} "
        f"(tried {cands}); install the system python3 or set SandboxConfig(python=...)")


_HARNESS_SRC = None


def _harness_source() -> str:
    global _HARNESS_SRC
    if _HARNESS_SRC is None:
        with open(os.path.join(_HERE, "_harness.py"), encoding="utf-8") as f:
            _HARNESS_SRC = f.read()
    return _HARNESS_SRC


def run_tests(program: str, tests: list, *, config: SandboxConfig = SandboxConfig(),
              mode: str = "assert") -> SandboxResult:
    """Run ``program`` against ``tests`` in the sandbox; never raises for program behaviour.

    Args:
      program: Python source of the completion.
      tests: ``mode="assert"``: list of Python statements run after the program in its
        namespace (each passes if it raises nothing); ``mode="io"``: list of
        ``{"input": str, "output": str}`` cases (stdout compared whitespace-split).
      config: limits, see :class:`SandboxConfig`.
    """
    if mode not in ("assert", "io"):
        raise ValueError(f"mode must be 'assert' or 'io', got {mode!r}")
    if not isinstance(program, str):
        raise ValueError(f"program must be a str, got {type(program).__name__}")
    if not tests:
        raise ValueError("tests must be a non-empty list")
    if mode == "io" and not all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
        raise ValueError("mode='io' needs tests as dicts with 'input' and 'output'")
    if mode == "assert" and not all(isinstance(t, str) for t in tests):
        raise ValueError("mode='assert' needs tests as Python source strings")
    is_root = os.geteuid() == 0
    python = find_sandbox_python(config)
    pw = pwd.getpwnam(config.user) if is_root else None
    uid, gid = (pw.pw_uid, pw.pw_gid) if pw else (os.getuid(), os.getgid())
    nonce = secrets.token_hex(16)
    fallback_dir = tempfile.mkdtemp(prefix="rlvr_sandbox_")
    os.chmod(fallback_dir, 0o700)
    if is_root:
        os.chown(fallback_dir, uid, gid)
    results = tempfile.TemporaryFile()
    output = tempfile.TemporaryFile()
    cfg = {
        "uid": uid, "gid": gid, "python": python, "harness": _harness_source(),
        "fd": results.fileno(), "workdir": fallback_dir, "disk_mb": config.disk_mb,
        "require_isolation": config.require_isolation,
        "limits": {"memory_mb": config.memory_mb,
                   "cpu_s": config.cpu_s or math.ceil(config.timeout_s) + 1,
                   "output_bytes": config.output_bytes, "open_files": config.open_files,
                   "processes": config.processes},
    }
    payload = json.dumps({"nonce": nonce, "program": program, "tests": tests, "mode": mode,
                          "max_output_chars": config.output_bytes}).encode()
    start = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", _JAIL, json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=output, stderr=output, pass_fds=(results.fileno(),),
            start_new_session=True, cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        try:
            proc.communicate(payload, timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        except BrokenPipeError:
            pass
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        wall = time.monotonic() - start
        results.seek(0)
        lines = results.read(1 << 22).decode("utf-8", "replace").splitlines()
        output.seek(0, os.SEEK_END)
        size = output.tell()
        output.seek(max(0, size - 2000))
        tail = output.read().decode("utf-8", "replace")
    finally:
        results.close()
        output.close()
        shutil.rmtree(fallback_dir, ignore_errors=True)
    passed, done, isolation = set(), False, {}
    for line in lines:
        head, _, rest = line.partition(" ")
        if head != nonce:
            continue
        if rest.startswith("start "):
            info = json.loads(rest[6:])
            isolation = dict(info["isolation"], uid=info["uid"],
                             net=info["isolation"]["net"] and info["ifaces"] == ["lo"])
        elif rest.startswith("ok "):
            idx = int(rest[3:])
            if 0 <= idx < len(tests):
                passed.add(idx)
        elif rest == "done":
            done = True
    if proc.returncode == 96 and config.require_isolation:
        raise RuntimeError(f"sandbox isolation incomplete, program not run: {tail.strip()}")
    status = "timeout" if timed_out else ("ok" if done else "crashed")
    return SandboxResult(passed=len(passed), total=len(tests), status=status,
                         isolation=isolation, wall_s=wall, output_tail=tail)


_FENCE = re.compile(r"```(?:python|py|Python3?|python3)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str) -> str:
    """The last fenced code block (```python ... ```) of a completion, else the whole text."""
    blocks = _FENCE.findall(completion)
    return blocks[-1] if blocks else completion


def code_reward(completion: str, reference, *, config: SandboxConfig = SandboxConfig(),
                partial_credit: bool = True) -> float:
    """Pass fraction (or 1.0/0.0 all-pass when ``partial_credit=False``) of the tests.

    Args:
      completion: model output; its last fenced Python block is run (else the whole text).
      reference: a list of assert statements, or a dict ``{"tests": [...], "mode": "assert"|"io"}``.
    """
    if isinstance(reference, dict):
        tests, mode = reference.get("tests"), reference.get("mode", "assert")
    else:
        tests, mode = reference, "assert"
    res = run_tests(extract_code(completion), list(tests or []), config=config, mode=mode)
    return res.pass_fraction if partial_credit else float(res.all_passed)
