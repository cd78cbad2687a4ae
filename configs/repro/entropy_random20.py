""""Beyond the 80/20 Rule" (Wang et al. 2025), controlled (issue #40): the policy gradient on
the 20% highest-entropy tokens matches full training (`entropy_8020`, reproduced here) — but
is that the entropy, or only training on a fifth of the tokens? The control arm trains on a
uniformly random 20% of each minibatch's valid tokens (`rl.entropy_mask_random`).

Rung "easy" (`lab.ladder`) with the entropy_8020 preset, as `entropy_8020`: 1-2 digit
addition, 400 warm-up steps, 100 RL steps of GRPO advantages, PPO clip 0.2/0.28 (one
minibatch: the clip never acts), token mean, no KL, 16 prompts x 8, lr 1e-4.

Arms (paired by seed): full (every token), top20 (the 20% highest-entropy tokens of each
minibatch: `entropy_8020`'s top20), random20 (a uniformly random 20%).

Checks (chosen before any run of this finding; registered under lab v2): (1) top20's pass@1
above random20's (the selection by entropy matters); (2) random20's pass@1 below full's (a
random fifth of the tokens is not enough). m = 0.01 each. Gate (a manipulation check: no
logged metric measures how concentrated the useful gradient is before training): random20
trains on about a fifth of the tokens, its mean `train/entropy_kept_fraction` at most 0.25.
Reported beside the verdict, not checked: the share of the policy gradient's norm carried
by the top-20% tokens, by a random 20% and by the bottom 80% at the warm-ups
(scripts/entropy_grad_share.py), if it is built in time.

    python scripts/reproduce.py run entropy_random20 --out docs/findings
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE
from rlvr_jax.lab.ladder import rung

_MASK = ("rl.entropy_keep_fraction", "rl.entropy_mask_random")


def finding():
    return Finding(
        name="entropy_random20",
        paper="Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective "
              "Reinforcement Learning for LLM Reasoning (with a random-20% control)",
        claim="Training on the top-20% entropy tokens beats training on a random 20% of the "
              "tokens, and a random 20% is worse than training on all of them.",
        base=lambda: rung("easy").config("entropy_8020"),
        arms={"full": {"rl.entropy_keep_fraction": 1.0},
              "top20": {"rl.entropy_keep_fraction": 0.2},
              "random20": {"rl.entropy_keep_fraction": 0.2, "rl.entropy_mask_random": True}},
        checks=[Check("pass@1", "top20", "random20", ">", margin=M_PASS,
                      note="entropy, not sparsity: top 20% beats a random 20%",
                      varies=("rl.entropy_mask_random",)),
                Check("pass@1", "random20", "full", "<", margin=M_PASS,
                      note="a random 20% is worse than every token", varies=_MASK)],
        gates=[Gate("random20 keeps about a fifth of the tokens (a manipulation check)",
                    "train_avg:train/entropy_kept_fraction", "random20", "<=", 0.25)],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run"),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        reference="full",
        curves=("rollout/reward_mean", "train/entropy", "train/entropy_kept_fraction"),
        notes="The paper compares top-20% with full training and with the bottom 80% on "
              "8B-32B models; the random-20% arm is this lab's control. A 16-token worked "
              "sum has few real forks.",
    )
