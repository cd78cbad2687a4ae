"""Sandbox server for :mod:`rlvr_jax.rewards.code` (a standalone script, stdlib only).

Started once per sandbox session (``python -I -S _jail.py CONFIG_JSON``, in a new session,
by :class:`rlvr_jax.rewards._sandbox.Session`). It is trusted, and it stays **clean**: it
never reads a job's program, tests or results. A job arrives as one message on fd 0 (a
``SOCK_SEQPACKET`` socket): a small JSON header (id, timeout, process budget) and four
memfds made by the caller (the job's JSON, its captured output, its results, its isolation
report). The server hands them to a **spare** (below) and closes its own copies; once the
job is over it answers one JSON line on fd 1 (exit status, timed out, wall time) and the
caller reads the memfds. So each program runs in a process that never held another job's
data: spares are forked from the clean server before their jobs arrive.

Set-up, once: as root a new network namespace (no interfaces but a down loopback) and a
cgroup-v1 ``pids`` directory; not root an unprivileged user + network namespace when the
kernel allows one. The server keeps ``parallel`` spares ready; a spare is (``_confine.py``
holds the layers):

1. the **job process** (trusted; root, or the caller in its user namespace): joins its own
   pids cgroup, keeps only its socket to the server, enters new PID, mount and IPC
   namespaces and forks the init; at the job's timeout the server sends it ``SIGTERM``, on
   which it kills the init;
2. the **init** (trusted, PID 1 of the namespace, not dumpable): the minimal root file
   system and a private ``/proc``; it waits for its job on the socket (four memfds), sets
   the size of ``/tmp``, forks the program process and reaps every orphan until the
   program exits, then exits with its status: the kernel kills whatever else is in the
   namespace before the init is reaped, so nothing of a job outlives its reply;
3. the **program process** (PID 2): its own session, descriptors 0-4 only, resource limits,
   a fresh session keyring, the drop to the unprivileged user, a minimal environment,
   ``no_new_privs`` and the seccomp filter; then the harness (``_harness.py``) runs it.

The isolation obtained is written by the program process to its report memfd (then
closed) before any untrusted code runs.
"""
import collections
import ctypes
import fcntl
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
TERM_GRACE_S = 5.0       # after SIGTERM at the timeout, SIGKILL
TRUSTED_PROCESSES = 2    # the job process and the init, in the job's pids budget
FDS = ("job", "out", "result", "info")
_libc = ctypes.CDLL(None, use_errno=True)
_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    """A sibling file's globals (``-I`` leaves the script's directory off ``sys.path``)."""
    ns = {"__name__": name}
    with open(os.path.join(_HERE, name)) as f:
        exec(compile(f.read(), name, "exec"), ns)
    return ns


def _unshare(flags):
    return _libc.unshare(ctypes.c_int(flags)) == 0


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


def _job_process(cfg, cgroup, sock, iso, lib):
    """A spare's trusted job process: cgroup, namespaces, the init; exits with the init."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _libc.prctl(PR_SET_DUMPABLE, 0)
    if cgroup:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    keep = sorted({sock, 2})
    for lo, hi in zip([-1] + keep, keep + [1 << 16]):
        os.closerange(lo + 1, hi)  # the server's socket, pipes and other spares' sockets
    iso = dict(iso, pid=False, fs=False, proc=False, ro_root=False, dev=False, init=False)
    if os.geteuid() == 0 or iso.get("userns"):
        iso["pid"] = _unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC)
    workdir = None
    if not iso["pid"]:  # no mount namespace: a directory of its own, removed afterwards
        workdir = tempfile.mkdtemp(prefix="rlvr_job_", dir="/tmp")
        os.chown(workdir, cfg["uid"], cfg["gid"])
    alive_r, alive_w = os.pipe()  # EOF in the init: this process is gone
    init = [0]
    signal.signal(signal.SIGTERM, lambda *a: init[0] and os.kill(init[0], signal.SIGKILL))
    init[0] = os.fork()
    if init[0] == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.close(alive_w)
            _init(cfg, iso, lib, sock, alive_r, workdir)
        except BaseException:  # noqa: BLE001 - set-up failed: on the session's stderr
            traceback.print_exc()
        finally:
            os._exit(98)
    os.close(alive_r)
    os.close(sock)
    _, status = os.waitpid(init[0], 0)  # retried after the SIGTERM handler (PEP 475)
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(cfg, iso, lib, sock, alive_r, workdir):
    """PID 1 of the job's namespace: the file system; then (once its job arrives on
    ``sock``) the program; reaps orphans until the program exits."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _libc.prctl(PR_SET_DUMPABLE, 0)
    if select.select([alive_r], [], [], 0)[0]:  # the job process died before the prctl
        os._exit(99)
    os.close(alive_r)
    if iso["pid"]:
        iso.update(lib["minimal_root"](1, cfg["uid"], cfg["gid"]))
        iso["proc"] = iso["fs"] and lib["mount"]("proc", "/proc", "proc", 2 | 4 | 8)
        iso["init"] = os.getpid() == 1
    conn = socket.socket(fileno=sock)
    msg, got, _, _ = socket.recv_fds(conn, 1 << 12, len(FDS))
    if not msg or len(got) != len(FDS):
        os._exit(0)  # the server is gone: never used
    conn.close()
    fds = dict(zip(FDS, got))
    job_fd = fds.pop("job")
    job = json.loads(os.pread(job_fd, os.fstat(job_fd).st_size, 0))
    os.close(job_fd)
    if iso["fs"]:  # the job's size for its /tmp
        iso["fs"] = lib["mount"](None, "/tmp", None, 32 | 2 | 4, f"size={int(job['disk_mb'])}m")
    program = os.fork()
    if program == 0:
        try:
            _program_process(cfg, job, iso, fds, lib, workdir or "/tmp/sandbox")
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            os._exit(98)
    for fd in fds.values():
        os.close(fd)
    while True:
        pid, status = os.wait()
        if pid == program:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _program_process(cfg, job, iso, fds, lib, workdir):
    """The program's process: limits, keyring, user drop, seccomp, then the harness."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()  # kill(0, ...) reaches this job's processes only
    # Descriptors: 0 /dev/null, 1 and 2 the captured output, 3 results, 4 isolation info.
    high = {k: fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for k, fd in fds.items()}  # no clobbering
    high["null"] = fcntl.fcntl(os.open(os.devnull, os.O_RDONLY), fcntl.F_DUPFD, 256)
    for key, dst in (("null", 0), ("out", 1), ("out", 2), ("result", 3), ("info", 4)):
        os.dup2(high[key], dst)
    os.closerange(5, 1 << 16)
    lim = job["limits"]
    mem = int(lim["memory_mb"]) << 20
    # With a pids cgroup per job, RLIMIT_NPROC (a count over the whole user) stays at its
    # inherited hard limit: the cgroup is the budget, and siblings do not share it.
    nproc = int(lim["processes"])
    if iso["pids"] == "cgroup":
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    for res, soft, hard in (
            (resource.RLIMIT_AS, mem, mem),
            (resource.RLIMIT_DATA, mem, mem),
            (resource.RLIMIT_CPU, int(lim["cpu_s"]), int(lim["cpu_s"]) + 1),
            (resource.RLIMIT_FSIZE, int(lim["output_bytes"]), int(lim["output_bytes"])),
            (resource.RLIMIT_NOFILE, int(lim["open_files"]), int(lim["open_files"])),
            (resource.RLIMIT_NPROC, nproc, nproc),
            (resource.RLIMIT_CORE, 0, 0)):
        resource.setrlimit(res, (soft, hard))
    iso["keyring"] = lib["fresh_keyring"]()
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
    iso["no_new_privs"], iso["seccomp"] = lib["seccomp"]()  # last: nothing privileged after
    os.write(4, json.dumps({"isolation": iso, "uid": os.getuid(), "ifaces": ifaces,
                            "cwd": os.getcwd()}).encode())
    os.close(4)  # written and closed before any untrusted code runs
    lib["run"](job)
    os._exit(0)


class Server:
    """The job loop: at most ``parallel`` jobs at once, each with its own deadline. It keeps
    ``parallel`` spares (a job process and its init, the file system built) forked ahead,
    before their jobs arrive; a job is handed to a spare."""

    def __init__(self, cfg, iso, lib):
        self.cfg, self.iso, self.lib = cfg, iso, lib
        self.sock = socket.socket(fileno=0)
        self.pending = collections.deque()
        self.running = {}  # pid -> [hdr, deadline, start, timed_out, kill_at, cgroup]
        self.spares, self.cgroups = [], {}  # [(pid, socket)]; pid -> cgroup (spare or job)
        self.eof, self.parallel, self.seq = False, 1, 0
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)

    def serve(self):
        while not (self.eof and not self.pending and not self.running):
            while self.pending and len(self.running) < self.parallel:
                self._start(*self.pending.popleft())
            while not self.eof and len(self.spares) < self.parallel:
                self.spares.append(self._spawn())
            now = time.monotonic()
            wake = [r[4] if r[3] else r[1] for r in self.running.values()]
            timeout = min(wake, default=now + 60) - now
            watch = [self.wake_r] + ([] if self.eof else [self.sock])
            try:
                ready = select.select(watch, [], [], max(0.0, timeout))[0]
            except InterruptedError:
                ready = []
            if self.sock in ready:
                self._read_job()
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self._reap()
            now = time.monotonic()
            for pid, run in self.running.items():
                if not run[3] and now >= run[1]:  # timeout: the job process kills its init
                    os.kill(pid, signal.SIGTERM)
                    run[3], run[4] = True, now + TERM_GRACE_S
                elif run[3] and now >= run[4]:
                    os.kill(pid, signal.SIGKILL)
                    run[4] = now + 60.0
        for pid, sock in self.spares:  # at EOF, after the last job
            os.kill(pid, signal.SIGKILL)
            sock.close()
            os.waitpid(pid, 0)
            if self.cgroups.get(pid):
                self.lib["drain_cgroup"](self.cgroups[pid])

    def _read_job(self):
        msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, len(FDS))
        if not msg:
            self.eof = True
            return
        hdr = json.loads(msg)
        if len(fds) != len(FDS):
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"job {hdr.get('id')}: {len(fds)} descriptors")
        self.parallel = max(1, int(hdr.get("parallel", self.parallel)))
        self.pending.append((hdr, dict(zip(FDS, fds))))

    def _spawn(self):
        """A new spare: (pid of its job process, the socket its init takes its job from)."""
        self.seq += 1
        cgroup = None
        if self.iso["pids"] == "cgroup":
            cgroup = os.path.join(self.cfg["cgroup"], f"s{self.seq}")
            os.mkdir(cgroup, 0o755)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _job_process(self.cfg, cgroup, theirs.fileno(), self.iso, self.lib)
            except BaseException:  # noqa: BLE001 - on the session's stderr
                traceback.print_exc()
            finally:
                os._exit(98)
        theirs.close()
        self.cgroups[pid] = cgroup
        return pid, ours

    def _start(self, hdr, fds):
        """Hands a job to a spare (a new one if none is left or the first is dead)."""
        while True:
            pid, sock = self.spares.pop(0) if self.spares else self._spawn()
            cgroup = self.cgroups[pid]
            try:
                if cgroup:
                    with open(os.path.join(cgroup, "pids.max"), "w") as f:
                        f.write(str(int(hdr["processes"]) + TRUSTED_PROCESSES))
                socket.send_fds(sock, [json.dumps(hdr).encode()], [fds[k] for k in FDS])
                break
            except OSError:
                os.kill(pid, signal.SIGKILL)  # reaped (and its cgroup removed) by _reap
            finally:
                sock.close()
        for fd in fds.values():
            os.close(fd)
        start = time.monotonic()
        self.running[pid] = [hdr, start + float(hdr["timeout_s"]), start, False, 0.0, cgroup]

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            cgroup = self.cgroups.pop(pid, None)
            if cgroup and not self.lib["drain_cgroup"](cgroup):
                sys.stderr.write(f"sandbox: cgroup {cgroup} not emptied\n")
            self.spares = [s for s in self.spares if s[0] != pid]  # a spare that died
            if pid in self.running:
                self._finish(pid, status)

    def _finish(self, pid, status):
        hdr, _, start, timed_out, _, _ = self.running.pop(pid)
        reply = {"id": hdr["id"], "timed_out": timed_out, "exit": os.waitstatus_to_exitcode(status),
                 "wall_s": time.monotonic() - start}
        os.write(1, (json.dumps(reply) + "\n").encode())

    def probe(self):
        """The isolation a job gets, measured with an empty job (for require_isolation)."""
        job = {"mode": "assert", "program": "", "exprs": [], "disk_mb": 1,
               "limits": {"memory_mb": 256, "cpu_s": 5, "output_bytes": 1 << 16,
                          "open_files": 64, "processes": 8}}
        fds = {k: os.memfd_create(f"rlvr_{k}") for k in FDS}
        os.write(fds["job"], json.dumps(job).encode())
        info = os.dup(fds["info"])
        self._start({"id": -1, "timeout_s": 30, "processes": 8}, fds)
        (pid,) = self.running
        os.waitpid(pid, 0)
        self.running.clear()
        self.lib["drain_cgroup"](self.cgroups.pop(pid) or "/nonexistent")
        try:
            return json.loads(os.pread(info, 1 << 16, 0))["isolation"]
        except (ValueError, KeyError):
            return {}
        finally:
            os.close(info)


def main():
    cfg = json.loads(sys.argv[1])
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    iso = {"net": False, "user_dropped": os.geteuid() == 0, "userns": False, "pids": "rlimit"}
    _setup_session(iso)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # 4 descriptors per job held
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    lib = _load("_confine.py")
    lib["run"] = _load("_harness.py")["run"]
    cgroup = lib["pids_cgroup"](f"rlvr_sandbox_{os.getpid()}") if os.geteuid() == 0 else None
    if cgroup:
        iso["pids"], cfg["cgroup"] = "cgroup", cgroup
    server = Server(cfg, iso, lib)
    if cfg.get("require_isolation"):
        probe = server.probe()
        needed = ("net", "fs", "pid", "init", "user_dropped", "ro_root", "no_new_privs", "seccomp")
        if not all(probe.get(k) for k in needed):
            sys.stderr.write(f"sandbox isolation incomplete: {probe}\n")
            os._exit(96)  # nothing was run
    os.write(1, (json.dumps({"ready": iso, "cgroup": cgroup}) + "\n").encode())
    server.serve()
    if cgroup:
        lib["drain_cgroup"](cgroup)
    os._exit(0)


if __name__ == "__main__":
    main()
