"""GRPO's group size G at matched compute: the same 128 samples per RL step as 32 prompts x 4,
16 x 8 or 8 x 16 samples. A larger group estimates each prompt's baseline better and is less
often all-right or all-wrong (a group with one reward value has zero advantage and teaches
nothing), at the price of fewer distinct prompts per step. GRPO (DeepSeekMath) used G = 64;
many recipes use 8-16. No single paper's claim: the common expectation tested here is that
at matched samples the larger groups learn more.

Arms (paired by seed; GRPO: group-normalised advantages, PPO clip, per-sequence token mean,
no KL, 100 RL steps, learning rate 1e-4): g4 (32 prompts x 4), g8 (16 x 8, the other
findings' set-up), g16 (8 x 16).

Checks (chosen before any run): the share of zero-variance groups over training is lower
with G = 16 than with G = 4 (the mechanism); pass@1 of g16 and of g8 above g4. Metric:
pass@k, k = 1..64, from 64 samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run group_size
"""
from rlvr_jax.lab import Check, Finding, Prereg
from rlvr_jax.lab.common import (EVAL, M_PASS, M_SHARE, PREREG_3_SEEDS, QUICK, SCHEDULE,
                                  base_config)

_G = ("rl.num_prompts", "rl.num_samples")


def finding():
    return Finding(
        name="group_size",
        paper="GRPO group size at matched compute (GRPO: DeepSeekMath; a design question, "
              "no single paper)",
        claim="At 128 samples per step, groups of 16 (8 prompts) or 8 (16 prompts) beat "
              "groups of 4 (32 prompts) at pass@1, with fewer zero-variance groups.",
        base=lambda: base_config("grpo"),
        arms={"g4": {"rl.num_prompts": 32, "rl.num_samples": 4},
              "g8": {"rl.num_prompts": 16, "rl.num_samples": 8},
              "g16": {"rl.num_prompts": 8, "rl.num_samples": 16}},
        checks=[Check("train_avg:rollout/zero_variance_fraction", "g16", "g4", "<",
                      margin=M_SHARE, note="fewer zero-variance groups over training",
                      varies=_G),
                Check("pass@1", "g16", "g4", ">", margin=M_PASS, note="G = 16 beats G = 4",
                      varies=_G),
                Check("pass@1", "g8", "g4", ">", margin=M_PASS, note="G = 8 beats G = 4",
                      varies=_G)],
        prereg=Prereg(seeds=3, note=PREREG_3_SEEDS),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "rollout/zero_variance_fraction", "train/entropy"),
        notes="Matched compute = the same sampled tokens and the same update size per step; "
              "over 100 steps g4 sees 3200 prompts, g16 800. The paper-scale question also "
              "involves long completions, where G changes the memory per prompt.",
    )
