"""RL on one training example ("Reinforcement Learning for Reasoning in Large Language Models
with One Training Example", Wang et al. 2025): RLVR on a single prompt, repeated, recovers
much of the held-out gain of RL on the whole training stream, and an entropy bonus helps it.

The quickstart's set-up (1-2 digit addition, 400 warm-up steps, then 100 RL steps of GRPO,
16 prompts x 8 samples, no KL, learning rate 1e-4). Arms (paired by seed):
- warm-up: the warm-up checkpoint, no RL.
- full: RL on the endless training stream (1,600 distinct prompts over 100 steps).
- one: RL on one training prompt (`data.size=1`: every batch is that prompt 16 times).
- one_entropy: the same with an entropy bonus (`rl.entropy_coef=0.01`).

Checks (chosen before any run; registered under lab v2): (1) one's pass@1 above the
warm-up's; (2) one's pass@1 not below full's by 0.05 or more (it recovers most of the gain);
(3) one_entropy's pass@1 above one's. m = 0.01 for (1) and (3), 0.05 for (2).

    python scripts/reproduce.py run one_example
"""
from rlvr_jax.lab import WARMUP, Check, Finding, Prereg
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE, base_config


def finding():
    return Finding(
        name="one_example",
        paper="Reinforcement Learning for Reasoning in Large Language Models with One "
              "Training Example",
        claim="RL on one training prompt raises held-out pass@1 over the warm-up, recovers "
              "most of the gain of RL on the whole stream, and an entropy bonus helps it.",
        base=lambda: base_config("grpo"),
        arms={WARMUP: {"rl.steps": 0}, "full": {}, "one": {"data.size": 1},
              "one_entropy": {"data.size": 1, "rl.entropy_coef": 0.01}},
        checks=[Check("pass@1", "one", WARMUP, ">", margin=M_PASS,
                      note="one prompt raises pass@1"),
                Check("pass@1", "one", "full", ">=", margin=0.05,
                      note="one prompt recovers most of the full gain", varies=("data.size",)),
                Check("pass@1", "one_entropy", "one", ">", margin=M_PASS,
                      note="an entropy bonus helps one-prompt RL",
                      varies=("rl.entropy_coef",))],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run"),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        reference=WARMUP,
        curves=("rollout/reward_mean", "rollout/zero_variance_fraction", "train/entropy"),
        notes="The paper's one example is a hard MATH problem on Qwen2.5-Math-1.5B; here one "
              "1-2 digit sum, which the warm-up model may already solve (its group then has "
              "zero variance and teaches nothing).",
    )
