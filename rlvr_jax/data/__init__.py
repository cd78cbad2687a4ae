"""Tokenizers (sentencepiece and HF tokenizer.json behind one interface), chat templates,
prompt datasets (synthetic tasks, JSONL, Parquet, TFDS) and a resumable batch loader.
See docs/tasks.md."""
from rlvr_jax.data.datasets import (ExampleList, completion_arrays, PromptBatch, PromptLoader,
                                    TaskSource)
from rlvr_jax.data.files import read_jsonl, read_parquet, read_tfds, records_to_examples
from rlvr_jax.data.tokenizers import (ChatTemplate, HFTokenizer, SentencePieceTokenizer,
                                      Tokenizer, load_tokenizer)

__all__ = ["ExampleList", "completion_arrays", "PromptBatch", "PromptLoader", "TaskSource", "read_jsonl",
           "read_parquet", "read_tfds", "records_to_examples", "ChatTemplate", "HFTokenizer",
           "SentencePieceTokenizer", "Tokenizer", "load_tokenizer"]
