"""The built-in reward terms, in the order they run (`scoring.terms`; docs/verifiers.md).

Adding a term: write `build(setup, weight) -> fn(rewards [B], x) -> (rewards [B], metrics)`
in the module it belongs to and add one `register` line here (or call
`scoring.register_term` from your own code: it runs after these).
"""
import functools

from rlvr_jax.scoring import (components, episodes, implicit_prm, label_free, noise, prm,
                              process, shaping, turns)
from rlvr_jax.scoring.judge import judge_term
from rlvr_jax.scoring.reward_model import reward_model_term
from rlvr_jax.scoring.terms import register
from rlvr_jax.scoring.verifiers import token_term

# The task's on-device token verifier (arithmetic): 1 for the right answer.
register("token", token_term, "device")
# Per completion, summed in one pass of the host pool (scoring.host_reward): the task's host
# verifier (Task.verify); the rule math verifier on example.answer (rewards.math_reward);
# math-verify on the extracted answer; the pass fraction of the example's unit tests in the
# sandbox (rewards.code_reward); 1 for exactly <think>...</think><answer>...</answer>.
for _name in ("task", "math", "math_verify", "code", "format"):
    register(_name, functools.partial(components.sample_term, name=_name), "sample")
# Label-free (TTRL): 1 where the completion's answer (the verifier's answer_key) is the
# majority answer of its group of G; exp(mean log-prob of the answer span's tokens).
register("majority", label_free.majority_term, "host")
register("self_certainty", label_free.self_certainty_term, "host")
# Per-step rewards [B, N] from the task's step checkers (rl.process_weight > 0).
register("process", process.process_term, "host", component=False, per_step=True)
# Seeded false negatives / positives (reward.noise_*), the backward or forward correction
# (reward.correction_*).
register("noise", noise.noise_term, "device", component=False)
register("correction", noise.correction_term, "device", component=False)
# DAPO soft overlong penalty in [-1, 0] on the completion length (or rl.overlong_*).
register("overlong", shaping.overlong_term, "device")
# Length rewards on the verifier's correctness: Yeo et al.'s cosine schedule (reward.cosine_*);
# Kimi k1.5's group-relative length penalty on correct answers (reward.length_penalty_*).
register("cosine_length", shaping.cosine_length_term, "device")
register("length_penalty", shaping.length_penalty_term, "device")
# A learned reward model's score of prompt + completion (reward.reward_model_path).
register("reward_model", reward_model_term, "device")
# A learned process reward model's per-step scores [B, N] (reward.prm_path; scoring/prm.py);
# PRIME's implicit PRM, β·log(π_φ/π_ref) per token, φ learned online (scoring/implicit_prm.py).
register("prm", prm.prm_term, "device", per_step=True)
register("implicit_prm", implicit_prm.implicit_prm_term, "device", per_step=True)
# A generative judge's P(yes) for question + answer (reward.judge_path; scoring/judge.py).
register("judge", judge_term, "device")
# Multi-turn turn rewards [B, N] at each turn's last model token (docs/multiturn.md): the
# env's per-turn rewards; the information gain about the answer (IGPO).
register("turn_env", turns.turn_env_term, "device", per_step=True)
register("info_gain", turns.info_gain_term, "device", per_step=True)
# A multi-turn environment's per-turn rewards (env.name).
register("env", episodes.env_term, "device", component=False)
