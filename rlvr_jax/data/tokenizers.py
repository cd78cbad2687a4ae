"""One tokenizer interface over sentencepiece models and Hugging Face ``tokenizer.json``.

    tok = load_tokenizer("builtin")                 # the shipped synthetic-task model
    tok = load_tokenizer("path/to/spm.model")       # any sentencepiece model
    tok = load_tokenizer("path/to/tokenizer.json")  # any HF tokenizers model
    ids = tok.encode("23+58=")                      # list[int] (no BOS/EOS unless asked)
    tokens, lengths = tok.encode_batch(texts, add_bos=True, max_len=16)  # LEFT padded
    text = tok.decode(ids)                          # stops at nothing; special ids dropped

Left padding: row i holds ``[pad]*(T - lengths[i]) + ids_i``; the prompt's last token is at
column T-1 for every row, which is what a sampler that prefills once per prompt wants.

`token_texts()` gives each id's surface text such that, for ordinary (non-special) ids, the
concatenation of the texts equals `decode` of the sequence up to leading whitespace; the
on-device verifier is built from it.
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import Sequence

import numpy as np

BUILTIN_MODEL = pathlib.Path(__file__).resolve().parent.parent / "assets" / "rlvr_tasks.model"


class Tokenizer:
    """Common interface. Subclasses set the ids and implement `_encode`, `_decode`,
    `vocab_size`, `token_texts`."""

    bos_id: int | None
    eos_id: int
    pad_id: int
    chat_template: "ChatTemplate | None" = None

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def _encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def token_texts(self) -> list[str]:
        """Surface text of every id (``""`` for special ids)."""
        raise NotImplementedError

    @property
    def special_ids(self) -> set[int]:
        return {i for i in (self.bos_id, self.eos_id, self.pad_id) if i is not None and i >= 0}

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"encode expects str, got {type(text).__name__}")
        ids = self._encode(text)
        if add_bos:
            if self.bos_id is None:
                raise ValueError("this tokenizer has no BOS token")
            ids = [self.bos_id] + ids
        return ids + [self.eos_id] if add_eos else ids

    def decode(self, ids: Sequence[int], *, stop_at_eos: bool = False) -> str:
        """Text of `ids` with special ids removed; with stop_at_eos, only ids before the
        first EOS."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        if stop_at_eos and self.eos_id in ids:
            ids = ids[:ids.index(self.eos_id)]
        special = self.special_ids
        return self._decode([i for i in ids if i not in special])

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = True, max_len: int | None = None,
                     pad_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded batch.

        Args:
          texts: B strings.
          add_bos: prepend BOS (when the tokenizer has one).
          max_len: raise ValueError if a sequence is longer (callers that want to truncate
            or drop do it before, see `rlvr_jax.data.datasets`).
          pad_to: the width T (default: the longest sequence).
        Returns:
          tokens [B, T] int32 (pad_id on the left), lengths [B] int32.
        """
        seqs = [self.encode(t, add_bos=add_bos and self.bos_id is not None) for t in texts]
        return self.pad_left(seqs, max_len=max_len, pad_to=pad_to)

    def pad_left(self, seqs: Sequence[Sequence[int]], *, max_len: int | None = None,
                 pad_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """[B, T] int32 left-padded array and [B] int32 lengths from id lists."""
        if not seqs:
            raise ValueError("empty batch")
        lengths = np.array([len(s) for s in seqs], dtype=np.int32)
        longest = int(lengths.max())
        if max_len is not None and longest > max_len:
            raise ValueError(f"sequence of {longest} tokens exceeds max_len={max_len}")
        width = longest if pad_to is None else pad_to
        if width < longest:
            raise ValueError(f"pad_to={pad_to} is shorter than the longest sequence ({longest})")
        tokens = np.full((len(seqs), width), self.pad_id, dtype=np.int32)
        for row, s in enumerate(seqs):
            if len(s):
                tokens[row, width - len(s):] = s
        return tokens, lengths

    def apply_chat_template(self, messages, *, add_generation_prompt: bool = True) -> str:
        if self.chat_template is None:
            raise ValueError("this tokenizer has no chat template; pass one with "
                             "load_tokenizer(..., chat_template=...)")
        return self.chat_template.render(messages, add_generation_prompt=add_generation_prompt)


class SentencePieceTokenizer(Tokenizer):
    """A sentencepiece model (``.model`` file or serialized bytes)."""

    def __init__(self, model: str | os.PathLike | bytes):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor()
        if isinstance(model, bytes):
            self.sp.LoadFromSerializedProto(model)
        else:
            if not pathlib.Path(model).is_file():
                raise ValueError(f"sentencepiece model not found: {model}")
            self.sp.Load(str(model))
        bos, eos, pad = self.sp.bos_id(), self.sp.eos_id(), self.sp.pad_id()
        if eos < 0:
            raise ValueError("sentencepiece model has no EOS piece")
        self.bos_id = bos if bos >= 0 else None
        self.eos_id = eos
        self.pad_id = pad if pad >= 0 else eos

    @property
    def vocab_size(self) -> int:
        return self.sp.GetPieceSize()

    def _encode(self, text):
        return list(self.sp.EncodeAsIds(text))

    def _decode(self, ids):
        return self.sp.DecodeIds(ids)

    def token_texts(self):
        texts = []
        for i in range(self.vocab_size):
            if self.sp.IsControl(i):
                texts.append("")
            elif self.sp.IsUnknown(i):
                texts.append(self.sp.DecodeIds([i]))
            elif self.sp.IsByte(i):
                byte = int(self.sp.IdToPiece(i)[3:5], 16)
                texts.append(chr(byte) if byte < 0x80 else "\ufffd")
            else:
                texts.append(self.sp.IdToPiece(i).replace("\u2581", " "))
        return texts


class HFTokenizer(Tokenizer):
    """A Hugging Face ``tokenizers`` model (``tokenizer.json``).

    Special tokens are looked up by name (`bos_token`, `eos_token`, `pad_token`); a missing
    pad token falls back to EOS. A missing EOS is an error.
    """

    def __init__(self, path_or_tokenizer, *, bos_token: str | None = None,
                 eos_token: str | None = None, pad_token: str | None = None):
        from tokenizers import Tokenizer as _HF
        if isinstance(path_or_tokenizer, (str, os.PathLike)):
            if not pathlib.Path(path_or_tokenizer).is_file():
                raise ValueError(f"tokenizer.json not found: {path_or_tokenizer}")
            self.tk = _HF.from_file(str(path_or_tokenizer))
        else:
            self.tk = path_or_tokenizer

        def find(name, candidates):
            for c in ([name] if name else []) + candidates:
                i = self.tk.token_to_id(c)
                if i is not None:
                    return i
            if name:
                raise ValueError(f"token {name!r} is not in the vocabulary")
            return None

        self.bos_id = find(bos_token, ["<s>", "<|begin_of_text|>", "<bos>", "[BOS]"])
        eos = find(eos_token, ["</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[EOS]"])
        if eos is None:
            raise ValueError("no EOS token found; pass eos_token=...")
        self.eos_id = eos
        pad = find(pad_token, ["<pad>", "[PAD]", "<|pad|>"])
        self.pad_id = eos if pad is None else pad

    @property
    def vocab_size(self) -> int:
        return self.tk.get_vocab_size(with_added_tokens=True)

    def _encode(self, text):
        return self.tk.encode(text, add_special_tokens=False).ids

    def _decode(self, ids):
        return self.tk.decode(ids, skip_special_tokens=False)

    def token_texts(self):
        # Decode each id after an anchor so decoders that strip a leading space (Metaspace)
        # still report it; fall back to the plain decode when no anchor is in the vocabulary.
        anchor = next((self.tk.token_to_id(c) for c in ("a", "x", "0")
                       if self.tk.token_to_id(c) is not None), None)
        special = self.special_ids
        base = self.tk.decode([anchor]) if anchor is not None else ""
        texts = []
        for i in range(self.vocab_size):
            if i in special:
                texts.append("")
                continue
            if anchor is not None:
                full = self.tk.decode([anchor, i], skip_special_tokens=False)
                texts.append(full[len(base):] if full.startswith(base) else full)
            else:
                texts.append(self.tk.decode([i], skip_special_tokens=False))
        return texts


class ChatTemplate:
    """A chat template: a Jinja2 string (HF style, variables `messages`,
    `add_generation_prompt`, `bos_token`, `eos_token`) or a plain format string with
    ``{prompt}`` (and optionally ``{system}``), used for single-turn prompts.

    Built-ins: ``"plain"`` (the user text as is) and ``"chatml"``.
    """

    BUILTIN = {
        "plain": "{prompt}",
        "chatml": ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                   "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                   "{% endif %}"),
    }

    def __init__(self, template: str, *, bos_token: str = "", eos_token: str = ""):
        template = self.BUILTIN.get(template, template)
        self.template, self.bos_token, self.eos_token = template, bos_token, eos_token
        self.is_jinja = "{%" in template or "{{" in template
        if self.is_jinja:
            try:
                import jinja2
            except ImportError as e:
                raise ValueError("Jinja chat templates need the jinja2 package") from e
            env = jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
            self._jinja = env.from_string(template)
        elif "{prompt}" not in template:
            raise ValueError("a format-string chat template must contain {prompt}")

    def render(self, messages, *, add_generation_prompt: bool = True) -> str:
        """Text for `messages` (a list of {"role", "content"} dicts, or a plain string taken
        as one user message)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        for m in messages:
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise ValueError(f"chat messages need 'role' and 'content', got {m!r}")
        if self.is_jinja:
            return self._jinja.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                      bos_token=self.bos_token, eos_token=self.eos_token)
        users = [m["content"] for m in messages if m["role"] == "user"]
        systems = [m["content"] for m in messages if m["role"] == "system"]
        if len(users) != 1 or len(messages) != len(users) + len(systems):
            raise ValueError("format-string templates support one user message (and an "
                             "optional system message); use a Jinja template for chats")
        return self.template.format(prompt=users[0], system=systems[0] if systems else "")


def single_token(tokenizer, text: str, what: str) -> int:
    """The one token id `tokenizer` encodes `text` to; ValueError naming `what` (the config
    field or role) when it is not one token."""
    ids = tokenizer.encode(text)
    if len(ids) != 1:
        raise ValueError(f"{what}: {text!r} is {len(ids)} tokens {ids}, not one")
    return int(ids[0])


def load_tokenizer(name_or_path: str | os.PathLike = "builtin", *,
                   chat_template: str | None = None) -> Tokenizer:
    """``"builtin"`` (the shipped synthetic-task sentencepiece model), a ``.model`` file, a
    ``tokenizer.json`` or a directory holding one (its ``tokenizer_config.json`` chat
    template is used unless `chat_template` is given)."""
    path = BUILTIN_MODEL if str(name_or_path) == "builtin" else pathlib.Path(name_or_path)
    config_template = None
    if path.is_dir():
        config = path / "tokenizer_config.json"
        if config.is_file():
            config_template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        candidates = [path / "tokenizer.json", path / "tokenizer.model"]
        found = [c for c in candidates if c.is_file()]
        if not found:
            raise ValueError(f"no tokenizer.json or tokenizer.model in {path}")
        path = found[0]
    if not path.is_file():
        raise ValueError(f"tokenizer not found: {name_or_path}")
    tok = HFTokenizer(path) if path.suffix == ".json" else SentencePieceTokenizer(path)
    template = chat_template or (config_template if isinstance(config_template, str) else None)
    if template is not None:
        tok.chat_template = ChatTemplate(template)
    return tok
