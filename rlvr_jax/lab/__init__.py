"""The reproduction lab: findings as declarative specs (`spec`), a resumable runner over arms ×
seeds (`runner`), seed-level statistics and verdicts (`stats`), plots (`plots`) and markdown
tables (`report`). Entry point: scripts/reproduce.py; results: docs/findings.md."""
from rlvr_jax.lab.spec import WARMUP, Check, EvalSpec, Finding, load, names

__all__ = ["WARMUP", "Check", "EvalSpec", "Finding", "load", "names"]
