"""Metrics to `metrics.jsonl` (one JSON object per line) and a progress bar."""
import json
import math
import os
import sys
import time
from typing import Dict

from tqdm.auto import tqdm


class MetricsWriter:
    """Appends `{"step": s, "phase": ..., "time": ..., **metrics}` lines to workdir/metrics.jsonl.

    Only the main process writes on multi-host runs (pass `enabled=False` elsewhere).
    Non-finite floats are written as null so every line stays valid JSON.
    """

    def __init__(self, workdir: str, *, enabled: bool = True, filename: str = "metrics.jsonl"):
        self.enabled = enabled
        self.path = os.path.join(workdir, filename)
        self._file = open(self.path, "a", encoding="utf-8") if enabled else None

    def write(self, step: int, metrics: Dict[str, float], *, phase: str = "rl") -> None:
        if not self.enabled:
            return
        record = {"step": int(step), "phase": phase, "time": time.time()}
        for key, value in metrics.items():
            value = float(value)
            record[key] = value if math.isfinite(value) else None
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_metrics(path: str) -> list:
    """The records of a metrics.jsonl file (a list of dicts)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def progress_bar(total: int, desc: str):
    """A tqdm bar on stderr (ETA included); quiet when stderr is not a terminal and CI is set."""
    disable = os.environ.get("RLVR_JAX_NO_PROGRESS") == "1"
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=disable, dynamic_ncols=True,
                mininterval=1.0)
