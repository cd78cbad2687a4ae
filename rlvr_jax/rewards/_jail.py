"""Sandbox server for :mod:`rlvr_jax.rewards.code` (a standalone script, stdlib only).

Started once per sandbox session (``python -I -S _jail.py CONFIG_JSON``, in a new session,
by :class:`rlvr_jax.rewards._sandbox.Session`), it reads jobs (one JSON line each: a program
and the expressions or stdin cases to run it on) from stdin and writes one JSON line per
finished job to stdout. It is trusted code: no untrusted code ever runs in this process.

Set-up, once: as root a new network namespace (no interfaces but a down loopback); not
root an unprivileged user + network namespace when the kernel allows one. Then, per job,
a **fresh fork** (nothing is exec'd: the interpreter is already loaded):

1. the job process (trusted, still root) enters new PID, mount and IPC namespaces, mounts a
   fresh size-limited tmpfs on ``/tmp`` holding the only directory the program may write
   (``/tmp/sandbox``, owned by the unprivileged user), covers the other world-writable
   directories with read-only tmpfs mounts and forks
2. the program process: PID 1 of the new namespace (when it exits the kernel kills every
   process the program started), a private ``/proc``, its own session, resource limits,
   the drop to the unprivileged user, a minimal environment, only its own file
   descriptors; then the harness (``_harness.py``) runs the program.

Each job's results come back through a memfd that only its program process holds; the
isolation actually obtained through a second memfd closed before the program starts.
A job past its ``timeout_s`` is killed with ``SIGKILL`` (its PID namespace with it).
"""
import collections
import ctypes
import fcntl
import json
import os
import resource
import select
import signal
import sys
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
PR_SET_PDEATHSIG = 1
COVERED_DIRS = ("/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
RESULT_CAP = 1 << 22   # bytes of a job's results read back
TAIL_CHARS = 2000      # of its captured stdout / stderr

_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags):
    return _libc.unshare(ctypes.c_int(flags)) == 0


def _mount(source, target, fstype, flags, data):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    return _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def _setup_session(iso):
    """Namespaces shared by every job of the session (network; the user namespace)."""
    if os.geteuid() == 0:
        iso["net"] = _unshare(CLONE_NEWNET)
        return
    uid, gid = os.getuid(), os.getgid()
    if _unshare(CLONE_NEWUSER | CLONE_NEWNET):
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
            iso["net"] = iso["userns"] = True
        except OSError:
            pass


def _private_tmp(cfg, job):
    """In the job's new mount namespace: a fresh tmpfs on /tmp, other writable dirs covered."""
    if not _mount(None, "/", None, MS_REC | MS_PRIVATE, None):
        return False
    size = f"size={int(job['disk_mb'])}m,mode=0755,nr_inodes=4096"
    if not _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, size):
        return False
    os.mkdir("/tmp/sandbox", 0o700)
    os.chown("/tmp/sandbox", cfg["uid"], cfg["gid"])
    for d in COVERED_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            if not _mount("tmpfs", d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "size=4k,mode=0755"):
                return False
    return True


def _job_process(cfg, job, iso, fds, harness):
    """The trusted per-job process: namespaces, then the program process; exits with it."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    iso = dict(iso, pid=False, fs=False, proc=False)
    if os.geteuid() == 0 or iso.get("userns"):
        if _unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC):
            iso["pid"] = True
            iso["fs"] = _private_tmp(cfg, job)
    alive_r, alive_w = os.pipe()  # EOF in the program process: this process is gone
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_w)
            _program_process(cfg, job, iso, fds, alive_r, harness)
        except BaseException:  # noqa: BLE001 - set-up failed: said on the output, no results
            traceback.print_exc()
        finally:
            os._exit(98)
    os.close(alive_r)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _program_process(cfg, job, iso, fds, alive_r, harness):
    """PID 1 of the job's namespace: limits, user drop, then the harness runs the program."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([alive_r], [], [], 0)[0]:  # the job process died before the prctl
        os._exit(99)
    if iso["pid"] and iso["fs"]:
        iso["proc"] = _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    workdir = "/tmp/sandbox" if iso["fs"] else cfg["workdir"]
    os.setsid()  # kill(0, ...) reaches this job's processes only
    # Descriptors: 0 /dev/null, 1 and 2 the captured output, 3 results, 4 isolation info.
    high = {k: fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for k, fd in fds.items()}  # no clobbering
    high["null"] = fcntl.fcntl(os.open(os.devnull, os.O_RDONLY), fcntl.F_DUPFD, 256)
    for key, dst in (("null", 0), ("out", 1), ("out", 2), ("result", 3), ("info", 4)):
        os.dup2(high[key], dst)
    os.closerange(5, 1 << 16)
    lim = job["limits"]
    mem = int(lim["memory_mb"]) << 20
    for res, soft, hard in (
            (resource.RLIMIT_AS, mem, mem),
            (resource.RLIMIT_DATA, mem, mem),
            (resource.RLIMIT_CPU, int(lim["cpu_s"]), int(lim["cpu_s"]) + 1),
            (resource.RLIMIT_FSIZE, int(lim["output_bytes"]), int(lim["output_bytes"])),
            (resource.RLIMIT_NOFILE, int(lim["open_files"]), int(lim["open_files"])),
            (resource.RLIMIT_NPROC, int(lim["processes"]), int(lim["processes"])),
            (resource.RLIMIT_CORE, 0, 0)):
        resource.setrlimit(res, (soft, hard))
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(cfg["gid"])
        os.setuid(cfg["uid"])
        if os.getuid() == 0 or os.geteuid() == 0:
            os._exit(97)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the credential change
    os.chdir(workdir)
    os.umask(0o077)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8",
                       "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past RLIMIT_FSIZE a write fails instead
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    try:
        with open("/proc/self/net/dev") as f:
            ifaces = [ln.split(":")[0].strip() for ln in f.read().splitlines()[2:]]
    except OSError:
        ifaces = None
    os.write(4, json.dumps({"isolation": iso, "uid": os.getuid(), "ifaces": ifaces,
                            "cwd": os.getcwd()}).encode())
    os.close(4)  # written and closed before any untrusted code runs
    harness["run"](job)
    os._exit(0)


class Server:
    """The job loop: at most ``parallel`` jobs at once, each with its own deadline."""

    def __init__(self, cfg, iso, harness):
        self.cfg, self.iso, self.harness = cfg, iso, harness
        self.pending = collections.deque()
        self.running = {}  # pid -> (job, fds, deadline, start, timed_out)
        self.buf, self.eof, self.parallel = b"", False, 1
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)

    def serve(self):
        while not (self.eof and not self.pending and not self.running):
            while self.pending and len(self.running) < self.parallel:
                self._start(self.pending.popleft())
            now = time.monotonic()
            timeout = min((r[2] for r in self.running.values()), default=now + 60) - now
            watch = [self.wake_r] + ([] if self.eof else [0])
            try:
                ready = select.select(watch, [], [], max(0.0, timeout))[0]
            except InterruptedError:
                ready = []
            if 0 in ready:
                self._read_jobs()
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self._reap()
            now = time.monotonic()
            for pid, (job, fds, deadline, start, timed_out) in list(self.running.items()):
                if now >= deadline and not timed_out:
                    os.kill(pid, signal.SIGKILL)
                    self.running[pid] = (job, fds, deadline, start, True)

    def _read_jobs(self):
        data = os.read(0, 1 << 16)
        if not data:
            self.eof = True
            return
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            if line.strip():
                job = json.loads(line)
                self.parallel = max(1, int(job.get("parallel", self.parallel)))
                self.pending.append(job)

    def _start(self, job):
        fds = {k: os.memfd_create(f"rlvr_{k}", os.MFD_CLOEXEC) for k in ("out", "result", "info")}
        for fd in fds.values():
            os.set_inheritable(fd, True)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                _job_process(self.cfg, job, self.iso, fds, self.harness)
            except BaseException:  # noqa: BLE001 - on the session's stderr
                traceback.print_exc()
            finally:
                os._exit(98)
        self.running[pid] = (job, fds, start + float(job["timeout_s"]), start, False)

    def _reap(self):
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.running:
                self._finish(pid, status)

    def _finish(self, pid, status):
        job, fds, _, start, timed_out = self.running.pop(pid)
        wall = time.monotonic() - start
        out = {k: _read(fds[k], RESULT_CAP if k != "out" else None) for k in fds}
        for fd in fds.values():
            os.close(fd)
        reply = {"id": job["id"], "timed_out": timed_out, "exit": os.waitstatus_to_exitcode(status),
                 "result": out["result"], "info": out["info"], "tail": out["out"], "wall_s": wall}
        os.write(1, (json.dumps(reply) + "\n").encode())


def _read(fd, cap):
    """A memfd's text: the first ``cap`` bytes, or (cap None) the last TAIL_CHARS bytes."""
    size = os.fstat(fd).st_size
    start = 0 if cap is not None else max(0, size - TAIL_CHARS)
    data = os.pread(fd, min(size - start, cap or TAIL_CHARS), start)
    return data.decode("utf-8", "replace")


def main():
    cfg = json.loads(sys.argv[1])
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    iso = {"net": False, "user_dropped": os.geteuid() == 0, "userns": False}
    _setup_session(iso)
    harness = {}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_harness.py")) as f:
        exec(compile(f.read(), "_harness.py", "exec"), harness)
    if cfg.get("require_isolation"):
        probe = _probe(cfg, iso)
        if not all(probe.get(k) for k in ("net", "fs", "pid", "user_dropped")):
            sys.stderr.write(f"sandbox isolation incomplete: {probe}\n")
            os._exit(96)  # nothing was run
    os.write(1, (json.dumps({"ready": iso}) + "\n").encode())
    os.set_blocking(0, True)
    Server(cfg, iso, harness).serve()
    os._exit(0)


def _probe(cfg, iso):
    """The isolation a job gets, measured with an empty job (for require_isolation)."""
    job = {"id": -1, "mode": "assert", "program": "", "exprs": [], "timeout_s": 10,
           "disk_mb": 1, "limits": {"memory_mb": 256, "cpu_s": 5, "output_bytes": 1 << 16,
                                    "open_files": 64, "processes": 8}}
    fds = {k: os.memfd_create(f"rlvr_{k}") for k in ("out", "result", "info")}
    pid = os.fork()
    if pid == 0:
        try:
            _job_process(cfg, job, iso, fds, {"run": lambda job: None})
        finally:
            os._exit(98)
    os.waitpid(pid, 0)
    try:
        return json.loads(_read(fds["info"], RESULT_CAP))["isolation"]
    except ValueError:
        return {}


if __name__ == "__main__":
    main()
