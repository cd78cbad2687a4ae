""""Understanding R1-Zero-Like Training: A Critical Perspective" (Liu et al. 2025, Dr.GRPO):
GRPO's per-response length normalisation (each completion's token losses divided by its own
length) penalises a long wrong completion less per token than a short one, so incorrect
completions grow longer during training; Dr.GRPO (token losses summed and divided by a
constant, no standard-deviation scaling) removes that bias at no cost in accuracy.

A setting with room to grow (lab v2 (b), issue #40): 1-3 digit addition (prompts up to 10
tokens, the worked solutions about 10-20 tokens) with max_new_tokens = 48, so a wrong
completion can run on well past its answer; the quickstart's warm-up (400 steps), then 100
RL steps, 16 prompts x 8 samples, PPO clip 0.2/0.2, no KL, learning rate 1e-4.

Arms (paired by seed; only the named variables differ):
- grpo: group-mean / group-std advantages, per-sequence token mean ("seq-mean-token-mean").
- dr_grpo: group-mean advantages without the std ("advantage_scale" none), token losses
  summed per sequence and divided by the constant max_new_tokens ("seq-mean-token-sum-norm").

Checks (chosen before any run): (1) at the end of training (the last 10% of the RL steps)
the incorrect completions of grpo are longer than those of dr_grpo, by at least one token
(m = 1 token of ~15); (2) dr_grpo's pass@1 is not worse than grpo's by one point or more.
Gate: the mechanism needs wrong completions to lengthen: grpo's mean reward over training
at most 0.9 (at least a tenth of the completions wrong), else check (1) is not testable.

    python scripts/reproduce.py run drgrpo_length
"""
from rlvr_jax.lab import Check, Finding, Gate
from rlvr_jax.lab.common import EVAL, M_PASS, QUICK, SCHEDULE, base_config

_VARIES = ("rl.advantage_scale", "rl.aggregation")
M_LENGTH = 1.0  # Tokens: about 7% of a worked solution.


def _base():
    config = base_config("grpo")
    config.data.task_kwargs.max_digits = 3
    config.data.max_prompt_len = 10
    config.sampling.max_new_tokens = 48
    return config


def finding():
    return Finding(
        name="drgrpo_length",
        paper="Understanding R1-Zero-Like Training: A Critical Perspective (Dr.GRPO)",
        claim="GRPO's per-response length normalisation lets incorrect completions grow "
              "longer than under Dr.GRPO, whose pass@1 is no worse.",
        base=_base,
        arms={"grpo": {},
              "dr_grpo": {"rl.advantage_scale": "none",
                          "rl.aggregation": "seq-mean-token-sum-norm"}},
        checks=[Check("train:rollout/response_length_incorrect", "grpo", "dr_grpo", ">",
                      margin=M_LENGTH, note="GRPO's wrong completions are longer at the end",
                      varies=_VARIES),
                Check("pass@1", "dr_grpo", "grpo", ">=", margin=M_PASS,
                      note="Dr.GRPO is not worse at pass@1", varies=_VARIES)],
        gates=[Gate("wrong completions to lengthen", "train_avg:rollout/reward_mean", "grpo",
                    "<=", 0.9, checks=(0,))],
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "rollout/response_length",
                "rollout/response_length_incorrect", "rollout/response_length_correct",
                "rollout/truncation_rate", "train/entropy"),
        notes="A tiny model (82k parameters) on a fixed worked-solution format: its wrong "
              "completions lengthen only by running on past the answer or stopping late, "
              "not by longer reasoning; 100 RL steps against the paper's thousands.",
    )
