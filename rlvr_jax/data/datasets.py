"""Prompt datasets and a resumable loader of fixed-shape prompt batches.

Sources (each gives `rlvr_jax.tasks.Example`s, so host verifiers work on every source):

  TaskSource(task, seed=0, split="train", size=None)   synthetic; infinite unless `size`
  ExampleList(examples, name=..., stats=...)            finite: what the file readers of
                                                       `rlvr_jax.data.files` return
  split_by_prompt(source, test_fraction=...)           a hash split of a finite source

Loader:

    loader = PromptLoader(source, tokenizer, batch_size=P, max_prompt_len=Tp, seed=0)
    batch = next(loader)          # PromptBatch: tokens [P, Tp] int32 (LEFT padded),
                                  # lengths [P], answers [P] int32, answer_mask [P],
                                  # valid [P], examples (list of Example, for host verifiers)
    state = loader.state()        # small dict of ints: save it with the checkpoint
    loader.restore(state)         # the next batch is exactly the one that would have followed

Finite sources are reshuffled every epoch with a permutation that depends only on
(seed, epoch); the stream runs across epoch boundaries (no short batches) unless
`num_epochs` is set, in which case the last batch is completed with copies marked
``valid=False`` and iteration then stops. Prompts longer than `max_prompt_len` tokens are
dropped or truncated (keeping BOS and the last tokens, where the question ends) by
``overflow="drop" | "truncate"``, and counted in the state; ``overflow="error"`` raises.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from rlvr_jax.tasks import base as task_base



# ---------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------
class TaskSource:
    """Examples of a synthetic task: example i is ``task.example(i, seed=seed, split=split)``.

    Infinite (``len`` is None) unless `size` is given. Shuffling does not apply (the
    generator already draws at random), so a loader over it walks i = 0, 1, 2, ...
    """

    def __init__(self, task: task_base.Task, *, seed: int = 0, split: str = "train",
                 size: int | None = None):
        task_base.check_split(split)
        if size is not None and size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        self.task, self.seed, self.split, self.size = task, seed, split, size

    def __len__(self):
        if self.size is None:
            raise TypeError("an infinite TaskSource has no length")
        return self.size

    @property
    def finite(self) -> bool:
        return self.size is not None

    def __getitem__(self, i: int) -> task_base.Example:
        return self.task.example(int(i), seed=self.seed, split=self.split)


class ExampleList:
    """A finite, random-access list of examples plus the counts of skipped rows."""

    finite = True

    def __init__(self, examples: Sequence[task_base.Example], *, name: str = "examples",
                 stats: dict[str, int] | None = None):
        self.examples, self.name = list(examples), name
        self.stats = dict(stats or {})
        if not self.examples:
            raise ValueError(f"dataset {name} is empty" + (f" (skipped rows: {self.stats})"
                                                           if any(self.stats.values()) else ""))

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[int(i)]


def split_by_prompt(source: ExampleList, *, test_fraction: float,
                    name: str = "") -> tuple[ExampleList, ExampleList]:
    """(train, test) of a finite source, split by the SHA-256 of each prompt's text
    (`tasks.split_of`): deterministic, the same on every machine, and a prompt that occurs
    twice lands on one side only, so train and test share no prompt.

    Raises ValueError when either side would be empty.
    """
    name = name or getattr(source, "name", "data")
    sides: dict[str, list] = {"train": [], "test": []}
    for i in range(len(source)):
        ex = source[i]
        sides[task_base.split_of(ex.prompt, test_fraction=test_fraction)].append(ex)
    n, n_test = len(source), len(sides["test"])
    if not sides["test"] or not sides["train"]:
        raise ValueError(f"data.eval_fraction: a hash split of {name} with test_fraction "
                         f"{test_fraction} leaves {n_test} of {n} prompts held out; change "
                         "it or give data.eval_path")
    return (ExampleList(sides["train"], name=f"{name} (hash split: train, {n - n_test} of {n})"),
            ExampleList(sides["test"], name=f"{name} (hash split: held out, {n_test} of {n} "
                                            f"prompts, eval_fraction {test_fraction:g})"))



# ---------------------------------------------------------------------------------------
# loader
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class PromptBatch:
    """A fixed-shape batch of P prompts.

    tokens [P, Tp] int32 left-padded with pad_id; lengths [P] int32; answers [P] int32
    (integer answers, 0 where `answer_mask` is False); answer_mask [P] bool; valid [P] bool
    (False only for filler rows of the final batch when `num_epochs` is set); examples: the
    P `Example`s (after any chat template, the prompt text is in `texts`); indices [P] and
    epochs [P] int64: each row's source index and the epoch it was drawn in (what
    `rlvr_jax.data.adaptive` tracks pass rates by).
    """

    tokens: np.ndarray
    lengths: np.ndarray
    answers: np.ndarray
    answer_mask: np.ndarray
    valid: np.ndarray
    examples: list
    texts: list
    indices: np.ndarray = None
    epochs: np.ndarray = None


class PromptLoader:
    """Deterministic, resumable iterator of `PromptBatch`es (see module docstring).

    Args:
      source: a `TaskSource` or `ExampleList` (or anything with __getitem__, `finite`, len).
      tokenizer: a `rlvr_jax.data.tokenizers.Tokenizer`.
      batch_size: P.
      max_prompt_len: Tp, the fixed prompt width (including BOS).
      seed: shuffling seed for finite sources.
      shuffle: reshuffle finite sources every epoch.
      overflow: "drop", "truncate" or "error" for prompts longer than Tp.
      chat_template: optional `ChatTemplate` (or template string) applied to each prompt.
      add_bos: prepend BOS when the tokenizer has one.
      num_epochs: stop after this many passes over a finite source (None: forever).
      admit: optional fn(source_index, epoch) -> bool; a prompt it refuses is skipped and
        counted as "filtered" (e.g. `adaptive.PromptFilter.admit`). Once a pass's worth of
        prompts (len(source)) has been refused while filling one batch, the rest of that
        batch is taken unfiltered (counted as "forced"), so the stream never stalls.
    """

    def __init__(self, source, tokenizer, *, batch_size: int, max_prompt_len: int, seed: int = 0,
                 shuffle: bool = True, overflow: str = "drop", chat_template=None,
                 add_bos: bool = True, num_epochs: int | None = None, admit=None):
        if batch_size <= 0 or max_prompt_len <= 0:
            raise ValueError("batch_size and max_prompt_len must be positive")
        if overflow not in ("drop", "truncate", "error"):
            raise ValueError(f"overflow must be 'drop', 'truncate' or 'error', got {overflow!r}")
        finite = getattr(source, "finite", True)
        if finite and len(source) == 0:
            raise ValueError("empty dataset")
        if num_epochs is not None and (not finite or num_epochs <= 0):
            raise ValueError("num_epochs needs a finite source and a positive value")
        if isinstance(chat_template, str):
            from rlvr_jax.data.tokenizers import ChatTemplate
            chat_template = ChatTemplate(chat_template)
        self.source, self.tokenizer, self.finite = source, tokenizer, finite
        self.batch_size, self.max_prompt_len, self.seed = batch_size, max_prompt_len, seed
        self.shuffle, self.overflow, self.chat_template = shuffle, overflow, chat_template
        self.add_bos = add_bos and tokenizer.bos_id is not None
        self.num_epochs, self.admit = num_epochs, admit
        self._state = {k: 0 for k in self.STATE_KEYS}
        self._perm_epoch, self._perm = None, None

    # -- position --------------------------------------------------------------------------
    STATE_KEYS = ("epoch", "index", "dropped", "truncated", "filtered", "forced")

    def state(self) -> dict[str, int]:
        """The position: {"epoch", "index", "dropped", "truncated", "filtered", "forced"}
        (plain ints; the last four are counts of prompts skipped or let through)."""
        return dict(self._state)

    def restore(self, state: dict[str, int]) -> None:
        missing = {"epoch", "index", "dropped", "truncated"} - set(state)
        if missing:
            raise ValueError(f"loader state misses {sorted(missing)}")
        # "filtered" / "forced" are absent from states saved before filtering existed.
        self._state = {k: int(state.get(k, 0)) for k in self.STATE_KEYS}

    def _source_index(self, epoch: int, index: int) -> int:
        if not self.finite or not self.shuffle:
            return index
        if self._perm_epoch != epoch:
            rng = np.random.default_rng([int(self.seed) & 0xFFFFFFFF, epoch])
            self._perm, self._perm_epoch = rng.permutation(len(self.source)), epoch
        return int(self._perm[index])

    # -- tokenisation ----------------------------------------------------------------------
    def encode_prompt(self, example) -> tuple[str, list[int] | None, bool]:
        """(text, ids, truncated) of one prompt after the overflow policy; ids is None when
        the prompt is dropped."""
        text = example.prompt
        if self.chat_template is not None:
            text = self.chat_template.render(text)
        ids = self.tokenizer.encode(text, add_bos=self.add_bos)
        limit = self.max_prompt_len
        if len(ids) <= limit:
            return text, ids, False
        if self.overflow == "error":
            raise ValueError(f"prompt {example.key!r} has {len(ids)} tokens > max_prompt_len={limit}")
        if self.overflow == "drop":
            return text, None, False
        head = ids[:1] if self.add_bos else []
        return text, head + ids[len(ids) - (limit - len(head)):], True

    def overflow_count(self) -> tuple[int, int, int]:
        """(n_long, n, longest) over a finite source: how many of its n prompts are longer
        than `max_prompt_len` tokens (chat template and BOS included), and the longest
        prompt's token count. Reads every prompt once; the loader's position is unchanged."""
        lengths = [len(self.tokenizer.encode(
            self.chat_template.render(ex.prompt) if self.chat_template else ex.prompt,
            add_bos=self.add_bos)) for ex in (self.source[i] for i in range(len(self.source)))]
        return sum(n > self.max_prompt_len for n in lengths), len(lengths), max(lengths)

    # -- iteration -------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self) -> PromptBatch:
        st = dict(self._state)
        rows, texts, where = [], [], []
        scanned_since_keep, refused = 0, 0
        while len(rows) < self.batch_size:
            if self.finite and st["index"] >= len(self.source):
                st["epoch"] += 1
                st["index"] = 0
            if self.num_epochs is not None and st["epoch"] >= self.num_epochs:
                break
            source_index = self._source_index(st["epoch"], st["index"])
            st["index"] += 1
            if self.admit is not None and not self.admit(source_index, st["epoch"]):
                if refused < len(self.source):  # (a filter needs a finite source)
                    refused += 1
                    st["filtered"] += 1
                    continue
                st["forced"] += 1  # A whole pass refused: the rest of this batch unfiltered.
            ex = self.source[source_index]
            text, ids, truncated = self.encode_prompt(ex)
            if ids is None:
                st["dropped"] += 1
                scanned_since_keep += 1
                if self.finite and scanned_since_keep > len(self.source):
                    raise ValueError(f"every prompt exceeds max_prompt_len={self.max_prompt_len}"
                                     f" tokens ({st['dropped']} dropped)")
                if not self.finite and scanned_since_keep > 10_000:
                    raise ValueError("10000 prompts in a row exceed max_prompt_len="
                                     f"{self.max_prompt_len}")
                continue
            st["truncated"] += int(truncated)
            scanned_since_keep = 0
            rows.append((ex, ids))
            texts.append(text)
            where.append((source_index, st["epoch"]))
        if not rows:
            self._state = st
            raise StopIteration
        valid = np.zeros((self.batch_size,), bool)
        valid[:len(rows)] = True
        while len(rows) < self.batch_size:  # final batch of a finite run: filler rows
            rows.append(rows[-1])
            texts.append(texts[-1])
            where.append(where[-1])
        self._state = st
        examples = [ex for ex, _ in rows]
        tokens, lengths = self.tokenizer.pad_left([ids for _, ids in rows], pad_to=self.max_prompt_len)
        answer_mask = np.array([ex.answer_value is not None for ex in examples], bool)
        answers = np.array([ex.answer_value if ex.answer_value is not None else 0
                            for ex in examples], np.int32)
        indices, epochs = np.array(where, np.int64).T
        return PromptBatch(tokens=tokens, lengths=lengths, answers=answers,
                           answer_mask=answer_mask, valid=valid, examples=examples, texts=texts,
                           indices=indices, epochs=epochs)


def completion_arrays(texts: Sequence[str], tokenizer, *, max_len: int,
                      add_eos: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded completion targets (e.g. worked solutions for supervised warm-up).

    Concatenated after a `PromptBatch`'s left-padded `tokens` ([P, Tp] ++ [P, Tc]) this is
    the layout a sampler produces: the prompt ends at column Tp-1, the completion starts at
    Tp. A completion longer than `max_len` (EOS included) is a ValueError.

    Returns:
      tokens [P, Tc] int32 (pad_id after the end), mask [P, Tc] bool (True on completion
      tokens, EOS included).
    """
    if not len(texts):
        raise ValueError("empty batch")
    tokens = np.full((len(texts), max_len), tokenizer.pad_id, np.int32)
    mask = np.zeros((len(texts), max_len), bool)
    for row, text in enumerate(texts):
        ids = tokenizer.encode(text, add_eos=add_eos)
        if len(ids) > max_len:
            raise ValueError(f"completion {row} has {len(ids)} tokens > max_len={max_len}")
        tokens[row, :len(ids)] = ids
        mask[row, :len(ids)] = True
    return tokens, mask
