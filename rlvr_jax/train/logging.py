"""Metrics to `metrics.jsonl` (one JSON object per line), TensorBoard events, optionally
Weights & Biases (`train/wandb_log.py`), and a progress bar."""
import json
import logging
import math
import os
import sys
import time
from typing import Dict, Optional

from tqdm import tqdm

_log = logging.getLogger("rlvr_jax")


EVENTS_SUFFIX = ".rlvr"


class TensorBoardScalars:
    """Scalar TensorBoard events in `logdir`, with the metric names kept verbatim as tags.

    (`tensorboardX.SummaryWriter.add_scalar` would rename `eval/pass@1` to `eval/pass_1`;
    TensorBoard itself accepts any tag, so the Summary proto is written directly.)
    Event files end in `EVENTS_SUFFIX`; with `replace=True` earlier ones in `logdir` are
    deleted first (the caller replays what should stay, see `MetricsWriter`).
    """

    def __init__(self, logdir: str, *, replace: bool = False):
        from tensorboardX import FileWriter
        from tensorboardX.proto.summary_pb2 import Summary
        if replace:
            for name in os.listdir(logdir):
                if name.startswith("events.out.tfevents.") and name.endswith(EVENTS_SUFFIX):
                    os.remove(os.path.join(logdir, name))
        self._summary = Summary
        self._writer = FileWriter(logdir, filename_suffix=EVENTS_SUFFIX)

    def add_scalars(self, step: int, metrics: Dict[str, float], *, walltime: float) -> None:
        values = [self._summary.Value(tag=k, simple_value=float(v)) for k, v in metrics.items()]
        self._writer.add_summary(self._summary(value=values), int(step), walltime)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def tensorboard_writer(logdir: str, *, replace: bool = False) -> Optional[TensorBoardScalars]:
    """A `TensorBoardScalars` on `logdir`, or None (with an INFO line, shown by
    `train.py --verbose`) when the optional `tensorboardX` package (the `viz` extra) is not
    installed."""
    try:
        return TensorBoardScalars(logdir, replace=replace)
    except ImportError:
        _log.info("tensorboardX is not installed (pip install 'rlvr_jax[viz]'); "
                  "writing metrics.jsonl only")
        return None


class MetricsWriter:
    """Appends `{"step": s, "phase": ..., "time": ..., **metrics}` lines to workdir/metrics.jsonl
    and, when `tensorboard` is on and tensorboardX is installed, writes every metric as a
    TensorBoard scalar (tag = metric name, e.g. `eval/pass@1`) to event files in `workdir`.

    With `wandb_project`, every record also goes to a W&B run (`wandb_log.WandbScalars`,
    opened at the first write). Only the main process writes on multi-host runs (pass
    `enabled=False` elsewhere).
    Non-finite floats are written as null in the JSONL so every line stays valid JSON
    (TensorBoard receives them as NaN/Inf).

    The JSONL file is the record: opening a writer on a workdir that already has one (a
    resumed run, whose file the loop cut back to the checkpoint) rewrites the TensorBoard
    events from its lines, so TensorBoard shows no duplicated or orphaned steps.
    """

    def __init__(self, workdir: str, *, enabled: bool = True, filename: str = "metrics.jsonl",
                 tensorboard: bool = True, wandb_project: str = ""):
        self.enabled, self._wandb_project, self._wandb = enabled, wandb_project, None
        self.path = os.path.join(workdir, filename)
        self._file = open(self.path, "a", encoding="utf-8") if enabled else None
        self._tb = None
        if enabled and tensorboard:
            self._tb = tensorboard_writer(workdir, replace=True)
            if self._tb is not None and os.path.getsize(self.path) > 0:
                for record in read_metrics(self.path):
                    self._tb.add_scalars(record["step"], _numbers(record),
                                         walltime=record.get("time") or time.time())
                self._tb.flush()

    @property
    def tensorboard(self) -> Optional[TensorBoardScalars]:
        """The TensorBoard writer, or None when TensorBoard logging is off."""
        return self._tb

    def write(self, step: int, metrics: Dict[str, float], *, phase: str = "rl") -> None:
        if not self.enabled:
            return
        now = time.time()
        record = {"step": int(step), "phase": phase, "time": now}
        values = {key: float(value) for key, value in metrics.items()}
        for key, value in values.items():
            record[key] = value if math.isfinite(value) else None
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            self._tb.add_scalars(step, values, walltime=now)
            self._tb.flush()
        if self._wandb_project and self._wandb is None:
            from rlvr_jax.train.wandb_log import WandbScalars
            self._wandb = WandbScalars(self._wandb_project, self.path)
        if self._wandb is not None:
            self._wandb.add_scalars(step, values, walltime=now)

    @property
    def wandb(self):
        """The `wandb_log.WandbScalars` once the first record was written, else None."""
        return self._wandb

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


class SampleWriter:
    """Appends a few sampled completions per logging step to workdir/samples.jsonl.

    One line per completion: {"step", "prompt", "answer", "completion", "reward"}, so you can
    read what the policy writes as training goes (e.g. `tail -f runs/x/samples.jsonl`).
    """

    def __init__(self, workdir: str, *, enabled: bool = True, filename: str = "samples.jsonl"):
        self.path = os.path.join(workdir, filename)
        self._file = open(self.path, "a", encoding="utf-8") if enabled else None

    def offset(self) -> Optional[int]:
        """The file's length in bytes (what a checkpoint records), or None when disabled."""
        return os.path.getsize(self.path) if self._file is not None else None

    def write(self, step: int, examples, completions, rewards, num_samples: int) -> None:
        """Completion j belongs to prompt j // num_samples of `examples` (rows are grouped)."""
        if self._file is None:
            return
        for j, (text, reward) in enumerate(zip(completions, rewards)):
            example = examples[j // num_samples]
            record = {"step": int(step), "prompt": example.prompt, "answer": example.answer,
                      "completion": text, "reward": float(reward)}
            self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _numbers(record: dict) -> Dict[str, float]:
    """The metric values of a metrics.jsonl record (null -> NaN)."""
    return {k: math.nan if v is None else float(v) for k, v in record.items()
            if k not in ("step", "phase", "time") and (v is None or (
                isinstance(v, (int, float)) and not isinstance(v, bool)))}


def read_metrics(path: str) -> list:
    """The records of a metrics.jsonl file (a list of dicts). A last line cut short (a run
    killed mid-write: no newline, not JSON) is left out; a bad line anywhere else is a
    ValueError naming its 1-based line number."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            if number == len(lines):  # No newline after it: the write was cut short.
                break
            raise ValueError(f"line {number}: not JSON ({e})") from None
    return records


def read_tensorboard_scalars(logdir: str) -> Dict[str, list]:
    """`{tag: [(step, value), ...]}` from the event files in `logdir` (needs tensorboardX).

    A small reader for tests and scripts that avoids the full `tensorboard` package: event
    files are TFRecord streams (8-byte length, 4-byte CRC, payload, 4-byte CRC) of `Event`
    protos.
    """
    import struct

    from tensorboardX.proto import event_pb2
    out: Dict[str, list] = {}
    names = sorted(n for n in os.listdir(logdir) if n.startswith("events.out.tfevents."))
    for name in names:
        with open(os.path.join(logdir, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((int(event.step), float(value.simple_value)))
    return out


class _Bar(tqdm):
    """A tqdm bar whose first step (which compiles) is out of its rate and ETA, and whose
    `set_postfix` waits for the next redraw (tqdm's own redraws at once, which on a
    non-terminal stream would write one line per step whatever `mininterval`)."""

    _first_done = False

    def update(self, n=1):
        if self.disable or self._first_done:
            return super().update(n)
        self._first_done = True    # Before any redraw: no ETA from the compile step.
        self.n += n
        exclude_compile(self)
        self.refresh()
        return True

    def set_postfix(self, ordered_dict=None, refresh=False, **kwargs):
        super().set_postfix(ordered_dict, refresh=refresh, **kwargs)


LIBRARY_LOGGERS = ("absl", "jax", "jaxlib", "orbax", "etils", "rlvr_jax")


def configure_library_logs(verbose: bool = False) -> None:
    """The command line's log levels: the libraries' INFO lines (orbax's per-save lines via
    absl, jax's "Unable to initialize backend 'tpu'", ...) hidden, WARNING and above shown,
    whatever level the root logger has; with `verbose` they are shown, on stderr."""
    level = logging.INFO if verbose else logging.WARNING
    if verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level)
        if not verbose:  # A full disk: the run reports it in one line (train/checkpoint.py).
            logging.getLogger(name).addFilter(_not_disk_full)
    if not verbose and not getattr(sys.unraisablehook, "quiet_closed_loop", False):
        sys.unraisablehook = _quiet_closed_loop(sys.unraisablehook)


def _quiet_closed_loop(hook):
    """`hook` (`sys.unraisablehook`) without the "Event loop is closed" errors that
    tensorstore's I/O threads report when a failed orbax save (a full disk) has closed its
    event loop: the run reports the failure itself, in one line."""
    def quiet(unraisable):
        value = unraisable.exc_value
        if not (isinstance(value, RuntimeError) and str(value) == "Event loop is closed"):
            hook(unraisable)
    quiet.quiet_closed_loop = True
    return quiet


def _not_disk_full(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    return not any("No space left on device" in str(x) for x in (record.getMessage(), exc))


def progress_bar(total: int, desc: str, *, initial: int = 0):
    """A tqdm bar on stderr (ETA included); disabled when RLVR_JAX_NO_PROGRESS=1 and on every
    process but process 0. Its rate
    is the average since the first step (which compiles) ended, not an EMA that a slow
    first step distorts;
    `initial` steps (done by an earlier, resumed run) count as done but not in the rate.
    Where stderr is not a terminal (a log file, a notebook cell) it redraws every 30 s
    instead of every second, so the output stays short."""
    import jax  # Only process 0 of a multi-process run shows one.
    disable = os.environ.get("RLVR_JAX_NO_PROGRESS") == "1" or jax.process_index() != 0
    interactive = getattr(sys.stderr, "isatty", lambda: False)()
    return _Bar(total=total, desc=desc, file=sys.stderr, disable=disable, dynamic_ncols=True,
                mininterval=1.0 if interactive else 30.0, smoothing=0.0, initial=initial)


def exclude_compile(bar) -> None:
    """Restarts `bar`'s clock after a phase's first step (which includes compiling it), so
    the rate and ETA count only the steps that follow."""
    if getattr(bar, "disable", True):
        return
    now = bar._time()
    bar.start_t, bar.last_print_t, bar.initial = now, now, bar.n
