"""REINFORCE++ with a learned process reward model's step scores (min-form) on 1-2 digit addition.

    python scripts/train_prm.py --config configs/quickstart.py --labels mc \
        --work runs/prm_work --out runs/prm/arith_mc          # MC step labels, step AUROC
    python scripts/train.py --config configs/prm_arithmetic.py --workdir runs/prm_arith

The quickstart's set-up (tiny model, supervised warm-up) trained on the outcome reward plus
0.5 x the PRM's probability that each worked column sum is right (or still reaches the
answer, with Monte-Carlo labels), read on device at the token ending each step
(`scoring.prm`) and credited min-form (PURE: a token is worth the worst step still ahead).
The task's step checker still runs on the host, only to measure: `process/step_accuracy`
(the oracle) beside `prm/step_score` and `prm/oracle_step_agreement` — the PRM audit
during RL (`scripts/prm_audit.py drift`). Options: `--config.reward.prm_form=progress`
(PAV: the change in the PRM's value across each step), `--config.rl.process_form=sum`.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="reinforce_pp")
    config.rl.kl_coef = 0.0
    config.reward.components = "task,prm"   # The verdict (host) and the PRM (device).
    config.reward.prm_path = "runs/prm/arith_mc"  # From scripts/train_prm.py.
    config.reward.prm_form = "min"
    config.rl.process_weight = 0.5           # α of the PRM's step rewards...
    config.rl.process_source = "learned"     # ...taken from the learned step scorer,
    config.rl.process_oracle_metrics = True  # with the oracle measuring beside it.
    config.rl.steps = 150
    config.eval.every = 50
    return config
