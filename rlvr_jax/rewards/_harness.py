"""Sandbox side of the code reward: runs one program and reports what it computed.

Loaded by the sandbox server (``_jail.py``) once per session; :func:`run` is called in
each job's program process (unprivileged, PID 2 of its own namespace, the child of a
trusted init) with fd 1 and 2 the captured output and fd 3 the result file. Nothing here decides whether a test passed:
the harness only reports **values** — in ``"assert"`` mode the JSON value of each
expression it was given (the non-literal operands of the tests' comparisons), in ``"io"``
mode the stdout of the program on each stdin case — and the trusted caller compares them
with expectations that never enter the sandbox (``rlvr_jax/rewards/_verdict.py``).

The program shares this process, so it can read or rewrite anything here (frames, the
result file, ``json``); all it can forge is values for the inputs it was shown, which is
no more than a program that computes them. One JSON line per event on fd 3:
``{"i": k, "value": v}`` or ``{"i": k, "error": name}`` (assert), ``{"i": k, "out": text,
"exit": code}`` (io), ``{"program_error": name}`` or ``{"loaded": true}`` once the
program ran (assert), and ``{"done": true}`` at the end.
"""
import io
import json
import os
import sys

RESULT_FD = 3
MAX_DEPTH = 64
_write, _dumps, _fork, _waitpid = os.write, json.dumps, os.fork, os.waitpid


class NotPlainJSON(Exception):
    """A value that is not None, bool, int, finite float, str, list, tuple or str-keyed dict."""


def plain(value, depth=0):
    """``value`` as plain JSON data (tuples become lists); raises NotPlainJSON otherwise.

    Exact type checks: an ``int`` subclass with its own ``__eq__`` is not plain."""
    t = type(value)
    if depth > MAX_DEPTH:
        raise NotPlainJSON("nested too deeply")
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise NotPlainJSON("non-finite float")
        return value
    if t is list or t is tuple:
        return [plain(v, depth + 1) for v in value]
    if t is dict:
        if not all(type(k) is str for k in value):
            raise NotPlainJSON("dict with non-str keys")
        return {k: plain(v, depth + 1) for k, v in value.items()}
    raise NotPlainJSON(f"{t.__name__} is not plain JSON")


def _report(obj):
    _write(RESULT_FD, (_dumps(obj) + "\n").encode("utf-8", "replace"))


def _run_assert(code, exprs):
    ns = {"__name__": "__completion__"}
    try:
        exec(code, ns)
    except SystemExit:
        pass
    except BaseException as e:  # noqa: BLE001 - the program's failure is its result
        _report({"program_error": type(e).__name__})
        return
    _report({"loaded": True})
    for i, src in enumerate(exprs):
        try:
            value = plain(eval(compile(src, "<test>", "eval"), ns))
            _report({"i": i, "value": value})
        except BaseException as e:  # noqa: BLE001
            _report({"i": i, "error": type(e).__name__})


def _run_case(code, text, cap):
    """Runs the program in a fork with ``text`` on stdin; (stdout text, exit code)."""
    in_fd, out_fd = os.memfd_create("stdin"), os.memfd_create("stdout")
    os.write(in_fd, text.encode("utf-8", "replace"))
    os.lseek(in_fd, 0, 0)
    pid = _fork()
    if pid == 0:
        status = 1
        try:
            os.dup2(in_fd, 0)
            os.dup2(out_fd, 1)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            try:
                exec(code, {"__name__": "__main__"})
                status = 0
            except SystemExit:
                status = 0
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        finally:
            os._exit(status)
    _, st = _waitpid(pid, 0)
    size = os.fstat(out_fd).st_size
    data = os.pread(out_fd, min(size, cap + 1), 0)
    os.close(in_fd)
    os.close(out_fd)
    return data.decode("utf-8", "replace"), os.waitstatus_to_exitcode(st)


def run(job):
    """Runs ``job`` (``{"mode", "program", "exprs" | "inputs", "max_case_chars"}``)."""
    try:
        code = compile(job["program"], "<completion>", "exec")
    except BaseException as e:  # noqa: BLE001
        _report({"program_error": type(e).__name__})
        code = None
    if code is not None and job["mode"] == "assert":
        _run_assert(code, job["exprs"])
    elif code is not None:
        cap = int(job.get("max_case_chars", 1 << 16))
        for i, text in enumerate(job["inputs"]):
            out, status = _run_case(code, text, cap)
            _report({"i": i, "out": out[:cap + 1], "exit": status})
    sys.stdout.flush()
    _report({"done": True})
