"""Prompt datasets and the resumable loader: resume, determinism, fixed shapes, file formats,
bad input (missing fields, non-UTF-8, empty files, over-long prompts)."""
import json

import numpy as np
import pytest

from rlvr_jax import tasks
from rlvr_jax.data import datasets, files, tokenizers


@pytest.fixture(scope="module")
def tok():
    return tokenizers.load_tokenizer("builtin")


def _rows(n):
    return [{"prompt": f"{i}+{i}=", "answer": str(2 * i), "id": i} for i in range(n)]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _signature(batch):
    return (batch.tokens.tobytes(), batch.lengths.tobytes(), [e.key for e in batch.examples])


@pytest.mark.parametrize("kind", ["task", "file"])
def test_resume_is_exact(tok, tmp_path, kind):
    if kind == "task":
        source = datasets.TaskSource(tasks.Arithmetic(max_digits=3), seed=7)
    else:
        source = files.read_jsonl(_write_jsonl(tmp_path / "d.jsonl", _rows(13)))
    make = lambda: datasets.PromptLoader(source, tok, batch_size=4, max_prompt_len=10, seed=3)  # noqa: E731
    reference = [_signature(next(make_iter)) for make_iter in [make()] for _ in range(10)]
    loader = make()
    for _ in range(4):
        next(loader)
    saved = json.loads(json.dumps(loader.state()))   # survives a JSON round trip
    after = [_signature(next(loader)) for _ in range(6)]
    assert after == reference[4:]
    fresh = make()
    fresh.restore(saved)
    assert [_signature(next(fresh)) for _ in range(6)] == reference[4:]
    if kind == "file":   # 10 batches of 4 over 13 rows: crossed epochs, each a permutation
        assert saved["epoch"] == 1
        keys = [k for sig in reference[:4] for k in sig[2]][:13]
        assert sorted(keys) == sorted(e.key for e in source.examples)


def test_shuffle_depends_on_seed_and_epoch(tok, tmp_path):
    source = files.read_jsonl(_write_jsonl(tmp_path / "d.jsonl", _rows(20)))
    def order(seed, shuffle=True):
        loader = datasets.PromptLoader(source, tok, batch_size=5, max_prompt_len=10, seed=seed,
                                       shuffle=shuffle, num_epochs=2)
        return [e.key for b in loader for e in b.examples]
    a = order(0)
    assert a == order(0) and a != order(1)
    assert a[:20] != a[20:] and sorted(a[:20]) == sorted(a[20:])
    assert order(0, shuffle=False)[:20] == [e.key for e in source.examples]


def test_batch_shapes_answers_and_final_partial_batch(tok, tmp_path):
    source = files.read_jsonl(_write_jsonl(tmp_path / "d.jsonl", _rows(7)))
    loader = datasets.PromptLoader(source, tok, batch_size=3, max_prompt_len=8, num_epochs=1,
                                   shuffle=False)
    batches = list(loader)
    assert len(batches) == 3
    for b in batches:
        assert b.tokens.shape == (3, 8) and b.tokens.dtype == np.int32
        assert b.answers.dtype == np.int32 and b.lengths.dtype == np.int32
        for row, n, ex in zip(b.tokens, b.lengths, b.examples):
            assert list(row[:8 - n]) == [tok.pad_id] * (8 - n) and row[8 - n] == tok.bos_id
            assert tok.decode(row) == ex.prompt
    np.testing.assert_array_equal(batches[0].answers, [0, 2, 4])
    assert batches[0].answer_mask.all()
    np.testing.assert_array_equal(batches[-1].valid, [True, False, False])
    with pytest.raises(StopIteration):
        next(loader)


def test_task_source_batches_verify_on_device(tok):
    task = tasks.Arithmetic(max_digits=2)
    loader = datasets.PromptLoader(datasets.TaskSource(task, seed=0, split="test"), tok,
                                   batch_size=8, max_prompt_len=8)
    batch = next(loader)
    assert all(e.split == "test" for e in batch.examples)
    np.testing.assert_array_equal(batch.answers, tasks.answers_array(batch.examples))
    comp, mask = datasets.completion_arrays([e.solution for e in batch.examples], tok, max_len=24)
    assert (comp[np.arange(8), mask.sum(1) - 1] == tok.eos_id).all()
    full = np.concatenate([batch.tokens, comp], axis=1)   # sampler layout: [P, Tp + Tc]
    assert tok.decode(full[0], stop_at_eos=True) == batch.examples[0].prompt + batch.examples[0].solution
    with pytest.raises(ValueError, match="max_len"):
        datasets.completion_arrays(["1 2 3 4 5 6 #### 7"], tok, max_len=5)
    rewards = np.asarray(tasks.make_token_verifier(tok)(comp, mask, batch.answers))
    np.testing.assert_array_equal(rewards, np.ones(8, np.float32))


def test_overflow_drop_truncate_error(tok, tmp_path):
    rows = _rows(6) + [{"prompt": "9" * 30 + "+1=", "answer": "x"}]
    source = files.read_jsonl(_write_jsonl(tmp_path / "d.jsonl", rows))
    drop = datasets.PromptLoader(source, tok, batch_size=6, max_prompt_len=8, shuffle=False,
                                 num_epochs=1)
    batch = next(drop)
    assert batch.valid.all() and drop.state()["dropped"] == 0
    with pytest.raises(StopIteration):
        next(drop)
    assert drop.state()["dropped"] == 1
    trunc = datasets.PromptLoader(source, tok, batch_size=7, max_prompt_len=8, shuffle=False,
                                  overflow="truncate", num_epochs=1)
    batch = next(trunc)
    assert trunc.state()["truncated"] == 1
    assert batch.tokens[6, 0] == tok.bos_id and tok.decode(batch.tokens[6]) == "9999+1="  # BOS + last 7 tokens
    assert not batch.answer_mask[6]
    err = datasets.PromptLoader(source, tok, batch_size=7, max_prompt_len=8, shuffle=False,
                                overflow="error")
    with pytest.raises(ValueError, match="max_prompt_len"):
        next(err)
    all_long = datasets.PromptLoader(source, tok, batch_size=2, max_prompt_len=2)
    with pytest.raises(ValueError, match="every prompt exceeds"):
        next(all_long)


def test_jsonl_bad_input(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"prompt": "1+1=", "answer": "2"}\n'
                     b'\n'
                     b'{"prompt": "2+2=", "ans": "4"}\n'
                     b'{"prompt": "caf\xe9", "answer": "x"}\n'
                     b'{"prompt": "3+3=", "answer": "6"\n'
                     b'{"prompt": 7, "answer": "6"}\n'
                     b'{"question": "4+4=", "solution": 8, "src": "s"}\n')
    with pytest.raises(ValueError, match=r"line 3: missing field\(s\) \['answer'\]"):
        files.read_jsonl(path)
    skipped = files.read_jsonl(path, on_error="skip")
    assert [e.prompt for e in skipped.examples] == ["1+1="]
    assert skipped.stats == {"missing_field": 2, "bad_utf8": 1, "bad_json": 1, "bad_type": 1,
                             "too_long": 0}
    renamed = files.read_jsonl(path, prompt_field="question", answer_field="solution",
                                  metadata_fields=["src"], on_error="skip")
    (ex,) = renamed.examples
    assert (ex.prompt, ex.answer, ex.answer_value, ex.meta) == ("4+4=", "8", 8, {"src": "s"})
    for bad, pattern in [(b'{"prompt": "caf\xe9", "answer": "x"}\n', "line 1: .*UTF-8"),
                         (b'{"prompt": "a", "answer": "b"\n', "line 1: not JSON")]:
        path.write_bytes(bad)
        with pytest.raises(ValueError, match=pattern):
            files.read_jsonl(path)
    path.write_bytes(b"\n\n")
    with pytest.raises(ValueError, match="empty"):
        files.read_jsonl(path)
    with pytest.raises(ValueError, match="not found"):
        files.read_jsonl(tmp_path / "missing.jsonl")


def test_parquet(tok, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    table = pa.table({"q": ["1+2=", "3+4=", "5+6="], "a": ["3", "7", "11"],
                      "level": [1, 2, 3], "raw": [b"ok", b"\xff", b"ok"]})
    pq.write_table(table, tmp_path / "d.parquet")
    data = files.read_parquet(tmp_path / "d.parquet", prompt_field="q", answer_field="a",
                                 metadata_fields=["level"])
    assert [(e.prompt, e.answer_value, e.meta["level"]) for e in data.examples] == [
        ("1+2=", 3, 1), ("3+4=", 7, 2), ("5+6=", 11, 3)]
    with pytest.raises(ValueError, match="row 1: .*UTF-8"):
        files.read_parquet(tmp_path / "d.parquet", prompt_field="raw", answer_field="a")
    with pytest.raises(ValueError, match="missing field"):
        files.read_parquet(tmp_path / "d.parquet")
    loader = datasets.PromptLoader(data, tok, batch_size=2, max_prompt_len=6)
    assert next(loader).tokens.shape == (2, 6)


def test_tfds_array_record_builder(tok, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    pytest.importorskip("array_record")

    class TinyArithmeticPrompts(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"question": tfds.features.Text(), "answer": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(6)}

        def _generate_examples(self, n):
            for i in range(n):
                yield i, {"question": f"{i}+1=", "answer": str(i + 1)}

    TinyArithmeticPrompts(data_dir=str(tmp_path), file_format="array_record").download_and_prepare()
    data = files.read_tfds("tiny_arithmetic_prompts", split="train", data_dir=str(tmp_path),
                              prompt_field="question")
    assert sorted((e.prompt, e.answer_value) for e in data.examples) == [
        (f"{i}+1=", i + 1) for i in range(6)]
    batch = next(datasets.PromptLoader(data, tok, batch_size=4, max_prompt_len=6))
    assert batch.tokens.shape == (4, 6)


def test_loader_argument_errors(tok, tmp_path):
    source = files.read_jsonl(_write_jsonl(tmp_path / "d.jsonl", _rows(3)))
    with pytest.raises(ValueError, match="overflow"):
        datasets.PromptLoader(source, tok, batch_size=2, max_prompt_len=8, overflow="clip")
    with pytest.raises(ValueError, match="num_epochs"):
        datasets.PromptLoader(datasets.TaskSource(tasks.Arithmetic()), tok, batch_size=2,
                              max_prompt_len=8, num_epochs=1)
    with pytest.raises(ValueError, match="misses"):
        datasets.PromptLoader(source, tok, batch_size=2, max_prompt_len=8).restore({"epoch": 0})
    with pytest.raises(ValueError, match="empty"):
        datasets.ExampleList([])
