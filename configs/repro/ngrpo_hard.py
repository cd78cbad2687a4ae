""""NGRPO: Negative-enhanced Group Relative Policy Optimization" (Nan et al. 2025) where its
mechanism is active (lab v2 (b), issue #40): GRPO gives an all-wrong group zero advantage
and learns nothing from it; NGRPO's virtual maximum-reward sample in every group's mean and
std gives those samples negative advantages. The easy rung's `ngrpo` finding ("no effect at
this scale") had about 0.3 of its groups with zero variance; here most groups are all wrong.

Rung "hard" (`lab.ladder`): 1-3 digit addition, prompts up to 10 tokens, 20 new tokens, the
tiny model, 400 warm-up steps, then 100 RL steps of 16 prompts x 8 samples, PPO clip
0.2/0.2, per-sequence token mean, no KL, learning rate 1e-4 (GRPO's pass@1 there moved from
about 0.04 to 0.06 in rl_vs_base_hard).

Arms (paired by seed; only rl.advantage differs): grpo (group mean / std) and ngrpo
(`advantages.ngrpo`).

Checks (chosen before any run of this finding; registered under lab v2): (1) ngrpo's pass@1
above grpo's; (2) ngrpo's pass@16 above grpo's; m = 0.01 each. Gate: most groups are all
wrong in the grpo arm: its share of zero-variance groups minus its mean reward (a lower
bound on the all-wrong share, since the share of all-right groups is at most the mean
reward), averaged over training, at least 0.5; else both checks are not testable here.

    python scripts/reproduce.py run ngrpo_hard --out docs/findings
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE
from rlvr_jax.lab.ladder import HARD_CURVES, rung



def finding():
    return Finding(
        name="ngrpo_hard",
        paper="NGRPO: Negative-enhanced Group Relative Policy Optimization",
        claim="Where most groups are all wrong, giving them negative advantages (a virtual "
              "maximum-reward sample in every group's statistics) raises pass@1 and pass@16 "
              "over GRPO.",
        base=lambda: rung("hard").config("grpo"),
        arms={"grpo": {}, "ngrpo": {"rl.advantage": "ngrpo"}},
        checks=[Check("pass@1", "ngrpo", "grpo", ">", margin=M_PASS,
                      note="NGRPO beats GRPO at k = 1", varies=("rl.advantage",)),
                Check("pass@16", "ngrpo", "grpo", ">", margin=M_PASS,
                      note="...and at k = 16", varies=("rl.advantage",))],
        gates=[Gate("most groups all wrong: grpo's zero-variance share - mean reward >= 0.5",
                    "train_avg:rollout/zero_variance_fraction", "grpo", ">=", 0.5,
                    minus="train_avg:rollout/reward_mean")],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run"),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=HARD_CURVES,
        notes="The paper trains 7B models on math with asymmetric clip bounds; here one "
              "minibatch per batch (the clip never acts, so it is left at 0.2/0.2) and a "
              "tiny model whose GRPO gains over 100 steps are about 0.02 at pass@1.",
    )
