"""Prompts in, completion texts out: the evaluator's decoding with a run's `Sampler`."""
from typing import List, Optional, Sequence

import jax
import numpy as np

from rlvr_jax.sampler import Sampler, with_sampling
from rlvr_jax.scoring import decode_completions


def encode_prompts(examples: Sequence, tokenizer, *, apply_chat_template: bool = False):
    """(tokens [P, Tp] int32 left-padded, mask [P, Tp] int32) with BOS when the tokenizer has
    one; Tp is the longest prompt."""
    ids = []
    for ex in examples:
        text = ex.prompt
        if apply_chat_template:
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}])
        ids.append(tokenizer.encode(text, add_bos=tokenizer.bos_id is not None))
    tokens, lengths = tokenizer.pad_left(ids)
    width = tokens.shape[1]
    mask = (np.arange(width)[None, :] >= width - lengths[:, None]).astype(np.int32)
    return tokens, mask


def eval_sampler(sampler: Sampler, *, num_samples: int, greedy: bool = False,
                 temperature: float = 1.0, top_p: float = 1.0) -> Sampler:
    """`sampler` (a run's rollout kind and its decoding settings: completion length, stop
    and pad tokens, vocabulary limit, cache, compaction, attention) with only what an
    evaluation chooses changed: `num_samples` per prompt, greedy or `temperature` / `top_p`
    sampling, no top-k filter, independent samples (no tree rollouts). Greedy decoding reads
    temperature 1 (its log-probs only)."""
    if greedy:
        temperature, top_p = 1.0, 1.0
    return with_sampling(sampler, num_samples=num_samples, greedy=greedy,
                         temperature=temperature, top_k=0, top_p=top_p, tree=None)


def generate_texts(params, sampler: Sampler, tokenizer, prompt_tokens, prompt_mask, rng, *,
                   num_samples: int, greedy: bool = False, temperature: float = 1.0,
                   top_p: float = 1.0, batch_size: int, answers=None, examples: Sequence = (),
                   buckets: Optional[Sequence[int]] = None) -> List[List[str]]:
    """Completions `[P][num_samples]` (the model's own tokens up to the stop token, an
    environment's observations left out, as the verifiers score them) of the prompts
    [P, Tp], `batch_size` prompts per call with key `fold_in(rng, call)`; the last batch is
    padded with copies of its last prompt (one compiled shape) and the copies are dropped.

    The rollouts are `sampler`'s kind at `eval_sampler`'s settings. `answers` [P] int32 reach
    an environment's `reset` (default 0), a host environment plays on `examples` [P];
    `buckets`: plain sampling's prompt-length buckets (`sampling.sample`; None: the prompts'
    own width)."""
    sampler = eval_sampler(sampler, num_samples=num_samples, greedy=greedy,
                           temperature=temperature, top_p=top_p)
    p = len(prompt_tokens)
    out: List[List[str]] = []
    answers = np.zeros((p,), np.int32) if answers is None else np.asarray(answers, np.int32)
    for i, start in enumerate(range(0, p, batch_size)):
        rows = np.minimum(np.arange(start, start + batch_size), p - 1)
        rollout = sampler.sample(params, prompt_tokens[rows], prompt_mask[rows],
                                 jax.random.fold_in(rng, i), answers=answers[rows],
                                 examples=[examples[r] for r in rows] if examples else (),
                                 buckets=buckets)
        texts = decode_completions(tokenizer, rollout.tokens, rollout.model_mask)
        keep = min(batch_size, p - start)
        out += [texts[j * num_samples:(j + 1) * num_samples] for j in range(keep)]
    return out
