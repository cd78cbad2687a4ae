""""Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement
Learning for LLM Reasoning" (Wang et al. 2025): the policy gradient restricted to the 20%
highest-entropy tokens matches (or beats) full-token training; restricted to the other 80%
it does much worse.

Arms (paired by seed; all the "entropy_8020" preset: GRPO advantages, clip-higher 0.2/0.28,
token mean, no KL): full (every token), top20 (the 20% highest-entropy tokens of each
minibatch), bottom80 (the other 80%: rl.entropy_mask_invert), 100 RL steps each. Metric:
pass@k, k = 1..64, from 64 samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run entropy_8020
"""
from rlvr_jax.lab import Check, Finding
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE, base_config

_MASK = ("rl.entropy_keep_fraction", "rl.entropy_mask_invert")


def finding():
    return Finding(
        name="entropy_8020",
        paper="Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective "
              "Reinforcement Learning for LLM Reasoning",
        claim="Training on the top-20% entropy tokens only matches full training (pass@1 "
              "not lower by more than 0.03); training on the bottom 80% only is worse.",
        base=lambda: base_config("entropy_8020"),
        arms={"full": {"rl.entropy_keep_fraction": 1.0},
              "top20": {"rl.entropy_keep_fraction": 0.2},
              "bottom80": {"rl.entropy_keep_fraction": 0.2, "rl.entropy_mask_invert": True}},
        checks=[Check("pass@1", "top20", "full", ">=", margin=0.03,
                      note="top 20% matches full (within 0.03)", varies=_MASK),
                Check("pass@1", "bottom80", "full", "<", margin=M_PASS,
                      note="bottom 80% is worse", varies=_MASK)],
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        reference="full",
        notes="The paper's models are 8B-32B with long chains of thought, where forking "
              "tokens are rare; a 16-token worked addition has few real forks.",
    )
