"""A workdir lock: one live run per workdir (`<workdir>/.lock`, held by process 0).

`check(workdir)` (read-only, before anything is written) refuses with a `ConfigError`
naming the holder (pid and host) while its process is alive; `acquire(workdir)` creates the
file atomically (O_EXCL) right before the run's first write and returns a release function
that removes it again. A lock left by a killed run (its pid no longer alive on this host) is
stale: `check` lets it pass and `acquire` takes it over. A lock of another host cannot be
checked from here: it counts as live (the message says how to remove it).
"""
import os
import socket
from typing import Callable, Optional, Tuple

from rlvr_jax.train.errors import ConfigError

LOCK = ".lock"


def _holder(path: str) -> Optional[Tuple[int, str]]:
    """(pid, host) written in the lock file, or None when there is none (or unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            pid, host = f.read().split(maxsplit=1)
        return int(pid), host.strip()
    except (OSError, ValueError):
        return None


def _alive(pid: int, host: str) -> bool:
    if host != socket.gethostname():
        return True  # Cannot be checked from this host.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # Alive, another user's.
    return True


def check(workdir: str) -> None:
    """Raises `ConfigError` when a live run holds `workdir`'s lock; writes nothing."""
    path = os.path.join(workdir, LOCK)
    holder = _holder(path)
    if holder is not None and _alive(*holder):
        pid, host = holder
        raise ConfigError(f"--workdir: {workdir} is in use by a running process (pid {pid} on "
                          f"{host}); wait for it to finish, or stop it (if that process is gone, "
                          f"remove {path})")


def check_all_processes(workdir: str) -> None:
    """`check` on a multi-host run: process 0 reads the lock (only its host can tell a dead
    holder) and every process raises the same `ConfigError` (a collective)."""
    import jax
    import numpy as np

    from rlvr_jax import distributed
    refusal = ""
    if jax.process_index() == 0:
        try:
            check(workdir)
        except ConfigError as e:
            refusal = str(e)
    if jax.process_count() > 1 and distributed.broadcast_from_main(np.int32(bool(refusal))):
        refusal = refusal or f"--workdir: {workdir} is in use by another run (see process 0)"
    if refusal:
        raise ConfigError(refusal)


def acquire(workdir: str) -> Callable[[], None]:
    """Takes `workdir`'s lock (a stale one is taken over); returns the function that releases
    it. Raises `ConfigError` when a live run holds it."""
    path = os.path.join(workdir, LOCK)
    me = f"{os.getpid()} {socket.gethostname()}\n"
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            check(workdir)  # Live: raises. Stale (or just released): remove and retry.
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(me)
        return lambda: _release(path, me)
    check(workdir)
    raise ConfigError(f"--workdir: could not take the lock {path}")


def _release(path: str, me: str) -> None:
    """Removes the lock if it is still ours."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() != me:
                return
        os.remove(path)
    except OSError:
        pass
