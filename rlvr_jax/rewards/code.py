"""Code rewards: run Python completions against tests in a sandbox, judge outside it.

**Verdicts are computed outside the process that runs untrusted code.** In ``assert`` mode
each test is parsed here (``_verdict.py``); only the non-literal operands of its
comparisons (``f(3)`` of ``assert f(3) == 18``) are evaluated inside the sandbox and come
back as plain JSON; the comparison with the literal (``18``, which never enters the
sandbox) happens here. A value that is not plain JSON fails its test. In ``io`` mode the
sandbox returns each case's stdout and the comparison with the expected output happens
here. Frame walking, patched builtins or ``__eq__``, always-equal objects, ``os._exit``,
printed or forged result lines can therefore only supply values for inputs the program
was shown — never a pass it did not compute.

**Throughput.** One sandbox server per process (``_sandbox.py``, started on first use and
reused; :func:`rlvr_jax.rewards.close_sandboxes` stops it, and it stops at exit) forks a
fresh namespaced process tree per program; a batch (:func:`run_tests_batch`,
:func:`code_rewards`) runs ``parallel`` programs at once and identical programs once.
:func:`code_reward` / :func:`code_rewards` also remember the results of programs that
finished (``status == "ok"``) in a per-process LRU cache, so the same program on the same
tests is run once per process.

Containment (see docs/verifiers.md, "Code sandbox", for what each layer stops and what
stays open):

* siblings: the server never reads a job (jobs and results travel as memfds between this
  process and the job's own processes), so no program runs in a process that held another
  job's program, tests or output;
* per program: a trusted init as PID 1 of new PID, mount and IPC namespaces (everything the
  program starts dies with it, before its verdict), a pids cgroup of its own
  (``processes``), ``SIGKILL`` at the per-program wall-clock timeout;
* a minimal file system: host mounts read-only and ``nosuid``, a fresh size-limited tmpfs
  working directory (the only writable one), ``/dev`` reduced to null, zero, random,
  urandom, empty ``/run``;
* ``resource.setrlimit``: address space, CPU seconds, file size (bounds output floods),
  open files, no core dumps;
* a fresh session keyring, ``no_new_privs`` and a seccomp filter (no keyrings, ptrace,
  mounts, namespaces, Unix / netlink / vsock sockets, io_uring, bpf);
* as root: a new network namespace (no interfaces but a down loopback) and a drop to an
  unprivileged user (``nobody``) running the system interpreter;
* a minimal environment (``PATH``, ``HOME``, ``LANG``): no inherited secrets.

What the kernel refuses is reported in :attr:`SandboxResult.isolation`; set
``SandboxConfig(require_isolation=True)`` to turn a missing layer into an error.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import pwd
import re
import shutil
import stat
import sys
import time

import numpy as np

from rlvr_jax.rewards import _sandbox, _verdict

_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
CACHE_SIZE = 4096


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed program.

    Attributes:
      timeout_s: wall-clock limit of one program (all its tests), from its fork.
      memory_mb: address-space limit (RLIMIT_AS) of each sandboxed process.
      cpu_s: CPU-seconds limit; default ``ceil(timeout_s) + 1``.
      processes: processes (and threads) the program may have at once: its own pids cgroup
        where the host has a writable cgroup-v1 ``pids`` hierarchy (as root), else
        RLIMIT_NPROC (a count over all the sandbox user's processes, shared by siblings).
      output_bytes: largest file, including captured stdout/stderr, the program may write.
      open_files: RLIMIT_NOFILE.
      disk_mb: size of the tmpfs working directory (with a mount namespace).
      user: unprivileged user to run as when the caller is root.
      python: interpreter for the sandbox; default: ``sys.executable`` when not root,
        else the first system ``python3`` the unprivileged user can execute.
      require_isolation: raise RuntimeError (without running the program) when a namespace,
        the init, the read-only root, the user drop, no_new_privs or seccomp could not be
        set up.
    """
    timeout_s: float = 1.0
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

    ``status``: ``"ok"`` (the harness finished), ``"timeout"``, ``"crashed"`` (the process
    died before finishing: memory, CPU, ``os._exit``...). Tests whose values were not
    reported count as failed. ``program_error``: the exception the program raised while
    it was compiled or run (assert mode), else None.
    """
    passed: int
    total: int
    status: str
    isolation: dict
    wall_s: float
    output_tail: str = ""
    program_error: str | None = None

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


def _check_tests(tests, mode):
    if not tests:
        raise ValueError("tests must be a non-empty list")
    if mode == "io" and not all(isinstance(t, dict) and "input" in t and "output" in t
                                for t in tests):
        raise ValueError("mode='io' needs tests as dicts with 'input' and 'output'")
    if mode == "assert" and not all(isinstance(t, str) for t in tests):
        raise ValueError("mode='assert' needs tests as Python source strings")


def _prepare(program, tests, mode, config):
    """(job for the sandbox, how to judge its reply) of one program; expectations stay here."""
    limits = {"memory_mb": config.memory_mb,
              "cpu_s": config.cpu_s or math.ceil(config.timeout_s) + 1,
              "output_bytes": config.output_bytes, "open_files": config.open_files,
              "processes": config.processes}
    job = {"mode": mode, "program": program, "timeout_s": config.timeout_s,
           "disk_mb": config.disk_mb, "limits": limits}
    if mode == "assert":
        exprs, checks = _verdict.compile_tests(tests)
        job["exprs"] = exprs
        judge = ("assert", checks, len(exprs))
    else:
        job["inputs"] = [str(t["input"]) for t in tests]
        job["max_case_chars"] = min(config.output_bytes, 1 << 16)
        judge = ("io", [str(t["output"]) for t in tests], job["max_case_chars"])
    return job, judge


def _judge(reply, judge, total) -> SandboxResult:
    """The verdict on one job's reply (None: no reply, the session timed out)."""
    if reply is None:
        return SandboxResult(0, total, "timeout", {}, 0.0)
    kind, expected, n = judge
    values, meta = _verdict.read_lines(reply["result"], n if kind == "assert" else total,
                                       "value" if kind == "assert" else "out")
    if kind == "assert":
        # A test counts only once the program ran (`assert True` is no free pass).
        passed = meta["loaded"] and sum(_verdict.passes(check, values) for check in expected)
    else:
        passed = sum(_verdict.io_passes(values.get(i), out, n) for i, out in enumerate(expected))
    try:
        info = json.loads(reply["info"])
        isolation = dict(info["isolation"], uid=info["uid"],
                         net=bool(info["isolation"]["net"]) and info["ifaces"] == ["lo"])
    except (ValueError, KeyError, TypeError):
        isolation = {}
    status = "timeout" if reply["timed_out"] else ("ok" if meta["done"] else "crashed")
    return SandboxResult(passed=int(passed), total=total, status=status, isolation=isolation,
                         wall_s=float(reply["wall_s"]), output_tail=reply["tail"],
                         program_error=meta["program_error"])


_CACHE: "collections.OrderedDict" = collections.OrderedDict()


def _key(program, tests, mode, config):
    return (program, json.dumps(tests, sort_keys=True, default=str), mode, config)


def run_tests_batch(programs: list, tests: list, *, config: SandboxConfig = SandboxConfig(),
                    mode: str = "assert", parallel: int = 2, cache: bool = False) -> list:
    """Runs programs[i] against tests[i] in the sandbox; one `SandboxResult` per program.

    One sandbox server (per process, reused) forks a fresh sandboxed process per distinct
    program, at most ``parallel`` at once; identical (program, tests) pairs run once.
    ``cache``: also reuse (and remember) finished results of earlier calls in this process.
    Never raises for program behaviour; ValueError for malformed tests.
    """
    if mode not in ("assert", "io"):
        raise ValueError(f"mode must be 'assert' or 'io', got {mode!r}")
    if len(programs) != len(tests):
        raise ValueError(f"{len(programs)} programs but {len(tests)} test lists")
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    for program, ts in zip(programs, tests):
        if not isinstance(program, str):
            raise ValueError(f"program must be a str, got {type(program).__name__}")
        _check_tests(ts, mode)
    keys = [_key(p, list(t), mode, config) for p, t in zip(programs, tests)]
    results, todo = {}, {}
    for i, k in enumerate(keys):
        if cache and k in _CACHE:
            _CACHE.move_to_end(k)
            results[k] = _CACHE[k]
        elif k not in todo:
            todo[k] = i
    if todo:
        results.update(_run_jobs(programs, tests, todo, mode, config, parallel))
        if cache:
            for k in todo:
                if results[k].status == "ok":
                    _CACHE[k] = results[k]
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
    return [dataclasses.replace(results[k]) for k in keys]


def _run_jobs(programs, tests, todo, mode, config, parallel) -> dict:
    """{key: SandboxResult} for the distinct jobs ``todo`` ({key: first index})."""
    prepared = {k: _prepare(programs[i], list(tests[i]), mode, config) for k, i in todo.items()}
    is_root = os.geteuid() == 0
    pw = pwd.getpwnam(config.user) if is_root else None
    uid, gid = (pw.pw_uid, pw.pw_gid) if pw else (os.getuid(), os.getgid())
    python = find_sandbox_python(config)
    waves = math.ceil(len(todo) / parallel)
    with _sandbox.lock():
        try:
            session = _sandbox.session(python, uid, gid, config.require_isolation)
        except _sandbox.IsolationError as e:
            raise RuntimeError(str(e)) from None
        deadline = time.monotonic() + waves * (config.timeout_s + 1.0) + 10.0
        replies = session.run([prepared[k][0] for k in todo], parallel=parallel, deadline=deadline)
    return {k: _judge(replies.get(j), prepared[k][1], len(tests[todo[k]]))
            for j, k in enumerate(todo)}


def run_programs_output(programs: list, *, config: SandboxConfig = SandboxConfig(),
                        stdin: str = "", parallel: int = 2) -> list:
    """Runs each program once in the sandbox with ``stdin``, ``parallel`` at a time; for each
    a (stdout, status) pair: ``"ok"`` when it exited normally (exit code 0 or
    ``SystemExit``), ``"error"`` when it raised or exited non-zero, ``"timeout"`` /
    ``"crashed"`` as in :class:`SandboxResult`. Never raises for program behaviour (the
    Python tool of `rlvr_jax.multiturn.tools`)."""
    for program in programs:
        if not isinstance(program, str):
            raise ValueError(f"program must be a str, got {type(program).__name__}")
    if not programs:
        return []
    jobs = [_prepare(p, [{"input": stdin, "output": ""}], "io", config)[0] for p in programs]
    is_root = os.geteuid() == 0
    pw = pwd.getpwnam(config.user) if is_root else None
    uid, gid = (pw.pw_uid, pw.pw_gid) if pw else (os.getuid(), os.getgid())
    waves = math.ceil(len(jobs) / max(parallel, 1))
    with _sandbox.lock():
        try:
            session = _sandbox.session(find_sandbox_python(config), uid, gid,
                                       config.require_isolation)
        except _sandbox.IsolationError as e:
            raise RuntimeError(str(e)) from None
        replies = session.run(jobs, parallel=max(parallel, 1),
                              deadline=time.monotonic() + waves * (config.timeout_s + 1.0) + 10.0)
    return [_program_output(replies.get(i)) for i in range(len(jobs))]


def _program_output(reply) -> tuple:
    """(stdout, status) of one io-mode reply with one case."""
    if reply is None or reply["timed_out"]:
        return "", "timeout"
    values, meta = _verdict.read_lines(reply["result"], 1, "out")
    if 0 not in values:
        return "", "crashed" if not meta["done"] else "error"
    out, exit_code = values[0]
    return str(out), "ok" if exit_code in (0, None) else "error"


def run_program_output(program: str, *, config: SandboxConfig = SandboxConfig(),
                       stdin: str = "") -> tuple:
    """`run_programs_output` of one program: (stdout, status)."""
    return run_programs_output([program], config=config, stdin=stdin, parallel=1)[0]


def run_tests(program: str, tests: list, *, config: SandboxConfig = SandboxConfig(),
              mode: str = "assert") -> SandboxResult:
    """Run ``program`` against ``tests`` in the sandbox; never raises for program behaviour.

    Args:
      program: Python source of the completion.
      tests: ``mode="assert"``: list of tests, each Python source made of ``assert``
        statements (``"assert f(3) == 18"``): the non-literal operands are evaluated in the
        sandbox (in the program's namespace, in order), the comparisons here;
        ``mode="io"``: list of ``{"input": str, "output": str}`` cases (stdout compared
        whitespace-split, here).
      config: limits, see :class:`SandboxConfig`.
    """
    return run_tests_batch([program], [tests], config=config, mode=mode, parallel=1)[0]


_FENCE = re.compile(r"```(?:python|py|Python3?|python3)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str) -> str:
    """The last fenced code block (```python ... ```) of a completion, else the whole text."""
    blocks = _FENCE.findall(completion)
    return blocks[-1] if blocks else completion


def _tests_and_mode(reference):
    if isinstance(reference, dict):
        return list(reference.get("tests") or []), reference.get("mode", "assert")
    return list(reference or []), "assert"


def program_rewards(programs: list, references: list, *,
                    config: SandboxConfig = SandboxConfig(), partial_credit: bool = True,
                    parallel: int = 2) -> np.ndarray:
    """float32 [B]: each program (str, or None: no program, 0) run against its reference's
    tests (see :func:`code_reward`); one sandbox server, ``parallel`` programs at once,
    identical programs once (and finished ones cached per process)."""
    if len(programs) != len(references):
        raise ValueError(f"{len(programs)} programs but {len(references)} references")
    out = np.zeros((len(programs),), np.float32)
    by_mode: dict = {}
    for i, (program, r) in enumerate(zip(programs, references)):
        tests, mode = _tests_and_mode(r)
        _check_tests(tests, mode)
        if program is not None:
            by_mode.setdefault(mode, []).append((i, program, tests))
    for mode, items in by_mode.items():
        res = run_tests_batch([p for _, p, _ in items], [t for _, _, t in items], config=config,
                              mode=mode, parallel=parallel, cache=True)
        for (i, _, _), r in zip(items, res):
            out[i] = r.pass_fraction if partial_credit else float(r.all_passed)
    return out


def code_rewards(completions: list, references: list, *, config: SandboxConfig = SandboxConfig(),
                 partial_credit: bool = True, parallel: int = 2) -> np.ndarray:
    """float32 [B] :func:`code_reward` of a batch (:func:`program_rewards` of each
    completion's last fenced block)."""
    return program_rewards([extract_code(c) for c in completions], references, config=config,
                           partial_credit=partial_credit, parallel=parallel)


def code_reward(completion: str, reference, *, config: SandboxConfig = SandboxConfig(),
                partial_credit: bool = True) -> float:
    """Pass fraction (or 1.0/0.0 all-pass when ``partial_credit=False``) of the tests.

    Args:
      completion: model output; its last fenced Python block is run (else the whole text).
      reference: a list of assert statements, or a dict ``{"tests": [...], "mode":
        "assert"|"io"}``.
    """
    return float(code_rewards([completion], [reference], config=config,
                              partial_credit=partial_credit, parallel=1)[0])
