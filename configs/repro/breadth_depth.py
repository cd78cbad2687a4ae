"""More samples per RL step: per prompt (depth of the group) or more prompts (breadth of
the batch)? ("BroRL: Scaling Reinforcement Learning via Broadened Exploration", 2025: more
rollouts per prompt keep learning where more steps stall; "Depth-Breadth Synergy in RLVR"
(DARS), 2025: a larger batch of prompts raises pass@1, more samples per prompt raise
pass@k.)

The quickstart's set-up (1-2 digit addition, 400 warm-up steps, then 100 RL steps of GRPO,
no KL, learning rate 1e-4). Arms (paired by seed; only the batch's shape differs):
- p16_g8: 16 prompts x 8 samples (128 a step: the other findings' set-up).
- p16_g64: 16 prompts x 64 samples (1024 a step: depth).
- p128_g8: 128 prompts x 8 samples (1024 a step: breadth).

Checks (chosen before any run; registered under lab v2): (1) p16_g64's pass@1 above
p16_g8's; (2) p128_g8's pass@1 above p16_g8's (8x the samples help either way); (3) at the
same 1024 samples a step, depth keeps more pass@64 than breadth: p16_g64 above p128_g8 at
pass@64. m = 0.01 each. Gate for (3): room at k = 64 (p128_g8's pass@64 at most 0.8),
else (3) is not testable here.

    python scripts/reproduce.py run breadth_depth
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import CEILING, EVAL, M_PASS, QUICK, SCHEDULE, base_config

_SHAPE = ("rl.num_prompts", "rl.num_samples")


def finding():
    return Finding(
        name="breadth_depth",
        paper="BroRL: Scaling Reinforcement Learning via Broadened Exploration; Depth-Breadth "
              "Synergy in RLVR (DARS)",
        claim="Eight times the samples per step raise pass@1 whether spent on more samples "
              "per prompt or on more prompts; at equal samples, more samples per prompt keep "
              "more pass@64 than more prompts.",
        base=lambda: base_config("grpo"),
        arms={"p16_g8": {},
              "p16_g64": {"rl.num_samples": 64},
              "p128_g8": {"rl.num_prompts": 128}},
        checks=[Check("pass@1", "p16_g64", "p16_g8", ">", margin=M_PASS,
                      note="more samples per prompt raise pass@1", varies=_SHAPE),
                Check("pass@1", "p128_g8", "p16_g8", ">", margin=M_PASS,
                      note="more prompts per step raise pass@1", varies=_SHAPE),
                Check("pass@64", "p16_g64", "p128_g8", ">", margin=M_PASS,
                      note="at equal samples, depth keeps more pass@64 than breadth",
                      varies=_SHAPE)],
        gates=[Gate("room at k = 64", "pass@64", "p128_g8", "<=", CEILING, checks=(2,))],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run"),
        eval=EVAL,
        quick=dict(QUICK, **{"rl.num_samples": 4}),
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "rollout/zero_variance_fraction", "train/entropy"),
        notes="The papers scale samples on 1.5B-7B models over hundreds of steps; here 100 "
              "steps of a tiny model, whose warm-up pass@64 is already about 0.9 (so the "
              "pass@64 check is gated). The 1024-sample arms cost 8x the compute of p16_g8.",
    )
