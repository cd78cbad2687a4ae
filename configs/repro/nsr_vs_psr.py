""""The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning" (Zhu et al.
2025): training only on wrong samples (NSR) keeps or raises pass@k across k, while training
only on right samples (PSR) raises pass@1 but narrows the distribution: pass@k at large k
falls.

Arms (paired by seed, same loss −A·logπ, token mean, same learning rate; only the signs
differ): the warm-up itself; PSR: A = +1 for right samples, 0 for wrong; NSR: A = −1 for
wrong, 0 for right (advantage="w_reinforce" with positive_weight / negative_weight 1/0 and
0/1), each for 100 and for 300 RL steps (the verdict reads the 300-step arms: narrowing
should grow with training). Metric: pass@k, k = 1..64, from 64 samples per prompt on 128
held-out prompts.

    python scripts/reproduce.py run nsr_vs_psr
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg, WARMUP
from rlvr_jax.lab.common import CEILING, EVAL, M_PASS, QUICK, SCHEDULE, base_config

_SIGNS = ("rl.positive_weight", "rl.negative_weight")


def finding():
    return Finding(
        name="nsr_vs_psr",
        paper="The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning",
        claim="NSR (−1 on wrong samples only) keeps pass@k at large k; PSR (+1 on right "
              "samples only) narrows it: at k = 64 NSR >= the starting model > PSR.",
        base=lambda: base_config("nsr"),
        arms={WARMUP: {"rl.steps": 0},
              "psr": {"rl.positive_weight": 1.0, "rl.negative_weight": 0.0},
              "nsr": {"rl.positive_weight": 0.0, "rl.negative_weight": 1.0},
              "psr_300": {"rl.positive_weight": 1.0, "rl.negative_weight": 0.0,
                          "rl.steps": 300},
              "nsr_300": {"rl.positive_weight": 0.0, "rl.negative_weight": 1.0,
                          "rl.steps": 300}},
        checks=[Check("pass@64", "psr_300", WARMUP, "<", margin=M_PASS,
                      note="PSR narrows pass@k at large k"),
                Check("pass@64", "nsr_300", WARMUP, ">=", margin=0.01,
                      note="NSR keeps pass@k at large k (within 0.01)"),
                Check("pass@64", "nsr_300", "psr_300", ">", margin=M_PASS,
                      note="NSR above PSR at large k", varies=_SIGNS)],
        gates=[Gate(f"room at k = 64: the warm-up's pass@64 <= {CEILING}", "pass@64", WARMUP,
                    "<=", CEILING)],
        prereg=Prereg(checks=[
            Check("pass@64", "psr", WARMUP, "<"),
            Check("pass@64", "nsr", WARMUP, ">=", margin=0.01),
            Check("pass@64", "nsr", "psr", ">")],
            note="registered on the 100-step arms psr / nsr (71f796b); the 300-step arms and "
                 "the checks' move to them came after the 100-step results had been seen "
                 "(13207b2)."),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        notes="PSR here is the paper's +1/0 REINFORCE, not GRPO with negative advantages "
              "zeroed; both arms share the loss, aggregation and learning rate (1e-4).",
    )
