"""The label-free vote, self-certainty and process rewards of one tiny hand-made rollout,
computed by tests/_distributed_worker.py on a batch sharded over 2 processes and by
tests/test_distributed.py in one process: the values must be the same."""
import types

import jax.numpy as jnp
import numpy as np

from rlvr_jax import scoring, tasks
from rlvr_jax.scoring.label_free import majority_term, self_certainty_term

N, G = 16, 4
TEXTS = ["13 11 7 #### 713", "13 12 7 #### 713", "13 11 8 #### 813", "13 11",   # prompt 1
         "1 3 #### 713", "13 11 7 #### 713", "#### 813", "13 11 8 #### 813"]    # prompt 2


def rollout_rows(tok):
    """(tokens, mask, logprobs) [8, N] of `TEXTS`: each text's ids, EOS, padding; distinct
    log-probs per token."""
    tokens = np.full((len(TEXTS), N), tok.pad_id, np.int32)
    mask = np.zeros((len(TEXTS), N), np.int32)
    for b, text in enumerate(TEXTS):
        ids = tok.encode(text)[:N - 1] + [tok.eos_id]
        tokens[b, :len(ids)], mask[b, :len(ids)] = ids, 1
    logprobs = -np.linspace(0.05, 2.0, tokens.size, dtype=np.float32).reshape(tokens.shape)
    return tokens, mask, logprobs


def text_terms(tok, tokens, mask, logprobs) -> dict:
    """Host text scoring of the rollout (numpy, or global arrays sharded over processes):
    majority + self_certainty terms added to zero rewards, and gated process rewards."""
    task = tasks.get("arithmetic", ops=("add",), min_digits=3, max_digits=3)
    examples = [task.make("add", 456, 257)] * len(TEXTS)   # Worked steps 13 11 7, 713.
    texts = scoring.decode_completions(tok, tokens, mask)
    rollout = types.SimpleNamespace(tokens=tokens, mask=mask, logprobs=logprobs)
    rewards, metrics = jnp.zeros((len(texts),), jnp.float32), {}
    setup = scoring.Setup(scoring.task_verifier(task), tokenizer=tok, num_samples=G)
    x = scoring.Inputs(rollout, group_size=G, texts=texts, examples=examples)
    for term in (majority_term(setup, 1.0), self_certainty_term(setup, 0.5)):
        rewards, m = term(rewards, x)
        metrics.update(m)
    steps, step_metrics = scoring.step_rewards_on_host(
        texts, examples, tokens, mask, step_scores=task.step_scores, tokenizer=tok,
        verdicts=[task.verify(t, ex) for t, ex in zip(texts, examples)])
    metrics.update(step_metrics)
    return {"texts": texts, "rewards": np.asarray(rewards).tolist(),
            "step_values": np.asarray(steps.values).tolist(),
            "step_ends": np.asarray(steps.ends).tolist(),
            "metrics": {k: float(v) for k, v in sorted(metrics.items())}}
