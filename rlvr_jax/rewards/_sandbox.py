"""A sandbox session: one launch of the sandbox server (``_jail.py``), many programs.

``Session.run(jobs)`` hands jobs to the server, which forks a fresh, namespaced,
unprivileged process per program (at most ``parallel`` at once) and answers one line per
job. Each job travels as memfds made here (its JSON, and empty files for its output,
results and isolation report), passed over a ``SOCK_SEQPACKET`` socket: the server never
reads them, so no program's process ever held another job's data; this side reads the
results. At most ``parallel + 2`` jobs are at the server at a time. A process keeps one
session per sandbox set-up (interpreter, user, ``require_isolation``) and starts it on
first use (:func:`session`); a session that dies or overruns is killed and the next call
starts a new one. After a ``fork`` the child starts its own (the parent's sockets are not
shared). :func:`close_sandboxes` (public: ``rlvr_jax.rewards.close_sandboxes``) stops
them; it runs at exit.
"""
from __future__ import annotations

import atexit
import collections
import json
import multiprocessing.util
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time

from rlvr_jax.rewards import _confine

_HERE = os.path.dirname(os.path.abspath(__file__))
_JAIL = os.path.join(_HERE, "_jail.py")
START_TIMEOUT_S = 60.0
RESULT_CAP = 1 << 22   # bytes of a job's results read back
TAIL_CHARS = 2000      # of its captured stdout / stderr
_SESSIONS: dict = {}
_LOCK = threading.RLock()


class IsolationError(RuntimeError):
    """``require_isolation`` and a layer of the sandbox could not be set up."""


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(f"rlvr_{name}", os.MFD_CLOEXEC)
    if data:
        os.write(fd, data)
    return fd


def _read(fd: int, cap: int | None) -> str:
    """A memfd's text: the first ``cap`` bytes, or (cap None) the last TAIL_CHARS bytes."""
    size = os.fstat(fd).st_size
    start = 0 if cap is not None else max(0, size - TAIL_CHARS)
    return os.pread(fd, min(size - start, cap or TAIL_CHARS), start).decode("utf-8", "replace")


class Session:
    """One running sandbox server.

    Args:
      python: interpreter of the server (and so of the programs).
      uid, gid: the unprivileged user programs run as (root callers).
      require_isolation: the server refuses to start (IsolationError) when a job would lack
        a layer (network, mount, PID namespace and init, read-only root, user drop,
        ``no_new_privs``, seccomp).
    """

    def __init__(self, python: str, uid: int, gid: int, require_isolation: bool):
        self.pid_owner = os.getpid()
        self.closed = False
        self._stderr = tempfile.TemporaryFile()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {"uid": uid, "gid": gid, "require_isolation": require_isolation}
        try:
            self.proc = subprocess.Popen(
                [python, "-I", "-S", _JAIL, json.dumps(cfg)], stdin=theirs.fileno(),
                stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True, cwd="/",
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        finally:
            theirs.close()
        self._buf = b""
        self._next_id = 0
        self.cgroup = None
        line = self._read_line(time.monotonic() + START_TIMEOUT_S)
        if line is None:
            code = self.proc.poll()
            err = self._stderr_text()
            self.close()
            if code == 96:
                raise IsolationError(f"sandbox isolation incomplete, program not run: {err}")
            raise RuntimeError(f"sandbox server did not start (exit {code}): {err}")
        ready = json.loads(line)
        self.isolation, self.cgroup = ready["ready"], ready["cgroup"]

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read(4000).decode("utf-8", "replace").strip()

    @property
    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def _read_line(self, deadline: float):
        """The next line of the server's stdout, or None at EOF or past ``deadline``."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _send(self, job: dict, job_id: int, parallel: int) -> tuple:
        """Hands one job to the server; (out, result, info) memfds this side keeps."""
        keep = tuple(_memfd(k) for k in ("out", "result", "info"))
        job_fd = _memfd("job", json.dumps(job).encode())
        hdr = {"id": job_id, "parallel": parallel, "timeout_s": job["timeout_s"],
               "processes": job["limits"]["processes"]}
        try:
            socket.send_fds(self.sock, [json.dumps(hdr).encode()], [job_fd, *keep])
        except OSError:
            for fd in keep:
                os.close(fd)
            raise
        finally:
            os.close(job_fd)
        return keep

    def run(self, jobs: list, *, parallel: int, deadline: float) -> dict:
        """Runs ``jobs`` (dicts) and returns ``{job index: reply}`` (``exit``, ``timed_out``,
        ``wall_s``, ``result``, ``info``, ``tail``) for every job answered before
        ``deadline``; on a timeout or a dead server the session is closed (the caller
        counts the missing jobs as timed out)."""
        base = self._next_id
        self._next_id += len(jobs)
        todo, held, replies = collections.deque(range(len(jobs))), {}, {}
        try:
            while len(replies) < len(jobs):
                while todo and len(held) < parallel + 2:
                    i = todo.popleft()
                    held[i] = self._send(jobs[i], base + i, parallel)
                line = self._read_line(deadline)
                if line is None:
                    break
                reply = json.loads(line)
                fds = held.pop(reply["id"] - base, None)
                if fds is not None:
                    out, result, info = fds
                    replies[reply["id"] - base] = dict(
                        reply, tail=_read(out, None), result=_read(result, RESULT_CAP),
                        info=_read(info, RESULT_CAP))
                    for fd in fds:
                        os.close(fd)
        except OSError:
            pass
        finally:
            for fds in held.values():
                for fd in fds:
                    os.close(fd)
        if len(replies) < len(jobs):
            self.close()
        return replies

    def close(self):
        """Kills the server and every job it runs (its process group; the jobs' inits and
        so their PID namespaces), then empties and removes its pids cgroups."""
        if os.getpid() != self.pid_owner or self.closed:
            return
        self.closed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.cgroup and os.path.isdir(self.cgroup):
            for name in os.listdir(self.cgroup):
                if os.path.isdir(os.path.join(self.cgroup, name)):
                    _confine.drain_cgroup(os.path.join(self.cgroup, name))
            _confine.drain_cgroup(self.cgroup)
        for f in (self.sock, self.proc.stdout, self._stderr):
            try:
                f.close()
            except OSError:
                pass


def session(python: str, uid: int, gid: int, require_isolation: bool) -> Session:
    """This process's live session for the set-up, started when there is none."""
    key = (python, uid, gid, require_isolation)
    with _LOCK:
        s = _SESSIONS.get(key)
        if s is not None and (s.pid_owner != os.getpid() or not s.alive):
            if s.pid_owner == os.getpid():
                s.close()
            s = None
        if s is None:
            s = _SESSIONS[key] = Session(python, uid, gid, require_isolation)
            # Pool workers leave through multiprocessing's exit, which skips atexit.
            multiprocessing.util.Finalize(s, s.close, exitpriority=0)
        return s


def lock():
    """Held by a caller for the whole of one batch (a session runs one batch at a time)."""
    return _LOCK


@atexit.register
def close_sandboxes():
    """Stops this process's sandbox sessions: each server, every program it runs and all
    their processes (none survives), and its cgroups. Runs at exit; safe to call at any time (the
    next code reward starts a new session)."""
    held = _LOCK.acquire(timeout=5.0)  # not forever: a batch may hang in a daemon thread
    try:
        for s in list(_SESSIONS.values()):
            s.close()
        _SESSIONS.clear()
    finally:
        if held:
            _LOCK.release()
