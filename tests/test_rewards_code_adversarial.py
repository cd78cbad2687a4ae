"""Code rewards that cannot be gamed: the verdict is taken outside the sandboxed process.

Every wrong solution below (the right one is ``x*5+3``) tries a trick on the harness and
must score 0 in both test formats; the honest solution scores 1 in both.
"""
import json

import pytest

from rlvr_jax.rewards import _verdict
from rlvr_jax.rewards import code as rc

# Every program here ends by itself: a budget it cannot hit on a loaded machine (a trick
# cut by the clock would score 0 for the wrong reason, an honest program fail).
CFG = rc.SandboxConfig(timeout_s=600.0, memory_mb=256)
INPUTS = [4, 7, 11]
ASSERTS = [f"assert f({x}) == {5 * x + 3}" for x in INPUTS]
IO = [{"input": f"{x}\n", "output": f"{5 * x + 3}\n"} for x in INPUTS]
HONEST = "def f(x):\n    return x * 5 + 3\n"
HONEST_IO = "x = int(input())\nprint(x * 5 + 3)\n"

# Each trick defines a wrong `f` (returns 0 unless the trick works) and, at module level,
# also acts as an io program (reads stdin, prints its "answer").
_IO_TAIL = "\ntry:\n    print(f(int(input())))\nexcept EOFError:\n    pass\n"
TRICKS = {
    # The old exploit: reach the harness's reporting function through the call stack.
    "frame_report": """
import sys
def f(x):
    fr = sys._getframe(1)
    while fr is not None:
        for name, v in list(fr.f_locals.items()) + list(fr.f_globals.items()):
            if callable(v) and 'report' in name:
                for i in range(10):
                    for line in ('ok %d' % i, {'i': i, 'value': True}, {'done': True}):
                        try:
                            v(line)
                        except Exception:
                            pass
        fr = fr.f_back
    return 0
""",
    # Search every frame, every object the interpreter holds and the process's memory for
    # the test's text (`f(4) == <expected>`) and return the expected value found there.
    "frame_walk_and_memory_scan": """
import gc, re, sys
PAT = re.compile(r'f\\((\\d+)\\)\\s*==\\s*(\\d+)')
def _texts():
    seen = []
    fr = sys._getframe(0)
    while fr is not None:
        seen += list(fr.f_locals.values()) + list(fr.f_globals.values()) + list(fr.f_code.co_consts)
        fr = fr.f_back
    seen += gc.get_objects()
    out = []
    def walk(v, depth=0):
        if depth > 4:
            return
        if isinstance(v, (str, bytes)):
            out.append(v if isinstance(v, str) else v.decode('latin-1'))
        elif isinstance(v, (list, tuple)):
            for w in v[:500]:
                walk(w, depth + 1)
        elif isinstance(v, dict):
            for w in list(v.values())[:500]:
                walk(w, depth + 1)
    for v in seen:
        walk(v)
    try:
        with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb') as mem:
            for line in maps:
                lo, hi = (int(a, 16) for a in line.split()[0].split('-'))
                if 'r' in line.split()[1] and hi - lo < 1 << 26:
                    try:
                        mem.seek(lo)
                        out.append(mem.read(hi - lo).decode('latin-1'))
                    except (OSError, ValueError, OverflowError):
                        pass
    except OSError:
        pass
    return out
def f(x):
    for text in _texts():
        for a, b in PAT.findall(text):
            if int(a) == x and a != '1':
                return int(b)
    return 0
""",
    # Patch builtins, json and operator so that whatever the harness compares or writes says
    # "pass".
    "monkeypatch_builtins": """
import builtins, json, operator
builtins.isinstance = lambda *a: True
builtins.type = lambda *a: int
operator.eq = lambda a, b: True
_orig = json.dumps
json.dumps = lambda obj, *a, **k: _orig({'i': obj.get('i'), 'value': True} if isinstance(obj, dict) and 'i' in obj else obj)
builtins.AssertionError = type('Never', (Exception,), {})
def f(x):
    return 0
""",
    # Objects that claim to equal anything, including an int subclass.
    "always_equal": """
class Eq:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
    def __str__(self): return '24'
class IntEq(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__
_n = [0]
def f(x):
    _n[0] += 1
    return Eq() if _n[0] % 2 else IntEq(0)
""",
    # Leave before any test runs (and, as io, before printing anything real).
    "exit_before_tests": """
import os
print('{"i": 0, "value": 24}')
os._exit(0)
def f(x):
    return 0
""",
    # Print and write every marker the harness might use, to every descriptor.
    "forged_markers": """
import os
lines = ['ok 0', 'ok 1', 'ok 2', 'done', '{"done": true}', '{"loaded": true}']
lines += ['{"i": %d, "value": %d}' % (i, v) for i in range(3) for v in range(0, 5)]
lines += ['{"i": %d, "out": "24", "exit": 0}' % i for i in range(3)]
text = '\\n'.join(lines) + '\\n'
print(text)
for fd in range(0, 20):
    try:
        os.write(fd, text.encode())
    except OSError:
        pass
def f(x):
    return 0
""",
    # Exceptions (and exits) from __del__ while the harness handles the value.
    "del_exceptions": """
import os, sys
class Boom:
    def __del__(self):
        try:
            os.write(3, b'{"i": 0, "value": 24}\\n{"done": true}\\n')
        except OSError:
            pass
        raise SystemExit(0)
class Exit:
    def __del__(self):
        os._exit(0)
def f(x):
    return Boom() if x == 4 else Exit()
""",
}


def _runs(programs, tests, mode):
    return rc.run_tests_batch(programs, [tests] * len(programs), config=CFG, mode=mode,
                              parallel=2)


def test_honest_solution_scores_one_in_both_formats():
    res_assert, = _runs([HONEST], ASSERTS, "assert")
    res_io, = _runs([HONEST_IO], IO, "io")
    assert res_assert.all_passed and res_assert.status == "ok"
    assert res_io.all_passed and res_io.status == "ok"
    completion = f"```python\n{HONEST}```"
    assert rc.code_reward(completion, ASSERTS, config=CFG) == 1.0
    assert rc.code_reward(f"```python\n{HONEST_IO}```", {"tests": IO, "mode": "io"},
                          config=CFG) == 1.0


@pytest.mark.parametrize("mode", ["assert", "io"])
def test_every_trick_scores_zero(mode):
    names = list(TRICKS)
    programs = [TRICKS[n] + (_IO_TAIL if mode == "io" else "") for n in names]
    results = _runs(programs, ASSERTS if mode == "assert" else IO, mode)
    scores = {n: r.passed for n, r in zip(names, results)}
    assert scores == {n: 0 for n in names}, scores
    assert [n for n, r in zip(names, results) if r.status == "timeout"] == []  # Not the clock.
    # The sandbox still works for the honest program afterwards.
    assert _runs([HONEST if mode == "assert" else HONEST_IO],
                 ASSERTS if mode == "assert" else IO, mode)[0].all_passed


def test_expected_values_never_enter_the_sandbox():
    """Everything sent to the sandbox for `assert f(x) == <literal>` holds the inputs only."""
    tests = ["assert f(4) == 987654321", "assert f(7) in (123456789, 234567891)",
             "assert not f(11) != 345678912 and f(1) <= 456789123"]
    job, _ = rc._prepare(HONEST, tests, "assert", CFG)
    sent = json.dumps(job)
    for secret in ("987654321", "123456789", "234567891", "345678912", "456789123"):
        assert secret not in sent
    assert job["exprs"] == ["f(4)", "f(7)", "f(11)", "f(1)"]
    job, _ = rc._prepare(HONEST_IO, [{"input": "4", "output": "987654321"}], "io", CFG)
    assert "987654321" not in json.dumps(job)


def test_values_that_are_not_plain_json_fail():
    program = ("import math\n"
               "class I(int):\n    pass\n"
               "vals = {'set': {1, 2}, 'nan': math.nan, 'inf': math.inf, 'sub': I(3),\n"
               "        'intkeys': {1: 2}, 'obj': object(), 'deep': [], 'ok_tuple': (1, [2, 'a']),\n"
               "        'ok_dict': {'a': None, 'b': True}, 'bytes': b'x'}\n"
               "d = vals['deep']\n"
               "for _ in range(100):\n    d.append([])\n    d = d[0]\n")
    tests = ["assert vals['set'] == {1, 2}", "assert vals['nan'] != 0",
             "assert vals['inf'] > 0", "assert vals['sub'] == 3",
             "assert vals['intkeys'] == {1: 2}", "assert vals['obj'] is not None",
             "assert vals['deep'] != 1", "assert vals['bytes'] == b'x'",
             "assert vals['ok_tuple'] == (1, [2, 'a'])",
             "assert vals['ok_dict'] == {'a': None, 'b': True}"]
    res = rc.run_tests(program, tests, config=CFG)
    assert res.status == "ok"
    assert res.passed == 2  # only the two plain-JSON values


def test_trusted_verdict_semantics():
    """`and`/`or`/`not`, chains, `in`, `is` evaluated outside, as Python would."""
    program = "def f(x):\n    return [x, x + 1] if x else None\n"
    tests = {"assert f(1) == [1, 2]": True, "assert f(1) == (1, 2)": True,
             "assert 0 < f(2)[0] < f(2)[1] <= 3": True, "assert 2 in f(1)": True,
             "assert 5 not in f(1)": True, "assert f(0) is None": True,
             "assert f(0) is None or f(0) > 1": True, "assert f(0) is not None and f(0) > 1": False,
             "assert not f(0)": True, "assert f(1) == [1, 3]": False,
             "assert f(1) < 'a'": False,  # TypeError outside: a fail, not an exception
             "assert f(1) == [1, 2]\nassert f(2) == [2, 3]": True,
             "assert f(1) == [1, 2]\nassert f(2) == [2, 4]": False,
             "assert g(1) == 2": False}  # NameError inside: that test fails only
    res = rc.run_tests_batch([program] * len(tests), [[t] for t in tests], config=CFG)
    assert [r.passed == 1 for r in res] == list(tests.values())


def test_tests_must_be_asserts():
    with pytest.raises(ValueError, match="assert statements only"):
        _verdict.compile_tests(["x = f(1)"])
    with pytest.raises(ValueError, match="not valid Python"):
        _verdict.compile_tests(["assert f(1) =="])
    exprs, checks = _verdict.compile_tests(["assert f(1) == 2", "assert f(1) != 3 and g()"])
    assert exprs == ["f(1)", "g()"] and len(checks) == 2


def test_batch_dedupes_and_task_programs():
    """Identical programs in a batch run once; a program task's answer fills its program
    (no answer: no program, 0)."""
    from rlvr_jax import tasks
    task = tasks.get("synthesis")
    ex = task.example(0, seed=0)
    ref = {"tests": ["assert f(2) == 13", "assert f(5) == 28"]}
    completions = ["b=3 a=8-3=5 #### x*5+3", "#### x*5+3", "#### x*4+5", "x*5+3",
                   "#### 1\nimport os", "#### x*5+3 #### x"]
    programs = [task.program(c, ex) for c in completions]
    assert programs[1] == "def f(x):\n    return x*5+3\n" and programs[3:] == [None] * 3
    scores = rc.program_rewards(programs, [ref] * len(programs), config=CFG)
    assert scores.tolist() == [1.0, 1.0, 0.5, 0.0, 0.0, 0.0]
    res = rc.run_tests_batch([HONEST] * 6, [ASSERTS] * 6, config=CFG)
    assert all(r.all_passed for r in res)
    assert len({id(r) for r in res}) == 6  # copies, not one shared object
