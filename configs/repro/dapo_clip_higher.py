""""DAPO: An Open-Source LLM Reinforcement Learning System at Scale" (Yu et al. 2025), the
clip-higher ablation: raising the upper clip bound of the PPO ratio from 1 + 0.2 to 1 + 0.28
lets low-probability tokens grow, which keeps the policy's entropy from collapsing and the
samples diverse (the paper's Figure 2: entropy and AIME accuracy over training).

Arms (paired by seed; both the "dapo" preset without dynamic sampling and overlong shaping,
so they differ in eps_high only: GRPO advantages, token mean, no KL, eps_low 0.2):
clip (eps_high 0.2) and clip_higher (eps_high 0.28). Both split each RL batch of 16
prompts x 8 samples into 8 minibatches of 2 prompts (8 optimizer steps per batch; DAPO's
recipe takes 16): with one minibatch the update is on-policy, the ratio is exactly 1 and
no clip bound acts (every other finding here runs so), which would make the arms
identical. A pilot of 8 RL steps (seed 0, eps_high 0.2; mechanism only, no evaluation)
found the upper bound clipping 0-0.8% of the tokens per step with 4 minibatches and
0.1-0.8% with 8, the lower 0.1-2%: hence 8. 100 RL steps.

Checks (chosen before any run of these arms): the policy entropy where training ends (its
mean over the last 10 RL steps) is higher with clip-higher, and so is pass@64 (the
diversity the paper attributes to it). Metric: pass@k, k = 1..64, from 64 samples per
prompt on 128 held-out prompts; the training entropy is the rollouts' mean token entropy.

    python scripts/reproduce.py run dapo_clip_higher
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import (EVAL, M_ENTROPY, M_PASS, PREREG_3_SEEDS, QUICK, SCHEDULE,
                                  base_config)


def _base():
    config = base_config("dapo")
    config.rl.dynamic_sampling = False
    config.rl.oversample = 1.0
    config.rl.overlong_buffer = 0
    config.rl.minibatches = 8
    return config


def finding():
    return Finding(
        name="dapo_clip_higher",
        paper="DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
        claim="Clip-higher (eps_high 0.28 instead of 0.2) keeps the policy's entropy higher "
              "at the end of training and its samples more diverse (higher pass@64).",
        base=_base,
        arms={"clip": {"rl.eps_high": 0.2}, "clip_higher": {"rl.eps_high": 0.28}},
        checks=[Check("train:train/entropy", "clip_higher", "clip", ">", margin=M_ENTROPY,
                      note="entropy over the last 10% of RL steps is higher",
                      varies=("rl.eps_high",)),
                Check("pass@64", "clip_higher", "clip", ">", margin=M_PASS,
                      note="more diverse samples: pass@64 is higher", varies=("rl.eps_high",))],
        gates=[Gate("the upper clip bound binds: clip arm's clip fraction >= 2% over training",
                    "train_avg:loss/clip_frac_high", "clip", ">=", 0.02)],
        prereg=Prereg(seeds=3, note=PREREG_3_SEEDS),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "train/entropy", "loss/clip_frac_high",
                "loss/clip_frac_low"),
        notes="The paper's runs are 32B models over thousands of steps with long chains of "
              "thought; here 100 steps x 8 minibatches of a 16-token worked sum, where the "
              "warm-up's entropy is already low (~0.25 nats per token).",
    )
