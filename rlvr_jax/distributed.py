"""Multi-host start-up through `jax.distributed`, and process-0 coordination.

One program runs on every host; `initialize(config.distributed)` joins them
into one JAX runtime so that `jax.devices()` lists every host's devices and a
single mesh (`sharding.make_mesh`) spans them all. Call it first thing, before
anything touches a device.

    TPU pod / multi-slice:  initialize() with no fields set: JAX discovers the
                            coordinator from the TPU metadata.
    GPU cluster (SLURM, Open MPI): same, JAX reads the scheduler's variables.
    Anything else:          set coordinator_address ("host:port" of process 0),
                            num_processes and process_id on each process.

Logging, metric files and progress bars should be written only where
`is_main_process()`; checkpoints are written by orbax, which coordinates the
processes itself (every process must call save/restore).
"""
import os
from typing import Any, Mapping

import jax
import ml_collections

# Environment variables that show we run under a multi-process launcher whose
# settings `jax.distributed.initialize()` discovers by itself.
_CLUSTER_ENV = (
    "JAX_COORDINATOR_ADDRESS",        # set by hand or by a launcher
    "TPU_WORKER_HOSTNAMES",           # Cloud TPU VM pods
    "MEGASCALE_COORDINATOR_ADDRESS",  # TPU multi-slice
    "SLURM_STEP_NUM_TASKS",           # srun
    "OMPI_COMM_WORLD_SIZE",           # mpirun (Open MPI)
)


def default_config() -> ml_collections.ConfigDict:
    """The `config.distributed` block read by `initialize`.

    Fields:
      enabled: None = auto (initialize when a cluster launcher is detected or
        any field below is set), True = always, False = never (single process).
      coordinator_address: "host:port" of process 0; None = discover.
      num_processes, process_id: None = discover.
      local_device_ids: devices this process uses (GPU: one process per GPU).
      initialization_timeout: seconds to wait for every process to join.
    """
    return ml_collections.ConfigDict({
        "enabled": ml_collections.config_dict.placeholder(bool),
        "coordinator_address": ml_collections.config_dict.placeholder(str),
        "num_processes": ml_collections.config_dict.placeholder(int),
        "process_id": ml_collections.config_dict.placeholder(int),
        "local_device_ids": ml_collections.config_dict.placeholder(list),
        "initialization_timeout": 300,
    })


def _get(config: Any, name: str, default: Any = None) -> Any:
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def _cluster_detected() -> bool:
    for name in _CLUSTER_ENV:
        value = os.environ.get(name)
        if not value:
            continue
        if name == "TPU_WORKER_HOSTNAMES":
            if "," in value:  # One hostname = a single-host TPU VM.
                return True
        elif name in ("SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE"):
            if value.isdigit() and int(value) > 1:
                return True
        else:
            return True
    return False


_INITIALIZED = False


def initialize(config: Any = None) -> bool:
    """Joins this process to the multi-process JAX runtime when configured.

    Args:
      config: `config.distributed` (ConfigDict or dict, fields of
        `default_config`); None = auto-detect only.

    Returns:
      True if `jax.distributed.initialize` was called (now or earlier), False
      when running as a single process.

    Raises:
      ValueError: explicit settings that are incomplete or inconsistent.
    """
    global _INITIALIZED
    if _INITIALIZED:
        return True
    enabled = _get(config, "enabled")
    address = _get(config, "coordinator_address")
    num_processes = _get(config, "num_processes")
    process_id = _get(config, "process_id")
    local_device_ids = _get(config, "local_device_ids")
    explicit = any(v is not None for v in (address, num_processes, process_id))
    if enabled is False:
        if explicit:
            raise ValueError("distributed.enabled=False but coordinator/process fields are set")
        return False
    if enabled is None and not explicit and not _cluster_detected():
        return False
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    if process_id is not None and num_processes is not None and not (
            0 <= process_id < num_processes):
        raise ValueError(f"process_id {process_id} is not in [0, {num_processes})")
    if (process_id is None) != (num_processes is None) and address is not None:
        raise ValueError("with coordinator_address, set both num_processes and process_id")
    kwargs = {"initialization_timeout": int(_get(config, "initialization_timeout", 300))}
    if address is not None:
        kwargs["coordinator_address"] = address
    if num_processes is not None:
        kwargs["num_processes"] = int(num_processes)
    if process_id is not None:
        kwargs["process_id"] = int(process_id)
    if local_device_ids is not None:
        kwargs["local_device_ids"] = list(local_device_ids)
    jax.distributed.initialize(**kwargs)
    _INITIALIZED = True
    return True


def shutdown() -> None:
    """Leaves the multi-process runtime (optional; JAX also does this at exit)."""
    global _INITIALIZED
    if _INITIALIZED:
        jax.distributed.shutdown()
        _INITIALIZED = False


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def is_main_process() -> bool:
    """True on process 0: the one that logs, writes metrics and prints."""
    return jax.process_index() == 0


def sync(name: str) -> None:
    """Barrier: returns once every process has reached `sync(name)`."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices(name)


def broadcast_from_main(value: Any) -> Any:
    """Process 0's value of a pytree of host arrays/scalars, on every process
    (e.g. a seed or a run name chosen at start-up)."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils
    return multihost_utils.broadcast_one_to_all(value)



# ----------------------------------------------------------------------------- host reads
#
# On several processes a batch-sharded `jax.Array` is spread over hosts: `np.asarray` of it
# fails ("spans non-addressable devices"). Every read of a device array on the host goes
# through `to_host` (one host needs all the rows: a collective that every process calls) or
# `my_rows` / `gather_rows` (each host handles its share of the rows, then all shares are
# gathered back, in process order).

def _readable(x) -> bool:
    return not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated


def to_host(tree: Any) -> Any:
    """`tree` with every array as a numpy array of its whole (global) value, on every process.

    Arrays this process can read (single-process, or fully replicated) are read directly;
    global arrays spread over processes are gathered with
    `multihost_utils.process_allgather` — a collective: every process must call `to_host`
    on the same arrays in the same order.
    """
    import numpy as np
    leaves, treedef = jax.tree.flatten(tree)
    spread = [i for i, x in enumerate(leaves) if not _readable(x)]
    if spread:
        from jax.experimental import multihost_utils
        gathered = multihost_utils.process_allgather([leaves[i] for i in spread], tiled=True)
        for i, value in zip(spread, gathered):
            leaves[i] = value
    return jax.tree.unflatten(treedef, [np.asarray(x) for x in leaves])


def my_rows(n: int) -> slice:
    """The contiguous share of `n` rows this process handles on the host (host scoring):
    `np.array_split` order, process 0 first; all of them with one process."""
    return slice(*_share(n, jax.process_count(), jax.process_index()))


def gather_rows(tree: Any, n: int) -> Any:
    """Every process's `my_rows(n)` share (a pytree of numpy arrays [share, ...]) joined
    into the whole [n, ...] on every process (a collective). Scalars are summed over the
    processes (e.g. error counts)."""
    import numpy as np
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils
    count = jax.process_count()
    width = -(-n // count)
    leaves, treedef = jax.tree.flatten(tree)

    def pad(x):
        x = np.asarray(x)
        return x if x.ndim == 0 else np.concatenate(
            [x, np.zeros((width - len(x),) + x.shape[1:], x.dtype)])
    stacked = multihost_utils.process_allgather([pad(x) for x in leaves])  # [count, ...]
    sizes = [b - a for a, b in (_share(n, count, i) for i in range(count))]
    out = [np.sum(s, axis=0) if np.ndim(x) == 0 else
           np.concatenate([s[i, :sizes[i]] for i in range(count)])
           for x, s in zip(leaves, stacked)]
    return jax.tree.unflatten(treedef, out)


def _share(n: int, count: int, index: int):
    base, extra = divmod(n, count)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def check_same_on_all_processes(tree: Any, what: str) -> None:
    """Raises ValueError (one line naming `what`, e.g. the data source) unless every
    process holds the same host values in `tree` (a hash compared across processes; a
    collective). A no-op with one process."""
    if jax.process_count() == 1:
        return
    import hashlib

    import numpy as np
    from jax.experimental import multihost_utils
    digest = hashlib.blake2b(digest_size=16)
    for x in jax.tree.leaves(tree):
        x = np.ascontiguousarray(x)
        digest.update(f"{x.dtype}{x.shape}".encode())
        digest.update(x.tobytes())
    mine = np.frombuffer(digest.digest(), np.int32)
    everyone = np.asarray(multihost_utils.process_allgather(mine))  # [processes, 4]
    differ = [i for i in range(len(everyone)) if not np.array_equal(everyone[i], everyone[0])]
    if differ:
        raise ValueError(f"{what}: the batch that every process must hold whole differs on "
                         f"processes {differ} from process 0's (the data source must give "
                         "every process the same batches: same files, same seed, same order)")
