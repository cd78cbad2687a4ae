"""Batched host verifiers in a process pool with per-sample timeouts.

A :class:`RewardPool` starts its worker processes once (``forkserver`` or ``spawn``
context: never ``fork`` from a process that runs JAX threads). Samples are sent to
idle workers in chunks (at most ``chunk_size``, about an equal share each) and every
result comes back on its own as soon as it is computed, so a worker never waits for the
caller between samples; each sample still has its own clock (it starts when the previous
result of its worker arrives). A sample that raises scores 0 and counts as an error, a worker that
dies (segfault, ``os._exit``) scores 0 and is replaced, and a sample that runs past
``timeout_s`` scores 0, counts as a timeout and its worker is killed (``SIGKILL``) and
replaced; the samples queued behind a dead or killed worker's are sent again. ``score``
therefore always returns: each sample holds its worker for at most ``timeout_s``, so a
batch takes about ``ceil(B / num_workers) * timeout_s`` at worst, plus worker restarts.

A worker runs the verifier on its main thread, so math-verify's own ``SIGALRM`` timeouts,
which :func:`rlvr_jax.rewards.math.math_verify_reward` keeps on (unless its
``timeout_s=None``), work there; the pool's timeout is the backstop.
"""
from __future__ import annotations

import collections
import math
import multiprocessing as mp
import time
from multiprocessing.connection import wait

import numpy as np


def _worker_main(conn, fn, preload):
    import importlib
    for name in preload:
        importlib.import_module(name)
    conn.send(("ready",))  # ``fn`` (and its module) is loaded: per-sample clocks start now
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        for idx, completion, reference in msg:  # a chunk; one reply per sample, in order
            try:
                out = fn(completion, reference)
                reply = (idx, "ok", out)
            except BaseException as e:  # noqa: BLE001 - any failure of a verifier is a 0 reward
                reply = (idx, "error", f"{type(e).__name__}: {str(e)[:200]}")
            try:
                conn.send(reply)
            except Exception as e:  # unpicklable result
                conn.send((idx, "error", f"result not picklable: {type(e).__name__}"))


def split_output(out) -> tuple[float, dict]:
    """A verifier returns a float, ``(float, {name: float})`` or ``{"reward": float, name: float}``."""
    if isinstance(out, dict):
        if "reward" not in out:
            raise ValueError("a verifier returning a dict must include 'reward'")
        comps = {k: float(v) for k, v in out.items() if k != "reward"}
        return float(out["reward"]), comps
    if isinstance(out, tuple):
        return float(out[0]), {k: float(v) for k, v in out[1].items()}
    return float(out), {}


class _Worker:
    def __init__(self, ctx, fn, preload):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, fn, preload), daemon=True)
        self.proc.start()
        child.close()
        self.queue = collections.deque()  # sample indices sent, in the order it runs them
        self.deadline = None              # when the head of the queue must be done
        self.ready = False
        self.started = time.monotonic()

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class RewardPool:
    """Score completions with a host verifier in ``num_workers`` processes.

    Args:
      fn: picklable (module-level) ``fn(completion: str, reference) -> float`` (or
        ``(float, components)`` / ``{"reward": float, **components}``).
      num_workers: worker processes, started now.
      timeout_s: wall-clock limit per sample.
      context: ``"forkserver"`` (default) or ``"spawn"``.
      startup_timeout_s: how long a (re)started worker may take to import ``fn``; a worker
        that fails to start raises RuntimeError (a set-up error, not a sample's fault).
      preload: modules each worker imports before it is ready (e.g. ``("math_verify",)``),
        so that a lazy import does not count against the first sample's timeout.
      chunk_size: the most samples sent to a worker at once (1: one round trip each).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, fn, *, num_workers: int = 2, timeout_s: float = 10.0,
                 context: str = "forkserver", startup_timeout_s: float = 120.0,
                 preload: tuple = (), chunk_size: int = 16):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if context not in ("forkserver", "spawn"):
            raise ValueError(f"context must be 'forkserver' or 'spawn', got {context!r}")
        if not callable(fn):
            raise ValueError("fn must be callable")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.fn, self.chunk_size = fn, int(chunk_size)
        self.timeout_s = float(timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self._ctx = mp.get_context(context)
        self._preload = tuple(preload)
        self._workers = [_Worker(self._ctx, fn, self._preload) for _ in range(num_workers)]
        self.restarts = 0
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stop the workers (politely, then ``SIGKILL`` after a second)."""
        if self._closed:
            return
        self._closed = True
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.proc.join(1.0)
            w.kill()
        self._workers = []

    def _replace(self, i):
        self._workers[i].kill()
        self._workers[i] = _Worker(self._ctx, self.fn, self._preload)
        self.restarts += 1

    def _check_started(self, w, has_message, now):
        if has_message:
            try:
                w.conn.recv()
                w.ready = True
                return
            except (EOFError, OSError):
                w.proc.join(1.0)
                raise RuntimeError(f"reward worker failed to start (exit code {w.proc.exitcode}); "
                                   "is the verifier a picklable module-level function, and is the "
                                   "caller's main module guarded by `if __name__ == "
                                   "'__main__':`?") from None
        if now >= w.started + self.startup_timeout_s:
            raise RuntimeError(f"reward worker did not start within {self.startup_timeout_s:g}s")

    def score(self, completions: list[str], references: list) -> tuple[np.ndarray, dict]:
        """Rewards ``float32[B]`` and info: ``errors``, ``timeouts``, ``error_messages``
        (first 5), ``components`` (``{name: float32[B]}``), ``wall_s``."""
        if self._closed:
            raise RuntimeError("RewardPool is closed")
        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        start = time.monotonic()
        n = len(completions)
        self._run = {"rewards": np.zeros((n,), np.float32), "comps": {}, "errors": 0,
                     "timeouts": 0, "messages": [], "done": 0, "single": False,
                     "pending": collections.deque(range(n))}
        r = self._run
        while r["done"] < n:
            for i in range(len(self._workers)):
                self._dispatch(i, completions, references)
            waiting = [w for w in self._workers if w.queue or not w.ready]
            if not waiting:
                continue
            deadlines = [w.deadline if w.ready else w.started + self.startup_timeout_s
                         for w in waiting]
            ready = set(wait([w.conn for w in waiting],
                             timeout=max(0.0, min(deadlines) - time.monotonic())))
            now = time.monotonic()
            for i, w in enumerate(self._workers):
                if not w.ready:
                    self._check_started(w, w.conn in ready, now)
                elif w.queue and w.conn in ready:
                    self._collect(i)
                elif w.queue and now >= w.deadline:
                    self._fail(i, "timeouts", f"timed out after {self.timeout_s:g}s")
        info = {"errors": r["errors"], "timeouts": r["timeouts"],
                "error_messages": r["messages"][:5], "components": r["comps"],
                "wall_s": time.monotonic() - start}
        return r["rewards"], info

    def _dispatch(self, i, completions, references):
        """Sends worker i a chunk of pending samples when it is ready and idle."""
        w, r = self._workers[i], self._run
        pending = r["pending"]
        if not (w.ready and not w.queue and pending):
            return
        share = math.ceil(len(pending) / len(self._workers))
        size = 1 if r["single"] else max(1, min(self.chunk_size, share))
        chunk = [pending.popleft() for _ in range(min(size, len(pending)))]
        try:
            w.conn.send([(idx, completions[idx], references[idx]) for idx in chunk])
        except Exception as e:  # noqa: BLE001 - a dead worker or an unpicklable input
            if len(chunk) > 1:  # Find the culprit: from now on one sample at a time.
                r["single"] = True
                pending.extendleft(reversed(chunk))
            else:
                self._count(chunk[0], "errors", f"send failed: {type(e).__name__}")
            if isinstance(e, OSError):
                self._replace(i)
            return
        w.queue.extend(chunk)
        w.deadline = time.monotonic() + self.timeout_s

    def _collect(self, i):
        """Reads every result worker i has sent so far."""
        w = self._workers[i]
        while w.queue and w.conn.poll():
            try:
                idx, status, out = w.conn.recv()
            except (EOFError, OSError):
                self._fail(i, "errors", f"worker died (exit {w.proc.exitcode})")
                return
            w.queue.remove(idx)  # The head: a worker runs its chunk in order.
            w.deadline = time.monotonic() + self.timeout_s  # The next sample's clock.
            self._record(idx, status, out)

    def _record(self, idx, status, out):
        r = self._run
        if status != "ok":
            self._count(idx, "errors", out)
            return
        try:
            value, parts = split_output(out)
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            self._count(idx, "errors", f"bad verifier output: {e}")
            return
        if not np.isfinite(value):
            self._count(idx, "errors", f"non-finite reward {value}")
            return
        r["done"] += 1
        r["rewards"][idx] = value
        n = len(r["rewards"])
        for k, v in parts.items():
            r["comps"].setdefault(k, np.zeros((n,), np.float32))[idx] = v

    def _count(self, idx, kind, message):
        """Sample idx scores 0, counted as `kind` ("errors" or "timeouts")."""
        r = self._run
        r[kind] += 1
        r["done"] += 1
        r["messages"].append(f"sample {idx}: {message}")

    def _fail(self, i, kind, message):
        """Worker i's running sample failed (hang or death): it scores 0, the samples queued
        behind it go back to the front of the pending queue, the worker is replaced."""
        w = self._workers[i]
        head, rest = w.queue.popleft(), list(w.queue)
        w.queue.clear()
        self._count(head, kind, message)
        self._run["pending"].extendleft(reversed(rest))
        self._replace(i)
