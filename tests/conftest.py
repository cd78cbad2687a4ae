"""Test set-up: 8 fake CPU devices, strict rank promotion, a persistent compile cache.

XLA_FLAGS must be set before jax is imported anywhere, which is why this file
sets it at import time (pytest imports conftest.py first).
"""
import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

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
