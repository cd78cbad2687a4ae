"""Named model shapes: `tiny` and `small` for tests and the CPU lab, and the published Qwen /
Llama shapes."""
from rlvr_jax.models.config import ModelConfig

_LLAMA31_SCALING = ("llama3", 8.0, 1.0, 4.0, 8192)
_LLAMA32_SCALING = ("llama3", 32.0, 1.0, 4.0, 8192)

PRESETS = {
    # A ~100k-parameter model for tests and the CPU quickstart.
    "tiny": ModelConfig(family="qwen2", vocab_size=128, d_model=64, n_layers=2, n_heads=4,
                        n_kv_heads=2, head_dim=16, d_ff=128, qkv_bias=True,
                        tie_embeddings=True, rope_theta=10000.0),
    # About 1.6M parameters (20x tiny; tests/test_models.py): the lab's rung for tasks the
    # tiny model cannot learn (e.g. 1-3 digit addition, warm-up pass@1 ~0.04 with tiny), at
    # several times tiny's cost per step on CPU. Width 192 = 6 heads x 32, 2 KV heads.
    "small": ModelConfig(family="qwen2", vocab_size=128, d_model=192, n_layers=4, n_heads=6,
                         n_kv_heads=2, head_dim=32, d_ff=512, qkv_bias=True,
                         tie_embeddings=True, rope_theta=10000.0),
    "qwen2.5-0.5b": ModelConfig(family="qwen2", vocab_size=151936, d_model=896, n_layers=24,
                                n_heads=14, n_kv_heads=2, head_dim=64, d_ff=4864,
                                rope_theta=1e6, qkv_bias=True, tie_embeddings=True),
    "qwen2.5-1.5b": ModelConfig(family="qwen2", vocab_size=151936, d_model=1536, n_layers=28,
                                n_heads=12, n_kv_heads=2, head_dim=128, d_ff=8960,
                                rope_theta=1e6, qkv_bias=True, tie_embeddings=True),
    "qwen2.5-7b": ModelConfig(family="qwen2", vocab_size=152064, d_model=3584, n_layers=28,
                              n_heads=28, n_kv_heads=4, head_dim=128, d_ff=18944,
                              rope_theta=1e6, qkv_bias=True, tie_embeddings=False),
    "qwen3-0.6b": ModelConfig(family="qwen3", vocab_size=151936, d_model=1024, n_layers=28,
                              n_heads=16, n_kv_heads=8, head_dim=128, d_ff=3072,
                              rope_theta=1e6, qk_norm=True, tie_embeddings=True),
    "qwen3-1.7b": ModelConfig(family="qwen3", vocab_size=151936, d_model=2048, n_layers=28,
                              n_heads=16, n_kv_heads=8, head_dim=128, d_ff=6144,
                              rope_theta=1e6, qk_norm=True, tie_embeddings=True),
    "qwen3-8b": ModelConfig(family="qwen3", vocab_size=151936, d_model=4096, n_layers=36,
                            n_heads=32, n_kv_heads=8, head_dim=128, d_ff=12288,
                            rope_theta=1e6, qk_norm=True, tie_embeddings=False),
    "llama3.2-1b": ModelConfig(family="llama", vocab_size=128256, d_model=2048, n_layers=16,
                               n_heads=32, n_kv_heads=8, head_dim=64, d_ff=8192,
                               rope_theta=500000.0, rope_scaling=_LLAMA32_SCALING,
                               norm_eps=1e-5, tie_embeddings=True, max_position_embeddings=131072),
    "llama3.2-3b": ModelConfig(family="llama", vocab_size=128256, d_model=3072, n_layers=28,
                               n_heads=24, n_kv_heads=8, head_dim=128, d_ff=8192,
                               rope_theta=500000.0, rope_scaling=_LLAMA32_SCALING,
                               norm_eps=1e-5, tie_embeddings=True, max_position_embeddings=131072),
    "llama3.1-8b": ModelConfig(family="llama", vocab_size=128256, d_model=4096, n_layers=32,
                               n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                               rope_theta=500000.0, rope_scaling=_LLAMA31_SCALING,
                               norm_eps=1e-5, tie_embeddings=False, max_position_embeddings=131072),
}


def get(name: str, **overrides) -> ModelConfig:
    """The preset `name` with optional field overrides, e.g. `get("tiny", dtype="bfloat16")`."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name].replace(**overrides) if overrides else PRESETS[name]
