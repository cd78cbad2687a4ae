"""GRPO on Qwen2.5-0.5B(-Instruct) imported from a local Hugging Face directory, on a JSONL
math dataset scored by the host math verifier (split path), bf16 compute, full remat, FSDP
over all devices.

Before running, set the two paths below (or override them on the command line):
  - model.hf_checkpoint / tokenizer: a local directory with config.json, *.safetensors and
    tokenizer.json (e.g. `huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir ...`).
  - data.path: a JSONL file with one {"prompt": ..., "answer": ...} object per line
    (e.g. GSM8K or MATH with the final answer in "answer").

    python scripts/train.py --config configs/qwen2p5_0p5b_grpo.py --workdir runs/qwen_grpo \
        --config.model.hf_checkpoint=/data/Qwen2.5-0.5B-Instruct \
        --config.tokenizer=/data/Qwen2.5-0.5B-Instruct --config.data.path=/data/math.jsonl
"""
from rlvr_jax.train.config import default_config

# Placeholders: replace with real local paths (no download happens at run time).
HF_DIR = "/path/to/Qwen2.5-0.5B-Instruct"
DATA_PATH = "/path/to/math_train.jsonl"


def get_config():
    config = default_config(algorithm="grpo")
    config.model.hf_checkpoint = HF_DIR     # Shapes and weights come from this directory.
    config.model.dtype = "bfloat16"         # Compute dtype; log-softmax stays float32.
    config.model.param_dtype = "float32"    # Master weights for AdamW.
    config.model.remat = "full"             # Recompute each layer in the backward pass.
    config.tokenizer = HF_DIR               # Its tokenizer.json (and chat template).
    config.data.source = "jsonl"
    config.data.path = DATA_PATH
    config.data.prompt_field = "prompt"
    config.data.answer_field = "answer"
    config.data.max_prompt_len = 256
    config.data.overflow = "drop"
    config.reward.verifier = "math"         # Host rule verifier (split path).
    config.sampling.temperature = 1.0
    config.sampling.max_new_tokens = 512
    config.sft.steps = 0                    # An instruct model needs no warm-up.
    config.rl.steps = 500
    config.rl.num_prompts = 32              # P prompts × G samples = 256 sequences per step.
    config.rl.num_samples = 8
    config.rl.learning_rate = 1e-6
    config.rl.warmup_steps = 10
    config.rl.kl_coef = 0.0                 # No reference model (common RLVR choice).
    config.rl.microbatches = 4              # 64 sequences per forward/backward (unpacked).
    config.rl.pack_length = 256 + 512       # Packed rows of Tp + N tokens (docs/performance.md).
    config.rl.pack_rows = 32                # 32 packed rows per micro-batch (as many as needed).
    config.rl.logprob_chunk = 128
    config.eval.every = 50
    config.eval.num_prompts = 500
    config.eval.batch_size = 128
    config.mesh.fsdp = -1                   # FSDP over every device...
    config.mesh.num_devices = 0             # ...of all hosts.
    config.mesh.rules = "fsdp"
    config.checkpoint.every = 50
    return config
