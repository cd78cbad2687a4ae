"""Peak host memory of initialising a model's parameters on a mesh, per process (JSON).

    python scripts/init_memory.py --preset qwen2.5-0.5b                    # 1 process
    python scripts/launch.py --processes 2 --devices-per-process 2 -- \
        scripts/init_memory.py --preset qwen2.5-0.5b                       # 2 processes

Prints one JSON line per process: the parameters' bytes, and `peak_mib` = the process's
peak resident memory (`resource.getrusage`) minus its resident memory once JAX's backend
(and `jax.distributed`) started. `--whole` measures the former path (every process builds
the whole model on the host, then `device_put`s its shards) instead of the born-sharded
init `loop.run` uses (`placer.Placer.init`: `sharding.sharded_init`). On CPU the devices'
memory is the process's, so a process holding half the shards holds half the model.
"""
import argparse
import json
import os
import resource
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="qwen2.5-0.5b")
    parser.add_argument("--whole", action="store_true",
                        help="init the whole model on every process, then shard it")
    args, rest = parser.parse_known_args()
    fields = {}  # --config.distributed.NAME=VALUE from scripts/launch.py; others ignored.
    for arg in rest:
        if arg.startswith("--config.distributed.") and "=" in arg:
            name, value = arg[len("--config.distributed."):].split("=", 1)
            fields[name] = value if name == "coordinator_address" else (
                value == "True" if name == "enabled" else int(value))

    import jax

    from rlvr_jax import distributed, models, sharding
    from rlvr_jax.train import placer as placer_lib
    distributed.initialize(fields or None)
    jax.devices()
    base = _rss_mib()
    cfg = models.presets.get(args.preset, dtype="float32", param_dtype="float32")
    mesh = sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 1})
    placer = placer_lib.Placer(mesh, sharding.get_rules("fsdp"), cfg)
    key = jax.random.PRNGKey(0)
    if args.whole:
        params = placer.params(models.init_params(cfg, key))
    else:
        params = placer.init(lambda k: models.init_params(cfg, k), key)
    jax.block_until_ready(params)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total = sum(x.nbytes for x in jax.tree.leaves(params))
    local = sum(s.data.nbytes for x in jax.tree.leaves(params) for s in x.addressable_shards)
    print(json.dumps({"process": jax.process_index(), "processes": jax.process_count(),
                      "devices": jax.device_count(), "init": "whole" if args.whole else "sharded",
                      "params_mib": round(total / 2**20), "local_shards_mib": round(local / 2**20),
                      "rss_after_backend_mib": round(base), "peak_mib": round(peak - base)}),
          flush=True)
    distributed.sync("init_memory:done")


if __name__ == "__main__":
    main()
