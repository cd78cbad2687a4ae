"""The typed data between the stages of one RL update.

    rollout, rewards ──select_update_groups──► Groups
    Groups ──experience_from──► Experience (tokens, masks, sampler log-probs)
           ──score_experience──► + old / reference log-probs, entropies, old values
           ──advantages_stage──► + advantages (and GAE returns)
           ──optimise──► new TrainState

Shapes: P groups of G samples enter the update, B = P·G rows, Tp prompt tokens, N new
tokens, T = Tp + N. Optional fields are None when the algorithm does not need them (a None
field is no pytree leaf: it costs nothing inside jit).
"""
from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp

from rlvr_jax import sampling
from rlvr_jax.scoring.process import StepRewards
from rlvr_jax.train.packing import Micro


@flax.struct.dataclass
class Groups:
    """The P groups that enter the update.

    Attributes:
      rollout: the B = P·G rows of those groups (G consecutive rows per prompt).
      rewards: [P, G] float32 rewards (shaped, e.g. minus a KL-in-reward penalty).
      valid: [P] bool, False for filler groups of dynamic sampling (no gradient, no statistics).
      steps: the process (step) rewards of those rows (`scoring.StepRewards`: values and
        ends [B, N]), or None (outcome rewards only).
    """
    rollout: sampling.Rollout
    rewards: jax.Array
    valid: jax.Array
    steps: Optional[StepRewards] = None


@flax.struct.dataclass
class Experience:
    """The rows one update trains on; row i of every field is the same sequence.

    Attributes:
      tokens: [B, T] int32 prompt (left-padded) followed by the completion.
      attention: [B, T] int32, 1 for real tokens.
      mask: [B, N] completion tokens that are trained on: those the model wrote (not a
        multi-turn rollout's observations), 0 in rows of invalid groups.
      sampler_logp: [B, N] float32 log-probs the sampler gave its tokens.
      row_valid: [B] bool, rows of valid groups.
      advantages: [B] (sequence-level estimators) or [B, N] (token-level) float32.
      old_logp: [B, N] log-probs of the policy that sampled, recomputed by the trainer
        (only when epochs > 1 or minibatches > 1; otherwise the on-policy sg(logp) is used).
      ref_logp: [B, N] reference-model log-probs (kl_coef > 0).
      entropy: [B, N] token entropies of the sampling policy (entropy_keep_fraction < 1);
        each minibatch turns it into `entropy_mask`.
      entropy_mask: [B, N] bool, the high-entropy tokens the policy loss keeps.
      old_values: [B, N] value-model outputs before the update (gae).
      returns: [B, N] value targets (gae).
      packed: inside the packed update's micro-batch loop (`train/packing.py`), the
        micro-batch's packed rows; `mask` is then limited to its sequences.
      offpolicy, sft_weight: [B] bool, the expert rows (rl.offpolicy_per_group), and [B]
        float32 CHORD's μ of this step (`train/offpolicy.py`); None without expert rows.
      fork_parent, fork_at: [B] int32 lineage of tree rollouts (`sampling.Rollout`), read by
        the prefix-tree advantages (rl.tree_advantage) and dropped once they are computed;
        None without tree rollouts.
    """
    tokens: jax.Array
    attention: jax.Array
    mask: jax.Array
    sampler_logp: jax.Array
    row_valid: jax.Array
    advantages: Optional[jax.Array] = None
    old_logp: Optional[jax.Array] = None
    ref_logp: Optional[jax.Array] = None
    entropy: Optional[jax.Array] = None
    entropy_mask: Optional[jax.Array] = None
    old_values: Optional[jax.Array] = None
    returns: Optional[jax.Array] = None
    packed: Optional[Micro] = None
    offpolicy: Optional[jax.Array] = None
    sft_weight: Optional[jax.Array] = None
    fork_parent: Optional[jax.Array] = None
    fork_at: Optional[jax.Array] = None

    @property
    def num_new(self) -> int:
        """N, the completion length."""
        return self.mask.shape[1]


def experience_from(groups: Groups) -> Experience:
    """The token-level view of `groups` (rows of invalid groups masked out)."""
    rollout = groups.rollout
    row_valid = jnp.repeat(groups.valid, groups.rewards.shape[1])
    tokens, attention = rollout.sequences()
    return Experience(
        tokens=tokens, attention=attention,
        # Only the model's tokens are trained on (observations of a multi-turn rollout are
        # attended to, through `attention`, but get no gradient and no KL).
        mask=rollout.model_mask * row_valid[:, None].astype(rollout.mask.dtype),
        sampler_logp=rollout.logprobs,
        row_valid=row_valid, fork_parent=rollout.fork_parent, fork_at=rollout.fork_at)


def take_rows(tree, index):
    """Rows `index` [K] of every leaf of a pytree of [B, ...] arrays."""
    return jax.tree.map(lambda x: jnp.take(x, index, axis=0), tree)
