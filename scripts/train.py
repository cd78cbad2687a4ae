"""Train a policy with RL from a config file.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart \
        [--config.rl.steps=50 ...] [--debug]

A problem with the command, the config, a file, the data or the workdir ends the run
before anything is compiled, with one line on stderr and exit status 2 (`--debug` shows
the traceback). See `rlvr_jax/train/cli.py`.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

if __name__ == "__main__":
    from rlvr_jax.train.cli import main
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if status:  # Skip interpreter shutdown: no library noise after the error line.
        os._exit(status)
