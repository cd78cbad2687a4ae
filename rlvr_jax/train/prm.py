"""A run's learned step scorer from `config.reward`: a PRM (`reward.prm_*`, the `prm`
component) or PRIME's implicit PRM (`reward.implicit_prm_*`, the `implicit_prm` component).

`train.judges.scoring_model` / `scoring_model_params` call these for the run's one scoring
model (docs/process_rewards.md).
"""
from rlvr_jax import scoring
from rlvr_jax.scoring import implicit_prm
from rlvr_jax.train import build
from rlvr_jax.train.errors import user_input


def open_step_scorer(config, tokenizer, weights):
    """The run's `scoring.ProcessRewardModel` (`prm` in `weights`) or `scoring.ImplicitPRM`;
    no weight is read. `ConfigError` naming the field at fault."""
    r = config.reward
    if "prm" in weights:
        with user_input("reward.prm_path"):
            return scoring.open_prm(
                r.prm_path, tokenizer, weight=weights["prm"], form=r.prm_form,
                boundary=r.prm_boundary, marker=r.prm_marker,
                microbatches=r.prm_microbatches, dtype=config.model.dtype,
                param_dtype=config.model.param_dtype,
                max_length=config.data.max_prompt_len + config.sampling.max_new_tokens)
    with user_input("reward.implicit_prm_beta"):
        return scoring.ImplicitPRM(config=build.build_model_config(config, tokenizer),
                                   weight=weights["implicit_prm"], beta=r.implicit_prm_beta,
                                   learning_rate=r.implicit_prm_lr)


def step_scorer_params(config, model, placer, policy_params):
    """A PRM's frozen parameters born sharded by `placer` (read from reward.prm_path), or an
    implicit PRM's {"phi", "ref", "opt"} from the policy's `policy_params`."""
    if isinstance(model, scoring.ProcessRewardModel):
        return scoring.load_reward_params(config.reward.prm_path, model, placer.shardings)
    if policy_params is None:
        raise ValueError("the implicit PRM starts from the policy's parameters (policy_params)")
    return implicit_prm.init_params(model, policy_params)
