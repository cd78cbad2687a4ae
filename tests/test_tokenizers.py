"""Tokenizer interface: round trips for sentencepiece and HF tokenizer.json, left padding,
special ids, chat templates."""
import json

import numpy as np
import pytest

from rlvr_jax import tasks
from rlvr_jax.data import tokenizers

TEXTS = ["23+58=11 8 #### 81", "sort 5 3 9:3<5<9 #### 3 5 9", "3 5 7 -> 22:5*3=15 15+7=22 #### 5*3+7",
         "  two  spaces\tand\nnewline ", "Thought process: (a-b)/c! ~{x}|[y]"]


def test_builtin_sentencepiece_round_trip_and_digits():
    tok = tokenizers.load_tokenizer("builtin")
    assert tok.vocab_size <= 256 and tokenizers.BUILTIN_MODEL.stat().st_size < 1_000_000
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 2, 3)
    for text in TEXTS:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert tok.decode(tok.encode(text, add_bos=True, add_eos=True)) == text
    texts = tok.token_texts()
    ids = tok.encode("1234567890")
    assert [texts[i] for i in ids] == list("1234567890")   # digit by digit
    for ex in tasks.Arithmetic(ops=("add",), max_digits=3).generate(50, seed=0):
        assert len(tok.encode(ex.solution)) + 1 <= 24    # completion + EOS stays short
    assert "".join(texts[i] for i in tok.encode(TEXTS[0])) == TEXTS[0]


def _hf_json(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tk.train_from_iterator(TEXTS * 5, trainer)
    path = tmp_path / "tokenizer.json"
    tk.save(str(path))
    return path


def test_hf_tokenizer_json_round_trip(tmp_path):
    path = _hf_json(tmp_path)
    tok = tokenizers.load_tokenizer(path)
    assert isinstance(tok, tokenizers.HFTokenizer)
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    for text in TEXTS + ["héllo wörld ✓ 日本"]:       # byte-level: any text round-trips
        assert tok.decode(tok.encode(text)) == text
        assert tok.decode(tok.encode(text, add_bos=True, add_eos=True)) == text
    texts = tok.token_texts()
    assert "".join(texts[i] for i in tok.encode(TEXTS[2])) == TEXTS[2]
    # a directory with tokenizer_config.json picks up its chat template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "chatml"}))
    tok2 = tokenizers.load_tokenizer(tmp_path)
    assert tok2.apply_chat_template("1+1=") == "<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n"


def test_encode_batch_left_pads():
    tok = tokenizers.load_tokenizer("builtin")
    tokens, lengths = tok.encode_batch(["1+1=", "123+456="], add_bos=True)
    assert tokens.dtype == np.int32 and lengths.dtype == np.int32
    assert tokens.shape == (2, 9) and list(lengths) == [5, 9]
    assert list(tokens[0, :4]) == [tok.pad_id] * 4 and tokens[0, 4] == tok.bos_id
    assert tok.decode(tokens[0]) == "1+1=" and tok.decode(tokens[1]) == "123+456="
    wide, _ = tok.encode_batch(["1+1="], pad_to=12)
    assert wide.shape == (1, 12)
    with pytest.raises(ValueError, match="max_len"):
        tok.encode_batch(["123+456="], max_len=4)
    with pytest.raises(ValueError, match="empty batch"):
        tok.encode_batch([])
    assert tok.decode(tok.encode("#### 5", add_eos=True) + tok.encode("junk"), stop_at_eos=True) == "#### 5"


def test_chat_templates():
    jinja = tokenizers.ChatTemplate("chatml")
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2="}]
    assert jinja.render(msgs, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2=<|im_end|>\n")
    fmt = tokenizers.ChatTemplate("Q: {prompt}\nA:")
    assert fmt.render("2+2=") == "Q: 2+2=\nA:"
    with pytest.raises(ValueError, match="prompt"):
        tokenizers.ChatTemplate("no placeholder")
    with pytest.raises(ValueError, match="role"):
        fmt.render([{"content": "x"}])
    tok = tokenizers.load_tokenizer("builtin", chat_template="Q: {prompt}\nA:")
    text = tok.apply_chat_template("12+3=")
    assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="no chat template"):
        tokenizers.load_tokenizer("builtin").apply_chat_template("x")


def test_missing_files_raise(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        tokenizers.load_tokenizer(tmp_path / "nope.model")
    with pytest.raises(ValueError, match="no tokenizer"):
        tokenizers.load_tokenizer(tmp_path)
