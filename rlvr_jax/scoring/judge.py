"""A generative judge: a frozen LM, scored on device inside the one compiled RL step.

    judge = scoring.make_judge(judge_config, tokenizer, weight=1.0)  # template, yes / no
    state = create_train_state(..., reward_params=judge_params)      # frozen, sharded
    scorer = scoring.token_scorer(verifier, reward_model=judge)      # or scorer_from_config
    rl_step = make_rl_step(mc, sc, rl, tx, scorer=scorer)

The judge reads a templated prompt and its reward is the probability of its "yes" token:

    reward += weight · P_judge(yes | template(question, reference, answer))

with P(yes) the softmax of the judge's next-token logits over the tokenizer's ids, or, with
a "no" token, P(yes) / (P(yes) + P(no)) = sigmoid(l_yes − l_no); float32 either way.

Where the judge's input is built: on device, from the rollout's token ids, no text and no
host round trip. The template (`reward.judge_template`, e.g. "Question: {question}\\n
Answer: {answer}\\nCorrect? ") is cut at its placeholders once, on the host, and each
literal piece tokenized alone; inside the step the judge's row is the concatenation
[BOS] piece0 {question} piece1 {answer} piece2 ... with
  {question}  the left-padded prompt tokens (its BOS masked),
  {answer}    the completion tokens the model wrote, its stop token masked,
  {reference} the task's integer answer spelt in digit tokens (right-aligned, leading
              zeros masked; needs a tokenizer whose digits and "-" are one token each),
  {criterion} a rubric's criterion (below).
Padding between the parts stays in the row with attention mask 0 (the model skips masked
tokens and they do not advance RoPE positions), so a row is read exactly as its compact
text would be; the verdict is the next token after the template's last piece (the row's
last column, always real). Tokenizing the pieces alone equals tokenizing the whole text
for a character-level tokenizer (the builtin one); for a BPE tokenizer end each literal
piece with a space or newline so merges do not cross a placeholder.

Rubrics (`Rubric`, built on the host by `data.rubrics.rubric_arrays` from a JSONL field): each
prompt carries up to K (criterion, weight) pairs; the judge reads one row per criterion, its
template's {criterion} filled with that criterion's tokens, and the reward is

    reward += weight · Σ_k w_k P_k(yes) / Σ_k max(w_k, 0)

so a completion meeting every positively weighted criterion and no negatively weighted one
(a pitfall) scores 1; absent criteria have w_k = 0.

Sampled verdicts (`Judge.samples` = k > 0): the reward is the share of k verdicts drawn from
the judge's verdict distribution that say yes (Bernoulli(P(yes)) each, seeded by a hash of the
rollout's tokens, `noise.rollout_key`): an unbiased, noisier estimate of P(yes), the reward a
judge that samples its verdict would give. The metrics still read P(yes).

The judge shares the policy's tokenizer (its ids are read as sampled). Its parameters live
in `TrainState.reward_params` (the one frozen scoring model of a run: a `reward_model`
and a `judge` do not go together), sharded like the policy's, never updated.
"""
import dataclasses
import re
from typing import Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.data.tokenizers import single_token
from rlvr_jax.models import transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.scoring.noise import rollout_key
from rlvr_jax.scoring.reward_model import scores_in_slices
from rlvr_jax.scoring.score import is_correct

Metrics = Dict[str, jax.Array]
PLACEHOLDERS = ("question", "answer", "reference", "criterion")
DEFAULT_TEMPLATE = "Question: {question}\nAnswer: {answer}\nCorrect? "
REFERENCE_DIGITS = 10  # {reference}: |answer| < 10^10 (any int32).


@dataclasses.dataclass(frozen=True)
class Judge:
    """A judge's static description (hashable: part of the compiled program).

    Attributes:
      config: the judge's `ModelConfig` (an LM; may differ from the policy's).
      parts: the template: literal token-id tuples and placeholder names, in order.
      yes, no: the verdict token ids (no = -1: P(yes) over the whole vocabulary).
      vocab: ids >= vocab are never a verdict (the model's padded rows; 0: none).
      bos, eos: the tokenizer's BOS (-1: none; prepended) and stop id (masked in {answer}).
      digits: token ids of "0".."9" then "-" ({reference}); () without one.
      weight: w in `reward += w · P(yes)`.
      microbatches: score the B rows in this many equal slices (activation memory).
      unique_fraction: u < 1: a group's identical completions are scored once: the judge
        reads R = ⌈u·B⌉ rows (rounded up to a multiple of microbatches), the first copies,
        or all B when a batch has more than R distinct ones (`judge_scores`); 1: all B.
      samples: k > 0: the reward is the share of k sampled verdicts saying yes; 0: P(yes).
    """
    config: ModelConfig
    parts: Tuple
    yes: int
    no: int = -1
    vocab: int = 0
    bos: int = -1
    eos: int = -1
    digits: Tuple[int, ...] = ()
    weight: float = 1.0
    microbatches: int = 1
    unique_fraction: float = 1.0
    samples: int = 0

    @property
    def rubric(self) -> bool:
        """Whether the template reads a rubric's {criterion} (one row per criterion)."""
        return "criterion" in self.parts


class Rubric(NamedTuple):
    """Each completion's rubric (its prompt's, repeated G times): up to K criteria.

    tokens, mask: [B, K, C] int32, each criterion's token ids (mask 0 on padding);
    weights: [B, K] float32 (0 for an absent criterion; negative: a pitfall)."""
    tokens: jax.Array
    mask: jax.Array
    weights: jax.Array

    @classmethod
    def of_batch(cls, batch, group_size: int = 1) -> Optional["Rubric"]:
        """The rubric of an RL batch's P' prompts (`data.rubrics.rubric_arrays`' arrays),
        each repeated `group_size` times (B = P'·G rows); None when the batch has none."""
        if "rubric_tokens" not in batch:
            return None
        rows = lambda a: jnp.repeat(a, group_size, axis=0)  # noqa: E731
        return cls(rows(batch["rubric_tokens"]), rows(batch["rubric_mask"]),
                   rows(batch["rubric_weights"]))


def split_template(template: str) -> Tuple:
    """The template's pieces: literal strings and placeholder names, in order. Raises
    ValueError for an unknown or repeated placeholder, no {answer}, or a template that does
    not end with literal text (the verdict follows it)."""
    pieces = re.split(r"\{(\w*)\}", template)
    names = pieces[1::2]
    for n in names:
        if n not in PLACEHOLDERS:
            raise ValueError(f"judge template: unknown placeholder {{{n}}}; known: "
                             + ", ".join("{%s}" % p for p in PLACEHOLDERS))
    if "answer" not in names or len(set(names)) != len(names):
        raise ValueError(f"judge template: needs {{answer}} once (and each placeholder at "
                         f"most once), got {template!r}")
    if not pieces[-1]:
        raise ValueError(f"judge template: must end with literal text after its last "
                         f"placeholder (the verdict token follows it), got {template!r}")
    return tuple(p if i % 2 else ("text", p) for i, p in enumerate(pieces) if i % 2 or p)


def make_judge(config: ModelConfig, tokenizer, *, template: str = DEFAULT_TEMPLATE,
               yes: str = "Y", no: str = "N", weight: float = 1.0,
               microbatches: int = 1, unique_fraction: float = 1.0, samples: int = 0) -> Judge:
    """The `Judge` of a judge model `config` reading the policy's `tokenizer` (its ids).

    Args:
      template: with {question}, {answer} and optionally {reference} and {criterion} (a
        rubric judge; see the module doc).
      yes, no: the verdict texts, one token each; no = "": P(yes) over every id.
      unique_fraction: in (0, 1]; see `Judge`.
      samples: k >= 0 sampled verdicts (0: the reward is P(yes)); see `Judge`.
    """
    if not 0.0 < unique_fraction <= 1.0:
        raise ValueError(f"judge unique_fraction must be in (0, 1], got {unique_fraction}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"judge samples must be an int >= 0 (0: P(yes)), got {samples!r}")
    if config.vocab_size < tokenizer.vocab_size:
        raise ValueError(f"the judge embeds {config.vocab_size} ids but the tokenizer has "
                         f"{tokenizer.vocab_size}: it is not this tokenizer's model")
    parts = tuple(tuple(int(i) for i in tokenizer.encode(p[1])) if isinstance(p, tuple)
                  else p for p in split_template(template))
    digits = ()
    if "reference" in parts:
        digits = tuple(single_token(tokenizer, c, "judge template {reference}")
                       for c in "0123456789-")
    bos = tokenizer.bos_id if tokenizer.bos_id is not None else -1
    return Judge(config=config, parts=parts, yes=single_token(tokenizer, yes, "judge yes"),
                 no=single_token(tokenizer, no, "judge no") if no else -1,
                 vocab=tokenizer.vocab_size, bos=bos, eos=tokenizer.eos_id, digits=digits,
                 weight=weight, microbatches=microbatches, unique_fraction=unique_fraction,
                 samples=samples)


def reference_tokens(answers: jax.Array, digits: Tuple[int, ...]):
    """(tokens, mask) [B, 1 + REFERENCE_DIGITS] int32: each integer answer [B] spelt
    right-aligned in `digits` ("0".."9", "-"), sign first, leading zeros masked."""
    mag = jnp.abs(answers.astype(jnp.int32))[:, None]
    powers = jnp.asarray([10 ** k for k in range(REFERENCE_DIGITS - 1, -1, -1)], jnp.int32)[None]
    place = (mag // powers) % 10
    shown = (mag >= powers) | (powers == 1)
    table = jnp.asarray(digits, jnp.int32)
    tokens = jnp.concatenate([jnp.full_like(place[:, :1], 10), place], axis=1)
    mask = jnp.concatenate([(answers < 0)[:, None], shown], axis=1)
    return table[tokens.astype(jnp.int32)], mask.astype(jnp.int32)


def judge_inputs(judge: Judge, rollout, answers=None, rubric: Optional[Rubric] = None):
    """(tokens, attention mask) [B, L] int32: each row's judge prompt (module doc), with
    padding left in place under mask 0. L is static: the literal pieces' lengths, + Tp, + N,
    + 1 + REFERENCE_DIGITS with {reference}, + C with {criterion}, + 1 with a BOS. A rubric
    judge reads K rows per completion: [B·K, L], row b·K + k is criterion k of completion b."""
    b = rollout.tokens.shape[0]
    if judge.rubric and rubric is None:
        raise ValueError("judge template {criterion}: this run's batch has no rubric "
                         "(reward.judge_rubric_field)")
    k = rubric.weights.shape[1] if judge.rubric else 1
    toks, masks = [], []

    def add(t, m):  # [B, l] -> [B, K, l]; a criterion is [B, K, C] already.
        toks.append(t if t.ndim == 3 else jnp.broadcast_to(t[:, None], (b, k) + t.shape[1:]))
        masks.append(m if m.ndim == 3 else jnp.broadcast_to(m[:, None], (b, k) + m.shape[1:]))

    def literal(ids):
        add(jnp.broadcast_to(jnp.asarray(ids, jnp.int32), (b, len(ids))),
            jnp.ones((b, len(ids)), jnp.int32))
    if judge.bos >= 0:
        literal((judge.bos,))
    for part in judge.parts:
        if isinstance(part, tuple):
            literal(part)
        elif part == "question":
            t = rollout.prompt_tokens
            add(t, ((rollout.prompt_mask != 0) & (t != judge.bos)).astype(jnp.int32))
        elif part == "answer":
            t = rollout.tokens
            add(t, ((rollout.model_mask != 0) & (t != judge.eos)).astype(jnp.int32))
        elif part == "criterion":
            add(rubric.tokens.astype(jnp.int32), (rubric.mask != 0).astype(jnp.int32))
        else:
            if answers is None:
                raise ValueError("judge template {reference}: this run has no answers")
            add(*reference_tokens(answers, judge.digits))
    tokens, mask = jnp.concatenate(toks, axis=2), jnp.concatenate(masks, axis=2)
    return tokens.reshape(b * k, -1), mask.reshape(b * k, -1)


def verdict_probability(logits: jax.Array, judge: Judge) -> jax.Array:
    """P(yes) [B] float32 from next-token logits [B, V]: softmax over ids < judge.vocab, or
    sigmoid(l_yes − l_no) with a "no" token."""
    logits = logits.astype(jnp.float32)
    if judge.no >= 0:
        return jax.nn.sigmoid(logits[:, judge.yes] - logits[:, judge.no])
    if 0 < judge.vocab < logits.shape[-1]:
        logits = logits[:, :judge.vocab]
    return jnp.exp(jax.nn.log_softmax(logits, axis=-1)[:, judge.yes])


def judge_logits(params, tokens: jax.Array, mask: jax.Array, *, config: ModelConfig):
    """Next-token logits [B, V] float32 after the last column of tokens [B, L] (which must
    be real): the final hidden state of that column times the LM head, in float32."""
    hidden, _ = transformer.forward(params, tokens, config=config, attention_mask=mask,
                                    return_hidden=True)
    head = transformer.head_matrix(params, config).astype(jnp.float32)
    return hidden[:, -1].astype(jnp.float32) @ head


def first_copies(rollout, group_size: int) -> jax.Array:
    """[B] int32: each row's first row of its group (G consecutive rows) with the same
    completion (the model's tokens under `model_mask`); itself when it is the first."""
    b, n = rollout.tokens.shape
    t = jnp.where(rollout.model_mask != 0, rollout.tokens, -1).reshape(-1, group_size, n)
    same = jnp.all(t[:, :, None, :] == t[:, None, :, :], axis=-1)  # [P, G, G]
    first = jnp.argmax(same, axis=-1)                              # Row i equals itself.
    return (first + group_size * jnp.arange(b // group_size)[:, None]).reshape(b).astype(
        jnp.int32)


def judge_verdicts(params, rollout, answers=None, *, judge: Judge, group_size: int = 0,
                   rubric: Optional[Rubric] = None) -> jax.Array:
    """P(yes) [B, K] float32 (no gradient) of the rollout's B completions, per rubric
    criterion (K = 1 without a rubric); with `group_size` G and judge.unique_fraction < 1,
    each group's identical completions are read once."""
    tokens, mask = judge_inputs(judge, rollout, answers, rubric)
    b = rollout.tokens.shape[0]
    tokens, mask = tokens.reshape(b, -1, tokens.shape[1]), mask.reshape(b, -1, mask.shape[1])

    def score(t, m):  # [R, K, L] -> P(yes) [R, K].
        r, k, l = t.shape
        p = scores_in_slices(
            lambda t, m: verdict_probability(judge_logits(params, t, m, config=judge.config),
                                             judge),
            t.reshape(r * k, l), m.reshape(r * k, l), judge.microbatches)
        return p.reshape(r, k)
    rows = -(-int(judge.unique_fraction * b) // judge.microbatches) * judge.microbatches
    if not group_size or rows >= b:
        return score(tokens, mask)
    first = first_copies(rollout, group_size)
    is_first = first == jnp.arange(b)
    order = jnp.argsort(~is_first, stable=True)        # The first copies, then the rest.
    slot = jnp.argsort(order)[first]                   # Each row's first copy's position.

    def distinct(_):
        kept = order[:rows]
        return score(tokens[kept], mask[kept])[jnp.minimum(slot, rows - 1)]
    return jax.lax.cond(jnp.sum(is_first) <= rows, distinct, lambda _: score(tokens, mask),
                        None)


def rubric_score(p: jax.Array, rubric: Optional[Rubric]) -> jax.Array:
    """[B] float32: verdicts p [B, K] combined, Σ_k w_k p_k / Σ_k max(w_k, 0) (a
    denominator of 0 reads as 1); p[:, 0] without a rubric."""
    if rubric is None:
        return p[:, 0]
    w = rubric.weights.astype(jnp.float32)
    total = jnp.sum(jnp.maximum(w, 0.0), axis=1)
    return jnp.sum(w * p, axis=1) / jnp.where(total > 0, total, 1.0)


def sampled_verdicts(p: jax.Array, key: jax.Array, k: int) -> jax.Array:
    """[...] float32: the share of k verdicts drawn Bernoulli(p) (p [...]) that say yes."""
    u = jax.random.uniform(key, p.shape + (k,))
    return jnp.mean((u < p[..., None]).astype(jnp.float32), axis=-1)


def judge_scores(params, rollout, answers=None, *, judge: Judge, group_size: int = 0,
                 rubric: Optional[Rubric] = None) -> jax.Array:
    """P(yes) [B] float32 (no gradient) of the rollout's B completions, a rubric's
    weighted combination (`rubric_score`) for a rubric judge; `judge_verdicts`' arguments."""
    return rubric_score(judge_verdicts(params, rollout, answers, judge=judge,
                                       group_size=group_size, rubric=rubric), rubric)


def judge_metrics(p: jax.Array, correct: jax.Array) -> Metrics:
    """P(yes) [B] beside the verifier's verdicts (correct [B] bool).

    reward/judge: mean P(yes); reward/judge_fn: the fraction of verified-correct completions
    it rejects (P(yes) < 1/2); reward/judge_fp: of the wrong ones, the fraction it accepts;
    reward/judge_accuracy: agreement at 1/2 (0 where a class is empty)."""
    c = correct.astype(jnp.float32)
    says = (p >= 0.5).astype(jnp.float32)
    n_c, n_i = jnp.sum(c), jnp.sum(1.0 - c)
    return {"reward/judge": jnp.mean(p),
            "reward/judge_fn": jnp.sum(c * (1.0 - says)) / jnp.maximum(n_c, 1.0),
            "reward/judge_fp": jnp.sum((1.0 - c) * says) / jnp.maximum(n_i, 1.0),
            "reward/judge_accuracy": jnp.mean(c * says + (1.0 - c) * (1.0 - says))}


def judge_term(setup, weight):
    """The device term adding `weight · P(yes)` of `setup.reward_model` when it is a `Judge`
    (its weight is the component's; a rubric's combination, or the share of sampled
    verdicts, in P(yes)'s place), with `judge_metrics`; None otherwise. Its parameters are
    `x.reward_params`, a rubric judge's rubric `x.rubric`."""
    del weight
    judge = setup.reward_model
    if not isinstance(judge, Judge):
        return None

    def fn(rewards, x):
        if x.reward_params is None:
            raise ValueError("the judge needs its parameters in state.reward_params "
                             "(create_train_state(..., reward_params=...))")
        rubric = x.rubric if judge.rubric else None
        verdicts = judge_verdicts(x.reward_params, x.rollout, x.answers, judge=judge,
                                  group_size=x.group_size, rubric=rubric)
        p = rubric_score(verdicts, rubric)
        metrics = judge_metrics(p, is_correct(x.verdicts))
        if judge.unique_fraction < 1.0:
            first = first_copies(x.rollout, x.group_size)
            metrics["reward/judge_distinct_fraction"] = jnp.mean(
                (first == jnp.arange(first.shape[0])).astype(jnp.float32))
        if judge.samples:
            key = jax.random.fold_in(rollout_key(0, x.rollout), 0x6A756467)  # "judg"
            p = rubric_score(sampled_verdicts(verdicts, key, judge.samples), rubric)
            metrics["reward/judge_sampled"] = jnp.mean(p)
        return rewards + judge.weight * p, metrics
    return fn
