"""Convert between a Hugging Face directory and an orbax params directory.

    python scripts/convert_checkpoint.py hf-to-orbax  HF_DIR  OUT_DIR [--param-dtype bfloat16]
    python scripts/convert_checkpoint.py orbax-to-hf  OUT_DIR HF_DIR  [--dtype bfloat16]
                                                                      [--max-shard-bytes N]
    python scripts/convert_checkpoint.py orbax-to-hf  runs/quickstart HF_DIR   # a training run

    python scripts/convert_checkpoint.py orbax-to-peft runs/lora OUT [--no-base]

`orbax-to-hf` also reads a `scripts/train.py` workdir: the policy of its latest checkpoint;
of a LoRA run (`model.lora.rank` > 0), the merged model (W + (alpha/r)·A·B, a quantized
base dequantized). `orbax-to-peft` writes a LoRA run's adapters in PEFT's format,
`OUT/adapter/` (adapter_config.json, adapter_model.safetensors: Hugging Face module names,
r, lora_alpha, target_modules), and its frozen base as an HF directory `OUT/base/` (with
`--no-base`, when the run's base already is one, `model.hf_checkpoint`, the adapter names
that directory instead). Load it with `PeftModel.from_pretrained(AutoModelForCausalLM.
from_pretrained("OUT/base"), "OUT/adapter")`; `model.lora.init_from=OUT/adapter` starts a
run from it.

Exports are exact by default: the tensors keep the parameters' own dtype
(`param_dtype` in model_config.json) unless `--dtype` asks for another.

An orbax params directory holds `params/` (the parameter pytree, written by
orbax's StandardCheckpointer) and `model_config.json` (the `ModelConfig` fields).
"""
import argparse
import dataclasses
import json
import os
import sys

import orbax.checkpoint as ocp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rlvr_jax.models import hf, lora, peft_format  # noqa: E402
from rlvr_jax.models.config import ModelConfig  # noqa: E402
from rlvr_jax.train import adapters  # noqa: E402


def save_orbax(params, config: ModelConfig, out_dir: str) -> None:
    """Writes `out_dir/params` (orbax) and `out_dir/model_config.json`."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(os.path.join(out_dir, "params"), params)
    checkpointer.wait_until_finished()
    with open(os.path.join(out_dir, "model_config.json"), "w") as f:
        json.dump(dataclasses.asdict(config), f, indent=2)


def load_orbax(in_dir: str):
    """(ModelConfig, params) from a directory written by `save_orbax`, or the policy of a
    `scripts/train.py` workdir's latest checkpoint."""
    in_dir = os.path.abspath(in_dir)
    if not os.path.isfile(os.path.join(in_dir, "model_config.json")):
        if os.path.isfile(os.path.join(in_dir, "config.json")) and not os.path.isfile(
                os.path.join(in_dir, "model.safetensors")):
            return _load_run(in_dir)
        raise FileNotFoundError(f"{in_dir}: neither an hf-to-orbax output (model_config.json)"
                                " nor a scripts/train.py workdir (config.json, checkpoints/)")
    with open(os.path.join(in_dir, "model_config.json")) as f:
        fields = json.load(f)
    if fields.get("rope_scaling") is not None:
        fields["rope_scaling"] = tuple(fields["rope_scaling"])
    config = ModelConfig(**fields)
    params = ocp.StandardCheckpointer().restore(os.path.join(in_dir, "params"))
    return config, params


def _load_run(run_dir: str):
    import json as json_lib

    from rlvr_jax.data.tokenizers import load_tokenizer
    from rlvr_jax.train.checkpoint import load_run
    with open(os.path.join(run_dir, "config.json")) as f:
        tokenizer = load_tokenizer(json_lib.load(f).get("tokenizer") or "builtin")
    return load_run(run_dir, tokenizer=tokenizer)


def main(argv=None) -> None:
    """Parses `argv` and converts; a missing or unreadable input ends with one `error:`
    line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    to_orbax = sub.add_parser("hf-to-orbax", help="Hugging Face directory -> orbax params")
    to_orbax.add_argument("hf_dir", help="Hugging Face directory (config.json + safetensors)")
    to_orbax.add_argument("out_dir", help="where params/ and model_config.json go")
    to_orbax.add_argument("--param-dtype", default="float32",
                          help="stored parameter dtype (default float32: exact for bf16/fp16 "
                          "sources too)")
    to_orbax.add_argument("--dtype", default="bfloat16", help="compute dtype stored in the config")
    to_hf = sub.add_parser("orbax-to-hf", help="orbax params -> Hugging Face directory")
    to_hf.add_argument("in_dir", help="an hf-to-orbax output, or a scripts/train.py workdir "
                       "(its latest checkpoint's policy)")
    to_hf.add_argument("hf_dir", help="where config.json and *.safetensors go")
    to_hf.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                       help="tensor dtype on disk (default: the parameters' own dtype, exact)")
    to_hf.add_argument("--max-shard-bytes", type=int, default=5 * 2**30)
    to_peft = sub.add_parser("orbax-to-peft", help="a LoRA run -> PEFT adapter (+ HF base)")
    to_peft.add_argument("in_dir", help="a scripts/train.py workdir of a LoRA run")
    to_peft.add_argument("out_dir", help="where adapter/ (and base/) go")
    to_peft.add_argument("--no-base", action="store_true",
                         help="do not write base/: the run's base is its model.hf_checkpoint")
    to_peft.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                         help="tensor dtype on disk (default: the parameters' own dtype)")
    args = parser.parse_args(argv)
    try:
        _convert(args)
    except (FileNotFoundError, ValueError) as e:
        text = str(e).strip()
        print(f"error: {text.splitlines()[0] if text else type(e).__name__}", file=sys.stderr)
        sys.exit(2)


def _convert(args) -> None:
    if args.command == "hf-to-orbax":
        config, params = hf.load_hf_checkpoint(args.hf_dir, dtype=args.dtype,
                                               param_dtype=args.param_dtype)
        save_orbax(params, config, args.out_dir)
        print(f"{config.family}: {config.num_params():,} parameters -> {args.out_dir}")
    elif args.command == "orbax-to-peft":
        _to_peft(args)
    else:
        config, params = load_orbax(args.in_dir)
        params = adapters.full_weights(params, config)  # A LoRA run: the merged model.
        hf.save_hf_checkpoint(params, config, args.hf_dir, dtype=args.dtype or config.param_dtype,
                              max_shard_bytes=args.max_shard_bytes)
        print(f"{config.family}: {config.num_params():,} parameters -> {args.hf_dir}")
        print(copy_tokenizer(args.in_dir, args.hf_dir))


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja", "chat_template.json", "generation_config.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json")


def copy_tokenizer(in_dir: str, out_dir: str) -> str:
    """Copies the Hugging Face tokenizer files (and chat template) of the run in `in_dir`
    (its config.json's `tokenizer`: an HF directory or a tokenizer.json) into `out_dir`;
    returns a line saying what was copied."""
    import shutil
    run_config = os.path.join(in_dir, "config.json")
    source = ""
    if os.path.isfile(run_config):
        with open(run_config) as f:
            source = json.load(f).get("tokenizer") or ""
    if os.path.isdir(source):
        files = [os.path.join(source, n) for n in TOKENIZER_FILES
                 if os.path.isfile(os.path.join(source, n))]
    else:
        files = [source] if os.path.basename(source) == "tokenizer.json" else []
    for file in files:
        shutil.copyfile(file, os.path.join(out_dir, os.path.basename(file)))
    if not files:
        return (f"no Hugging Face tokenizer to copy (the run's tokenizer: "
                f"{source or 'not recorded'}); add one to {out_dir} to load it with transformers")
    return f"tokenizer: {', '.join(os.path.basename(f) for f in files)} -> {out_dir}"


def _to_peft(args) -> None:
    """OUT/adapter (PEFT) and, unless --no-base, OUT/base (HF) of a LoRA run."""
    config, params = load_orbax(args.in_dir)
    if not config.lora_rank:
        raise ValueError(f"{args.in_dir} is not a LoRA run (model.lora.rank is 0): use "
                         "orbax-to-hf")
    dtype = args.dtype or config.param_dtype
    base_dir = os.path.abspath(os.path.join(args.out_dir, "base"))
    if args.no_base:
        with open(os.path.join(args.in_dir, adapters.BASE_JSON)) as f:
            record = json.load(f)
        if record["source"] != "hf":
            raise ValueError(f"{args.in_dir}: the run created or trained its base (it is in "
                             f"{adapters.BASE_DIR}/, not an HF directory): drop --no-base")
        base_dir = record["path"]
    else:
        hf.save_hf_checkpoint(adapters.full_weights(lora.base_of(params), config), config,
                              base_dir, dtype=dtype)
        print(copy_tokenizer(args.in_dir, base_dir))
    peft_format.save_peft(lora.split(params)[0], config, os.path.join(args.out_dir, "adapter"),
                          base_model=base_dir, dtype=dtype)
    print(f"LoRA r={config.lora_rank} alpha={config.lora_alpha} "
          f"({','.join(config.lora_targets)}) -> {os.path.join(args.out_dir, 'adapter')}"
          + ("" if args.no_base else f", base -> {base_dir}"))


if __name__ == "__main__":
    main()
