"""The on-device environment protocol of multi-turn rollouts.

An episode starts from a prompt. The model writes a turn; the turn ends with a stop token
(the episode ends), with one of the environment's tool-call close tags (the environment
answers), or when it reaches `max_turn_tokens` (the episode ends, truncated). The
environment's answer is an observation — up to `max_obs_tokens` token ids, written into the
row's sequence and KV cache, attended to but never trained on — plus a reward and a done
flag. Every size is static, so a batch of episodes is one array program, and an environment
whose `step` is a pure JAX function runs inside the sampler's `lax.while_loop`.

    @dataclasses.dataclass(frozen=True)          # hashable: a static jit argument
    class Echo(DeviceEnv):
        def step(self, state, turn, turn_len):
            obs = turn[:, :self.max_obs_tokens]  # answer with the turn's first tokens
            n = jnp.minimum(turn_len, self.max_obs_tokens)
            return state, self.reply(obs, n)

    env = Echo(call_end_ids=(98,), max_turns=3, max_turn_tokens=16, max_obs_tokens=4)
"""
import dataclasses
from typing import Any, ClassVar, Tuple

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class EnvStep:
    """The environment's answer to the turns that just called it (B rows; rows that did
    not call are ignored).

    Attributes:
      obs: [B, O] int32 observation token ids (O = max_obs_tokens).
      obs_len: [B] int32, how many of them are real (0..O; 0 = the model goes on at once).
      reward: [B] float32, this turn's reward (summed over the episode).
      done: [B] bool, the environment ends the episode (no observation is written).
      error: [B] bool, the tool failed (malformed call, ...): counted in `tool/error_rate`.
    """
    obs: jax.Array
    obs_len: jax.Array
    reward: jax.Array
    done: jax.Array
    error: jax.Array


@dataclasses.dataclass(frozen=True)
class DeviceEnv:
    """Base class of on-device environments (frozen dataclasses: static jit arguments).

    Attributes:
      call_end_ids: token ids that end a model turn with a tool call (e.g. ``]``).
      max_turns: model turns per episode; a call in the last turn ends the episode.
      max_turn_tokens: M, tokens per model turn; a turn that reaches M without a stop
        token or a close tag ends the episode (truncated).
      max_obs_tokens: O, the observation buffer's size.

    Subclasses implement `step` (and `reset` when they keep per-row state).
    """
    on_host: ClassVar[bool] = False  # Read once, by `rlvr_jax.sampler.Sampler`.
    call_end_ids: Tuple[int, ...] = ()
    max_turns: int = 2
    max_turn_tokens: int = 16
    max_obs_tokens: int = 8

    def __post_init__(self):
        object.__setattr__(self, "call_end_ids", tuple(int(t) for t in self.call_end_ids))
        if not self.call_end_ids:
            raise ValueError("an environment needs at least one tool-call close tag "
                             "(call_end_ids)")
        for name in ("max_turns", "max_turn_tokens", "max_obs_tokens"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def reset(self, prompt_tokens: jax.Array, prompt_mask: jax.Array,
              answers: jax.Array) -> Any:
        """The per-row state of B new episodes (a pytree of [B, ...] arrays; default: none).

        Args: prompt_tokens, prompt_mask [B, Tp] (left-padded); answers [B] int32 (the
        batch's reference answers, one per row).
        """
        del prompt_tokens, prompt_mask, answers
        return {}

    def step(self, state: Any, turn: jax.Array, turn_len: jax.Array) -> Tuple[Any, EnvStep]:
        """Answers the turns that ended with a tool call.

        Args:
          state: the per-row state (`reset`'s structure).
          turn: [B, M] int32, the tokens of each row's last model turn, close tag included.
          turn_len: [B] int32, how many of them are real.

        Returns: (new state, `EnvStep`). Pure and traceable; rows that did not call are
        computed too and their results ignored.
        """
        raise NotImplementedError

    def reply(self, obs: jax.Array, obs_len: jax.Array, *, reward=None, done=None,
              error=None) -> EnvStep:
        """An `EnvStep` from [B, O] observation ids and their lengths [B] (the other fields
        default to 0 / False)."""
        b = obs.shape[0]
        zeros = jnp.zeros((b,), bool)
        return EnvStep(obs=obs.astype(jnp.int32), obs_len=obs_len.astype(jnp.int32),
                       reward=(jnp.zeros((b,), jnp.float32) if reward is None
                               else reward.astype(jnp.float32)),
                       done=zeros if done is None else done.astype(bool),
                       error=zeros if error is None else error.astype(bool))
