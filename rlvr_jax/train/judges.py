"""A run's one scoring model: a generative judge (`scoring.judge`, from
`config.reward.judge_*`), a step scorer (`train/prm.py`) or a reward model.

`scoring_model` / `scoring_model_params` are what a run calls for it (a judge here, a PRM or
implicit PRM through `train/prm.py`, else `build.build_reward_model`'s reward model).
`reward.judge_path` is any frozen LM `train/frozen.py` reads (a run directory or a local
Hugging Face `*ForCausalLM` directory). `open_judge` reads no weight; `scoring_model_params`
reads them born sharded like the policy's (placed by the run's `Placer`).
"""
from rlvr_jax import scoring
from rlvr_jax.train import build, frozen, reference
from rlvr_jax.train import prm as prm_runs
from rlvr_jax.train.errors import user_input


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
    implicit PRM's start from `policy_params`); a frozen model's in its compute dtype
    (`reference.frozen_scorer_params`: the same scores, half the bytes in bf16)."""
    if model is None:
        return None
    if isinstance(model, scoring.ImplicitPRM):  # Learned (φ trains): as stored.
        return prm_runs.step_scorer_params(config, model, placer, policy_params)
    if isinstance(model, scoring.Judge):
        params = frozen.lm_params(config.reward.judge_path, model.config, placer)
    elif isinstance(model, scoring.ProcessRewardModel):
        params = prm_runs.step_scorer_params(config, model, placer, policy_params)
    else:
        params = build.reward_model_params(config, model, placer)
    return reference.frozen_scorer_params(params, model.config)


def open_judge(config, tokenizer, *, weight: float) -> scoring.Judge:
    """The run's `scoring.Judge` (reward.judge_path / _template / _yes / _no /
    _microbatches / _unique_fraction / _samples); `ConfigError` naming the field at fault."""
    r = config.reward
    with user_input("reward.judge_path"):
        judge_config = frozen.lm_config(r.judge_path, tokenizer.vocab_size,
                                        dtype=config.model.dtype,
                                        param_dtype=config.model.param_dtype, what="the judge")
    with user_input("reward.judge_template"):
        judge = scoring.make_judge(judge_config, tokenizer, template=r.judge_template,
                                   yes=r.judge_yes, no=r.judge_no, weight=weight,
                                   microbatches=r.judge_microbatches,
                                   unique_fraction=r.judge_unique_fraction,
                                   samples=r.judge_samples)
    longest = (config.data.max_prompt_len + config.sampling.max_new_tokens + 12
               + sum(len(p) for p in judge.parts if isinstance(p, tuple))
               + (config.data.rubric_tokens if judge.rubric else 0))
    if longest > judge_config.max_position_embeddings:
        with user_input("reward.judge_path"):
            raise ValueError(f"judge rows of up to {longest} tokens exceed the judge's "
                             f"{judge_config.max_position_embeddings} positions")
    return judge
