"""Measure the false-negative / false-positive rates of the math verifiers.

    python scripts/audit_verifier.py [--pairs tests/data/answer_pairs.jsonl
                                              tests/data/answer_pairs_hard.jsonl
                                              tests/data/answer_pairs_bad_days.jsonl]
                                     [--update-doc docs/verifiers.md]

Prints a markdown report (one section per pairs file); with --update-doc, replaces the text
between ``<!-- audit:start -->`` and ``<!-- audit:end -->`` in that file.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rlvr_jax.rewards import audit, math as rmath  # noqa: E402

START, END = "<!-- audit:start -->", "<!-- audit:end -->"


def main():
    """Audit both verifiers on each pairs file, print the report, optionally update the doc."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = os.path.join(here, "tests", "data")
    parser.add_argument("--pairs", nargs="+", default=[
        os.path.join(data, name) for name in ("answer_pairs.jsonl", "answer_pairs_hard.jsonl",
                                              "answer_pairs_bad_days.jsonl")])
    parser.add_argument("--update-doc", default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--module", default=None,
                        help="audit math_reward / math_verify_reward of this .py file instead "
                             "(e.g. an earlier version: git show REV:rlvr_jax/rewards/math.py)")
    args = parser.parse_args()
    if args.module:
        import importlib
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.module)))
        rmod = importlib.import_module(os.path.splitext(os.path.basename(args.module))[0])
    else:
        rmod = rmath
    verifiers = {"rule (rlvr_jax)": (rmod.math_reward, ())}
    if rmath.math_verify_available():
        verifiers["math-verify 0.9"] = (rmod.math_verify_reward, ("math_verify",))
    else:
        print("math-verify is not installed: auditing the rule verifier only "
              "(pip install 'rlvr_jax[math]')", file=sys.stderr)
    sections = []
    for path in args.pairs:
        pairs = audit.load_pairs(path)
        results = {name: audit.audit(pairs, fn, num_workers=args.workers, timeout_s=args.timeout,
                                     preload=preload)
                   for name, (fn, preload) in verifiers.items()}
        sections.append(f"### `{os.path.relpath(path, here)}`\n\n" + audit.markdown_report(results))
    report = "\n".join(sections)
    print(report)
    if args.update_doc:
        with open(args.update_doc, encoding="utf-8") as f:
            text = f.read()
        if START not in text or END not in text:
            raise SystemExit(f"{args.update_doc} has no {START} ... {END} block")
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        with open(args.update_doc, "w", encoding="utf-8") as f:
            f.write(head + START + "\n" + report + END + tail)


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
