"""The ladder of settings: the rungs a finding picks from, each with the mechanisms it can show.

A finding names its rung (its base config is `rung(NAME).config(algorithm)`, plus the
finding's own overrides) and says in its gate why its mechanism is active there. The
warm-up numbers quoted in `shows` come from the committed results named there
(docs/findings/*/results.json, held-out pass@k from 64 samples per prompt, 5 seeds).

    python -c "from rlvr_jax.lab import ladder; print(ladder.table())"
"""
import dataclasses
from typing import Tuple

from rlvr_jax.lab.common import base_config


@dataclasses.dataclass(frozen=True)
class Rung:
    """One setting: `task` with its digits, the model preset, prompt and completion lengths,
    supervised warm-up steps and RL steps; `shows`: the mechanisms it can make visible (and
    why); `cannot`: what it cannot show."""
    name: str
    task: str
    max_digits: int
    preset: str
    max_prompt_len: int
    max_new_tokens: int
    sft_steps: int
    rl_steps: int
    shows: str
    cannot: str
    findings: Tuple[str, ...] = ()

    def config(self, algorithm: str = "grpo"):
        """The lab's base config (`common.base_config`: 16 prompts x 8 samples, lr 1e-4, no
        KL) set to this rung."""
        config = base_config(algorithm)
        config.model.preset = self.preset
        config.data.task_kwargs.max_digits = self.max_digits
        config.data.max_prompt_len = self.max_prompt_len
        config.sampling.max_new_tokens = self.max_new_tokens
        config.sft.steps = self.sft_steps
        config.rl.steps = self.rl_steps
        return config


RUNGS = (
    Rung("easy", "addition", 2, "tiny", 8, 16, 400, 100,
         shows="pass@1 effects of the loss, the advantage and the token mask: the warm-up's "
               "pass@1 0.25 leaves room and about 0.3 of the groups of 8 have zero variance "
               "(rl_vs_base, group_size)",
         cannot="large-k effects: the warm-up's pass@64 is already 0.91 (rl_vs_base)",
         findings=("rl_vs_base", "nsr_vs_psr", "entropy_8020", "dapo_clip_higher",
                   "noisy_rewards", "group_size", "lite_ppo", "ngrpo", "process_rewards",
                   "tree_rollouts", "spurious_clipping", "one_example", "breadth_depth",
                   "entropy_random20")),
    Rung("hard", "addition", 3, "tiny", 10, 20, 400, 100,
         shows="sparse rewards and large k: the warm-up's pass@1 0.04 and pass@64 0.46, "
               "mean reward 0.06-0.08 under GRPO, so most groups of 8 are all wrong "
               "(rl_vs_base_hard, lite_ppo_hard, ngrpo_hard: zero-variance share 0.75); "
               "large-k claims (k up to 256)",
         cannot="effects that need the model to learn much within 100 steps (GRPO moves "
                "pass@1 by about 0.02 here)",
         findings=("lite_ppo_hard", "rl_vs_base_hard", "ngrpo_hard", "kl_choice",
                   "prolonged_rl")),
    Rung("long", "addition", 3, "tiny", 10, 48, 400, 100,
         shows="completion length: 48 new tokens against worked solutions of 10-20, so a "
               "completion can run on past its answer (drgrpo_length)",
         cannot="longer reasoning: the worked format is fixed; a wrong completion can only "
                "run on or stop late",
         findings=("drgrpo_length",)),
    Rung("small_hard", "addition", 3, "small", 10, 20, 400, 100,
         shows="the hard rung with 20x the parameters (the `small` preset, 1.6M): after 60 "
               "warm-up steps greedy pass@1 0.050 against the tiny model's 0.002 "
               "(docs/findings.md); after 400 the warm-up's pass@1 0.053 and pass@256 0.655 "
               "(room at large k), and 100 GRPO steps add +0.031 at pass@1 (tiny on the hard "
               "rung: +0.023) (rl_vs_base_small)",
         cannot="effects that need RL to move the policy much within 100 steps: the training "
                "reward's last-10% mean exceeds its all-steps mean by 0.019 (tiny: 0.015), "
                "under rl_vs_base_small's learning gate of 0.025, and by 0.018 after 300 steps "
                "(rl_vs_base_small_300: in 4 of 5 seeds the reward rose over the first 100 "
                "steps, then levelled off); many arms or long RL within "
                "30 minutes on 2 cores (idle machine: 0.175 s per warm-up step, 0.46 s per RL "
                "step, about 2.5 minutes a seed for 2 arms with 256-sample evaluations)",
         findings=("rl_vs_base_small", "rl_vs_base_small_300")),
)

# The hard rung's recorded curves, shared by ngrpo_hard and kl_choice so that their identical
# grpo / no_kl arm is one pair (a pair's hash includes the curves).
HARD_CURVES = ("rollout/reward_mean", "rollout/zero_variance_fraction", "train/entropy",
               "loss/kl")


def rung(name: str) -> Rung:
    """The rung called `name` (ValueError naming the known ones otherwise)."""
    for r in RUNGS:
        if r.name == name:
            return r
    raise ValueError(f"unknown rung {name!r}; known: {', '.join(r.name for r in RUNGS)}")


def table() -> str:
    """The ladder as a markdown table (docs/findings.md)."""
    rows = ["| rung | task | model | prompt / new tokens | warm-up / RL steps | can show | "
            "cannot show | findings |", "|---|---|---|---|---|---|---|---|"]
    for r in RUNGS:
        rows.append(f"| {r.name} | 1-{r.max_digits} digit {r.task} | {r.preset} | "
                    f"{r.max_prompt_len} / {r.max_new_tokens} | {r.sft_steps} / {r.rl_steps} "
                    f"| {r.shows} | {r.cannot} | {', '.join(r.findings) or '—'} |")
    return "\n".join(rows)
