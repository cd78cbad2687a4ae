"""Labelled pairs written by others: the ``(gold, pred, expected)`` cases of math-verify's own
test suite, as a JSONL file for ``scripts/audit_verifier.py --pairs``.

    git clone https://github.com/huggingface/Math-Verify /tmp/Math-Verify
    python scripts/pairs_from_math_verify_tests.py /tmp/Math-Verify/tests /tmp/mv_pairs.jsonl
    python scripts/audit_verifier.py --pairs /tmp/mv_pairs.jsonl

Each pair is ``{"reference": gold, "candidate": pred, "equivalent": bool(expected),
"category": "<file>::<test>", "completion": true}``: ``pred`` is given to a verifier as the
whole response. The labels follow math-verify's conventions (for example a 16-digit decimal
equals ``1/12``, which our rule verifier rejects as an approximation), and some golds are
whole solutions rather than answers, so this is an out-of-sample check of the rule verifier
and an in-sample one of math-verify.
"""
import argparse
import ast
import glob
import json
import os
import sys


def pairs_from_file(path: str) -> list[dict]:
    """The ``gold, pred, expected`` parametrize cases of one pytest file."""
    source = open(path, encoding="utf-8").read()
    rows = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"
                    and isinstance(dec.args[0], ast.Constant)):
                continue
            names = [n.strip() for n in dec.args[0].value.split(",")]
            if names[:3] != ["gold", "pred", "expected"]:
                continue
            try:
                cases = ast.literal_eval(dec.args[1])
            except ValueError:
                continue
            for case in cases:
                if len(case) >= 3 and isinstance(case[0], str) and isinstance(case[1], str):
                    rows.append({"reference": case[0], "candidate": case[1],
                                 "equivalent": bool(case[2]), "completion": True,
                                 "category": f"{os.path.basename(path)[:-3]}::{node.name}"})
    return rows


def main(argv=None):
    """Write the pairs of every ``test_*.py`` under TESTS_DIR to OUT (a JSONL file)."""
    parser = argparse.ArgumentParser(
        description="math-verify's own (gold, pred, expected) test cases as labelled pairs "
                    "(JSONL) for scripts/audit_verifier.py --pairs.")
    parser.add_argument("tests_dir", help="math-verify's tests/ directory")
    parser.add_argument("out", help="the JSONL file to write")
    args = parser.parse_args(argv)
    tests_dir, out = args.tests_dir, args.out
    if not glob.glob(os.path.join(tests_dir, "test_*.py")):
        print(f"error: {tests_dir}: no test_*.py files", file=sys.stderr)
        sys.exit(2)
    rows = [r for f in sorted(glob.glob(os.path.join(tests_dir, "test_*.py")))
            for r in pairs_from_file(f)]
    with open(out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} pairs ({sum(r['equivalent'] for r in rows)} equivalent) -> {out}")


if __name__ == "__main__":
    main()
