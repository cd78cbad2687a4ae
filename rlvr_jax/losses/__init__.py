"""Pure, jittable RL loss components: policy losses, KL, entropy, aggregation, value loss."""
from rlvr_jax.losses.entropy import entropy, entropy_bonus, high_entropy_mask

__all__ = ["entropy", "entropy_bonus", "high_entropy_mask"]
