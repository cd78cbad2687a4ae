"""On-policy distillation on 1-2 digit addition: GRPO plus a teacher's per-token reverse KL.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart  # teacher
    python scripts/train.py --config configs/distill_arithmetic.py --workdir runs/distill \
        --config.rl.teacher=runs/quickstart

The student is a fresh warm-up (as the quickstart's); the teacher (`rl.teacher`: any
scripts/train.py workdir with a checkpoint, e.g. a finished quickstart run, or a Hugging Face
directory of the same tokenizer) scores every sampled token inside the same compiled step,
and each token's advantage gains −w·(log π_student − log π_teacher) beside the verifier's
group advantage (`train/distill.py`). metrics.jsonl logs `distill/reverse_kl`, the per-token
reverse KL to the teacher over training. `--config.rl.teacher_divergence=jsd` uses GKD's
generalised JSD (β = `rl.teacher_jsd_beta`) instead.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0                # No reference model: as the quickstart.
    config.rl.teacher = "runs/quickstart"  # The teacher run (see the docstring).
    config.rl.teacher_coef = 1.0           # w: the per-token term beside the verifier's.
    config.eval.every = 50
    return config
