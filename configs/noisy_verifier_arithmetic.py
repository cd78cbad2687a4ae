"""A noisy verifier and its backward correction (GRPO, the quickstart's set-up).

The token verifier's verdicts are flipped before the update: a correct completion scores 0
with probability 0.2 (false negatives, p1), a wrong one 1 with probability 0.1 (false
positives, p0), seeded (`reward.noise_seed`); the flips are logged every step
(`reward/noise_false_negatives`, `reward/noise_false_positives`) and `reward/correct` stays
the true accuracy. The backward-corrected reward (r̂ − 0.1) / (1 − 0.2 − 0.1) is unbiased for
the true reward (scoring/noise.py). Turn the correction off with
`--config.reward.correction_fn_rate=0 --config.reward.correction_fp_rate=0`; random rewards
(Bernoulli(0.5), the "spurious rewards" control): `--config.reward.noise_fn_rate=0.5
--config.reward.noise_fp_rate=0.5` and no correction. Runs on device (one program).

    python scripts/train.py --config configs/noisy_verifier_arithmetic.py --workdir runs/noisy
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0
    config.reward.noise_fn_rate = 0.2
    config.reward.noise_fp_rate = 0.1
    config.reward.correction_fn_rate = 0.2
    config.reward.correction_fp_rate = 0.1
    config.eval.every = 50
    return config
