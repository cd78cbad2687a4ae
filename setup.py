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
    "absl-py>=2.0",
    "jinja2>=3.1",
]

EXTRAS = {
    "math": ["math-verify>=0.9"],
    "parquet": ["pyarrow>=15"],
    # TFDS array_record data sources; no TensorFlow needed.
    "tfds": ["tensorflow-datasets>=4.9", "array_record>=0.8", "importlib_resources>=6"],
    # TensorBoard event files and PNG plots (install `tensorboard` itself to view the logs).
    "viz": ["tensorboardX>=2.6", "matplotlib>=3.8"],
    # Weights & Biases logging (`--config.log_wandb=PROJECT`).
    "wandb": ["wandb>=0.31"],
}
# torch==2.13.0 is the CPU build; torch/transformers are only a numeric-parity reference.
# The tests also exercise every optional extra.
EXTRAS["test"] = sorted(set(
    ["chex>=0.1.92", "pytest>=9.0", "pytest-timeout>=2.4", "torch==2.13.0", "transformers>=5.0", "peft>=0.21",
     "nbformat>=5.10", "nbclient>=0.10", "ipykernel>=6.29", "pytest-xdist>=3.5",
     "hypothesis>=6.100"]
    + EXTRAS["math"] + EXTRAS["parquet"] + EXTRAS["tfds"] + EXTRAS["viz"] + EXTRAS["wandb"]))

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
