"""Optional Weights & Biases logging (`--config.log_wandb=PROJECT`, the `wandb` extra).

Every metrics.jsonl record is also logged to a W&B run of PROJECT, against a `step` axis
(`wandb.define_metric`), with the run's config.json as the W&B config. The run's files go
to `<workdir>/wandb/`. `WANDB_MODE=offline` logs there without a network (`wandb sync`
uploads later); other `WANDB_*` variables (entity, API key) work as usual.

The W&B run id comes from the workdir and the time of the run's first metrics line, so a
resumed run continues its W&B run, while a run started again from the beginning (or a new
run in the same directory) gets a new one. After a resume, the steps between the checkpoint
and the interruption are logged twice (W&B keeps both; metrics.jsonl, cut back, has them
once).
"""
import hashlib
import json
import os
from typing import Dict

INSTALL = "pip install -c constraints.txt -e \".[wandb]\""


def require() -> None:
    """Raises ImportError with the install command when the `wandb` package is missing."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ImportError(f"needs the wandb extra: {INSTALL}") from None


class WandbScalars:
    """Scalars of one run to W&B project `project`; `metrics_path` is the run's
    metrics.jsonl, whose first line (already written) fixes the run id (module docstring)."""

    def __init__(self, project: str, metrics_path: str):
        import wandb
        workdir = os.path.dirname(os.path.abspath(metrics_path))
        with open(metrics_path, encoding="utf-8") as f:
            first = json.loads(f.readline())
        run_id = hashlib.blake2b(f"{workdir}:{first['time']!r}".encode(),
                                 digest_size=8).hexdigest()
        config_path = os.path.join(workdir, "config.json")
        config = {}
        if os.path.exists(config_path):
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
        os.makedirs(os.path.join(workdir, "wandb"), exist_ok=True)
        self.run = wandb.init(project=project, dir=workdir, id=run_id, resume="allow",
                              name=os.path.basename(workdir), config=config,
                              settings=wandb.Settings(silent=True, console="off"))
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")

    def add_scalars(self, step: int, metrics: Dict[str, float], *, walltime: float) -> None:
        del walltime  # W&B stamps its own time.
        self.run.log({"step": int(step), **{k: float(v) for k, v in metrics.items()}})

    def flush(self) -> None:
        """(W&B sends in the background.)"""

    def close(self) -> None:
        self.run.finish()
