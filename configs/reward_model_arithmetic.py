"""GRPO against a learned reward model (no verifier in the reward) on 1-2 digit addition.

    python scripts/train_reward_model.py --out runs/rm_arithmetic          # ~3000 steps
    python scripts/train.py --config configs/reward_model_arithmetic.py --workdir runs/rm_grpo

The tiny reward model (trained on the task's own preferences, exported as a Hugging Face
`Qwen2ForSequenceClassification`) is scored on device inside the RL step; the task's token
verifier only measures. metrics.jsonl logs `reward/reward_model` (what the policy is
trained on) beside `reward/correct` (the true accuracy) and `reward/reward_model_agreement`;
reward hacking is the reward model's score rising while the accuracy does not.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # No reference model: as the quickstart.
    config.reward.components = "reward_model"  # The reward model alone (weight 1); the token
    #                                            verifier measures correctness only.
    config.reward.reward_model_path = "runs/rm_arithmetic"  # From scripts/train_reward_model.py.
    config.eval.every = 50
    return config
