"""File datasets: JSONL, Parquet and TFDS rows as `rlvr_jax.tasks.Example`s (an
`ExampleList`, for `datasets.PromptLoader`).

  read_jsonl(path, prompt_field=..., answer_field=..., metadata_fields=...) -> ExampleList
  read_parquet(path, ...)                              needs pyarrow (imported lazily)
  read_tfds(name, split=..., data_dir=...)             needs tensorflow-datasets +
                                                       array_record (no TensorFlow): reads
                                                       the prepared array_record files through
                                                       `tfds.data_source`

Bad input: a missing field, a line that is not JSON or not UTF-8, a non-text prompt, an
answer that is neither text nor a number (null, a list, an object, true/false), an integer
too long for Python's JSON reader (over 4300 digits) or a line over `MAX_LINE_BYTES` is a
ValueError naming the file and row (``on_error="raise"``, the default) or a skipped row
counted in `ExampleList.stats` (``on_error="skip"``). Reading holds one line at a time, and
never more than `MAX_LINE_BYTES` of it. An empty dataset is a ValueError.
"""
from __future__ import annotations

import json
import pathlib
from typing import Iterable, Sequence

from rlvr_jax.data.datasets import ExampleList
from rlvr_jax.tasks import base as task_base

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_LINE_BYTES = 16 * 2**20  # A longer JSONL line is a bad row, read no further than this.


def _answer_value(answer: str) -> int | None:
    text = answer.strip().replace(",", "")
    if text.lstrip("-").isdigit() and text.isascii():
        value = int(text)
        if INT32_MIN <= value <= INT32_MAX:
            return value
    return None


def _to_text(value, what: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _RowError("bad_utf8", f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})")
    if isinstance(value, str):
        return value
    if what.startswith(("prompt", "solution")):
        raise _RowError("bad_type", f"{what} must be text, got {_json_type(value)}")
    return str(value)


def _answer_text(value, what: str) -> str:
    """An answer as text: text, or a number written out. Anything else (null, a list, an
    object, true/false) would become a reference like "None" that a completion can match,
    so it is a bad row."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            raise _RowError("bad_type", f"{what} must be text or a finite number, got {value}")
        return str(value)
    if isinstance(value, (str, bytes)):
        return _to_text(value, what)
    raise _RowError("bad_type", f"{what} must be text or a number, got {_json_type(value)}")


def _json_type(value) -> str:
    names = {type(None): "null", bool: "true/false", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


class _RowError(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def records_to_examples(records: Iterable[dict], *, name: str, prompt_field: str = "prompt",
                        answer_field: str = "answer", metadata_fields: Sequence[str] | str = (),
                        on_error: str = "raise", first_row: int = 0,
                        solution_field: str = "solution") -> ExampleList:
    """Turn dict records into an `ExampleList`.

    Args:
      records: dicts (bytes values are decoded as UTF-8).
      name: used in error messages and example keys.
      prompt_field, answer_field: field names.
      solution_field: the optional field of a worked solution (the warm-up's target); a
        record without it has none ("").
      metadata_fields: names copied into `Example.meta`, or "*" for every other field.
      on_error: "raise" (ValueError naming the row) or "skip" (count in `.stats`).
      first_row: number of the first record in messages and keys.
    """
    return _convert(enumerate(records, start=first_row), name=f"{name} row", prompt_field=prompt_field,
                    answer_field=answer_field, metadata_fields=metadata_fields,
                    on_error=on_error, key_prefix=name, solution_field=solution_field)


def _convert(numbered, *, name, prompt_field, answer_field, metadata_fields, on_error,
             key_prefix, solution_field) -> ExampleList:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    stats = {"missing_field": 0, "bad_utf8": 0, "bad_json": 0, "bad_type": 0, "too_long": 0}
    examples = []
    for row, rec in numbered:
        try:
            if isinstance(rec, _RowError):
                raise rec
            missing = [f for f in (prompt_field, answer_field) if f not in rec]
            if missing:
                raise _RowError("missing_field", f"missing field(s) {missing}; has {sorted(rec)}")
            prompt = _to_text(rec[prompt_field], f"prompt field {prompt_field!r}")
            answer = _answer_text(rec[answer_field], f"answer field {answer_field!r}")
            solution = rec.get(solution_field) if solution_field not in (
                "", prompt_field, answer_field) else None
            solution = "" if solution is None else _to_text(
                solution, f"solution field {solution_field!r}")
            if metadata_fields == "*":
                meta_names = [k for k in rec if k not in (prompt_field, answer_field,
                                                          solution_field)]
            else:
                meta_names = list(metadata_fields)
                absent = [f for f in meta_names if f not in rec]
                if absent:
                    raise _RowError("missing_field", f"missing metadata field(s) {absent}")
            meta = {k: (_to_text(rec[k], f"field {k!r}") if isinstance(rec[k], bytes) else rec[k])
                    for k in meta_names}
        except _RowError as e:
            if on_error == "raise":
                raise ValueError(f"{name} {row}: {e}") from None
            stats[e.kind] += 1
            continue
        examples.append(task_base.Example(
            prompt=prompt, answer=answer, solution=solution, task=key_prefix, key=f"{key_prefix}:{row}",
            split="", answer_value=_answer_value(answer), meta=meta))
    return ExampleList(examples, name=name, stats=stats)


def _jsonl_lines(f, limit: int):
    """Each line of binary file `f`, or None for a line longer than `limit` bytes (the rest of
    which is read in `limit`-sized pieces and thrown away): memory stays within `limit`."""
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):
            raw = f.readline(limit)
        yield None


def _read_jsonl_records(path: pathlib.Path, limit: int):
    with open(path, "rb") as f:
        for raw in _jsonl_lines(f, limit):
            if raw is None:
                yield _RowError("too_long", f"line is longer than {limit} bytes "
                                            "(files.MAX_LINE_BYTES)")
                continue
            if not raw.strip():
                yield None
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield _RowError("bad_utf8", f"line is not valid UTF-8 ({e.reason} at byte {e.start})")
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                yield _RowError("bad_json", f"not JSON: {e.msg}")
                continue
            except ValueError:  # Python refuses integers of more than 4300 digits.
                yield _RowError("bad_json", "a number has more digits than Python's JSON reader "
                                            "takes (4300)")
                continue
            yield rec if isinstance(rec, dict) else _RowError("bad_json", "line is not a JSON object")


def read_jsonl(path, *, prompt_field: str = "prompt", answer_field: str = "answer",
               metadata_fields: Sequence[str] | str = (), on_error: str = "raise",
               solution_field: str = "solution") -> ExampleList:
    """Examples from a JSON-lines file (one object per line; blank lines ignored; rows are
    numbered from 1 as lines); fields as in `records_to_examples`."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"JSONL file not found: {path}")
    records = _read_jsonl_records(path, MAX_LINE_BYTES)
    numbered = ((line, rec) for line, rec in enumerate(records, start=1)
                if rec is not None)
    return _convert(numbered, name=f"{path} line", prompt_field=prompt_field,
                    answer_field=answer_field, metadata_fields=metadata_fields,
                    on_error=on_error, key_prefix=path.name, solution_field=solution_field)


def read_parquet(path, *, prompt_field: str = "prompt", answer_field: str = "answer",
                 metadata_fields: Sequence[str] | str = (), on_error: str = "raise",
                 solution_field: str = "solution") -> ExampleList:
    """Examples from a Parquet file (needs pyarrow; rows numbered from 0)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ValueError("reading Parquet needs pyarrow: pip install pyarrow") from e
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"Parquet file not found: {path}")
    records = pq.read_table(path).to_pylist()
    return records_to_examples(records, name=str(path), prompt_field=prompt_field,
                               answer_field=answer_field, metadata_fields=metadata_fields,
                               on_error=on_error, solution_field=solution_field)


def read_tfds(name: str, *, split: str = "train", data_dir: str | None = None,
              prompt_field: str = "prompt", answer_field: str = "answer",
              metadata_fields: Sequence[str] | str = (), on_error: str = "raise",
              solution_field: str = "solution") -> ExampleList:
    """Examples from a prepared TFDS dataset, by builder name, through its array_record
    files (`tfds.data_source`; no TensorFlow). The dataset must have been prepared with
    ``file_format="array_record"``; text features arrive as bytes and are decoded as UTF-8.
    Needs ``pip install tensorflow-datasets array_record importlib_resources`` (the
    ``tfds`` extra)."""
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ValueError("reading TFDS needs the tfds extra: pip install tensorflow-datasets "
                         "array_record importlib_resources") from e
    source = tfds.data_source(name, split=split, data_dir=data_dir)
    records = (source[i] for i in range(len(source)))
    return records_to_examples(records, name=f"tfds:{name}/{split}", prompt_field=prompt_field,
                               answer_field=answer_field, metadata_fields=metadata_fields,
                               on_error=on_error, solution_field=solution_field)
