"""Training and auditing a process reward model (PRM) on a policy's own traces
(`scripts/train_prm.py`, `scripts/prm_audit.py`; docs/process_rewards.md).

    traces = sample_traces(policy, examples, tokenizer, model_config=mc, ...)   # host arrays
    ends = step_ends(traces, tokenizer, boundary=" ", marker="####")   # the RL term's rule
    oracle, oracle_ends = oracle_labels(traces, task.step_scores, tokenizer)
    mc = mc_labels(policy, traces, ends, task.verify, tokenizer, model_config=mc, ...)
    params = fit_prm(init_prm(mc_config, policy), traces, labels, label_ends, ...)
    step_auroc(prm_step_scores(params, traces, config=...)[oracle_ends], oracle[oracle_ends])

Labels (Math-Shepherd, Wang et al. 2024; OmegaPRM): "oracle" — the task's step checker's
0/1 verdict at the token ending each step (`scoring.process.place_steps`); "mc" — from the
token ending step k, `continuations` samples of the policy finish the completion; the step
is good (1) when at least `threshold` of them reach the right answer (the task's `verify`).
The MC positions are the RL term's own step ends (`scoring.prm.device_step_ends`), so an
MC-trained PRM is trained where it is read; the prompt's last token gets the fraction of
the prompt's G traces that are right (the PRM's p_0 of the "progress" form).

The PRM is a reward model (`models.reward_model`: the policy's trunk copied, a `score`
head) trained with binary cross-entropy at the labelled positions; exported with
`models.save_hf_reward_model` (a `*ForSequenceClassification` directory).
"""
import dataclasses
from typing import Callable, Dict, List, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlvr_jax import sampling
from rlvr_jax.data.tokenizers import single_token
from rlvr_jax.models import reward_model as rm_lib
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.scoring.prm import boundary_ids, device_step_ends
from rlvr_jax.scoring.process import place_steps
from rlvr_jax.scoring.score import decode_completions


@dataclasses.dataclass
class Traces:
    """B sampled completions (host arrays): prompt_tokens / prompt_mask [B, Tp] (left-padded),
    tokens / mask [B, N], examples [B], texts [B] (decoded), group_size G (consecutive rows
    of one prompt)."""
    prompt_tokens: np.ndarray
    prompt_mask: np.ndarray
    tokens: np.ndarray
    mask: np.ndarray
    examples: List
    texts: List[str]
    group_size: int = 1

    def sequences(self) -> Tuple[np.ndarray, np.ndarray]:
        """(tokens, attention) [B, Tp + N]: prompt then completion."""
        return (np.concatenate([self.prompt_tokens, self.tokens], 1),
                np.concatenate([self.prompt_mask, self.mask], 1).astype(np.int32))


def encode_prompts(tokenizer, examples: Sequence, max_prompt_len: int):
    """(tokens, mask) [P, Tp] int32 of the examples' prompts with BOS, left-padded to
    Tp = max_prompt_len (`Tokenizer.encode_batch`; a longer prompt raises ValueError)."""
    tokens, lengths = tokenizer.encode_batch([ex.prompt for ex in examples],
                                             max_len=max_prompt_len, pad_to=max_prompt_len)
    mask = np.arange(max_prompt_len)[None, :] >= max_prompt_len - lengths[:, None]
    return tokens, mask.astype(np.int32)


def _generate(params, tokens, mask, seed, *, model_config, sc, chunk):
    """Rollout arrays (tokens, mask) [P·G, N] of prompts [P, T], `chunk` prompts per call."""
    fn = jax.jit(lambda p, t, m, k: sampling.generate(p, t, m, k, model_config=model_config,
                                                       sampling_config=sc))
    outs_t, outs_m = [], []
    for i in range(0, tokens.shape[0], chunk):
        t, m = tokens[i:i + chunk], mask[i:i + chunk]
        pad = chunk - t.shape[0]  # Same shape every call: one compilation.
        if pad:
            t, m = np.concatenate([t, t[:pad]]), np.concatenate([m, m[:pad]])
        ro = fn(params, t, m, jax.random.PRNGKey(seed + i))
        keep = (chunk - pad) * sc.num_samples
        outs_t.append(np.asarray(ro.tokens)[:keep])
        outs_m.append(np.asarray(ro.mask)[:keep].astype(np.int32))
    return np.concatenate(outs_t), np.concatenate(outs_m)


def sample_traces(params, examples: Sequence, tokenizer, *, model_config: ModelConfig,
                  max_prompt_len: int, max_new_tokens: int, num_samples: int, seed: int,
                  chunk: int = 32) -> Traces:
    """`num_samples` completions of each example's prompt by the policy (temperature 1)."""
    pt, pm = encode_prompts(tokenizer, examples, max_prompt_len)
    sc = sampling.SamplingConfig(max_new_tokens=max_new_tokens, num_samples=num_samples,
                                 stop_token_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id)
    tokens, mask = _generate(params, pt, pm, seed, model_config=model_config, sc=sc,
                             chunk=min(chunk, len(examples)))
    exs = [ex for ex in examples for _ in range(num_samples)]
    return Traces(np.repeat(pt, num_samples, 0), np.repeat(pm, num_samples, 0), tokens, mask,
                  exs, decode_completions(tokenizer, tokens, mask), num_samples)


def step_ends(traces: Traces, tokenizer, *, boundary: str = " ", marker: str = "####"
              ) -> np.ndarray:
    """[B, N] bool: the RL term's step ends (`scoring.prm.device_step_ends`)."""
    return np.asarray(device_step_ends(
        jnp.asarray(traces.tokens), jnp.asarray(traces.mask),
        boundary_ids=boundary_ids(tokenizer, boundary),
        marker_ids=(single_token(tokenizer, marker, "marker"),)))


def oracle_labels(traces: Traces, step_scores: Callable, tokenizer
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """(labels [B, N] float32, ends [B, N] bool): the task's step verdicts at the tokens
    ending each step (`scoring.process.place_steps`; a failing checker: no steps)."""
    labels = np.zeros(traces.tokens.shape, np.float32)
    ends = np.zeros(traces.tokens.shape, bool)
    for b, (text, ex) in enumerate(zip(traces.texts, traces.examples)):
        try:
            steps = step_scores(text, ex) or []
        except Exception:  # noqa: BLE001 - as the RL term: a raising checker is "no steps"
            steps = []
        labels[b], ends[b] = place_steps(tokenizer, traces.tokens[b], traces.mask[b], steps)
    return labels, ends


def _prefix_prompts(traces: Traces, where: np.ndarray, pad_id: int):
    """[K, Tp + N] left-padded prompt ++ completion[: t + 1] for each (b, t) in `where`."""
    seq, att = traces.sequences()
    tp = traces.prompt_tokens.shape[1]
    out = np.full((len(where), seq.shape[1]), pad_id, np.int32)
    mask = np.zeros(out.shape, np.int32)
    for k, (b, t) in enumerate(where):
        ids = seq[b, :tp + t + 1][att[b, :tp + t + 1] > 0]
        out[k, -len(ids):], mask[k, -len(ids):] = ids, 1
    return out, mask


def mc_labels(params, traces: Traces, ends: np.ndarray, verify: Callable, tokenizer, *,
              model_config: ModelConfig, continuations: int, threshold: float, seed: int,
              chunk: int = 64) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels [B, N] float32 in {0, 1} at `ends`, the success fractions [B, N] there,
    p_0 labels [B]: each prompt's fraction of right traces), Monte-Carlo (module docstring)."""
    where = np.argwhere(ends)
    n = traces.tokens.shape[1]
    frac = np.zeros(traces.tokens.shape, np.float32)
    if len(where):
        pt, pm = _prefix_prompts(traces, where, tokenizer.pad_id)
        sc = sampling.SamplingConfig(max_new_tokens=n, num_samples=continuations,
                                     stop_token_ids=(tokenizer.eos_id,), pad_id=tokenizer.pad_id)
        ct, cm = _generate(params, pt, pm, seed, model_config=model_config, sc=sc,
                           chunk=min(chunk, len(where)))
        for k, (b, t) in enumerate(where):
            head = [int(x) for x in traces.tokens[b, :t + 1]]
            wins = 0
            for c in range(continuations):
                r = k * continuations + c
                tail = [int(x) for x in ct[r][cm[r] > 0]]
                text = tokenizer.decode(head + tail, stop_at_eos=True)
                wins += float(verify(text, traces.examples[b])) >= 1.0
            frac[b, t] = wins / continuations
    right = np.asarray([float(verify(t, ex)) >= 1.0 for t, ex in
                        zip(traces.texts, traces.examples)], np.float32)
    g = traces.group_size
    p0 = np.repeat(right.reshape(-1, g).mean(1), g)
    return (frac >= threshold).astype(np.float32) * ends, frac, p0


def init_prm(config: ModelConfig, policy_params, seed: int = 0):
    """A PRM {"trunk", "score"} whose trunk is a copy of the policy's (`init_reward_params`)."""
    return rm_lib.init_reward_params(config, jax.random.PRNGKey(seed), trunk_params=policy_params)


def _loss(params, seq, att, labels, weights, *, config):
    s = rm_lib.token_scores(params, seq, att, config=config)[..., 0]
    bce = optax.sigmoid_binary_cross_entropy(s, labels)
    return jnp.sum(bce * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def label_arrays(traces: Traces, labels: np.ndarray, ends: np.ndarray, p0=None):
    """(labels, weights) [B, Tp + N] on the sequence: the step labels at their ends, and
    p_0's label at the last prompt token when given."""
    tp = traces.prompt_tokens.shape[1]
    lab = np.zeros((labels.shape[0], tp + labels.shape[1]), np.float32)
    w = np.zeros(lab.shape, np.float32)
    lab[:, tp:], w[:, tp:] = labels * ends, ends
    if p0 is not None:
        lab[:, tp - 1], w[:, tp - 1] = p0, 1.0
    return lab, w


def fit_prm(params, traces: Traces, labels: np.ndarray, weights: np.ndarray, *,
            config: ModelConfig, steps: int, batch_size: int, learning_rate: float,
            seed: int, log: Callable[[str], None] = print):
    """`steps` Adam steps of the weighted BCE (labels, weights [B, Tp + N]: `label_arrays`)
    on random row batches; returns the trained params."""
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
    grad = jax.value_and_grad(lambda p, *a: _loss(p, *a, config=config))

    @jax.jit
    def step(p, opt, *batch):
        loss, g = grad(p, *batch)
        updates, opt = tx.update(g, opt, p)
        return optax.apply_updates(p, updates), opt, loss

    seq, att = traces.sequences()
    rng, opt = np.random.default_rng(seed), tx.init(params)
    for i in range(steps):
        rows = rng.choice(seq.shape[0], size=batch_size, replace=seq.shape[0] < batch_size)
        params, opt, loss = step(params, opt, seq[rows], att[rows], labels[rows], weights[rows])
        if (i + 1) % 100 == 0 or i + 1 == steps:
            log(f"prm step {i + 1}: loss {float(loss):.4f}")
    return params


def prm_step_scores(params, traces: Traces, *, config: ModelConfig, chunk: int = 256
                    ) -> np.ndarray:
    """p [B, N] float32: σ of the PRM's score at each completion token."""
    seq, att = traces.sequences()
    tp = traces.prompt_tokens.shape[1]
    fn = jax.jit(lambda p, s, a: jax.nn.sigmoid(rm_lib.token_scores(p, s, a, config=config)[
        ..., 0]))
    out = [np.asarray(fn(params, seq[i:i + chunk], att[i:i + chunk]))
           for i in range(0, seq.shape[0], chunk)]
    return np.concatenate(out)[:, tp:]


def step_auroc(scores, labels) -> float:
    """AUROC of `scores` [K] for binary `labels` [K]: P(score of a good step > a bad one's),
    ties counting 1/2 (Mann-Whitney U with mid-ranks); NaN without both classes."""
    s, y = np.asarray(scores, np.float64), np.asarray(labels) > 0.5
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):  # Mid-ranks of ties.
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def agreement(scores: np.ndarray, labels: np.ndarray, ends: np.ndarray) -> Dict[str, float]:
    """A step scorer against the oracle at the oracle's step ends: step_auroc, accuracy at
    0.5, the oracle's good-step rate, the mean score of good / bad steps, and steps."""
    s, y = scores[ends], labels[ends]
    good = y > 0.5
    return {"step_auroc": step_auroc(s, y), "accuracy": float(np.mean((s >= 0.5) == good))
            if len(s) else float("nan"), "oracle_good_rate": float(np.mean(good))
            if len(s) else float("nan"),
            "score_good": float(np.mean(s[good])) if good.any() else float("nan"),
            "score_bad": float(np.mean(s[~good])) if (~good).any() else float("nan"),
            "steps": int(len(s))}
