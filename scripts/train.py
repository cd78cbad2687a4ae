"""Train a policy with RL from a config file.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart \
        [--config.rl.steps=50 ...]
"""
import os
import sys

from absl import app, flags
from ml_collections import config_flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for metrics, checkpoints, summary.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    from rlvr_jax.train import run
    run(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    app.run(main)
