"""A run's generative judge (`scoring.judge`) from `config.reward.judge_*`.

`scoring_model` / `scoring_model_params` are what a run calls for its one frozen scoring
model (a judge here, else `build.build_reward_model`'s reward model).
`reward.judge_path` is a `scripts/train.py` run directory (its config.json and latest intact
checkpoint) or a local Hugging Face `*ForCausalLM` directory. `open_judge` reads no weight;
`judge_params` reads them born sharded like the policy's (placed by the run's `Placer`).
"""
import json
import os

import jax
import ml_collections

from rlvr_jax import scoring
from rlvr_jax.models import hf, hf_slices, transformer
from rlvr_jax.models.config import ModelConfig
from rlvr_jax.train import build
from rlvr_jax.train import prm as prm_runs
from rlvr_jax.train.checkpoint import Checkpointer, checked_step
from rlvr_jax.train.errors import user_input


def is_run_dir(path: str) -> bool:
    """True when `path` holds a training run (config.json and checkpoints/)."""
    return os.path.isdir(os.path.join(path, "checkpoints"))


def judge_model_config(path: str, tokenizer, *, dtype: str, param_dtype: str) -> ModelConfig:
    """The judge's `ModelConfig` from its run directory or HF directory (config.json only).
    Raises FileNotFoundError / ValueError (one line)."""
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        raise FileNotFoundError(f"{config_file} not found (a scripts/train.py run directory or "
                                "a local Hugging Face *ForCausalLM directory)")
    if is_run_dir(path):
        with open(config_file) as f:
            stored = ml_collections.ConfigDict(json.load(f))
        config = build.build_model_config(stored, tokenizer)
        if config.lora_rank:
            raise ValueError(f"{path} is a LoRA run; export it (scripts/convert_checkpoint.py) "
                             "and pass the HF directory")
        return config.replace(dtype=dtype, param_dtype=param_dtype)
    with open(config_file) as f:
        raw = json.load(f)
    if set(raw.get("architectures") or ()) & set(hf.REWARD_ARCHITECTURES):
        raise ValueError(f"{path} is a reward model ({raw['architectures'][0]}), not an LM: "
                         "use reward.components=reward_model")
    return hf.config_from_hf(raw, dtype=dtype, param_dtype=param_dtype)


def scoring_model(config, tokenizer):
    """The run's frozen scoring model: its `scoring.Judge` with the `judge` component, else
    `build.build_reward_model` (a `scoring.RewardModel` or None). No weight is read."""
    weights = dict(scoring.parse_components(config.reward))
    if "judge" in weights:
        return open_judge(config, tokenizer, weight=weights["judge"])
    if "prm" in weights or "implicit_prm" in weights:
        return prm_runs.open_step_scorer(config, tokenizer, weights)
    return build.build_reward_model(config, tokenizer)


def scoring_model_params(config, model, placer, policy_params=None):
    """The parameters of `scoring_model(...)` (None: None), born sharded by `placer` (an
    implicit PRM's start from `policy_params`)."""
    if isinstance(model, scoring.Judge):
        return judge_params(config.reward.judge_path, model, placer)
    if isinstance(model, (scoring.ProcessRewardModel, scoring.ImplicitPRM)):
        return prm_runs.step_scorer_params(config, model, placer, policy_params)
    return build.reward_model_params(config, model, placer)


def open_judge(config, tokenizer, *, weight: float) -> scoring.Judge:
    """The run's `scoring.Judge` (reward.judge_path / _template / _yes / _no /
    _microbatches); `ConfigError` naming the field at fault."""
    r = config.reward
    with user_input("reward.judge_path"):
        judge_config = judge_model_config(r.judge_path, tokenizer, dtype=config.model.dtype,
                                          param_dtype=config.model.param_dtype)
    with user_input("reward.judge_template"):
        judge = scoring.make_judge(judge_config, tokenizer, template=r.judge_template,
                                   yes=r.judge_yes, no=r.judge_no, weight=weight,
                                   microbatches=r.judge_microbatches)
    longest = (config.data.max_prompt_len + config.sampling.max_new_tokens + 12
               + sum(len(p) for p in judge.parts if isinstance(p, tuple)))
    if longest > judge_config.max_position_embeddings:
        with user_input("reward.judge_path"):
            raise ValueError(f"judge rows of up to {longest} tokens exceed the judge's "
                             f"{judge_config.max_position_embeddings} positions")
    return judge


def judge_params(path: str, judge: scoring.Judge, placer):
    """The judge's frozen parameters, born sharded by `placer` (the policy's layout rules)."""
    config = judge.config
    shapes = hf_slices.shapes(config)
    placed = placer.shardings(shapes, transformer.param_logical_axes(config))
    if not is_run_dir(path):
        return hf_slices.load_hf_params_sharded(path, config, placed)
    directory = os.path.join(path, "checkpoints")
    step = checked_step(directory)
    abstract = jax.tree.map(lambda s, p: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=p),
                            shapes, placed)
    ckpt = Checkpointer(directory)
    try:
        return ckpt.restore_params(step, abstract)
    finally:
        ckpt.close()
