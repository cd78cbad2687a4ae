"""The built-in reward terms, in the order they run (`scoring.terms`; docs/verifiers.md).

Adding a term: write `build(setup, weight) -> fn(rewards [B], x) -> (rewards [B], metrics)`
in the module it belongs to and add one `register` line here (or call
`scoring.register_term` from your own code: it runs after these).
"""
import functools

from rlvr_jax.scoring import components, episodes, label_free, noise, process, shaping
from rlvr_jax.scoring.reward_model import reward_model_term
from rlvr_jax.scoring.terms import register
from rlvr_jax.scoring.verifiers import token_term

register("token", token_term, "device",
         "the task's on-device token verifier (arithmetic): 1 for the right answer")
for _name, _doc in (
        ("task", "the task's host verifier (Task.verify): 1 for the right final answer"),
        ("math", "the rule math verifier on example.answer (rewards.math_reward)"),
        ("math_verify", "math-verify on the extracted answer (rewards.math_verify_reward)"),
        ("code", "pass fraction of the example's unit tests in the sandbox (rewards.code_reward)"),
        ("format", "1 for exactly <think>...</think><answer>...</answer> (rewards.format_reward)")):
    register(_name, functools.partial(components.sample_term, name=_name), "sample", _doc)
register("majority", label_free.majority_term, "host",
         "label-free (TTRL): 1 where the completion's answer (the verifier's answer_key) is "
         "the majority answer of its group of G (scoring.label_free)")
register("self_certainty", label_free.self_certainty_term, "host",
         "label-free: exp(mean log-prob of the answer span's tokens) under the sampling "
         "policy (scoring.label_free)")
register("process", process.process_term, "host",
         "per-step rewards [B, N] from the task's step checkers (rl.process_weight > 0)",
         component=False, per_step=True)
register("noise", noise.noise_term, "device",
         "seeded false negatives / positives (reward.noise_fn_rate, noise_fp_rate)",
         component=False)
register("correction", noise.correction_term, "device",
         "the backward correction (reward.correction_fn_rate, correction_fp_rate)",
         component=False)
register("overlong", shaping.overlong_term, "device",
         "DAPO soft overlong penalty in [-1, 0] on the completion length (or rl.overlong_*)")
register("reward_model", reward_model_term, "device",
         "a learned reward model's score of prompt + completion, on device "
         "(reward.reward_model_path; scoring.reward_model)")
register("env", episodes.env_term, "device",
         "a multi-turn environment's per-turn rewards (env.name)", component=False)
