"""Helpers shared by tests/test_multiturn.py and tests/test_multiturn_host.py."""
import os
import re

import jax.numpy as jnp
import numpy as np

from rlvr_jax import sampling


def prompt_arrays(tok, texts):
    """(tokens [P, Tp] int32, mask [P, Tp] int32) of `texts`, BOS first, left-padded."""
    ids = [tok.encode(t, add_bos=True) for t in texts]
    tokens, lengths = tok.pad_left(ids)
    width = tokens.shape[1]
    mask = (np.arange(width)[None] >= width - lengths[:, None]).astype(np.int32)
    return jnp.asarray(tokens), jnp.asarray(mask)


def sampling_config(tok, **fields):
    """A SamplingConfig that stops at `tok`'s EOS, pads with its pad id and never draws ids
    past its vocabulary; `fields` set the rest."""
    base = dict(stop_token_ids=(tok.eos_id,), pad_id=tok.pad_id, vocab_limit=tok.vocab_size)
    base.update(fields)
    return sampling.SamplingConfig(**base)


def doc_example(heading):
    """The names defined by docs/multiturn.md's first python block after `heading`, run as
    written; the block must be at most 20 lines (what the docs promise)."""
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "multiturn.md")
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    code = re.search(r"```python\n(.*?)```", doc[doc.index(heading):], re.S).group(1)
    assert len(code.strip().splitlines()) <= 20
    scope = {}
    exec(compile(code, "docs/multiturn.md", "exec"), scope)
    return scope
