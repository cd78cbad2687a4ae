"""The reproduction lab: findings as declarative specs (`spec`), a resumable runner over arms ×
seeds (`runner`), seed-level statistics (`stats`), verdicts (`verdict`), static checks of the
arms (`audit`), held-out prompt sets and the warm-up criterion (`heldout`), plots (`plots`)
and markdown tables (`report`). Entry point: scripts/reproduce.py; results:
docs/findings.md."""
from rlvr_jax.lab.spec import (WARMUP, Check, EvalSpec, Finding, Gate, Prereg,
                               WarmupCriterion, load, names)

__all__ = ["WARMUP", "Check", "EvalSpec", "Finding", "Gate", "Prereg", "WarmupCriterion", "load",
           "names"]
