"""The command line of `scripts/train.py`: flags, the config file, overrides, and errors as
one line.

    python scripts/train.py --config configs/quickstart.py --workdir runs/quickstart \
        [--config.rl.steps=50 ...] [--debug] [--verbose]

`main(argv) -> exit status`: 0 when the run finished; 2 for a problem the user can fix (a
flag, the config file, a config value, a file, the data, the workdir), reported as the
last line of stderr, `error: <field or file>: <what is wrong>`, with no traceback unless
`--debug`; 1 when a run stops for another reason (e.g. a non-finite loss, a full disk), also
one line; 143 on SIGTERM, after the current RL step was checkpointed (one line says how to
resume).
The libraries' INFO logs (orbax, jax) are hidden unless `--verbose`.
"""
import errno
import importlib.util
import os
import sys
import traceback
from typing import Callable, List, Optional

USAGE = """usage: python scripts/train.py --config CONFIG.py --workdir DIR [--config.SECTION.KEY=VALUE ...]
                              [--debug] [--verbose]

Trains a policy with RL from an ml_collections config file (see configs/ and README.md).

  --config FILE        experiment config: a Python file with get_config()
  --workdir DIR        where metrics.jsonl, samples.jsonl, summary.json and checkpoints/ go;
                       a new or empty directory starts a run, an interrupted run's directory
                       resumes it (or starts it again if it saved no checkpoint)
  --config.a.b=VALUE   override any config field (all listed below with their comments),
                       e.g. --config.rl.steps=50
  --debug              show the full traceback of an error
  --verbose            show the libraries' INFO logs (orbax, jax, absl), hidden by default
  -h, --help           show this message and every config field (with --config FILE: that
                       file's values)
"""


class UsageError(Exception):
    """A bad command line or config file (reported like `ConfigError`)."""


def main(argv: Optional[List[str]] = None) -> int:
    """Runs `scripts/train.py` with `argv` (without the program name); the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        return print_help(argv)
    debug, verbose = "--debug" in argv, "--verbose" in argv
    argv = [a for a in argv if a not in ("--debug", "--verbose")]
    from rlvr_jax.train.logging import configure_library_logs
    configure_library_logs(verbose)
    from rlvr_jax.train.preempt import Preempted
    from rlvr_jax.train.errors import ConfigError
    try:
        config, workdir = parse(argv)
        from rlvr_jax.train import loop
        loop.run(config, workdir)
        return 0
    except (UsageError, ConfigError) as e:
        return _report(e, 2, debug)
    except FloatingPointError as e:
        return _report(e, 1, debug)
    except Preempted as e:
        sys.stdout.flush()
        print(f"\n{e}", file=sys.stderr, flush=True)  # (After a progress bar's line.)
        return 143
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        print(file=sys.stderr)  # (After a progress bar's line.)
        return _report(RuntimeError(e.strerror or str(e)), 1, debug)
    except KeyboardInterrupt:
        print("\ninterrupted; rerun the same command to resume (or start again)",
              file=sys.stderr)
        return 130


def print_help(argv: List[str]) -> int:
    """Prints the usage and every config field with its value and comment: the values of
    `--config FILE` when one is given (and loads), else the defaults."""
    from rlvr_jax.train.config import default_config
    from rlvr_jax.train.config_help import format_help
    path, config = _flag_value(argv, "config"), None
    if path:
        try:
            config = load_config_file(path)
        except UsageError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    title = (f"config fields (values of {path}):" if config is not None else
             "config fields (defaults; a config file may change them):")
    try:
        print(USAGE)
        print(title)
        print(format_help(config if config is not None else default_config()), flush=True)
    except BrokenPipeError:  # `train.py --help | head`: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (Python's advice)
    return 0


def parse(argv: List[str]):
    """(locked config with the overrides applied, workdir) from the command line."""
    from absl import flags
    from ml_collections import config_flags
    config_path, workdir = _flag_value(argv, "config"), _flag_value(argv, "workdir")
    if not config_path:
        raise UsageError("--config: missing (a config file, e.g. --config configs/quickstart.py)")
    if not workdir:
        raise UsageError("--workdir: missing (a directory for the run's files)")
    base = load_config_file(config_path)
    from rlvr_jax.train.config import check_key
    for key in [a[len("--config."):].split("=", 1)[0] for a in argv if a.startswith("--config.")]:
        try:
            check_key(base, key)
        except ValueError as e:
            raise UsageError(str(e)) from None
    argv = [_split_commas(base, a) for a in argv]
    values = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                             flag_values=values, lock_config=True,
                                             sys_argv=["train.py"] + argv)
    flags.DEFINE_string("workdir", None, "Run directory.", flag_values=values)
    try:
        extra = values(["train.py"] + argv)
    except flags.Error as e:
        raise UsageError(str(e).splitlines()[0]) from None
    if len(extra) > 1:
        raise UsageError(f"unexpected argument(s): {' '.join(extra[1:])}")
    try:
        config = holder.value
    except Exception as e:  # The file loaded above; an override failed to apply.
        raise UsageError(f"{config_path}: {_first_line(e)}") from None
    if config.log_wandb:
        from rlvr_jax.train.wandb_log import require
        try:
            require()
        except ImportError as e:
            raise UsageError(f"log_wandb: {e}") from None
    return config, workdir


def load_config_file(path: str):
    """`get_config()` of the Python file at `path` (as config_flags loads it); a missing
    file, an import error or a failing `get_config` raises `UsageError` naming the file."""
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "no such file"
        raise UsageError(f"--config: {what}: {path}")
    try:
        spec = importlib.util.spec_from_file_location("_rlvr_config", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        raise UsageError(f"{path}: cannot be imported: {type(e).__name__}: {_first_line(e)}") \
            from None
    if not hasattr(module, "get_config"):
        raise UsageError(f"{path}: has no get_config() function")
    try:
        return module.get_config()
    except Exception as e:
        raise UsageError(f"{path}: get_config() failed: {type(e).__name__}: {_first_line(e)}") \
            from None


def _split_commas(base, arg: str) -> str:
    """`--config.x=a,b` -> `--config.x=('a', 'b')` where x is a tuple of strings (as
    `data.task_kwargs.ops`); other arguments are returned as they are."""
    if not arg.startswith("--config.") or "=" not in arg:
        return arg
    key, value = arg[len("--config."):].split("=", 1)
    node = base
    for part in key.split("."):
        node = node[part]
    if isinstance(node, (tuple, list)) and node and all(isinstance(v, str) for v in node) \
            and not value.lstrip().startswith(("(", "[")):
        items = tuple(v.strip() for v in value.split(",") if v.strip())
        return f"--config.{key}={items!r}"
    return arg


def _flag_value(argv: List[str], name: str) -> Optional[str]:
    for i, arg in enumerate(argv):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def script_main(main: Callable[[], object]) -> None:
    """Runs a script's `main()` (the other `scripts/*.py`): a missing file, a bad value or a
    bad config file (`FileNotFoundError`, `ValueError`, `UsageError`) ends the script with
    one `error:` line on stderr and exit status 2; `RLVR_JAX_DEBUG=1` in the environment
    shows the traceback too."""
    try:
        main()
    except (FileNotFoundError, ValueError, UsageError) as e:
        sys.exit(_report(e, 2, os.environ.get("RLVR_JAX_DEBUG") == "1"))


def _report(e: BaseException, status: int, debug: bool) -> int:
    """`error: ...` on stderr: one line, or one per problem of a `ConfigError` that lists
    several (`validate`)."""
    from rlvr_jax.train.errors import ConfigError
    if debug:
        traceback.print_exception(e)
    sys.stdout.flush()
    lines = str(e).strip().splitlines() if isinstance(e, ConfigError) else []
    for line in lines[:20] or [_first_line(e)]:
        print(f"error: {line}", file=sys.stderr, flush=True)
    return status
