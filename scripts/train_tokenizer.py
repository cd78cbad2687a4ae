"""Train the small sentencepiece model for the synthetic tasks.

    python scripts/train_tokenizer.py --out rlvr_jax/assets/rlvr_tasks --vocab_size 128

Text: prompts and worked solutions of every task in `rlvr_jax.tasks` (train split). Digits
are split (numbers tokenise digit by digit), every printable ASCII character is a required
character, "####" is one piece, whitespace is kept verbatim (no dummy prefix, no collapsing),
ids: pad=0, unk=1, bos=2, eos=3.
"""
import argparse
import io
import os
import string
import sys

import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax import tasks  # noqa: E402


def task_text(n_per_task: int, seed: int):
    makers = [
        tasks.Arithmetic(ops=("add", "sub", "mul"), min_digits=1, max_digits=4, mul_max_digits=2),
        tasks.Countdown(num_numbers=4, max_number=25),
        tasks.Sorting(min_len=2, max_len=8, max_value=99),
    ]
    for task in makers:
        for ex in task.generate(n_per_task, seed=seed):
            yield ex.prompt + ex.solution


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="rlvr_jax/assets/rlvr_tasks", help="model prefix")
    parser.add_argument("--vocab_size", type=int, default=128)
    parser.add_argument("--n_per_task", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    printable = "".join(c for c in string.printable if c.isprintable() and c != " ") + "\n\t\r"
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=task_text(args.n_per_task, args.seed), model_writer=model,
        vocab_size=args.vocab_size, model_type="bpe", character_coverage=1.0,
        required_chars=printable, split_digits=True, user_defined_symbols=["####"],
        add_dummy_prefix=False, remove_extra_whitespaces=False, normalization_rule_name="identity",
        allow_whitespace_only_pieces=True, split_by_whitespace=True,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, num_threads=1, minloglevel=2)
    with open(args.out + ".model", "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    print(f"wrote {args.out}.model: {sp.GetPieceSize()} pieces, {len(model.getvalue())} bytes")
    print("456+257=13 11 7 #### 713 ->", sp.EncodeAsPieces("456+257=13 11 7 #### 713"))


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
