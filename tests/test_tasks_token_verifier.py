"""The on-device token verifier agrees with the host verifier (builtin sentencepiece and a
HF tokenizer with multi-character digit tokens), on right, wrong and adversarial outputs."""
import jax
import numpy as np
import pytest

from rlvr_jax import tasks
from rlvr_jax.data import tokenizers

N = 40  # completion width


def _adversarial(ex):
    a = ex.answer
    wrong = str(ex.answer_value + 1)
    steps = ex.solution.split(tasks.MARKER)[0]
    return [
        ex.solution, f"#### {a}", f"####{a}", f"{steps}#### {a}\n", f" #### {a} ", f"#### 0{a}",
        f"#### {wrong}", f"{steps}#### {wrong}", f"the answer is {a}", a, f"{a} ####",
        f"#### {a} #### {a}", f"#### {a} #### {wrong}", f"#### {wrong} #### {a}",
        f"##### {a}", f"### {a}", f"#### {a}.", f"#### {a} done", f"#### {a}{a}",
        f"#### -{a}", f"#### - {a}", f"#### --{a}", f"#### {a[:-1]} {a[-1]}", "Thought process:",
        f"Thought process: the answer is {a}", f"Thought process: #### {a}", "####", "#### ",
        f"#### 0000000000{a}", f"#### 12345678901234{a}", f"#{a}###", f"## ## {a}", "",
        f"#### {a}\t\r\n", f"{a} {a} #### {a}",
    ]


def _batch(tok, texts, rng, garbage_after_eos=True):
    tokens = np.full((len(texts), N), tok.pad_id, np.int32)
    mask = np.zeros((len(texts), N), np.int32)
    for i, t in enumerate(texts):
        ids = tok.encode(t, add_eos=bool(rng.random() < 0.8))[:N]
        tokens[i, :len(ids)] = ids
        mask[i, :len(ids)] = 1
        if garbage_after_eos and len(ids) < N and rng.random() < 0.5:
            extra = tok.encode(" #### 7")[: N - len(ids)]
            tokens[i, len(ids):len(ids) + len(extra)] = extra  # masked out: must be ignored
    return tokens, mask


def _host(task, tok, tokens, mask, examples):
    out = []
    for row, m, ex in zip(tokens, mask, examples):
        text = tok.decode(row[m.astype(bool)], stop_at_eos=True)
        out.append(task.verify(text, ex))
    return np.asarray(out, np.float32)


def _agreement(tok, seed):
    rng = np.random.default_rng(seed)
    task = tasks.Arithmetic(ops=("add", "sub", "mul"), min_digits=1, max_digits=3, mul_max_digits=2)
    exs = task.generate(40, seed=seed)
    texts, examples = [], []
    for ex in exs:
        for t in _adversarial(ex):
            texts.append(t)
            examples.append(ex)
    # random strings over the answer alphabet
    alphabet = list("0123456789#- \n") + ["####", "a"]
    for _ in range(300):
        ex = exs[int(rng.integers(len(exs)))]
        parts = [alphabet[int(i)] for i in rng.integers(0, len(alphabet), int(rng.integers(1, 12)))]
        if rng.random() < 0.5:
            parts = parts + ["#### ", ex.answer]
        texts.append("".join(parts))
        examples.append(ex)
    tokens, mask = _batch(tok, texts, rng)
    answers = tasks.answers_array(examples)
    verify = jax.jit(tasks.make_token_verifier(tok))
    device = np.asarray(verify(tokens, mask, answers))
    host = _host(task, tok, tokens, mask, examples)
    bad = np.nonzero(device != host)[0]
    assert not len(bad), [(texts[i], examples[i].answer, host[i], device[i]) for i in bad[:5]]
    assert 0.15 < host.mean() < 0.6  # both right and wrong samples are present
    return host


def test_agrees_with_host_builtin_sentencepiece():
    host = _agreement(tokenizers.load_tokenizer("builtin"), seed=0)
    assert host.sum() > 100


def _hf_tokenizer():
    """A tiny byte-level BPE (GPT-2 style) trained here on task text: it has multi-character
    tokens such as " 81" and " ####"."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "</s>", "<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    task = tasks.Arithmetic(ops=("add", "sub", "mul"), max_digits=3, mul_max_digits=2)
    corpus = [ex.prompt + ex.solution for ex in task.generate(300, seed=5)]
    tk.train_from_iterator(corpus, trainer)
    return tokenizers.HFTokenizer(tk, eos_token="</s>", bos_token="<s>", pad_token="<pad>")


def test_agrees_with_host_hf_multichar_tokens():
    tok = _hf_tokenizer()
    texts = tok.token_texts()
    assert any(len(t) > 1 and t.strip().isdigit() and t[0] == " " for t in texts)
    assert any("####" in t for t in texts)
    _agreement(tok, seed=1)


@pytest.mark.parametrize("require_eos", [False, True])
def test_require_eos(require_eos):
    tok = tokenizers.load_tokenizer("builtin")
    verify = tasks.make_token_verifier(tok, require_eos=require_eos)
    with_eos = tok.encode("#### 12", add_eos=True)
    no_eos = tok.encode("#### 12")
    tokens, lengths = tok.pad_left([with_eos, no_eos])
    mask = np.arange(tokens.shape[1])[None, :] >= tokens.shape[1] - lengths[:, None]
    out = np.asarray(verify(tokens, mask, np.array([12, 12], np.int32)))
    np.testing.assert_array_equal(out, [1.0, 0.0 if require_eos else 1.0])


def test_answers_array_rejects_non_integer_tasks():
    ex = tasks.Sorting().generate(1, seed=0)[0]
    with pytest.raises(ValueError, match="no integer answer"):
        tasks.answers_array([ex])
