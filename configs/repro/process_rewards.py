""""Solving math word problems with process- and outcome-based feedback" (Uesato et al. 2022):
training on the final answer alone gives about the same final-answer accuracy as training
with feedback on each reasoning step, but leaves more right answers reached through wrong
steps; process feedback lowers that trace error.

Arms (paired by seed; GRPO: group-normalised advantages, PPO clip, per-sequence token mean,
no KL, 100 RL steps of 16 prompts x 8 samples): outcome (the verifier's final-answer reward
only) and process (plus 0.5 x the group-normalised verdicts of the task's step checker on
each worked column sum, summed over the steps ahead of a token: DeepSeekMath's process
supervision GRPO, rl.process_weight = 0.5, process_form "sum"; scored on the host).

Checks (chosen before any run): CoT-pass@1 (answer and every worked step right) is higher
with process rewards; pass@1 (answer only) is not lower by more than 0.02. The trace error
pass@1 − CoT-pass@1 is reported per arm. Metric: pass@k and CoT-pass@k, k = 1..64, from 64
samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run process_rewards
"""
from rlvr_jax.lab import Check, Finding, Gate
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE, base_config

_PROCESS = ("rl.process_weight", "rl.process_form")


def finding():
    return Finding(
        name="process_rewards",
        paper="Solving math word problems with process- and outcome-based feedback",
        claim="Process rewards (step verdicts) raise CoT-pass@1 over outcome-only rewards at "
              "about the same final-answer pass@1 (not lower by more than 0.02).",
        base=lambda: base_config("grpo"),
        arms={"outcome": {},
              "process": {"rl.process_weight": 0.5, "rl.process_form": "sum"}},
        checks=[Check("cot_pass@1", "process", "outcome", ">", margin=M_PASS,
                      note="fewer right answers with wrong steps", varies=_PROCESS),
                Check("pass@1", "process", "outcome", ">=", margin=0.02,
                      note="final-answer accuracy about the same", varies=_PROCESS)],
        gates=[Gate("room for fewer wrong traces: the outcome arm's trace error "
                    "pass@1 - cot_pass@1 >= 0.05", "pass@1", "outcome", ">=", 0.05,
                    minus="cot_pass@1", checks=(0,))],
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "reward/correct", "train/entropy"),
        notes="Uesato et al. used supervised and RL fine-tuning of a 70B model with human "
              "step labels on GSM8K; here the step labels are the task's exact column-sum "
              "checker, so process feedback is noiseless.",
    )
