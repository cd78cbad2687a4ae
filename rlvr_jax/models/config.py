"""`ModelConfig`: the static description of a decoder-only transformer."""
import dataclasses
from typing import Optional, Tuple

import jax.numpy as jnp

FAMILIES = ("llama", "qwen2", "qwen3")
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
ATTENTIONS = ("auto", "xla", "pallas_gpu", "splash")  # `models.attention`
# scan_unroll=0 unrolls the training forward of models this shallow (measured in
# docs/performance.md: faster on CPU at 4 layers; at 24 layers on an H100 the scanned update
# ran out of memory where the unrolled one fitted).
AUTO_UNROLL_LAYERS = 32


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shapes and options of a Llama-3 / Qwen2 / Qwen3 style decoder.

    Frozen and hashable, so it can be a static argument of `jax.jit`.

    Attributes:
      family: "llama", "qwen2" or "qwen3" (used by the Hugging Face importer).
      vocab_size: V.
      d_model: D, the residual width.
      n_layers: L.
      n_heads: query heads H.
      n_kv_heads: key/value heads (GQA); must divide `n_heads`.
      head_dim: per-head width.
      d_ff: SwiGLU hidden width.
      rope_theta: RoPE base frequency.
      rope_scaling: None, or ("llama3", factor, low_freq_factor, high_freq_factor,
        original_max_position_embeddings) for Llama 3.1/3.2.
      norm_eps: RMSNorm epsilon.
      qkv_bias: bias on the q/k/v projections (Qwen2/2.5).
      qk_norm: RMSNorm over head_dim on queries and keys before RoPE (Qwen3).
      tie_embeddings: the LM head reuses the input embedding matrix.
      dtype: compute dtype (activations, matmuls, KV cache), e.g. "bfloat16".
      param_dtype: storage dtype of the parameters, e.g. "float32".
      remat: "none", "full" (recompute everything in backward), "dots" (save
        matmul outputs) or "dots_no_batch" (save matmul outputs without batch
        dimensions, i.e. weights-only products).
      max_position_embeddings: informational (positions are not clipped).
      scan_unroll: layers per iteration of the training forward's layer scan: 1 scans
        (compile time flat in depth), L unrolls fully (cross-layer fusion, no loop);
        0 (default) unrolls models of at most `AUTO_UNROLL_LAYERS` layers and scans deeper
        ones. Decoding always runs layer by layer (`models.decoding`). Parameters are
        stacked [L, ...] either way.
      attention: the training forward's self-attention (`models.attention`): "auto" (a
        fused kernel on GPU / TPU, per device shard under a mesh; the plain XLA path on CPU),
        "xla", "pallas_gpu" or "splash" (explicit kernels run in Pallas interpret mode off
        their backend).
      lora_rank: r of the LoRA adapters (`models.lora`); 0: none. The forward applies an
        adapter wherever its leaves are in the parameter tree; these fields say how to
        create and scale them.
      lora_alpha: PEFT's lora_alpha (the adapters' output is scaled by alpha / r).
      lora_targets: the adapted projections, from ("q", "k", "v", "o", "gate", "up", "down").
    """
    family: str = "qwen2"
    vocab_size: int = 128
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    d_ff: int = 128
    rope_theta: float = 10000.0
    rope_scaling: Optional[Tuple] = None
    norm_eps: float = 1e-6
    qkv_bias: bool = False
    qk_norm: bool = False
    tie_embeddings: bool = True
    dtype: str = "float32"
    param_dtype: str = "float32"
    remat: str = "none"
    max_position_embeddings: int = 32768
    scan_unroll: int = 0
    attention: str = "auto"
    lora_rank: int = 0
    lora_alpha: float = 0.0
    lora_targets: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {self.attention!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.remat not in REMAT_POLICIES:
            raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {self.remat!r}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "head_dim", "d_ff"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.rope_scaling is not None and (
                len(self.rope_scaling) != 5 or self.rope_scaling[0] != "llama3"):
            raise ValueError(
                "rope_scaling must be None or ('llama3', factor, low_freq_factor, "
                f"high_freq_factor, original_max_position_embeddings), got {self.rope_scaling!r}")
        jnp.dtype(self.dtype), jnp.dtype(self.param_dtype)  # Raises on unknown names.
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))  # (JSON: a list)
        if self.lora_rank < 0 or (self.lora_rank and (not self.lora_targets or
                                                       self.lora_alpha <= 0)):
            raise ValueError(f"LoRA: rank {self.lora_rank} >= 0, and with a rank, targets "
                             f"{self.lora_targets} and alpha {self.lora_alpha} > 0")
        if not 0 <= self.scan_unroll <= self.n_layers:
            raise ValueError(f"scan_unroll must be in [0, n_layers={self.n_layers}], "
                             f"got {self.scan_unroll}")

    @property
    def compute_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def layer_unroll(self) -> int:
        """The unroll factor of the training forward's layer scan (see `scan_unroll`)."""
        if self.scan_unroll:
            return self.scan_unroll
        return self.n_layers if self.n_layers <= AUTO_UNROLL_LAYERS else 1

    @property
    def storage_dtype(self):
        return jnp.dtype(self.param_dtype)

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def num_params(self, include_embedding: bool = True) -> int:
        """Parameter count. With include_embedding=False: matmul parameters only
        (the LM head counted once, whether tied or not), as used for MFU."""
        attn = self.d_model * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)
        if self.qkv_bias:
            attn += self.head_dim * (self.n_heads + 2 * self.n_kv_heads)
        if self.qk_norm:
            attn += 2 * self.head_dim
        layer = attn + 3 * self.d_model * self.d_ff + 2 * self.d_model
        embed = self.vocab_size * self.d_model
        if not include_embedding:
            return self.n_layers * (layer - 2 * self.d_model) + embed
        head = 0 if self.tie_embeddings else embed
        return self.n_layers * layer + self.d_model + embed + head
