"""`Checkpointer`: periodic, asynchronous, atomic checkpoints of a `TrainState` (orbax).

A checkpoint at step `s` is the directory `<directory>/<s>/` holding two items:

  state/   the `TrainState` pytree (params, optimizer state, rng, step, ...), written by
           orbax's array serialisation, one shard per device (works on any mesh);
  extra/   a small JSON dict the loop needs to continue exactly: the data loader
           position, the phase, the metrics.jsonl offset, the last evaluation.

Atomicity: orbax writes a step into `<s>.orbax-checkpoint-tmp-<n>/` and renames it to
`<s>/` only after every file is written (and, on multi-host runs, after all processes
finished). `latest_step()` and `restore()` only ever see renamed, complete steps; a
process killed mid-save leaves a tmp directory that is ignored and deleted the next time
a `Checkpointer` opens the directory. Old steps are deleted only after a newer one is
complete, so the latest good checkpoint survives a kill at any moment.

Integrity: once orbax has finished a step, process 0 writes `<s>/checksums.json` (size and
blake2b of every file; `train/integrity.py`); a run, `evaluate.py` and `convert_checkpoint.py`
verify the newest step before using it and fall back to the newest intact one.

Asynchrony: `save` copies the arrays off the device and returns; the files are written by
a background thread while training continues (the state may be donated to the next step
right away). Only one save is in flight: the next `save` (or `wait`, `close`) waits for
the previous one.
"""
import contextlib
import errno
import os
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers

from rlvr_jax.train import integrity

_STATE, _EXTRA = "state", "extra"


def abstract_like(tree) -> Any:
    """`jax.ShapeDtypeStruct`s (with shardings) standing for the arrays of `tree`.

    Leaves that are already `ShapeDtypeStruct`s are kept; `None` subtrees stay `None`.
    """
    def one(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        if isinstance(x, jax.Array):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
        raise ValueError(f"abstract state leaves must be jax.Arrays or ShapeDtypeStructs, got "
                         f"{type(x).__name__}")
    return jax.tree.map(one, tree)


def nonfinite_leaves(tree) -> list:
    """Key paths of the floating-point arrays of `tree` that hold a NaN or an Inf."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    floats = [(path, x) for path, x in leaves
              if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)]
    if not floats:
        return []
    ok = jax.device_get(_all_finite([x for _, x in floats]))
    return [jax.tree_util.keystr(path) for (path, _), good in zip(floats, ok) if not good]


@jax.jit
def _all_finite(arrays):
    return [jnp.all(jnp.isfinite(x)) for x in arrays]


def _is_disk_full(e: BaseException) -> bool:
    while e is not None:
        if (isinstance(e, OSError) and e.errno == errno.ENOSPC) or \
                "No space left on device" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _pytree_restore(abstract, *, partial: bool = False):
    return ocp.args.PyTreeRestore(
        abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
        partial_restore=partial)


class Checkpointer:
    """Saves and restores `(state, extra)` pairs under `directory`, one sub-directory a step.

    Args:
      directory: where the steps live (created if missing); made absolute.
      max_to_keep: how many of the newest complete checkpoints to keep (>= 1).
      save_interval_steps: `save(step, ...)` writes only when `step % interval == 0`,
        `force=True`, the directory has no checkpoint yet, or (multi-host TPU/GPU jobs)
        JAX reports a preemption signal (orbax's default decision policies).
      async_save: write in a background thread (True) or before `save` returns.
    """

    def __init__(self, directory: str, *, max_to_keep: int = 3, save_interval_steps: int = 1,
                 async_save: bool = True):
        if max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
        if save_interval_steps < 1:
            raise ValueError(f"save_interval_steps must be >= 1, got {save_interval_steps}")
        self.directory = os.path.abspath(os.fspath(directory))
        self._async = async_save
        options = ocp.CheckpointManagerOptions(
            save_interval_steps=save_interval_steps,  # (+ orbax's save-on-preemption)
            preservation_policy=checkpoint_managers.LatestN(max_to_keep),
            enable_async_checkpointing=async_save,
            cleanup_tmp_directories=True,   # Remove what a killed save left behind.
            create=True)
        self._manager = ocp.CheckpointManager(
            self.directory, options=options,
            item_handlers={_STATE: ocp.PyTreeCheckpointHandler(),
                           _EXTRA: ocp.JsonCheckpointHandler()})

    def save(self, step: int, state, extra: Optional[Dict[str, Any]] = None, *,
             force: bool = False, check_finite: bool = True) -> bool:
        """Starts saving `state` (a pytree of jax.Arrays) and `extra` (JSON) as `step`.

        Returns whether a save was started (False when the interval skips this step or
        `step` is already saved). Raises what a previous asynchronous save raised, and
        FloatingPointError (writing nothing) when `check_finite` and a floating-point
        array of `state` holds a NaN or an Inf.
        """
        step = int(step)
        if step in self._manager.all_steps() or not (force or self._manager.should_save(step)):
            return False
        if check_finite:
            bad = nonfinite_leaves(state)
            if bad:
                self.wait()  # The save in flight (if any) is the latest good one.
                raise FloatingPointError(
                    f"refusing to checkpoint step {step}: non-finite values in "
                    f"{bad[:5]}{' ...' if len(bad) > 5 else ''}; the latest checkpoint stays "
                    f"step {self.latest_step()}")
        self.wait()  # (orbax would wait too) The previous step is complete: sealed.
        args = ocp.args.Composite(**{_STATE: ocp.args.PyTreeSave(state),
                                     _EXTRA: ocp.args.JsonSave(dict(extra or {}))})
        with self._disk_full_is_one_line():
            started = self._manager.save(step, args=args, force=force)
        if started and not self._async:
            self._seal()
        return started

    def all_steps(self) -> Tuple[int, ...]:
        """The complete checkpoints on disk, oldest first."""
        return tuple(sorted(self._manager.all_steps()))

    def latest_step(self) -> Optional[int]:
        """The newest complete checkpoint, or None."""
        return self._manager.latest_step()

    def restore(self, step: Optional[int], abstract_state) -> Tuple[Any, Dict[str, Any]]:
        """`(state, extra)` of `step` (None: the latest).

        `abstract_state` gives the structure, shapes, dtypes and shardings of the result: a
        `TrainState` of jax.Arrays (e.g. a freshly initialised one placed on the mesh) or
        of `jax.ShapeDtypeStruct`s with `sharding` set. Every array is read straight into
        its target sharding, so this works on any mesh, also one that differs from the
        mesh the checkpoint was written on.
        """
        step = self._complete_step(step)
        abstract = abstract_like(abstract_state)
        args = ocp.args.Composite(**{_STATE: _pytree_restore(abstract),
                                     _EXTRA: ocp.args.JsonRestore()})
        restored = self._manager.restore(step, args=args)
        return restored[_STATE], dict(restored[_EXTRA] or {})

    def restore_params(self, step: Optional[int] = None, abstract_params=None, *,
                       field: str = "params"):
        """One field of the saved state (default the policy parameters), nothing else read.

        For evaluation and conversion scripts that need no optimizer state. With
        `abstract_params` None the arrays come back with their saved shapes and dtypes on
        the first local device; otherwise in the given shardings.
        """
        step = self._complete_step(step)
        if abstract_params is None:
            tree = self.metadata(step)
            if field not in tree:
                raise KeyError(f"the saved state has no field {field!r}; has {sorted(tree)}")
            device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
            abstract_params = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), tree[field])
        abstract = {field: abstract_like(abstract_params)}
        restored = self._manager.restore(step, args=ocp.args.Composite(
            **{_STATE: _pytree_restore(abstract, partial=True)}))
        return restored[_STATE][field]

    def metadata(self, step: Optional[int] = None) -> Dict[str, Any]:
        """The saved state as a nested dict of `jax.ShapeDtypeStruct`s (no sharding)."""
        step = self._complete_step(step)
        tree = self._manager.item_metadata(step)[_STATE].tree
        return jax.tree.map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), tree,
                            is_leaf=lambda m: hasattr(m, "shape") and hasattr(m, "dtype"))

    def _complete_step(self, step: Optional[int]) -> int:
        if step is None:
            step = self.latest_step()
        if step is None or step not in self._manager.all_steps():
            raise FileNotFoundError(f"no complete checkpoint for step {step} in "
                                    f"{self.directory}; have {list(self.all_steps())}")
        return step

    def read_extra(self, step: Optional[int] = None) -> Dict[str, Any]:
        """Only the JSON `extra` of `step` (None: the latest), without reading any array."""
        step = self._complete_step(step)
        restored = self._manager.restore(
            step, args=ocp.args.Composite(**{_EXTRA: ocp.args.JsonRestore()}))
        return dict(restored[_EXTRA] or {})

    def wait(self) -> None:
        """Blocks until the save in flight (if any) is complete, visible and sealed."""
        with self._disk_full_is_one_line():
            self._manager.wait_until_finished()
            self._seal()

    @contextlib.contextmanager
    def _disk_full_is_one_line(self):
        """A full disk during a save: the partial step removed, then one OSError(ENOSPC)."""
        try:
            yield
        except Exception as e:  # orbax / tensorstore wrap the OSError in their own types.
            if not _is_disk_full(e):
                raise
            if jax.process_index() == 0:
                integrity.clean_tmp(self.directory)
            raise OSError(errno.ENOSPC, f"no space left on device while saving a checkpoint in "
                          f"{self.directory} (the partial save was removed; the latest complete "
                          f"step is {self._manager.latest_step()}); free space and rerun the same "
                          "command to resume") from None

    def close(self) -> None:
        """Waits for the save in flight, then releases orbax's threads."""
        self.wait()
        self._manager.close()

    def _seal(self) -> None:
        """Process 0 writes the checksums of the complete steps that have none yet."""
        if jax.process_index() == 0:
            for step in self._manager.all_steps():
                integrity.seal(os.path.join(self.directory, str(step)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def disk_full_error(ckpt: Optional[Checkpointer], e: OSError) -> OSError:
    """The one-line error of a full disk (`e`), after the save in flight of `ckpt` (if any)
    was stopped and its partial directory removed."""
    latest = None
    if ckpt is not None:
        try:
            ckpt.close()
        except Exception:  # noqa: BLE001 (the save in flight fails the same way)
            pass
        if jax.process_index() == 0:
            integrity.clean_tmp(ckpt.directory)
        latest = integrity.newest_good(ckpt.directory)[0]
    what = f"writing {e.filename}" if e.filename else "writing the run's files"
    kept = f"the latest complete checkpoint is step {latest}" if latest is not None else \
        "no checkpoint was saved"
    return OSError(errno.ENOSPC, f"no space left on device ({what}); {kept}; free space and "
                   "rerun the same command to resume")


def load_run(run_dir: str, *, tokenizer, step: Optional[int] = None):
    """(ModelConfig, params) of a training run's checkpoint (`scripts/train.py --workdir`).

    The model is rebuilt from `<run_dir>/config.json`; the policy parameters are read from
    `<run_dir>/checkpoints` (the latest complete step unless `step`). A LoRA run's are its
    adapters attached to its frozen base (`train/adapters.py`; quantized if it was)."""
    import json

    import ml_collections

    from rlvr_jax.train.build import build_model_config
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found (expected a scripts/train.py workdir)")
    with open(config_path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    model_config = build_model_config(config, tokenizer)
    directory = os.path.join(run_dir, "checkpoints")
    step = checked_step(directory, step)  # Read first: opening a Checkpointer creates the dir.
    ckpt = Checkpointer(directory)
    try:
        params = ckpt.restore_params(step)
    except (OSError, RuntimeError, KeyError, TypeError) as e:  # Damage checksums cannot see.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"{directory}: the step-{step} checkpoint is unreadable ({first})") \
            from e
    finally:
        ckpt.close()
    if model_config.lora_rank:  # The checkpoint holds the adapters; the base is saved once.
        from rlvr_jax.models import lora
        from rlvr_jax.train import adapters
        params = lora.attach(adapters.load_base(run_dir, config, model_config), params)
    return model_config, params


def checked_step(directory: str, step: Optional[int] = None) -> int:
    """`step` (None: the newest intact step) of `directory` after verifying its checksums;
    damaged newer steps are skipped with a one-line notice on stderr (and left where they
    are: a training run moves them aside). Raises FileNotFoundError / ValueError (one line)."""
    import sys
    steps = integrity.steps(directory)
    if not steps or (step is not None and step not in steps):
        have = f"steps {steps}" if steps else "no complete checkpoint"
        raise FileNotFoundError(f"{directory}: {have}; train with --config.checkpoint.every=N "
                                "to keep checkpoints")
    if step is not None:
        problem = integrity.verify(os.path.join(directory, str(step)))
        if problem:
            raise ValueError(f"{directory}: the step-{step} checkpoint is damaged ({problem})")
        return step
    good, damaged = integrity.newest_good(directory)
    if good is None:
        raise ValueError(integrity.describe(directory, good, damaged, moved=False))
    if damaged:
        print(integrity.describe(directory, good, damaged, moved=False), file=sys.stderr)
    return good
