"""GRPO + self-verification (RISE, "Trust, But Verify"): the policy also learns to say
whether its own solutions are right, in the same compiled step.

    python scripts/train.py --config configs/self_verify_arithmetic.py --workdir runs/verify

Each step, `rl.verify_groups=4` of the policy's completions are verified G times each: the
prompt, the completion, then "\\nCorrect? ", and the policy's next token is its verdict (`Y`
or `N`), rewarded 1 when it says what the task's verifier said of that completion. The
verification rows take the place of 4 of the 16 groups (those whose rewards are all equal
first: they carry no policy gradient) and are trained in the one update beside the
solving rows (`train/verify.py`). metrics.jsonl logs `verify/accuracy`, `verify/yes_rate`,
`verify/source_correct` (the verified solutions' share of correct ones) and
`verify/solve_correct` (the solving rows' own accuracy; `reward/correct` counts both kinds).
A policy that never writes `Y` or `N` there would get no verification signal, so a quarter
of the warm-up's rows (`sft.verify_fraction=0.25`) are verifications of the worked solution
(verdict `Y`) or of a copy with a wrong final answer (`N`), trained on the verdict only.
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0              # No reference model: as the quickstart.
    config.rl.verify_groups = 4
    config.rl.verify_template = "\nCorrect? "
    config.rl.verify_yes, config.rl.verify_no = "Y", "N"
    config.sft.verify_fraction = 0.25    # A quarter of the warm-up's rows teach the verdict.
    config.eval.every = 50
    return config
