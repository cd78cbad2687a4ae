"""Process (step) rewards with min-form credit assignment (PURE) and REINFORCE++.

The quickstart's set-up (1-2 digit addition with worked column sums, supervised warm-up)
trained with REINFORCE++ on the outcome reward plus 0.5 x the arithmetic step checker's
verdict on each worked column sum, placed on the token that ends the step. Min-form
(`rl.process_form="min"`): a token's return is the worst step still ahead of it (exactly,
T = 0), so tokens after the first wrong column sum keep a low return while those before a
late mistake are not blamed for it. Scored on the host (split path). Options:
`--config.rl.process_form=sum` (summed step rewards), `--config.rl.process_gate=True`
(step rewards only in completions with a correct final answer),
`--config.rl.process_temperature=0.1` (PURE's softmin weights instead of the exact min).

    python scripts/train.py --config configs/process_min_arithmetic.py --workdir runs/process_min
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="reinforce_pp")
    config.rl.process_weight = 0.5
    config.rl.process_form = "min"
    config.rl.steps = 150
    config.eval.every = 50
    return config
