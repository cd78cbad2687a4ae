"""From character offsets in a decoded completion to the tokens of the sampled row.

The completion text of row b is `tokenizer.decode(tokens[b][mask[b]], stop_at_eos=True)`
(`scoring.decode_completions`); the token that holds character c - 1 (the last character of
a span ending at offset c) is the first token i whose decoded prefix `tokens[:i + 1]` is at
least c characters long. Found by bisection: O(log N) prefix decodes per offset.
"""
from typing import List, Sequence

import numpy as np


def completion_ids(tokens, mask) -> List[int]:
    """The sampled ids of one row [N] up to the mask's end (what `decode_completions` reads)."""
    return [int(t) for t in np.asarray(tokens)[np.asarray(mask, bool)]]


def token_of_offsets(tokenizer, ids: Sequence[int], offsets: Sequence[int]) -> List[int]:
    """For each character offset c >= 1 of the decoded `ids`, the index of the token holding
    character c - 1 (clamped to the last token: an offset past the text maps there).

    Args:
      tokenizer: a `rlvr_jax.data.tokenizers.Tokenizer` (`decode(ids, stop_at_eos=True)`).
      ids: the row's completion ids (`completion_ids`).
      offsets: end offsets (exclusive) into the decoded text.

    Returns: token indices in [0, len(ids)), or [] when `ids` is empty.
    """
    if not ids:
        return []
    cache = {}

    def prefix_len(i):  # Characters decoded from ids[:i + 1].
        if i not in cache:
            cache[i] = len(tokenizer.decode(ids[:i + 1], stop_at_eos=True))
        return cache[i]

    out = []
    for c in offsets:
        lo, hi = 0, len(ids) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if prefix_len(mid) >= c:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return out
