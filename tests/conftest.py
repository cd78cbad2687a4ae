"""Test set-up: 8 fake CPU devices, strict rank promotion, a persistent compile cache.

XLA_FLAGS must be set before jax is imported anywhere, which is why this file
sets it at import time (pytest imports conftest.py first); subprocesses the tests start
(scripts, notebooks, a second distributed process) inherit it.

The CPU backend compiles at LLVM optimisation level 0 unless XLA_FLAGS already sets a
level: the HLO optimisation passes still run, only machine-code optimisation is skipped; with tiny
models compile time dominates the suite (measured: a config's one-step run 65 s -> 30 s,
the interrupted-and-resumed run 66 s -> 42 s with an empty compile cache). Fusions are emitted by
XLA CPU's legacy loop emitters (--xla_cpu_use_fusion_emitters=false), which compile far faster at
that level (the model-heavy test files: 150.6 s -> 88.2 s CPU, cold cache; the whole suite on a
fresh clone: tests 5 min 14 s -> 3 min 14 s / 3 min 27 s in two runs, with --dist loadfile). Users' runs keep
XLA's defaults; both change only rounding, which the tolerances (tests/numerics.py) allow for.
"""
import os

_FLAGS = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _FLAGS:
    _FLAGS += " --xla_backend_optimization_level=0"
if "xla_cpu_use_fusion_emitters" not in _FLAGS:
    _FLAGS += " --xla_cpu_use_fusion_emitters=false"
# For a subprocess that must see ONE CPU device (a user's set-up) and compile like the tests
# (machine code at another optimisation level rounds some results differently).
os.environ["RLVR_JAX_TEST_XLA_FLAGS"] = _FLAGS.strip()
os.environ["XLA_FLAGS"] = (_FLAGS + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

if os.environ.get("RLVR_TOLERANCE_AUDIT"):
    from tests.tolerance_audit import install  # noqa: E402
    install(os.environ["RLVR_TOLERANCE_AUDIT"])

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update(
    "jax_compilation_cache_dir",
    os.environ.get("RLVR_JAX_CACHE_DIR", os.path.expanduser("~/.cache/rlvr_jax/jax_cache")))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


@pytest.fixture(scope="session")
def tiny_config():
    """The `tiny` model preset in float32 (shared by every test that needs a model)."""
    from rlvr_jax.models import presets
    return presets.get("tiny", dtype="float32")


@pytest.fixture(scope="session")
def tiny_params(tiny_config):
    """Random parameters of the tiny model, created once per test session."""
    from rlvr_jax.models import transformer
    return transformer.init_params(tiny_config, jax.random.PRNGKey(0))


@pytest.fixture(scope="session")
def tok():
    """The builtin sentencepiece tokenizer of the synthetic tasks."""
    from rlvr_jax.data.tokenizers import load_tokenizer
    return load_tokenizer("builtin")


@pytest.fixture(scope="session")
def model_config(tok):
    """The tiny model sized for the builtin tokenizer (float32)."""
    from rlvr_jax.models import presets
    return presets.get("tiny", vocab_size=tok.vocab_size, dtype="float32")


@pytest.fixture(scope="session")
def params(model_config):
    """Random parameters of `model_config`."""
    from rlvr_jax.models import transformer
    return transformer.init_params(model_config, jax.random.PRNGKey(0))
