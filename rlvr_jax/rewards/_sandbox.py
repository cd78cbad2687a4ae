"""A sandbox session: one launch of the sandbox server (``_jail.py``), many programs.

``Session.run(jobs)`` sends jobs (JSON lines) to the server, which forks a fresh,
namespaced, unprivileged process per program (at most ``parallel`` at once) and answers one
line per job. A process keeps one session per sandbox set-up (interpreter, user,
``require_isolation``) and starts it on first use (:func:`session`); a session that dies
or overruns is killed and the next call starts a new one. After a ``fork`` the child
starts its own (the parent's pipes are not shared).
"""
from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_JAIL = os.path.join(_HERE, "_jail.py")
START_TIMEOUT_S = 60.0
_SESSIONS: dict = {}
_LOCK = threading.RLock()


class IsolationError(RuntimeError):
    """``require_isolation`` and a namespace or the user drop could not be set up."""


class Session:
    """One running sandbox server.

    Args:
      python: interpreter of the server (and so of the programs).
      uid, gid: the unprivileged user programs run as (root callers).
      workdir: the programs' directory when no mount namespace can be made.
      require_isolation: the server refuses to start (IsolationError) when a job would lack
        a layer (network, mount, PID namespace, user drop).
    """

    def __init__(self, python: str, uid: int, gid: int, workdir: str,
                 require_isolation: bool):
        self.pid_owner = os.getpid()
        self.workdir = workdir
        self._stderr = tempfile.TemporaryFile()
        cfg = {"uid": uid, "gid": gid, "workdir": workdir, "require_isolation": require_isolation}
        self.proc = subprocess.Popen(
            [python, "-I", "-S", _JAIL, json.dumps(cfg)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True, cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        self._buf = b""
        self._next_id = 0
        line = self._read_line(time.monotonic() + START_TIMEOUT_S)
        if line is None:
            code = self.proc.poll()
            err = self._stderr_text()
            self.close()
            if code == 96:
                raise IsolationError(f"sandbox isolation incomplete, program not run: {err}")
            raise RuntimeError(f"sandbox server did not start (exit {code}): {err}")
        self.isolation = json.loads(line)["ready"]

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read(4000).decode("utf-8", "replace").strip()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

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

    def run(self, jobs: list, *, parallel: int, deadline: float) -> dict:
        """Sends ``jobs`` (dicts without ``id``) and returns ``{job index: reply}`` for every
        job answered before ``deadline``; on a timeout or a dead server the session is
        closed (the caller counts the missing jobs as timed out)."""
        base = self._next_id
        self._next_id += len(jobs)
        lines = b"".join((json.dumps(dict(job, id=base + i, parallel=parallel)) + "\n").encode()
                         for i, job in enumerate(jobs))
        writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
        writer.start()
        replies = {}
        while len(replies) < len(jobs):
            line = self._read_line(deadline)
            if line is None:
                self.close()
                break
            reply = json.loads(line)
            if base <= reply["id"] < base + len(jobs):
                replies[reply["id"] - base] = reply
        writer.join(5.0)
        return replies

    def _write(self, data: bytes):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def close(self):
        """Kills the server and every job it runs (its process group; PID namespaces)."""
        if os.getpid() != self.pid_owner:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self._stderr):
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
            workdir = tempfile.mkdtemp(prefix="rlvr_sandbox_")
            os.chmod(workdir, 0o700)
            if os.geteuid() == 0:
                os.chown(workdir, uid, gid)
            s = _SESSIONS[key] = Session(python, uid, gid, workdir, require_isolation)
            # Pool workers leave through multiprocessing's exit, which skips atexit.
            multiprocessing.util.Finalize(s, shutil.rmtree, args=(workdir, True), exitpriority=0)
        return s


def lock():
    """Held by a caller for the whole of one batch (a session runs one batch at a time)."""
    return _LOCK


@atexit.register
def close_all():
    """Stops this process's sessions."""
    for s in list(_SESSIONS.values()):
        if s.pid_owner == os.getpid():
            s.close()
            shutil.rmtree(s.workdir, ignore_errors=True)
    _SESSIONS.clear()
