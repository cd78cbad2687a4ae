"""Prompts in, completion texts out: the decoding both evaluators share."""
from typing import List, Optional, Sequence

import jax
import numpy as np

from rlvr_jax import sampling
from rlvr_jax.sampler import Sampler
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


def generate_texts(params, model_config, tokenizer, prompt_tokens, prompt_mask, rng, *,
                   num_samples: int, greedy: bool = False, temperature: float = 1.0,
                   top_p: float = 1.0, max_new_tokens: int, batch_size: int,
                   buckets: Optional[Sequence[int]] = sampling.DEFAULT_BUCKETS,
                   env=None, answers=None, tools=None, examples=None,
                   cache_window: Optional[int] = None, sampler: Optional[Sampler] = None
                   ) -> List[List[str]]:
    """Completions `[P][num_samples]` (texts up to the stop token), `batch_size` prompts per
    call with key `fold_in(rng, call)`; the last batch is padded with copies of its last
    prompt (one compiled shape) and the copies are dropped. `buckets`: the prompt-length
    buckets of plain sampling (`sampling.sample`; None: the prompts' own width).

    The rollouts are `sampler`'s kind (a run's `rlvr_jax.sampler.Sampler`) at this
    function's sampling settings; without one, `env` (a multi-turn environment, with `tools`
    for a host one) makes it. With an environment `answers` [P] int32 reach `env.reset`
    (default 0), a host environment plays on `examples` [P], and the texts are the model's
    own tokens (observations left out), as the verifiers score them. cache_window: the
    sampler's `SamplingConfig.cache_window` (None: automatic)."""
    config = sampling.SamplingConfig(greedy=greedy, temperature=temperature, top_p=top_p,
                                     max_new_tokens=max_new_tokens, num_samples=num_samples,
                                     stop_token_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id,
                                     vocab_limit=tokenizer.vocab_size,
                                     cache_window=cache_window)
    if sampler is None:
        sampler = Sampler(model_config, config, env=env, tools=tools, tokenizer=tokenizer)
    sampler = sampler.replace(config)
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
