"""rlvr_jax: reinforcement learning with verifiable rewards for language models, in JAX."""
from setuptools import find_packages, setup

RUNTIME = [
    "jax>=0.10",
    "flax>=0.12",
    "optax>=0.2.8",
    "orbax-checkpoint>=0.12",
    "ml-collections>=1.1",
    "sentencepiece>=0.2",
    "tokenizers>=0.23",
    "safetensors>=0.8",
    "numpy>=2.0",
    "tqdm>=4.66",
]

EXTRAS = {
    # torch==2.13.0 is the CPU build; torch/transformers are only a numeric-parity reference.
    "test": ["chex>=0.1.92", "pytest>=9.0", "pytest-timeout>=2.4", "torch==2.13.0", "transformers>=5.0"],
    "math": ["math-verify>=0.9"],
    "tfds": ["tensorflow-datasets", "array_record", "importlib_resources"],
    "viz": ["tensorboard", "matplotlib"],
}

setup(
    name="rlvr_jax",
    version="0.1.0",
    description="JAX-native reinforcement learning with verifiable rewards (RLVR) for language models.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["rlvr_jax", "rlvr_jax.*"]),
    package_data={"rlvr_jax": ["assets/*"]},
    install_requires=RUNTIME,
    extras_require=EXTRAS,
)
