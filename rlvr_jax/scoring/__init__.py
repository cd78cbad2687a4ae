"""The scoring room: every reward of a run is decided here.

    scorer = scoring.scorer_from_config(config, task, tokenizer, rl=rl)   # config.reward
    host = scorer.score_host(rollout, examples, G)        # None when every term is on device
    rewards, metrics, correct = scorer.score_device(scoring.Inputs(rollout, answers=...), host)

A run's scorer is a *verifier* (`Verifier`: verify, answer key, step check — what
`reward/correct`, pass@k and evaluation read; `reward.verifier`) and an ordered list of
*terms* (`terms.Term`), each `fn(rewards [B], x: Inputs) -> (rewards [B], metrics)` tagged
device, host or sample (`scoring.terms`). `reward.components` / `reward.weights` list the
terms (default: the verifier, weight 1); the noisy verifier and its correction
(`reward.noise_*`, `reward.correction_*`), `rl.overlong_*`, process rewards
(`rl.process_weight`) and a multi-turn environment's rewards are terms configured by their
own fields. The built-in terms and their order are in `scoring/registry.py`; adding one is
a builder function plus `register_term(name, build, where)` (docs/verifiers.md).

The one place that knows whether the reward needs the host is the `Scorer` constructor
(`Scorer.traceable`); the RL step composes it with a `rlvr_jax.sampler.Sampler`.
`shaping.kl_in_reward`, the one shaping that needs the policy's log-probs, is called by the
update.

Layering: imports `rlvr_jax.tasks`, `rlvr_jax.rewards`, `rlvr_jax.sampling`,
`rlvr_jax.multiturn` (episode statistics), `rlvr_jax.models` (the reward model); never
`rlvr_jax.train` or `rlvr_jax.evaluation` (both build on it).
"""
from rlvr_jax.scoring.custom import device_reward
from rlvr_jax.scoring.host import HostScorer
from rlvr_jax.scoring.label_free import answer_span_mask, majority, self_certainty
from rlvr_jax.scoring.noise import backward_corrected, noisy
from rlvr_jax.scoring.process import StepRewards, step_rewards_on_host
from rlvr_jax.scoring.score import decode_completions, is_correct, reward_metrics
from rlvr_jax.scoring.reward_model import (RewardModel, check_reward_model_path,
                                           load_reward_params, open_reward_model,
                                           reward_model_metrics, reward_model_scores)
from rlvr_jax.scoring.shaping import kl_in_reward, overlong
from rlvr_jax.scoring.judge import Judge, Rubric, judge_scores, make_judge
from rlvr_jax.scoring.prm import ProcessRewardModel, open_prm
from rlvr_jax.scoring.implicit_prm import ImplicitPRM
from rlvr_jax.scoring.terms import TERMS, Inputs, Setup, Term
from rlvr_jax.scoring.terms import register as register_term
from rlvr_jax.scoring.verifiers import VERIFIERS, Verifier, choose_verifier, math_verifier, \
    task_verifier
from rlvr_jax.scoring import registry  # noqa: F401,E402  (registers the built-in terms)
from rlvr_jax.scoring.scorer import (HostScores, Scorer, assemble, check_reward_config,
                                     parse_components, scorer_from_config, token_scorer)

__all__ = ["Verifier", "VERIFIERS", "choose_verifier", "task_verifier", "math_verifier",
           "check_reward_config", "parse_components",
           "TERMS", "Term", "Inputs", "Setup", "register_term", "device_reward",
           "Scorer", "HostScores", "assemble", "scorer_from_config", "token_scorer",
           "HostScorer", "overlong", "kl_in_reward", "is_correct", "reward_metrics",
           "decode_completions",
           "RewardModel", "reward_model_scores", "reward_model_metrics",
           "check_reward_model_path", "open_reward_model", "load_reward_params",
           "Judge", "Rubric", "make_judge", "judge_scores", "ProcessRewardModel", "open_prm",
           "ImplicitPRM",
           "noisy", "backward_corrected", "majority", "self_certainty",
           "answer_span_mask", "StepRewards", "step_rewards_on_host"]
