"""Rubrics: per-prompt lists of (criterion, weight) a judge scores (`scoring.judge`).

A JSONL row carries its rubric in one field (`data.rubric_field`), a list of criteria, each
`{"criterion": "...", "weight": 2.0}` or `["...", 2.0]`:

    {"prompt": "...", "answer": "...",
     "rubric": [{"criterion": "The final answer is 12", "weight": 3},
                {"criterion": "Each step is justified", "weight": 1},
                ["The answer contradicts itself", -2]]}

A negative weight marks a pitfall. `rubric_arrays` turns a batch's rubrics into the fixed
shapes the compiled step reads: K criteria per prompt (absent ones weight 0), C tokens per
criterion.
"""
import math
from typing import Dict, List, Sequence, Tuple

import numpy as np


def parse_rubric(value, field: str) -> List[Tuple[str, float]]:
    """[(criterion, weight)] from a rubric field's value; ValueError (one line) otherwise."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"field {field!r} must be a non-empty list of criteria, got "
                         f"{type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, dict) and set(item) == {"criterion", "weight"}:
            text, weight = item["criterion"], item["weight"]
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            text, weight = item
        else:
            raise ValueError(f"field {field!r}, criterion {i}: expected "
                             '{"criterion": str, "weight": number} or [str, number], '
                             f"got {item!r}")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"field {field!r}, criterion {i}: the criterion must be a "
                             f"non-empty string, got {text!r}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(
                weight):
            raise ValueError(f"field {field!r}, criterion {i}: the weight must be a finite "
                             f"number, got {weight!r}")
        out.append((text, float(weight)))
    return out


def rubric_arrays(examples: Sequence, tokenizer, *, field: str, size: int,
                  max_tokens: int) -> Dict[str, np.ndarray]:
    """{"rubric_tokens" [P, K, C] int32, "rubric_mask" [P, K, C] int32, "rubric_weights"
    [P, K] float32} of the P examples' rubrics (`Example.meta[field]`), K = size criteria
    (the absent ones weight 0 and masked), C = max_tokens (criterion tokens left-aligned, no
    BOS/EOS). ValueError naming the example when a rubric is missing, malformed, longer than
    K criteria, or has a criterion over C tokens."""
    p = len(examples)
    tokens = np.zeros((p, size, max_tokens), np.int32)
    mask = np.zeros((p, size, max_tokens), np.int32)
    weights = np.zeros((p, size), np.float32)
    for i, ex in enumerate(examples):
        if field not in ex.meta:
            raise ValueError(f"example {ex.key!r} has no rubric field {field!r}")
        try:
            rubric = parse_rubric(ex.meta[field], field)
        except ValueError as e:
            raise ValueError(f"example {ex.key!r}: {e}") from None
        if len(rubric) > size:
            raise ValueError(f"example {ex.key!r} has {len(rubric)} criteria, more than "
                             f"data.rubric_size={size}")
        for k, (text, weight) in enumerate(rubric):
            ids = tokenizer.encode(text)
            if len(ids) > max_tokens:
                raise ValueError(f"example {ex.key!r}, criterion {k}: {len(ids)} tokens, more "
                                 f"than data.rubric_tokens={max_tokens}")
            tokens[i, k, :len(ids)], mask[i, k, :len(ids)] = ids, 1
            weights[i, k] = weight
    return {"rubric_tokens": tokens, "rubric_mask": mask, "rubric_weights": weights}
