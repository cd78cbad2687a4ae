"""Checkpoints of the RL loop (`train/loop.py`): opened, saved with the extra the loop needs
to continue exactly, restored (state, adaptive data), and the finite-metrics guard that keeps
the last good checkpoint the latest one.

`r` below is the loop's `Run` (its config, workdir, checkpointer, writers, adaptive data).
"""
import os
from typing import Any, Dict, Optional

import numpy as np

from rlvr_jax import scoring
from rlvr_jax.models import lora
from rlvr_jax.train import adapters
from rlvr_jax.train import workdir as workdir_lib
from rlvr_jax.train.checkpoint import Checkpointer
from rlvr_jax.train.errors import ConfigError
from rlvr_jax.train.state import FROZEN


def open_checkpoints(config, plan: workdir_lib.Plan):
    """(Checkpointer or None, the extra of the checkpoint to resume from or None)."""
    c = config.checkpoint
    directory = os.path.join(plan.workdir, workdir_lib.CHECKPOINTS)
    if c.every <= 0 and plan.resume_step is None:
        return None, None
    ckpt = Checkpointer(directory, max_to_keep=c.keep, save_interval_steps=max(c.every, 1),
                        async_save=c.async_save)
    if plan.resume_step is None:
        return ckpt, None
    return ckpt, ckpt.read_extra(plan.resume_step)


def restore(r, step: int, state):
    """(state, extra) of the checkpoint at `step`, shaped like `state`; a checkpoint that
    does not fit the config (or is damaged in a way its checksums could not show: one saved
    without them) raises `ConfigError` (not orbax's shape text)."""
    try:
        restored, extra = r.ckpt.restore(step, saved_part(r, state))
        if adapters.enabled(r.config):  # The adapters, on the base saved once.
            base = adapters.restore_base(r.workdir, r.config, state.params)
            restored = restored.replace(params=lora.attach(base, restored.params))
        return restored.replace(**{k: getattr(state, k) for k in frozen_fields(r)}), extra
    except (ValueError, TypeError, KeyError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ConfigError(f"--workdir: the step-{step} checkpoint in {r.ckpt.directory} does not "
                          f"fit this config ({first}); use a new --workdir (if the step is "
                          f"damaged instead, rename it to {step}.damaged to resume from the "
                          "one before)") from e


def restore_adaptive(r, resumed) -> None:
    """The adaptive data's state (pass rates, curriculum level, mixture weights) as the
    checkpoint holds it; a checkpoint without it (or with another scheme's) is an error."""
    saved = resumed.get("adaptive")
    if r.adaptive is None and saved is None:
        return
    try:
        if r.adaptive is None or saved is None:
            raise ValueError("adaptive data is " + ("off in this config" if r.adaptive is None
                                                    else "off in the checkpoint"))
        r.adaptive.restore(saved)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"--workdir: the checkpoint's data state does not fit this config's "
                          f"data.filter / data.curriculum / data.mixture ({e}); use a new "
                          "--workdir") from e


def frozen_fields(r) -> tuple:
    """The `TrainState` fields a checkpoint leaves out: the frozen models (`FROZEN`, read
    again from their paths on resume), but not a scoring model that learns during RL (the
    implicit PRM's φ and its optimizer state live in `reward_params`)."""
    learned = isinstance(r.reward_model, scoring.ImplicitPRM)
    return tuple(k for k in FROZEN if not (learned and k == "reward_params"))


def saved_part(r, state):
    """The state a checkpoint holds: all but `frozen_fields(r)` and a LoRA policy's frozen
    base (saved once: `adapters.save_base`)."""
    return state.replace(params=adapters.saved_params(state.params),
                         **dict.fromkeys(frozen_fields(r)))


def saving(r) -> bool:
    return r.ckpt is not None and r.config.checkpoint.every > 0


def checkpoint_extra(r, loader, summary, last_eval) -> Dict[str, Any]:
    """The JSON saved beside the state: what the loop needs to continue exactly."""
    return {"phase": "rl", "loader": loader.state(),
            "adaptive": None if r.adaptive is None else r.adaptive.state(),
            "metrics_offset": os.path.getsize(r.writer.path) if r.writer.enabled else None,
            "samples_offset": r.samples.offset(),
            "after_warmup": {k: float(v) for k, v in summary["after_warmup"].items()},
            "last_eval": {k: float(v) for k, v in last_eval.items()}}


def check_finite(metrics: Dict[str, float], step: int,
                  ckpt: Optional[Checkpointer] = None) -> None:
    """Raises FloatingPointError on a non-finite loss, gradient norm or update norm.

    The step's state is not saved; the save in flight (an earlier, finite step) is
    completed first, so the latest checkpoint on disk is the last good one.
    """
    bad = [k for k in ("train/loss", "train/grad_norm", "train/update_norm") if k in metrics
           and not np.isfinite(metrics[k])]
    if bad:
        where = "no checkpoint was saved"
        if ckpt is not None:
            ckpt.wait()
            last = ckpt.latest_step()
            ckpt.close()
            if last is not None:
                where = f"the last good checkpoint is step {last} in {ckpt.directory}"
        raise FloatingPointError(f"non-finite {bad} at RL step {step}: "
                                 f"{ {k: metrics[k] for k in bad} }; stopping ({where})")
