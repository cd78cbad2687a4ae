"""The reproduction lab: findings as declarative specs (`spec`), a resumable runner over arms ×
seeds (`runner`), seed-level statistics and verdicts (`stats`), plots (`plots`).
Entry point: scripts/reproduce.py; results: docs/findings.md."""
from rlvr_jax.lab.spec import Check, EvalSpec, Finding, WARMUP, load, names  # noqa: F401
