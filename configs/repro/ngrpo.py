""""NGRPO: Negative-enhanced Group Relative Policy Optimization" (Nan et al. 2025): GRPO
learns nothing from a group whose samples are all wrong (zero advantage); adding a virtual
maximum-reward sample to every group's mean and std ("advantage calibration") gives those
samples negative advantages, and the policy learns from them: pass@1 and pass@k rise over
GRPO.

Arms (paired by seed; GRPO otherwise: PPO clip, per-sequence token mean, no KL, 100 RL steps
of 16 prompts x 8 samples; one minibatch, so the paper's asymmetric clip bounds would not
act and are left at 0.2/0.2): grpo (the same runs as `grpo` in lite_ppo) and ngrpo
(rl.advantage = "ngrpo", `advantages.ngrpo`).

Checks (chosen before any run): pass@1 and pass@16 of ngrpo above grpo. Metric: pass@k,
k = 1..64, from 64 samples per prompt on 128 held-out prompts.

    python scripts/reproduce.py run ngrpo
"""
from rlvr_jax.lab import Check, Finding
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE, base_config


def finding():
    return Finding(
        name="ngrpo",
        paper="NGRPO: Negative-enhanced Group Relative Policy Optimization",
        claim="With a virtual maximum-reward sample in every group's statistics (all-wrong "
              "groups get negative advantages), pass@1 and pass@16 are higher than GRPO's.",
        base=lambda: base_config("grpo"),
        arms={"grpo": {}, "ngrpo": {"rl.advantage": "ngrpo"}},
        checks=[Check("pass@1", "ngrpo", "grpo", ">", margin=M_PASS,
                      note="NGRPO beats GRPO at k = 1", varies=("rl.advantage",)),
                Check("pass@16", "ngrpo", "grpo", ">", margin=M_PASS,
                      note="...and at k = 16", varies=("rl.advantage",))],
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        notes="The paper trains 7B models on math; here about 0.3 of GRPO's groups of 8 "
              "have zero variance over training (all-wrong and all-right together; "
              "group_size's g8 arm).",
    )
