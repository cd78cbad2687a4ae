"""The choice of divergence ("The Choice of Divergence: A Neglected Key to Mitigating
Diversity Collapse in Reinforcement Learning with Verifiable Reward", 2025): a mode-seeking
(reverse) KL regulariser does not keep the diversity RLVR loses; a mass-covering (forward)
one does, so pass@k at large k stays higher at no cost at pass@1.

The two KL losses GRPO implementations use, sampled from the policy (`losses.kl`): k2 =
δ²/2 (δ = log π − log π_ref), whose expected gradient is that of the reverse KL(π‖π_ref),
and k3 = e^{-δ} − 1 + δ (GRPO's usual choice), whose expected gradient is that of the
forward KL(π_ref‖π): it pushes back hardest on tokens the policy has made much less likely
than the reference (mass-covering).

Rung "hard" (`lab.ladder`): 1-3 digit addition, 20 new tokens, the tiny model, 400 warm-up
steps, 100 RL steps of GRPO (16 prompts x 8, PPO clip 0.2/0.2, per-sequence token mean,
lr 1e-4); the warm-up (the reference) solves 0.46 of the prompts at k = 64 (room there).

Arms (paired by seed; only the KL differs): no_kl (β = 0: the same runs as ngrpo_hard's
grpo), k2 (β = 0.2, k2 in the loss), k3 (β = 0.2, k3 in the loss). β = 0.2 is five times
the grpo preset's 0.04 (DeepSeekMath's), so that the term can act within 100 steps at
lr 1e-4; the checks judge the estimators at this β only.

Checks (chosen before any run of this finding; registered under lab v2): (1) k3's pass@64
above no_kl's; (2) k3's pass@64 above k2's; (3) k3's pass@1 not below no_kl's by 0.01 or
more. m = 0.01 each. Gates: (a) room at k = 64: no_kl's pass@64 at most 0.8 (guards 1, 2);
(b) diversity to keep: without a KL the token entropy falls over training, no_kl's mean
entropy over all RL steps minus that over the last 10% at least 0.0125 nats (for a steady
fall, half the fall from start to end: a fall of about 0.025, the lab's m for entropy)
(guards 1, 2).

    python scripts/reproduce.py run kl_choice --out docs/findings
"""
from rlvr_jax.lab import Check, Finding, Gate, Prereg
from rlvr_jax.lab.common import CEILING, EVAL, M_ENTROPY, M_PASS, QUICK, SCHEDULE
from rlvr_jax.lab.ladder import HARD_CURVES, rung

BETA = 0.2
_KL = ("rl.kl_coef", "rl.kl_kind")


def finding():
    return Finding(
        name="kl_choice",
        paper="The Choice of Divergence: A Neglected Key to Mitigating Diversity Collapse in "
              "Reinforcement Learning with Verifiable Reward",
        claim="A KL loss with the forward-KL gradient (k3) keeps more pass@64 than no KL and "
              "than the reverse-KL gradient (k2), at no cost at pass@1.",
        base=lambda: rung("hard").config("grpo"),
        arms={"no_kl": {},
              "k2": {"rl.kl_coef": BETA, "rl.kl_kind": "k2"},
              "k3": {"rl.kl_coef": BETA, "rl.kl_kind": "k3"}},
        checks=[Check("pass@64", "k3", "no_kl", ">", margin=M_PASS,
                      note="forward KL keeps more pass@64 than no KL", varies=_KL),
                Check("pass@64", "k3", "k2", ">", margin=M_PASS,
                      note="forward KL keeps more pass@64 than reverse KL",
                      varies=("rl.kl_kind",)),
                Check("pass@1", "k3", "no_kl", ">=", margin=M_PASS,
                      note="forward KL costs nothing at pass@1", varies=_KL)],
        gates=[Gate(f"room at k = 64: no_kl's pass@64 <= {CEILING}", "pass@64", "no_kl", "<=",
                    CEILING, checks=(0, 1)),
               Gate("diversity to keep: no_kl's entropy, all-steps mean - last-10% mean "
                    f">= {M_ENTROPY / 2}", "train_avg:train/entropy", "no_kl", ">=",
                    M_ENTROPY / 2, minus="train:train/entropy", checks=(0, 1))],
        prereg=Prereg(rule="v2", note="registered under lab v2 before any run"),
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=HARD_CURVES,
        notes="The paper's divergences (forward KL, JS, α-divergences) are computed over the "
              "vocabulary or on a reference data set; here the two sampled-token estimators "
              "GRPO code ships, whose gradients are those of the reverse (k2) and forward "
              "(k3) KL. A tiny model over 100 steps: the policy drifts little from the "
              "warm-up, so the estimators' difference (in δ², larger when |δ| is large) is "
              "small unless the drift is.",
    )
