"""Cosine length-scaled reward (Yeo et al. 2025, "Demystifying Long Chain-of-Thought
Reasoning in LLMs") with GRPO, the quickstart's set-up.

The reward is the `cosine_length` term alone (the token verifier decides correctness at
weight 0): a correct completion earns 2 at length 0 falling to 1 at L_max on a cosine, a
wrong one -10 rising to 0 (longer thinking is penalised less when wrong), any completion
that reaches L_max = sampling.max_new_tokens (16) earns -10 — the paper's values
(`reward.cosine_*`, scoring/shaping.py). Logged: `reward/cosine_length`,
`reward/cosine_length_exceeded`, and `rollout/response_length_correct` /
`rollout/response_length_incorrect` beside `reward/correct`. Runs on device (one program).

    python scripts/train.py --config configs/cosine_length_arithmetic.py --workdir runs/cosine
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # No reference model: faster on CPU.
    config.reward.components = "cosine_length"
    config.eval.every = 50
    return config
