"""rlvr_jax: reinforcement learning with verifiable rewards for language models, in JAX.

Submodules are imported lazily so that ``from rlvr_jax import losses`` pulls in
only what it needs.
"""
import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "advantages", "losses", "evaluation", "models", "sampling", "sharding",
    "rewards", "scoring", "tasks", "data", "train", "distributed", "perf",
)


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"rlvr_jax.{name}")
    raise AttributeError(f"module 'rlvr_jax' has no attribute {name!r}")
