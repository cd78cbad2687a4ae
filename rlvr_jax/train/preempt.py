"""SIGTERM (a preempted VM, a cluster scheduler): finish the step, checkpoint it, exit 143.

`handle_sigterm()` is a context manager that, while active (main thread only), turns the
first SIGTERM into a flag; a second SIGTERM ends the process at once (the default action).
The run loop asks `requested()` between steps; on a multi-host run the processes agree
(any process signalled: all stop after the same step, so all take part in the save).
"""
import contextlib
import signal
import threading

import numpy as np

_FLAG = {"set": False}


class Preempted(Exception):
    """The run stopped on SIGTERM; `step` is the RL step saved (None: nothing to save)."""

    def __init__(self, message: str, step=None):
        super().__init__(message)
        self.step = step


def _on_sigterm(signum, frame):
    _FLAG["set"] = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # A second SIGTERM: gone at once.


@contextlib.contextmanager
def handle_sigterm():
    """Records SIGTERM instead of dying while the block runs (a no-op off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _FLAG["set"] = False
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _FLAG["set"] = False


def requested() -> bool:
    """Whether a SIGTERM arrived (on any process: a collective on multi-host runs, so every
    process must call it at the same point)."""
    import jax
    if jax.process_count() == 1:
        return _FLAG["set"]
    from jax.experimental import multihost_utils
    flags = multihost_utils.process_allgather(np.asarray(_FLAG["set"], np.int32))
    return bool(np.any(flags))

