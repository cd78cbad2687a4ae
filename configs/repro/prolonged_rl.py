"""Prolonged RL ("ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in
Large Language Models", Liu et al. 2025): trained long enough, RL lifts pass@k at large k
above the model it starts from, where short RL (Yue et al. 2025; this lab's
`rl_vs_base_hard`) only sharpens what the base model already samples.

Rung "hard" (`lab.ladder`): 1-3 digit addition, 20 new tokens, the tiny model, 400 warm-up
steps; GRPO (16 prompts x 8, PPO clip 0.2/0.2, per-sequence token mean, no KL, lr 1e-4).
The tiny model's RL steps are cheap here (the rung's long-horizon use in issue #40).

Arms (paired by seed; only rl.steps differs): the warm-up (no RL), grpo (100 RL steps, as
`rl_vs_base_hard`) and grpo_1000 (1,000 RL steps). Evaluation: 256 samples per prompt on
128 held-out prompts, pass@k for k = 1..256 (as `rl_vs_base_hard`).

Checks (chosen before any run of this finding; registered under lab v2): (1) grpo_1000's
pass@256 above the warm-up's; (2) grpo_1000's pass@256 above grpo's; (3) grpo_1000's
pass@1 above grpo's. m = 0.01 each. Gate: room at k = 256, the warm-up's pass@256 at most
0.8 (guards 1, 2). Known before registration: `rl_vs_base_hard`'s committed results on the
same rung (warm-up pass@256 0.677, grpo − warm-up +0.006 at k = 256 over 10 seeds); the
1,000-step arm had never been run.

    python scripts/reproduce.py run prolonged_rl --out docs/findings
"""
from rlvr_jax.lab import WARMUP, Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import CEILING, EVAL_256, M_PASS, QUICK, SCHEDULE
from rlvr_jax.lab.ladder import HARD_CURVES, rung


def finding():
    return Finding(
        name="prolonged_rl",
        paper="ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in Large "
              "Language Models",
        claim="1,000 RL steps raise pass@256 above the warm-up and above 100 RL steps, and "
              "pass@1 above 100 RL steps.",
        base=lambda: rung("hard").config("grpo"),
        arms={WARMUP: {"rl.steps": 0}, "grpo": {}, "grpo_1000": {"rl.steps": 1000}},
        checks=[Check("pass@256", "grpo_1000", WARMUP, ">", margin=M_PASS,
                      note="prolonged RL expands pass@256 beyond the warm-up"),
                Check("pass@256", "grpo_1000", "grpo", ">", margin=M_PASS,
                      note="...and beyond short RL", varies=("rl.steps",)),
                Check("pass@1", "grpo_1000", "grpo", ">", margin=M_PASS,
                      note="prolonged RL raises pass@1 over short RL", varies=("rl.steps",))],
        gates=[Gate(f"room at k = 256: the warm-up's pass@256 <= {CEILING}", "pass@256",
                    WARMUP, "<=", CEILING, checks=(0, 1))],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run of this finding "
                      "(rl_vs_base_hard's results on the same rung were known)"),
        eval=EVAL_256,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        reference=WARMUP,
        curves=HARD_CURVES,
        notes="ProRL trains a 1.5B model for 2,000+ steps with a KL term and periodic "
              "reference resets; here plain GRPO without KL on a tiny model, 10x the lab's "
              "usual 100 steps.",
    )
