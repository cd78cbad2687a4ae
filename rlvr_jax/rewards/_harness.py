"""Test harness executed inside the sandbox (``python -I -S -c <this source> INFO_JSON``).

Reads ``{"nonce", "program", "tests", "mode"}`` as JSON from stdin and appends one
line per event, prefixed by the nonce, to the result file descriptor:
``start {...}``, ``ok i`` / ``fail i`` per test, ``done``. The nonce is never in the
program's globals, so printing lines does not forge results (a program that
introspects the harness's frames could; see docs/verifiers.md).

Modes: ``"assert"`` — run the program once, then each test (a Python statement,
usually an ``assert``) in its namespace; ``"io"`` — run the program once per case
with ``input`` on stdin and compare whitespace-split stdout with ``output``.
"""
import io
import json
import os
import sys


class _CappedText(io.StringIO):
    def __init__(self, cap):
        super().__init__()
        self.cap = cap

    def write(self, s):
        if self.tell() + len(s) > self.cap:
            raise OSError("output limit")
        return super().write(s)


def _main():
    info = json.loads(sys.argv[1])
    fd = info["fd"]
    data = json.loads(sys.stdin.read())
    sys.stdin = open(os.devnull)
    nonce = data.pop("nonce")

    def report(line):
        os.write(fd, (nonce + " " + line + "\n").encode())

    try:
        with open("/proc/self/net/dev") as f:
            ifaces = [ln.split(":")[0].strip() for ln in f.read().splitlines()[2:]]
    except OSError:
        ifaces = None
    report("start " + json.dumps({"uid": os.getuid(), "ifaces": ifaces, "cwd": os.getcwd(),
                                  "isolation": info["isolation"]}))
    program, tests, mode = data["program"], data["tests"], data["mode"]
    try:
        code = compile(program, "<completion>", "exec")
    except BaseException:
        code = None
    if mode == "assert":
        ns = {"__name__": "__completion__"}
        ok_program = code is not None
        if ok_program:
            try:
                exec(code, ns)
            except SystemExit:
                pass
            except BaseException:
                ok_program = False
        for i, test in enumerate(tests):
            passed = False
            if ok_program:
                try:
                    exec(compile(test, "<test>", "exec"), ns)
                    passed = True
                except BaseException:
                    passed = False
            report(("ok " if passed else "fail ") + str(i))
    else:
        real_stdout = sys.stdout
        for i, case in enumerate(tests):
            passed = False
            if code is not None:
                out = _CappedText(int(data.get("max_output_chars", 1 << 20)))
                sys.stdin, sys.stdout = io.StringIO(case["input"]), out
                finished = True
                try:
                    exec(code, {"__name__": "__main__"})
                except SystemExit:
                    pass
                except BaseException:
                    finished = False
                finally:
                    sys.stdout = real_stdout
                passed = finished and out.getvalue().split() == str(case["output"]).split()
            report(("ok " if passed else "fail ") + str(i))
    report("done")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


if __name__ == "__main__":
    _main()
