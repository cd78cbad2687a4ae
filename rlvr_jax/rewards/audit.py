"""Audit verifiers on labelled answer pairs: false-negative and false-positive rates.

A pair is ``{"reference", "candidate", "equivalent": bool, "category"}``. Each
verifier sees the candidate as a completion ``"... $\\boxed{candidate}$."`` so that
extraction and equivalence are audited together (a pair with ``"completion": true`` gives
the whole response instead, for extraction cases such as ``<think>`` vs ``<answer>``), through a
:class:`~rlvr_jax.rewards.pool.RewardPool` (timeouts and crashes count as "not
equivalent" and are reported).
"""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from rlvr_jax.rewards.pool import RewardPool


def load_pairs(path: str) -> list[dict]:
    """Read a JSONL file of labelled pairs, checking the fields."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = {"reference", "candidate", "equivalent", "category"} - set(row)
            if missing or not isinstance(row["equivalent"], bool) or not isinstance(
                    row.get("completion", False), bool):
                raise ValueError(f"{path}:{n}: bad pair (missing {sorted(missing)} or non-bool label)")
            pairs.append(row)
    if not pairs:
        raise ValueError(f"{path}: no pairs")
    return pairs


def as_completion(candidate: str) -> str:
    """The completion a verifier sees for a candidate answer: it boxed, in a sentence."""
    return f"So the final answer is $\\boxed{{{candidate}}}$."


def pair_completion(pair: dict) -> str:
    """The completion of a labelled pair: the candidate itself when ``pair["completion"]``."""
    return pair["candidate"] if pair.get("completion") else as_completion(pair["candidate"])


def audit(pairs: list[dict], verifier, *, num_workers: int = 2, timeout_s: float = 10.0,
          preload: tuple = ()) -> dict:
    """Run ``verifier(completion, reference)`` on every pair.

    Returns ``{"fn_rate", "fp_rate", "accuracy", "n_pos", "n_neg", "errors", "timeouts",
    "by_category": {cat: {"fn", "fp", "n"}}, "mistakes": [pair + "verdict"]}``.
    """
    comps = [pair_completion(p) for p in pairs]
    refs = [p["reference"] for p in pairs]
    with RewardPool(verifier, num_workers=num_workers, timeout_s=timeout_s,
                    preload=preload) as pool:
        rewards, info = pool.score(comps, refs)
    verdict = rewards > 0.5
    labels = np.array([p["equivalent"] for p in pairs])
    fn = labels & ~verdict
    fp = ~labels & verdict
    by_cat = defaultdict(lambda: {"fn": 0, "fp": 0, "n": 0})
    for p, a, b in zip(pairs, fn, fp):
        c = by_cat[p["category"]]
        c["fn"] += int(a)
        c["fp"] += int(b)
        c["n"] += 1
    mistakes = [dict(p, verdict=bool(v)) for p, v, bad in zip(pairs, verdict, fn | fp) if bad]
    return {
        "fn_rate": float(fn.sum() / max(1, labels.sum())),
        "fp_rate": float(fp.sum() / max(1, (~labels).sum())),
        "accuracy": float((verdict == labels).mean()),
        "n_pos": int(labels.sum()), "n_neg": int((~labels).sum()),
        "errors": info["errors"], "timeouts": info["timeouts"],
        "by_category": dict(by_cat), "mistakes": mistakes,
    }


def markdown_report(results: dict[str, dict]) -> str:
    """Markdown tables: the summary per verifier, then FN/FP counts per category."""
    names = list(results)
    first = results[names[0]]
    lines = [f"Labelled pairs: {first['n_pos'] + first['n_neg']} "
             f"({first['n_pos']} equivalent, {first['n_neg']} not equivalent).", "",
             "| verifier | false-negative rate | false-positive rate | accuracy | errors | timeouts |",
             "|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['fn_rate']:.1%} ({round(r['fn_rate'] * r['n_pos'])}/{r['n_pos']}) "
                     f"| {r['fp_rate']:.1%} ({round(r['fp_rate'] * r['n_neg'])}/{r['n_neg']}) "
                     f"| {r['accuracy']:.1%} | {r['errors']} | {r['timeouts']} |")
    lines += ["", "| category | pairs | " + " | ".join(f"{n} FN / FP" for n in names) + " |",
              "|---|---|" + "---|" * len(names)]
    for cat, c in first["by_category"].items():
        cells = [f"{results[n]['by_category'][cat]['fn']} / {results[n]['by_category'][cat]['fp']}"
                 for n in names]
        lines.append(f"| {cat} | {c['n']} | " + " | ".join(cells) + " |")
    for name, r in results.items():
        lines += ["", f"Mistakes of `{name}`:", ""]
        if not r["mistakes"]:
            lines.append("- none")
        for m in r["mistakes"]:
            kind = "FP" if m["verdict"] else "FN"
            lines.append(f"- {kind} `{m['candidate']}` vs `{m['reference']}` ({m['category']})")
    return "\n".join(lines) + "\n"
