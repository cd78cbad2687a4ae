"""REINFORCE++ with PRIME's implicit process rewards on 1-2 digit addition.

    python scripts/train.py --config configs/implicit_prm_arithmetic.py --workdir runs/prime

The quickstart's set-up trained on the on-device outcome reward plus 0.5 x the implicit
PRM's dense per-token rewards β·(log π_φ − log π_ref) (`scoring.implicit_prm`): φ and π_ref
start as copies of the warmed-up policy, and after each RL step φ takes one Adam step of
PRIME's cross-entropy between σ(Σ_t r_t) and the verifier's verdict — an outcome-trained
model read as a process reward. Logged: `prime/loss`, `prime/accuracy` (the implicit
outcome reward's sign agrees with the verdict), `prime/token_reward`.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="reinforce_pp")
    config.rl.kl_coef = 0.0
    config.reward.components = "token,implicit_prm"  # All on device: one program.
    config.reward.implicit_prm_beta = 0.05
    config.reward.implicit_prm_lr = 1e-5
    config.rl.process_weight = 0.5
    config.rl.process_source = "learned"
    config.rl.steps = 150
    config.eval.every = 50
    return config
