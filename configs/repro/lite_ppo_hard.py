"""`lite_ppo` on a hard task setting: 1-3 digit addition, where the warm-up solves few samples
(docs/algorithms.md: greedy pass@1 0.06 after the same 400 supervised steps) and most groups
are all wrong. "Tricks or Traps? A Deep Dive into RL for LLM Reasoning" (Liu et al. 2025)
compares the techniques on easy and hard data; Lite PPO's batch-level std is meant to keep
the scale of the rare informative groups sensible when rewards are sparse.

Arms and checks: those of configs/repro/lite_ppo.py (grpo, lite_ppo, dapo; pass@1 of lite_ppo
above grpo and above dapo), on data.task_kwargs.max_digits = 3 with prompts up to 10 tokens
and 20 new tokens (its own warm-ups). Chosen before any run of this setting; the easy
setting's results were known.

    python scripts/reproduce.py run lite_ppo_hard
"""
import dataclasses

from rlvr_jax import lab


def _base():
    config = lab.load("lite_ppo").base()
    config.data.task_kwargs.max_digits = 3
    config.data.max_prompt_len = 10
    config.sampling.max_new_tokens = 20
    return config


def finding():
    easy = lab.load("lite_ppo")
    return dataclasses.replace(
        easy, name="lite_ppo_hard", base=_base, prereg=lab.Prereg(),
        claim=easy.claim + " (Hard setting: 1-3 digit addition.)",
        notes="Its own warm-ups (3-digit prompts change the warm-up's data). " + easy.notes)
