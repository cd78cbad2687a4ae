"""GRPO rewarded by a small generative judge (no verifier in the reward) on 1-2 digit addition.

    python scripts/train_judge.py --out runs/judge_arithmetic          # ~600 steps
    python scripts/train.py --config configs/judge_arithmetic.py --workdir runs/judge_grpo
    python scripts/judge_audit.py --judge runs/judge_arithmetic --run runs/judge_grpo --step 0
    python scripts/judge_audit.py --judge runs/judge_arithmetic --run runs/judge_grpo

The judge (a `tiny` LM fine-tuned to say Y / N on verifier labels, exported as a Hugging
Face `Qwen2ForCausalLM`) reads "<question> ref <reference> ans <answer> ok? " built on
device from the rollout's tokens, and the reward is its P(Y) / (P(Y) + P(N)), inside the
one compiled RL step; the task's token verifier only measures. metrics.jsonl logs
`reward/judge` beside `reward/correct` and the judge's live FN / FP
(`reward/judge_fn`, `reward/judge_fp`). Checkpoints at step 0 (after the warm-up) and the
last step let `scripts/judge_audit.py` measure the judge on the policy before and after RL.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # No reference model: as the quickstart.
    config.reward.components = "judge"  # The judge alone (weight 1); the verifier measures.
    config.reward.judge_path = "runs/judge_arithmetic"  # From scripts/train_judge.py.
    config.reward.judge_template = "{question} ref {reference} ans {answer} ok? "
    config.reward.judge_yes, config.reward.judge_no = "Y", "N"
    config.eval.every = 50
    config.checkpoint.every = 100
    config.checkpoint.keep = 5       # Keeps step 0 (after the warm-up) for the audit.
    return config
