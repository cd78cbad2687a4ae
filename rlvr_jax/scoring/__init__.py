"""The scoring room: every reward of a run is decided here.

    verifier = scoring.choose_verifier(config.reward.verifier, task, tokenizer)
    # on device (inside the one jitted program):
    rewards, metrics = scoring.score_on_device(rollout, answers, verifier=verifier.token,
                                               rl=rl, max_new_tokens=N)
    # on the host (math-verify, code sandboxes):
    rewards, metrics = scoring.score_on_host(rollout, texts, examples, verify=verifier.verify,
                                             rl=rl, max_new_tokens=N)

With `config.reward.components` (weighted components: token, task, math, math_verify, code,
format, overlong) the verifier is `scoring.reward_from_config(config, task, tokenizer)`;
`scoring.check_reward_config(config.reward)` validates that section before any compilation.
Host scoring runs in-process or in a process pool (`HostScorer`, `config.reward.num_workers`).

Both paths end in `score`: the verifier's verdicts [B] → `reward_metrics` (each reward
metric defined once) → the config's shapers in order (`shaping.rollout_shapers`). The one
shaping that needs the policy's log-probs, KL in the reward, is `shaping.kl_in_reward`,
which the update calls once it has the reference log-probs.

A reward model (`scoring.reward_model`) is scored on device too, inside the one program:
`score_with_reward_model` adds its weighted score to the verifier's shaped verdicts.

Beyond one outcome reward: `scoring.noise` (a noisy verifier and its backward correction,
shapers on both paths), `scoring.label_free` (TTRL majority votes, self-certainty) and
`scoring.process` (the task step checkers' verdicts as per-step rewards [B, N]) — the last
two scored from the texts on the split path (`host_text_scoring`).

Layering: imports `rlvr_jax.tasks`, `rlvr_jax.rewards`, `rlvr_jax.sampling`,
`rlvr_jax.models` (the reward model); never
`rlvr_jax.train` or `rlvr_jax.evaluation` (both build on it).
"""
from rlvr_jax.scoring.components import (COMPONENTS, check_reward_config, parse_components,
                                         reward_from_config)
from rlvr_jax.scoring.host import HostScorer
from rlvr_jax.scoring.label_free import answer_span_mask, majority, self_certainty
from rlvr_jax.scoring.noise import backward_corrected, noise_shapers, noisy
from rlvr_jax.scoring.process import StepRewards, step_rewards_on_host
from rlvr_jax.scoring.text_terms import host_text_scoring
from rlvr_jax.scoring.score import (decode_completions, is_correct, reward_metrics, score,
                                    score_on_device, score_on_host, score_rows_on_host,
                                    verify_on_host)
from rlvr_jax.scoring.reward_model import (RewardModel, add_scores, check_reward_model_path,
                                           load_reward_params, open_reward_model,
                                           reward_model_metrics, reward_model_scores,
                                           score_with_reward_model)
from rlvr_jax.scoring.shaping import (Shaper, kl_in_reward, overlong, rollout_shapers, shape,
                                      weighted)
from rlvr_jax.scoring.verifiers import VERIFIERS, Verifier, choose_verifier, math_verifier, \
    task_verifier

__all__ = ["Verifier", "VERIFIERS", "choose_verifier", "task_verifier", "math_verifier",
           "COMPONENTS", "check_reward_config", "parse_components", "reward_from_config",
           "HostScorer", "Shaper", "overlong", "weighted", "rollout_shapers", "shape",
           "kl_in_reward",
           "is_correct", "reward_metrics", "score", "score_on_device", "score_on_host",
           "verify_on_host", "decode_completions",
           "RewardModel", "add_scores", "reward_model_scores", "reward_model_metrics",
           "score_with_reward_model", "check_reward_model_path", "open_reward_model",
           "load_reward_params",
           "noisy", "backward_corrected", "noise_shapers", "majority", "self_certainty",
           "answer_span_mask", "StepRewards", "step_rewards_on_host", "host_text_scoring"]
