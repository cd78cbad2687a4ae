"""A user's own data: answers that are not text or numbers, huge lines and numbers, over-long
prompts counted and refused past `data.max_drop_fraction`, a too-small held-out set, a
truncated metrics.jsonl, and `--help` in the config's own order."""
import json
import os

import pytest

from rlvr_jax.data import datasets, files, tokenizers
from rlvr_jax.train import build, cli
from rlvr_jax.train.config import default_config
from rlvr_jax.train.logging import read_metrics
from rlvr_jax.train.errors import ConfigError

QUICK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs",
                     "quickstart.py")


def _write(path, lines):
    path.write_bytes(b"".join(line if isinstance(line, bytes) else json.dumps(line).encode()
                              + b"\n" for line in lines))
    return path


@pytest.mark.parametrize("answer,kind", [(None, "null"), ([1, 2], "a list"),
                                         ({"a": 1}, "an object"), (True, "true/false")])
def test_an_answer_that_is_not_text_or_a_number_is_an_error_naming_its_line(tmp_path, answer,
                                                                            kind):
    """A null answer would become the reference "None", which `#### None` matches."""
    path = _write(tmp_path / "d.jsonl", [{"prompt": "1+1=", "answer": 2},
                                         {"prompt": "2+2=", "answer": answer}])
    with pytest.raises(ValueError, match=f"d.jsonl line 2: answer field 'answer' must be text "
                                         f"or a number, got {kind}"):
        files.read_jsonl(path)
    data = files.read_jsonl(path, on_error="skip")
    assert [(e.prompt, e.answer) for e in data.examples] == [("1+1=", "2")]
    assert data.stats["bad_type"] == 1


def test_numbers_as_answers_are_written_out(tmp_path):
    data = files.read_jsonl(_write(tmp_path / "d.jsonl", [{"prompt": "a", "answer": 7},
                                                             {"prompt": "b", "answer": 0.5}]))
    assert [(e.answer, e.answer_value) for e in data.examples] == [("7", 7), ("0.5", None)]


def test_a_huge_integer_or_line_is_an_error_naming_its_line(tmp_path, monkeypatch):
    big = b'{"prompt": "x", "answer": ' + b"9" * 100_001 + b"}\n"
    path = _write(tmp_path / "big.jsonl", [{"prompt": "a", "answer": "1"}, big])
    with pytest.raises(ValueError, match="big.jsonl line 2: a number has more digits"):
        files.read_jsonl(path)
    # A line over the limit is refused without being held: the reader keeps at most the
    # limit (here 64 bytes; by default files.MAX_LINE_BYTES = 16 MiB) of it.
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 64)
    long_line = json.dumps({"prompt": "p" * 500, "answer": "1"}).encode() + b"\n"
    path = _write(tmp_path / "long.jsonl", [{"prompt": "a", "answer": "1"}, long_line,
                                            {"prompt": "b", "answer": "2"}])
    with pytest.raises(ValueError, match="long.jsonl line 2: line is longer than 64 bytes"):
        files.read_jsonl(path)
    data = files.read_jsonl(path, on_error="skip")
    assert [e.key for e in data.examples] == ["long.jsonl:1", "long.jsonl:3"]
    assert data.stats["too_long"] == 1


def _config(tmp_path, n_long, n=40, **data):
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(n - n_long)]
    rows += [{"prompt": "1" * 30 + f"+{i}=", "answer": "0"} for i in range(n_long)]
    config = default_config()
    config.data.update(dict(source="jsonl", path=str(_write(tmp_path / "d.jsonl", rows)),
                            max_prompt_len=8, **data))
    return config


def _check(config):
    tok = tokenizers.load_tokenizer("builtin")
    train = files.read_jsonl(config.data.path)
    build.check_prompt_lengths(config, build.prompt_loader(config, train, tok, 1), "d.jsonl")


def test_over_long_prompts_are_counted_and_refused_past_the_fraction(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"data.max_prompt_len: 2 of 40 prompts of d.jsonl "
                                          r"\(5.0%\) are longer than 8 tokens, more than "
                                          r"data.max_drop_fraction=0.01 may drop; the longest "
                                          r"has 34 tokens: set data.max_prompt_len=34"):
        _check(_config(tmp_path, 2))
    _check(_config(tmp_path, 2, max_drop_fraction=0.1))
    out = capsys.readouterr().out
    assert "data: 2 of 40 prompts of d.jsonl are longer than data.max_prompt_len=8 tokens and " \
           "are dropped (the longest has 34)" in out
    _check(_config(tmp_path, 2, overflow="truncate"))
    assert "are truncated" in capsys.readouterr().out
    _check(_config(tmp_path, 0))
    assert "longer than" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match=r"data.max_drop_fraction: must be in \[0, 1\]"):
        _check(_config(tmp_path, 2, max_drop_fraction=2.0))
    # The long prompts sit past the first 64 that `check_fit` encodes one by one.
    with pytest.raises(ConfigError, match=r"data.max_prompt_len: 2 of 80 prompts of d.jsonl "
                                          r"are longer than 8 tokens \(data.overflow=error\); "
                                          r"the longest has 34 tokens"):
        _check(_config(tmp_path, 2, n=80, overflow="error"))


def test_a_small_held_out_set_is_warned_about_and_bad_rows_skipped_are_printed(tmp_path,
                                                                               capsys):
    config = _config(tmp_path, 0, n=20, skip_bad_rows=True)
    with open(config.data.path, "a") as f:
        f.write('{"prompt": "9+9=", "answer": null}\n')
    build.file_sources(config.data, files.read_jsonl)
    out = capsys.readouterr().out
    assert "data: skipped 1 bad rows of" in out and "bad_type 1" in out
    assert "warning: the held-out set has" in out and "below 100" in out


def test_data_errors_on_the_command_line_are_one_line_exit_2(tmp_path, capsys, monkeypatch):
    """The issue's second attempt: a file whose prompts are all too long for the quickstart's
    max_prompt_len=8 gave a traceback from the evaluator; now one line, exit 2."""
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    rows = [{"prompt": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(20)]
    path = _write(tmp_path / "mine.jsonl", rows)
    capsys.readouterr()
    status = cli.main(["--config", QUICK, "--workdir", str(tmp_path / "run"),
                       "--config.data.source=jsonl", f"--config.data.path={path}",
                       "--config.sft.steps=0"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: data.max_prompt_len: all of the first") and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_read_metrics_leaves_out_a_cut_last_line_and_names_a_bad_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert read_metrics(str(path)) == [{"step": 1}, {"step": 2}]
    path.write_text('{"step": 1}\n{"step": 2\n{"step": 3}\n')
    with pytest.raises(ValueError, match="line 2: not JSON"):
        read_metrics(str(path))


def test_help_lists_fields_in_the_configs_order_so_continued_comments_read_on():
    from rlvr_jax.train.config_help import field_help
    names = [name for name, _, _ in field_help(default_config())]
    assert names.index("data.answer_field") == names.index("data.prompt_field") + 1
    assert names.index("data.overflow") == names.index("data.max_prompt_len") + 1
    assert names[0] == "seed" and names.index("model.preset") < names.index("data.source")


def test_the_validator_reports_every_problem(tmp_path, capsys, monkeypatch):
    """The issue's case: switching the quickstart to JSONL without a path reported only
    `sft.steps`; now every problem, one `error:` line each, exit 2: `data.path` and a bad
    value of another section too. (`sft.steps` is checked against the file's worked
    solutions once it is read.)"""
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    capsys.readouterr()
    status = cli.main(["--config", QUICK, "--workdir", str(tmp_path / "run"),
                       "--config.data.source=jsonl", "--config.checkpoint.keep=0"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert [line.split(":")[1].strip() for line in lines] == [
        "checkpoint.keep", "data.path"], lines
    assert all(line.startswith("error: ") for line in lines)


def test_worked_solutions_come_from_a_solution_field_and_a_warm_up_needs_them(tmp_path,
                                                                            capsys, monkeypatch):
    rows = [{"prompt": f"{i}+{i}=", "answer": str(2 * i), "solution": f"#### {2 * i}"}
            for i in range(6)] + [{"prompt": "7+1=", "answer": "8"}]
    path = _write(tmp_path / "mine.jsonl", rows)
    data = files.read_jsonl(path)
    assert [e.solution for e in data.examples] == [f"#### {2 * i}" for i in range(6)] + [""]
    assert files.read_jsonl(path, solution_field="").examples[0].solution == ""
    _write(tmp_path / "bad.jsonl", [{"prompt": "1+1=", "answer": 2, "solution": 2}])
    with pytest.raises(ValueError, match="bad.jsonl line 1: solution field 'solution' must be "
                                         "text, got int"):
        files.read_jsonl(tmp_path / "bad.jsonl")
    # A warm-up (the quickstart's sft.steps > 0) on rows without solutions: one line, exit 2.
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    capsys.readouterr()
    status = cli.main(["--config", QUICK, "--workdir", str(tmp_path / "run"),
                       "--config.data.source=jsonl", f"--config.data.path={path}",
                       "--config.data.solution_field=steps", "--config.data.eval_fraction=0.3"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: sft.steps: the warm-up trains on worked "
                                          "solutions and the first "), err
    # With them, the warm-up runs on the file (and its loss falls).
    status = cli.main(["--config", QUICK, "--workdir", str(tmp_path / "ok"),
                       "--config.data.source=jsonl", f"--config.data.path={path}",
                       "--config.data.eval_fraction=0.3", "--config.sft.steps=30",
                       "--config.sft.batch_size=4", "--config.log_every=10",
                       "--config.rl.steps=0", "--config.eval.num_prompts=2",
                       "--config.eval.batch_size=2"])
    assert status == 0, capsys.readouterr().err
    sft = [r["sft/loss"] for r in read_metrics(str(tmp_path / "ok" / "metrics.jsonl"))
           if "sft/loss" in r]
    assert len(sft) == 3 and sft[-1] < sft[0]
