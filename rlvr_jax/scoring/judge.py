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
              zeros masked; needs a tokenizer whose digits and "-" are one token each).
Padding between the parts stays in the row with attention mask 0 (the model skips masked
tokens and they do not advance RoPE positions), so a row is read exactly as its compact
text would be; the verdict is the next token after the template's last piece (the row's
last column, always real). Tokenizing the pieces alone equals tokenizing the whole text
for a character-level tokenizer (the builtin one); for a BPE tokenizer end each literal
piece with a space or newline so merges do not cross a placeholder.

The judge shares the policy's tokenizer (its ids are read as sampled). Its parameters live
in `TrainState.reward_params` (the one frozen scoring model of a run: a `reward_model`
and a `judge` do not go together), sharded like the policy's, never updated.
"""
import dataclasses
import re
from typing import Dict, Tuple

import jax
import jax.numpy as jnp

from rlvr_jax.data.tokenizers import single_token
from rlvr_jax.models import transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.scoring.reward_model import scores_in_slices
from rlvr_jax.scoring.score import is_correct

Metrics = Dict[str, jax.Array]
PLACEHOLDERS = ("question", "answer", "reference")
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
               microbatches: int = 1, unique_fraction: float = 1.0) -> Judge:
    """The `Judge` of a judge model `config` reading the policy's `tokenizer` (its ids).

    Args:
      template: with {question}, {answer} and optionally {reference} (see the module doc).
      yes, no: the verdict texts, one token each; no = "": P(yes) over every id.
      unique_fraction: in (0, 1]; see `Judge`.
    """
    if not 0.0 < unique_fraction <= 1.0:
        raise ValueError(f"judge unique_fraction must be in (0, 1], got {unique_fraction}")
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
                 weight=weight, microbatches=microbatches, unique_fraction=unique_fraction)


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


def judge_inputs(judge: Judge, rollout, answers=None):
    """(tokens, attention mask) [B, L] int32: each row's judge prompt (module doc), with
    padding left in place under mask 0. L is static: the literal pieces' lengths, + Tp, + N,
    + 1 + REFERENCE_DIGITS with {reference}, + 1 with a BOS."""
    b = rollout.tokens.shape[0]
    toks, masks = [], []

    def literal(ids):
        toks.append(jnp.broadcast_to(jnp.asarray(ids, jnp.int32), (b, len(ids))))
        masks.append(jnp.ones((b, len(ids)), jnp.int32))
    if judge.bos >= 0:
        literal((judge.bos,))
    for part in judge.parts:
        if isinstance(part, tuple):
            literal(part)
        elif part == "question":
            t = rollout.prompt_tokens
            toks.append(t)
            masks.append(((rollout.prompt_mask != 0) & (t != judge.bos)).astype(jnp.int32))
        elif part == "answer":
            t = rollout.tokens
            toks.append(t)
            masks.append(((rollout.model_mask != 0) & (t != judge.eos)).astype(jnp.int32))
        else:
            if answers is None:
                raise ValueError("judge template {reference}: this run has no answers")
            t, m = reference_tokens(answers, judge.digits)
            toks.append(t)
            masks.append(m)
    return jnp.concatenate(toks, axis=1), jnp.concatenate(masks, axis=1)


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


def judge_scores(params, rollout, answers=None, *, judge: Judge,
                 group_size: int = 0) -> jax.Array:
    """P(yes) [B] float32 (no gradient) of the rollout's B completions; with `group_size` G
    and judge.unique_fraction < 1, each group's identical completions are read once."""
    tokens, mask = judge_inputs(judge, rollout, answers)
    k = judge.microbatches
    score = lambda t, m: scores_in_slices(  # noqa: E731
        lambda t, m: verdict_probability(judge_logits(params, t, m, config=judge.config), judge),
        t, m, k)
    b = tokens.shape[0]
    rows = -(-int(judge.unique_fraction * b) // k) * k
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
    (its weight is the component's), with `judge_metrics`; None otherwise. Its parameters
    are `x.reward_params`."""
    del weight
    judge = setup.reward_model
    if not isinstance(judge, Judge):
        return None

    def fn(rewards, x):
        if x.reward_params is None:
            raise ValueError("the judge needs its parameters in state.reward_params "
                             "(create_train_state(..., reward_params=...))")
        p = judge_scores(x.reward_params, x.rollout, x.answers, judge=judge,
                         group_size=x.group_size)
        metrics = judge_metrics(p, is_correct(x.verdicts))
        if judge.unique_fraction < 1.0:
            first = first_copies(x.rollout, x.group_size)
            metrics["reward/judge_distinct_fraction"] = jnp.mean(
                (first == jnp.arange(first.shape[0])).astype(jnp.float32))
        return rewards + judge.weight * p, metrics
    return fn
