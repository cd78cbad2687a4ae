""""Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base
Model?" (Yue et al. 2025) where this lab can test it: `rl_vs_base` is "not testable here"
under lab v2 because its warm-up already solves 0.91 of the prompts at k = 64. Here the task
is the hard setting of `lite_ppo_hard` (1-3 digit addition, prompts up to 10 tokens, 20 new
tokens; a weak warm-up) and k reaches 256 (256 samples per prompt).

Arms (paired by seed): the warm-up itself (standing in for the base model) and GRPO from it
for 100 steps (the `grpo` arm of lite_ppo_hard: group mean and std, PPO clip, per-sequence
token mean, no KL, 16 prompts x 8 samples, lr 1e-4). Metric: pass@k, k = 1..256, from 256
samples per prompt on 128 held-out prompts.

Checks, m, gate and schedule (chosen before any run of this finding, after the v2 re-judging
of rl_vs_base): pass@1 of grpo above the warm-up (m 0.01); pass@256 of grpo not above the
warm-up's by 0.01 or more (the paper: the base model catches up at large k). Gate: the
warm-up's pass@256 <= 0.8 (room at the checked k). Seeds 5, then 10 by the lab's schedule.

    python scripts/reproduce.py run rl_vs_base_hard
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg, WARMUP, load
from rlvr_jax.lab.common import CEILING, EVAL_256, M_PASS, QUICK, SCHEDULE


def finding():
    return Finding(
        name="rl_vs_base_hard",
        paper="Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs "
              "Beyond the Base Model?",
        claim="RL (GRPO) beats the model it starts from at pass@1 but not at pass@256 "
              "(hard setting: 1-3 digit addition).",
        base=load("lite_ppo_hard").base,
        arms={WARMUP: {"rl.steps": 0}, "grpo": {}},
        checks=[Check("pass@1", "grpo", WARMUP, ">", margin=M_PASS, note="RL helps at k = 1"),
                Check("pass@256", "grpo", WARMUP, "<=", margin=M_PASS,
                      note="no gain of 0.01 or more at k = 256")],
        gates=[Gate(f"room at k = 256: the warm-up's pass@256 <= {CEILING}", "pass@256",
                    WARMUP, "<=", CEILING, checks=(1,))],
        eval=EVAL_256,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        prereg=Prereg(rule="v2", note="registered under lab v2 (085a7bb), before any run"),
        notes="The warm-up (400 supervised steps on worked 1-3 digit sums) stands in for the "
              "base model; the paper's base models are pretrained LLMs on math benchmarks.",
    )
