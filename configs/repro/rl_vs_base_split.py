""""Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond the Base
Model?" (Yue et al. 2025) under the lab's less noisy evaluation (lab v2, item 4): a small
demonstration run, not a replacement of `rl_vs_base`.

What differs from `rl_vs_base`: every arm x seed is evaluated on the whole fixed test split
of 1-2 digit addition (951 problems, each once, the same for every seed: `EvalSpec(prompts=
"all")`) instead of 128 prompts of the seed's own test stream; results keep the per-prompt
pass@k values, so the report gives seed x prompt bootstrap intervals; the shared warm-up is
trained to a criterion (held-out greedy pass@1 >= 0.4, checked every 50 steps on 128 prompts
of another test stream, at most 400 steps) instead of a fixed 400 steps, and the report says
where each seed stopped. 16 samples per prompt (k up to 16) keeps the evaluation of 951
prompts near the cost of rl_vs_base's 128 x 64.

Arms (paired by seed): the warm-up itself and GRPO from it for 100 steps (rl_vs_base's
`grpo`). Checks (chosen before any run of this finding): pass@1 of grpo above the warm-up
(m 0.01); pass@16 of grpo not above the warm-up's by 0.01 or more. Gate: the warm-up's
pass@16 <= 0.8. Three seeds, one look (a demonstration of the evaluation: at 3 seeds the
v2 verdict is expected to be inconclusive).

    python scripts/reproduce.py run rl_vs_base_split
"""
from rlvr_jax.lab import Check, EvalSpec, Finding, Gate, Prereg, WarmupCriterion, WARMUP
from rlvr_jax.lab.common import CEILING, M_PASS, QUICK, base_config

EVAL_SPLIT = EvalSpec(prompts="all", num_samples=16, ks=(1, 2, 4, 8, 16), batch_size=64)


def finding():
    return Finding(
        name="rl_vs_base_split",
        paper="Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs "
              "Beyond the Base Model?",
        claim="RL (GRPO) beats the model it starts from at pass@1 but not at pass@16 (whole "
              "1-2 digit addition test split; warm-up trained to a criterion).",
        base=lambda: base_config("entropy_8020"),
        arms={WARMUP: {"rl.steps": 0}, "grpo": {"rl.entropy_keep_fraction": 1.0}},
        checks=[Check("pass@1", "grpo", WARMUP, ">", margin=M_PASS, note="RL helps at k = 1"),
                Check("pass@16", "grpo", WARMUP, "<=", margin=M_PASS,
                      note="no gain of 0.01 or more at k = 16")],
        gates=[Gate(f"room at k = 16: the warm-up's pass@16 <= {CEILING}", "pass@16", WARMUP,
                    "<=", CEILING, checks=(1,))],
        eval=EVAL_SPLIT,
        warmup=WarmupCriterion(until_pass1=0.4, every=50, max_steps=400, num_prompts=128),
        quick=QUICK,
        quick_eval=EvalSpec(prompts="all", num_samples=2, ks=(1, 2), batch_size=256),
        seeds=3,
        prereg=Prereg(rule="v2", note="registered under lab v2 (504f27c), before any run"),
        notes="A demonstration of the whole-split evaluation, per-prompt intervals and the "
              "warm-up criterion at 3 seeds; the warm-up stands in for the base model.",
    )
