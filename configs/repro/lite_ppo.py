""""Tricks or Traps? A Deep Dive into RL for LLM Reasoning" (Liu et al. 2025): two techniques
suffice — advantages normalised with the group's mean and the batch's standard deviation,
and token-level loss aggregation ("Lite PPO") — and this minimal recipe does better than
GRPO and DAPO when training base (not instruction-tuned) models.

Arms (paired by seed; each the repository's preset of that name with no KL, 100 RL steps,
16 prompts x 8 samples, learning rate 1e-4): grpo (group mean and group std, per-sequence
token mean, PPO clip 0.2/0.2: the configuration of `clean` in noisy_rewards and `g8` in
group_size), lite_ppo (group mean, batch std, token mean, clip 0.2/0.2), dapo (clip-higher
0.2/0.28, token mean, dynamic sampling from 2x oversampled prompts, soft overlong penalty
over the last 4 of the 16 tokens). The warm-up stands in for the base model. One task
setting (1-2 digit addition); configs/repro/lite_ppo_hard.py runs the same on 1-3 digits.

Checks (chosen before any run): pass@1 of lite_ppo above grpo and above dapo. Metric:
pass@k, k = 1..64, from 64 samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run lite_ppo
"""
from rlvr_jax.lab import Check, Finding, Prereg
from rlvr_jax.lab.common import (EVAL, M_PASS, PREREG_3_SEEDS, QUICK, SCHEDULE,
                                  base_config)


def finding():
    return Finding(
        name="lite_ppo",
        paper="Tricks or Traps? A Deep Dive into RL for LLM Reasoning",
        claim="Lite PPO (group-mean / batch-std advantages, token-level aggregation) beats "
              "GRPO and DAPO at pass@1 when trained from a base model.",
        base=lambda: base_config("grpo"),
        arms={"grpo": {},
              "lite_ppo": {"rl.advantage_scale": "batch", "rl.aggregation": "token-mean"},
              "dapo": {"rl.eps_high": 0.28, "rl.aggregation": "token-mean",
                       "rl.dynamic_sampling": True, "rl.oversample": 2.0,
                       "rl.overlong_buffer": 4, "rl.overlong_penalty": 1.0}},
        checks=[Check("pass@1", "lite_ppo", "grpo", ">", margin=M_PASS,
                      note="Lite PPO beats GRPO",
                      varies=("rl.advantage_scale", "rl.aggregation")),
                Check("pass@1", "lite_ppo", "dapo", ">", margin=M_PASS,
                      note="Lite PPO beats DAPO")],
        prereg=Prereg(seeds=3, note=PREREG_3_SEEDS),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        notes="The paper's base models are Qwen3 4B-8B on math data; here the warm-up stands "
              "in for the base model and the task is easy for it (pass@64 ~0.9 before RL). "
              "DAPO's oversampling doubles its sampling per step.",
    )
