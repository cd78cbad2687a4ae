"""A reward model: a device term, scored inside the one compiled RL step (or after its seam).

    rm = scoring.open_reward_model(path, weight=1.0)       # checks; reads no weight
    rm_params = scoring.load_reward_params(path, rm, placer.shardings)   # born sharded
    state = create_train_state(..., reward_params=rm_params)
    scorer = scoring.token_scorer(verifier, reward_model=rm)   # or scorer_from_config
    rl_step = make_rl_step(mc, sc, rl, tx, scorer=scorer)

The reward model (`models.reward_model`: a Llama / Qwen2 / Qwen3 trunk with a `score` head,
e.g. a Hugging Face `*ForSequenceClassification` checkpoint) reads each sampled sequence as
the policy wrote it — the left-padded prompt then the completion up to and including its
stop token — and its score (label `label`) of the last real token is added to the reward:

    reward = Σ_k w_k · c_k (the verifier's components) + weight · RM(prompt, completion)

then the device terms after it (`scoring.terms`: env rewards). The verifier still decides correctness
(`reward/correct`, eval pass@k), so the true task accuracy is logged beside the reward
model's score; with the verifier's weight 0 the policy trains on the reward model alone and
reward hacking shows as `reward/reward_model` rising while `reward/correct` does not.
Its parameters are frozen: they live in `TrainState.reward_params` (sharded like the
policy's, read sliced straight into their shards, never updated, no optimizer state).

The reward model must share the policy's tokenizer (the ids are scored as sampled).
"""
import dataclasses
import json
import os
from typing import Any, Callable, Dict

import jax
import jax.numpy as jnp

from rlvr_jax import sampling
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.models import hf, hf_slices
from rlvr_jax.models import reward_model as rm_lib
from rlvr_jax.models.reward_model import reward_forward
from rlvr_jax.scoring.score import is_correct

Metrics = Dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class RewardModel:
    """A reward model's static description (hashable: part of the compiled program).

    Attributes:
      config: the reward model's `ModelConfig` (its trunk; may differ from the policy's).
      weight: w in `reward += w · score`.
      label: which of its K scores is the reward (0 for a scalar reward model).
      microbatches: score the B sequences in this many equal slices (activation memory).
    """
    config: ModelConfig
    weight: float = 1.0
    label: int = 0
    microbatches: int = 1


def reward_model_scores(params, rollout: sampling.Rollout, *, reward_model: RewardModel
                        ) -> jax.Array:
    """Scores [B] float32 (no gradient) of the rollout's B sequences, prompt ++ completion.

    Args:
      params: {"trunk", "score"} (`models.reward_model`).
      rollout: B sequences; `rollout.sequences()` gives tokens / attention [B, Tp + N].
    """
    tokens, attention = rollout.sequences()
    rm = reward_model
    return scores_in_slices(
        lambda t, a: reward_forward(params, t, a, config=rm.config)[:, rm.label],
        tokens, attention, rm.microbatches)


def scores_in_slices(score, tokens: jax.Array, mask: jax.Array, k: int) -> jax.Array:
    """[B, ...] float32, no gradient: `score(tokens [B/k, T], mask [B/k, T]) -> [B/k, ...]`
    (one score per row, or per position: a PRM's [B/k, T]) over k equal slices of the B rows
    in turn (a frozen model's activation memory / k)."""
    if tokens.shape[0] % k:
        raise ValueError(f"{tokens.shape[0]} sequences do not split into {k} micro-batches")
    split = (tokens.reshape((k, -1) + tokens.shape[1:]), mask.reshape((k, -1) + mask.shape[1:]))
    out = jax.lax.map(lambda x: score(*x), split)
    return jax.lax.stop_gradient(out.reshape((tokens.shape[0],) + out.shape[2:]))


def reward_model_metrics(scores: jax.Array, correct: jax.Array, num_samples: int) -> Metrics:
    """The reward model's scores [B] beside the verifier's verdicts (correct [B] bool).

    reward/reward_model: the mean score; reward/reward_model_correct and
    reward/reward_model_incorrect: the mean over completions the verifier accepts / rejects
    (0 where there are none); reward/reward_model_agreement: of the pairs (one correct, one
    incorrect completion of the same prompt, G = num_samples per prompt), the fraction the
    reward model orders right (what a group advantage sees; 0 without such pairs).
    """
    c = correct.astype(jnp.float32)
    n_c, n_i = jnp.sum(c), jnp.sum(1.0 - c)
    s, cg = scores.reshape(-1, num_samples), c.reshape(-1, num_samples)
    above = (s[:, :, None] > s[:, None, :]).astype(jnp.float32)  # [P, G, G]
    pairs = cg[:, :, None] * (1.0 - cg)[:, None, :]
    return {"reward/reward_model": jnp.mean(scores),
            "reward/reward_model_correct": jnp.sum(scores * c) / jnp.maximum(n_c, 1.0),
            "reward/reward_model_incorrect": jnp.sum(scores * (1.0 - c)) / jnp.maximum(n_i, 1.0),
            "reward/reward_model_agreement": jnp.sum(above * pairs) / jnp.maximum(
                jnp.sum(pairs), 1.0)}


def reward_model_term(setup, weight):
    """The device term adding `weight · score` of `setup.reward_model` (a `RewardModel`
    whose weight is the component's) with `reward_model_metrics` beside the verifier's
    verdicts; None without a reward model. Its parameters are `x.reward_params`."""
    del weight
    rm = setup.reward_model
    if not isinstance(rm, RewardModel):  # None, or a judge (`scoring.judge`).
        return None

    def fn(rewards, x):
        scores = reward_model_scores(reward_params(x.reward_params), x.rollout, reward_model=rm)
        return rewards + rm.weight * scores, reward_model_metrics(
            scores, is_correct(x.verdicts), x.group_size)
    return fn


# ----------------------------------------------------------------------------- from a path

def check_reward_model_path(path: str) -> None:
    """Raises FileNotFoundError / ValueError when `path` is not a local reward-model
    directory this library reads (config.json of a supported `*ForSequenceClassification`
    architecture, and safetensors). Cheap: reads config.json only, touches no device."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no such directory: {path} (a local Hugging Face "
                                "*ForSequenceClassification directory; nothing is downloaded)")
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        raise FileNotFoundError(f"{path} has no config.json")
    with open(config_file) as f:
        raw = json.load(f)
    archs = raw.get("architectures") or []
    if not set(archs) & set(hf.REWARD_ARCHITECTURES):
        raise ValueError(f"{path} holds {archs or 'no architectures'}, not a reward model; "
                         f"supported: {', '.join(sorted(hf.REWARD_ARCHITECTURES))}")
    hf.config_from_hf(raw)  # Unsupported options raise here.
    if not any(os.path.isfile(os.path.join(path, name)) for name in
               ("model.safetensors", "model.safetensors.index.json")):
        raise FileNotFoundError(f"{path} has no model.safetensors (or its index)")


def open_reward_model(path: str, *, weight: float = 1.0, microbatches: int = 1,
                      dtype: str = "float32", param_dtype: str = "float32", vocab_size: int = 0,
                      max_length: int = 0) -> RewardModel:
    """The RewardModel of the checkpoint at `path`, checked from its config.json and its
    tensors' headers (no weight is read: `load_reward_params` reads them).

    Args:
      vocab_size: the policy tokenizer's vocabulary; the reward model must embed every id
        (it reads the sampled ids as they are: it must be the policy tokenizer's model).
      max_length: the longest scored sequence (prompt width + new tokens), checked against
        the reward model's positions.
    """
    check_reward_model_path(path)
    config, _ = rm_lib.read_reward_config(path, dtype=dtype, param_dtype=param_dtype)
    if config.vocab_size < vocab_size:
        raise ValueError(f"{path}: the reward model embeds {config.vocab_size} ids but the "
                         f"tokenizer has {vocab_size}: it is not this tokenizer's model")
    if max_length > config.max_position_embeddings:
        raise ValueError(f"{path}: sequences of {max_length} tokens exceed the reward "
                         f"model's {config.max_position_embeddings} positions")
    return RewardModel(config=config, weight=weight, microbatches=microbatches)


def load_reward_params(path: str, reward_model: RewardModel, shardings: Callable) -> Any:
    """The parameters of `open_reward_model(path, ...)` born sharded: each process reads
    only its devices' slices (`hf_slices.load_hf_reward_params_sharded`).

    shardings: fn(parameter shapes, logical axes) -> their shardings (`Placer.shardings`).
    """
    config = reward_model.config
    _, k = rm_lib.read_reward_config(path, dtype=config.dtype, param_dtype=config.param_dtype)
    placed = shardings(rm_lib.reward_param_shapes(config, k), rm_lib.reward_logical_axes(config))
    return hf_slices.load_hf_reward_params_sharded(path, config, k, placed)


def reward_params(params):
    """`params` (`TrainState.reward_params`), which a configured reward model needs."""
    if params is None:
        raise ValueError("reward_model needs its parameters in state.reward_params "
                         "(create_train_state(..., reward_params=...))")
    return params
