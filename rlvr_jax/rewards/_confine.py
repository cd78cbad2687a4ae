"""Confinement layers of one sandboxed program (stdlib only; loaded by ``_jail.py``).

* :func:`minimal_root` (the job's init, in its new mount namespace): every mount of the
  host read-only and ``nosuid`` (``mount_setattr``, recursive), a fresh size-limited tmpfs
  on ``/tmp`` holding the only writable directory (``/tmp/sandbox``), ``/dev`` replaced by
  a tmpfs with ``null``, ``zero``, ``random``, ``urandom`` only, empty read-only tmpfs over
  ``/run`` (``/var/run``) and the other world-writable directories;
* :func:`fresh_keyring` (the program process): a new anonymous session keyring;
* :func:`seccomp` (the program process, last): ``no_new_privs`` and a classic-BPF filter:
  x86-64 only (any other architecture or the x32 ABI is refused), ``EPERM`` for keyrings
  (``keyctl``, ``add_key``, ``request_key``), ``ptrace`` and ``process_vm_*``, mounts and
  namespaces (``mount``, ``umount2``, ``unshare``, ``setns``, ``pivot_root``, ``chroot``,
  the new mount API, ``clone`` with a namespace flag; ``clone3`` answers ``ENOSYS`` so the
  C library falls back to ``clone``), ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring``, modules, ``kexec``, ``reboot``, ``swapon``, ``syslog``, and ``socket`` of
  any family but ``AF_INET`` / ``AF_INET6`` (no Unix, netlink or vsock sockets);
* :func:`pids_cgroup` (the server): a cgroup-v1 ``pids`` directory per session, one child
  per job with ``pids.max`` (its own process budget).

Each returns whether it held; the caller reports it (``SandboxResult.isolation``).
"""
import ctypes
import errno
import os
import platform
import struct

_libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 4096, 8192, 0x4000, 1 << 18
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 1, 2
SYS_MOUNT_SETATTR = 442
DEVICES = ("null", "zero", "random", "urandom")
COVERED_DIRS = ("/run", "/var/run", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock",
                "/dev/mqueue")


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    return _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                       enc(data)) == 0


def _read_only_root():
    """Every mount under / read-only and nosuid (one recursive ``mount_setattr``)."""
    attr = struct.pack("=QQQQ", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    return _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, buf, len(attr)) == 0


def _devices(stage):
    """A small tmpfs at ``stage`` with the harmless devices bound in, moved onto /dev."""
    if not mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=16k,mode=0755"):
        return False
    for name in DEVICES:
        path = os.path.join(stage, name)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
        if not mount(f"/dev/{name}", path, None, MS_BIND):
            return False
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(stage, name))
    if not mount(stage, "/dev", None, MS_MOVE):
        return False
    os.rmdir(stage)
    return True


def minimal_root(disk_mb, uid, gid):
    """In a new mount namespace: the file system a program sees (module docstring).
    Returns {"fs": the private /tmp and covers, "ro_root": host mounts read-only,
    "dev": the reduced /dev}; all False when the private propagation failed."""
    out = {"fs": False, "ro_root": False, "dev": False}
    if not mount(None, "/", None, MS_REC | MS_PRIVATE):
        return out
    out["ro_root"] = _read_only_root()
    size = f"size={int(disk_mb)}m,mode=0755,nr_inodes=4096"
    if not mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, size):
        return out
    stage = "/tmp/.dev"
    os.mkdir(stage, 0o755)
    out["dev"] = _devices(stage)
    for d in COVERED_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            if not mount("tmpfs", d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         "size=4k,mode=0755"):
                return out
    os.mkdir("/tmp/sandbox", 0o700)
    os.chown("/tmp/sandbox", uid, gid)
    out["fs"] = True
    return out


def fresh_keyring():
    """Joins a new anonymous session keyring (KEYCTL_JOIN_SESSION_KEYRING, no name)."""
    return _libc.syscall(250, 1, None) > 0


# ---------------------------------------------------------------- seccomp (classic BPF)

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
LD_ABS_W, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
NR_CLONE, NR_CLONE3, NR_SOCKET = 56, 435, 41
NS_FLAGS = 0x7E020000  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}
AF_INET, AF_INET6 = 2, 10
DENIED = {  # x86-64 syscall numbers
    "ptrace": 101, "syslog": 103, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442, "quotactl_fd": 443,
}


def seccomp_program():
    """The filter: a list of (code, jt, jf, k) classic-BPF instructions."""
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    prog = [(LD_ABS_W, 0, 0, 4), (JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (RET_K, 0, 0, RET_KILL_PROCESS),
            (LD_ABS_W, 0, 0, 0), (JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, eperm)]
    for nr in sorted(DENIED.values()):
        prog += [(JEQ_K, 0, 1, nr), (RET_K, 0, 0, eperm)]
    prog += [(JEQ_K, 0, 1, NR_CLONE3), (RET_K, 0, 0, enosys),
             (JEQ_K, 0, 4, NR_CLONE), (LD_ABS_W, 0, 0, 16), (JSET_K, 0, 1, NS_FLAGS),
             (RET_K, 0, 0, eperm), (RET_K, 0, 0, RET_ALLOW),
             (JEQ_K, 0, 5, NR_SOCKET), (LD_ABS_W, 0, 0, 16), (JEQ_K, 2, 0, AF_INET),
             (JEQ_K, 1, 0, AF_INET6), (RET_K, 0, 0, eperm), (RET_K, 0, 0, RET_ALLOW),
             (RET_K, 0, 0, RET_ALLOW)]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PROGRAM = seccomp_program()  # built once, in the server, before any job
_FILTER = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *ins) for ins in _PROGRAM))
_X86_64 = platform.machine() == "x86_64"


def seccomp():
    """``no_new_privs`` then the filter; (no_new_privs held, filter held). The filter is
    x86-64 only: elsewhere it is not installed (and reported so)."""
    nnp = _libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) == 0  # PR_SET_NO_NEW_PRIVS
    if not nnp or not _X86_64:
        return nnp, False
    fprog = _SockFprog(len(_PROGRAM), ctypes.addressof(_FILTER))
    ok = _libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(fprog), ctypes.c_ulong(0),
                     ctypes.c_ulong(0)) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    return nnp, ok


# ---------------------------------------------------------------- per-job process budget

def pids_cgroup(name):
    """A new cgroup-v1 ``pids`` directory ``name`` under this process's own pids cgroup,
    or None (no such hierarchy, or not writable: then jobs share ``RLIMIT_NPROC``)."""
    try:
        with open("/proc/self/cgroup") as f:
            own = [ln.split(":", 2)[2].strip() for ln in f
                   if "pids" in ln.split(":", 2)[1].split(",")]
        with open("/proc/self/mountinfo") as f:
            mounts = [ln.split() for ln in f]
    except OSError:
        return None
    for fields in mounts:
        sep = fields.index("-")
        if own and fields[sep + 1] == "cgroup" and "pids" in fields[sep + 3].split(","):
            rel = own[0]
            if fields[3] != "/" and rel.startswith(fields[3]):  # a cgroup namespace's root
                rel = rel[len(fields[3]):]
            path = os.path.join(fields[4] + rel, name)
            _remove_stale(os.path.dirname(path))
            try:
                os.mkdir(path, 0o755)
                with open(os.path.join(path, "pids.max"), "w") as g:
                    g.write("max")
                return path
            except OSError:
                return None
    return None


def _remove_stale(parent):
    """Removes the cgroups of sandbox servers that are gone (killed with their caller)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("rlvr_sandbox_")]
    except OSError:
        return
    for name in names:
        try:
            os.kill(int(name.rsplit("_", 1)[1]), 0)
            continue  # its server still runs
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue
        path = os.path.join(parent, name)
        for sub in os.listdir(path):
            if os.path.isdir(os.path.join(path, sub)):
                drain_cgroup(os.path.join(path, sub), attempts=100)
        drain_cgroup(path, attempts=100)


def drain_cgroup(path, attempts=10_000):
    """Kills whatever is left in the cgroup ``path`` and removes it; whether it is gone."""
    import signal
    import time
    for _ in range(attempts):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            pass
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)
    return False
