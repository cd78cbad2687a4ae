"""Sandbox launcher for :mod:`rlvr_jax.rewards.code` (a standalone script, stdlib only).

Run as ``python -I -S _jail.py CONFIG_JSON`` in a new session by
:func:`rlvr_jax.rewards.code.run_tests`. As root it

1. enters new network, mount and PID namespaces (each one that the kernel allows);
2. in the mount namespace, mounts a fresh size-limited tmpfs on ``/tmp`` holding the
   only directory the untrusted program may write (``/tmp/sandbox``, owned by the
   unprivileged user) and covers the other world-writable directories with
   read-only tmpfs mounts;
3. forks the first process of the PID namespace (so that when it exits the kernel
   kills every process the program started), mounts a private ``/proc`` there, sets
   resource limits, drops to the unprivileged user and ``execve``s the harness with
   the system interpreter and a minimal environment.

Not root: it tries an unprivileged user + network namespace only; whatever could
not be set up is reported in the isolation flags, never silently assumed.
"""
import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
PR_SET_PDEATHSIG = 1
COVERED_DIRS = ("/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")

_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags):
    return _libc.unshare(ctypes.c_int(flags)) == 0


def _mount(source, target, fstype, flags, data):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    return _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def _setup_namespaces(cfg, iso):
    if os.geteuid() == 0:
        for name, flag in (("net", CLONE_NEWNET), ("fs", CLONE_NEWNS), ("pid", CLONE_NEWPID)):
            iso[name] = _unshare(flag)
        if iso["fs"]:
            iso["fs"] = _private_tmp(cfg)
    else:
        uid, gid = os.getuid(), os.getgid()
        if _unshare(CLONE_NEWUSER | CLONE_NEWNET):
            try:
                with open("/proc/self/setgroups", "w") as f:
                    f.write("deny")
                with open("/proc/self/uid_map", "w") as f:
                    f.write(f"{uid} {uid} 1")
                with open("/proc/self/gid_map", "w") as f:
                    f.write(f"{gid} {gid} 1")
                iso["net"] = True
            except OSError:
                iso["net"] = False


def _private_tmp(cfg):
    if not _mount(None, "/", None, MS_REC | MS_PRIVATE, None):
        return False
    size = f"size={int(cfg['disk_mb'])}m,mode=0755,nr_inodes=4096"
    if not _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, size):
        return False
    os.mkdir("/tmp/sandbox", 0o700)
    os.chown("/tmp/sandbox", cfg["uid"], cfg["gid"])
    for d in COVERED_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            if not _mount("tmpfs", d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "size=4k,mode=0755"):
                return False
    cfg["workdir"] = "/tmp/sandbox"
    return True


def _child(cfg, iso):
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if iso["pid"] and iso["fs"]:
        iso["proc"] = _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    lim = cfg["limits"]
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
    os.chdir(cfg["workdir"])
    os.umask(0o077)
    env = {"PATH": "/usr/bin:/bin", "HOME": cfg["workdir"], "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    info = json.dumps({"fd": cfg["fd"], "isolation": iso})
    py = cfg["python"]
    os.execve(py, [py, "-I", "-S", "-c", cfg["harness"], info], env)


def main():
    cfg = json.loads(sys.argv[1])
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    iso = {"net": False, "fs": False, "pid": False, "proc": False,
           "user_dropped": os.geteuid() == 0}
    _setup_namespaces(cfg, iso)
    if cfg.get("require_isolation") and not all(iso[k] for k in ("net", "fs", "pid", "user_dropped")):
        sys.stderr.write(f"sandbox isolation incomplete: {iso}\n")
        os._exit(96)  # nothing was run
    pid = os.fork()
    if pid == 0:
        try:
            _child(cfg, iso)
        finally:
            os._exit(98)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
