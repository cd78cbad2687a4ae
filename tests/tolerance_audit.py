"""Opt-in pytest plugin: how close each tolerance assertion came to failing.

Run the suite with ``RLVR_TOLERANCE_AUDIT=DIR`` set (conftest.py loads this plugin then) and
every ``np.testing.assert_allclose`` and ``pytest.approx`` comparison made from a test file
appends one JSON line to ``DIR/<pid>.jsonl``: the call site and its *margin use*

    ratio = max_i |actual_i - desired_i| / (atol + rtol * |desired_i|)

(1.0 = exactly at the tolerance; assert_allclose fails above 1). Then

    python tests/tolerance_audit.py DIR [DIR ...]

prints, per call site, the largest ratio seen in each directory, worst first. Run it under
several XLA CPU code paths (other vector widths with ``--xla_cpu_max_isa``, single-threaded
dots with ``--xla_cpu_multi_thread_eigen=false``) to see which tolerances depend on the
machine: a derived tolerance keeps its ratio well below 1 on all of them. This module only
records; it never changes what a test asserts.
"""
import inspect
import json
import os
import sys

import numpy as np

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _call_site():
    """'tests/file.py:line' of the innermost frame in a test file, or None."""
    for frame in inspect.stack()[2:]:
        path = os.path.abspath(frame.filename)
        if path.startswith(_TESTS_DIR) and path != os.path.abspath(__file__):
            return f"tests/{os.path.relpath(path, _TESTS_DIR)}:{frame.lineno}"
    return None


def _ratio(actual, desired, rtol, atol):
    a = np.asarray(actual, np.float64)
    d = np.asarray(desired, np.float64)
    a, d = np.broadcast_arrays(a, d)
    both_nan = np.isnan(a) & np.isnan(d)
    equal = (a == d) | both_nan
    err = np.where(equal, 0.0, np.abs(a - d))
    tol = atol + rtol * np.abs(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / tol)
    return float(np.nanmax(r)) if r.size else 0.0


def install(out_dir):
    """Wrap np.testing.assert_allclose and pytest.approx so that each call records a line."""
    from _pytest import approx as python_api

    os.makedirs(out_dir, exist_ok=True)
    out = open(os.path.join(out_dir, f"{os.getpid()}.jsonl"), "a", buffering=1)

    def record(kind, ratio):
        site = _call_site()
        if site is not None:
            out.write(json.dumps({"site": site, "kind": kind, "ratio": ratio}) + "\n")

    original = np.testing.assert_allclose

    def assert_allclose(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
        try:
            record("allclose", _ratio(actual, desired, rtol, atol))
        except (TypeError, ValueError):
            pass
        return original(actual, desired, rtol, atol, *args, **kwargs)

    np.testing.assert_allclose = assert_allclose

    scalar_eq = python_api.ApproxScalar.__eq__

    def approx_eq(self, actual):
        result = scalar_eq(self, actual)
        try:
            tol = float(self.tolerance)
            err = abs(float(actual) - float(self.expected))
            record("approx", 0.0 if err == 0 else (err / tol if tol > 0 else float("inf")))
        except (TypeError, ValueError, OverflowError):
            pass
        return result

    python_api.ApproxScalar.__eq__ = approx_eq


def _summarise(dirs):
    worst = {}
    for k, d in enumerate(dirs):
        for name in os.listdir(d):
            with open(os.path.join(d, name)) as f:
                for line in f:
                    r = json.loads(line)
                    row = worst.setdefault(r["site"], [0.0] * len(dirs))
                    row[k] = max(row[k], r["ratio"])
    print("max ratio per directory (" + ", ".join(dirs) + ")")
    for site, row in sorted(worst.items(), key=lambda kv: -max(kv[1])):
        print("  ".join(f"{x:9.3g}" for x in row), site)


if __name__ == "__main__":
    _summarise(sys.argv[1:])
