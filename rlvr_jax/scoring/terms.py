"""Reward terms: the one protocol every part of a run's reward follows, and their registry.

A term is `fn(rewards [B], x: Inputs) -> (rewards [B], metrics)`: it reads the running
reward and what it needs of the rollout, and returns the new reward (most add
`weight · score`; the noisy verifier and its correction transform it). Each is tagged where
it runs:

  device   jittable; inside the one compiled program (or after the seam of the split path,
           compiled with the update)
  host     outside jit, before every device term: `x.texts` / `x.examples` are set; a
           `per_step` host term returns (`process.StepRewards` [B, N], metrics) instead
  sample   a host term scored per completion, `fn(text, example) -> float` (picklable): all
           of them run in one pass of the host pool and their weighted sum is the reward
           the other terms start from

A term kind is registered as `register(name, build, where)`: `build(setup, weight)` returns
the term's function (None: the config does not ask for it); `weight` is the term's weight
in `reward.weights` when `reward.components` names it, else None. The scorer runs the
configured terms in registry order: sample terms (their sum), host terms, device terms.
"""
import dataclasses
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence

import flax.struct
import jax

Metrics = Dict[str, jax.Array]
WHERE = ("device", "host", "sample")


@flax.struct.dataclass
class Inputs:
    """What a term may read about B = P'·G completions (G consecutive rows per prompt).

    Attributes:
      rollout: the sampler's `Rollout` (`model_mask`: the model's own tokens).
      answers: [B] int32 reference answers (each prompt's repeated G times).
      verdicts: [B] float32, the verifier's scores (`reward/correct` counts those >= 1).
      group_size: G.
      episodes: a multi-turn rollout's `multiturn.Episodes` (the env's rewards), or None.
      reward_params: `TrainState.reward_params` (a reward model's frozen parameters).
      params, model_config: the policy's parameters and `ModelConfig` (the `info_gain` term
        scores the answer under the policy), or None.
      texts, examples: host terms only: the decoded completions [B] and their examples [B].
      host_steps: device terms: the host stage's per-step rewards (`HostScores.steps`, the
        oracle's step verdicts), or None; the learned step scorers audit against them.
      rubric: a rubric judge's `judge.Rubric` ([B, K, ...], each prompt's repeated G
        times), or None.
    """
    rollout: Any
    answers: Any = None
    verdicts: Any = None
    group_size: int = flax.struct.field(pytree_node=False, default=1)
    episodes: Any = None
    reward_params: Any = None
    params: Any = None
    model_config: Any = flax.struct.field(pytree_node=False, default=None)
    texts: Optional[Sequence[str]] = flax.struct.field(pytree_node=False, default=None)
    examples: Optional[Sequence] = flax.struct.field(pytree_node=False, default=None)
    host_steps: Any = None
    rubric: Any = None


@dataclasses.dataclass(frozen=True)
class Term:
    """One configured term: its name, where it runs (`WHERE`), its function and, for a
    sample term, its weight in the sum."""
    name: str
    where: str
    fn: Callable
    weight: float = 1.0
    per_step: bool = False


class Setup(NamedTuple):
    """What a term's builder reads: the run's verifier, `config.reward` and its `RLConfig`
    (None in a programmatic scorer), the task, tokenizer, reward model (`scoring.RewardModel`)
    and multi-turn environment (or None), G and N, and the components listed."""
    verifier: Any
    reward: Any = None
    rl: Any = None
    task: Any = None
    tokenizer: Any = None
    reward_model: Any = None
    env: Any = None
    num_samples: int = 1
    max_new_tokens: int = 0
    components: tuple = ()


class Kind(NamedTuple):
    """A registered term kind."""
    build: Callable  # build(setup, weight or None) -> fn, or None when not configured
    where: str
    component: bool  # Named in `reward.components` (else configured by other fields).
    per_step: bool


TERMS: Dict[str, Kind] = {}


def register(name: str, build: Callable, where: str, *, component: bool = True,
             per_step: bool = False) -> None:
    """Registers term kind `name` (after the ones before it: the order terms run in)."""
    if where not in WHERE:
        raise ValueError(f"term {name!r}: where must be one of {WHERE}, got {where!r}")
    if name in ("reward", "correct", "verifier"):
        raise ValueError(f"a term may not be named {name!r}")
    TERMS[name] = Kind(build, where, component, per_step)
