"""The shared small-scale set-up of the findings in configs/repro/ (quickstart scale)."""
from rlvr_jax.lab.spec import EvalSpec
from rlvr_jax.train.config import arithmetic_config

# --quick: a smoke run of the whole pipeline (seconds, not a measurement): a one-layer model.
QUICK = {"sft.steps": 3, "rl.steps": 2, "rl.num_prompts": 4, "rl.num_samples": 4,
         "model.n_layers": 1}
RL_STEPS = 100
# pass@k for k = 1..64 from 64 samples per prompt on 128 held-out prompts.
EVAL = EvalSpec(num_prompts=128, num_samples=64, ks=(1, 2, 4, 8, 16, 32, 64), batch_size=32)


def base_config(algorithm: str = "grpo"):
    """configs/quickstart.py's set-up (tiny model, 1-2 digit addition, 400 warm-up steps, no
    KL) with `algorithm`'s preset and RL_STEPS RL steps at the quickstart's learning rate
    (1e-4), 16 prompts x 8 samples per step."""
    config = arithmetic_config(algorithm=algorithm)
    config.rl.kl_coef = 0.0
    config.rl.steps = RL_STEPS
    return config
