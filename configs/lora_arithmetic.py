"""The quickstart recipe with RL through LoRA adapters: a full-weight supervised warm-up, then
GRPO that trains only rank-8 adapters on all seven projections (q, k, v, o, gate, up, down)
of the frozen warmed-up base (docs/lora.md).

    python scripts/train.py --config configs/lora_arithmetic.py --workdir runs/lora

The optimizer state holds only the adapters'; checkpoints hold the adapters, and the base
once (`runs/lora/lora_base/`); `scripts/convert_checkpoint.py orbax-to-peft runs/lora OUT`
exports a PEFT adapter (+ its base as an HF directory). QLoRA: add
`--config.model.lora.quantize_base=nf4` (the frozen base stored in 4 bits).
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # As the quickstart (with LoRA a KL term costs no copy).
    config.model.lora.rank = 8
    config.model.lora.alpha = 16.0
    config.model.lora.targets = "q,k,v,o,gate,up,down"
    # Adapters start at zero (B = 0) and move W by (alpha/r)·A·ΔB: a larger step than the
    # quickstart's full-weight 1e-4 moves the weights by about as much.
    config.rl.learning_rate = 5e-4
    config.eval.every = 50
    config.checkpoint.every = 100
    config.checkpoint.keep = 1
    return config
