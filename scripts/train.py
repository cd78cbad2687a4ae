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


def _check_overrides(argv):
    """Unknown `--config.a.b=...` keys fail here with a clear message, not a traceback."""
    config_path = None
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            config_path = arg.split("=", 1)[1]
        elif arg == "--config" and i + 1 < len(argv):
            config_path = argv[i + 1]
    keys = [a[len("--config."):].split("=", 1)[0] for a in argv if a.startswith("--config.")]
    if not config_path or not keys or not os.path.isfile(config_path):
        return  # absl reports a missing or unreadable --config itself.
    import importlib.util
    from rlvr_jax.train.config import check_key
    spec = importlib.util.spec_from_file_location("_config", config_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    for key in keys:
        try:
            check_key(config, key)
        except ValueError as e:
            sys.exit(f"error: {e}")


if __name__ == "__main__":
    _check_overrides(sys.argv[1:])
    app.run(main)
