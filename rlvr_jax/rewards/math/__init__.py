"""Math answer rewards: final-answer extraction, normalisation and equivalence.

Two verifiers share one interface ``(completion: str, reference) -> float``:

* :func:`math_reward` — our rule verifier (pure Python, no dependencies, bounded work).
  Exact rational arithmetic for integers of any size, fractions, ``\\frac``, percentages,
  decimals, repeating decimals and simple expressions; numeric evaluation at fixed points
  for expressions in variables; intervals, inequalities, tuples, vectors and matrices,
  unordered sets / unions / solution lists, answer-choice letters and units.
* :func:`math_verify_reward` — the ``math-verify`` library (the ``math`` extra), imported
  lazily, on the same extracted and normalised answer; its timeouts stay on.

Modules: :mod:`.extract` (which span is the answer), :mod:`.normalize` (its canonical
form), :mod:`.parse` (scalar expressions), :mod:`.equiv` (equivalence), :mod:`.forms`
(ratios, equations, decimal commas, vectors, set notations, unions), :mod:`.units` (units,
degrees), :mod:`.choices` (option letters vs listed values), :mod:`.verifiers` (the reward
functions). Both verifiers are audited on labelled answer pairs by
``scripts/audit_verifier.py``; the measured false-negative / false-positive rates per class
are in ``docs/verifiers.md``.
"""
from rlvr_jax.rewards.math.equiv import answers_equivalent
from rlvr_jax.rewards.math.extract import extract_answer, extract_boxed
from rlvr_jax.rewards.math.normalize import normalize_answer
from rlvr_jax.rewards.math.parse import MAX_ANSWER_CHARS
from rlvr_jax.rewards.math.verifiers import (get_math_verifier, math_reward,
                                             math_verify_available, math_verify_reward)

__all__ = ["MAX_ANSWER_CHARS", "answers_equivalent", "extract_answer", "extract_boxed",
           "get_math_verifier", "math_reward", "math_verify_available", "math_verify_reward",
           "normalize_answer"]
