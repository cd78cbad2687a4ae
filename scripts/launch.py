"""Run a script as N local JAX processes joined by `jax.distributed` (a pod on one machine).

    python scripts/launch.py --processes 2 --devices-per-process 2 -- \
        scripts/train.py --config configs/quickstart.py --workdir runs/qs2

Starts N copies of the script, each with `--config.distributed.*` flags (coordinator on a
free localhost port, process ids 0..N-1) and, on CPU, `XLA_FLAGS` giving it
`--devices-per-process` devices; `--config.mesh.num_devices=0` (every device of every
process) is added unless the command sets it. Output lines are forwarded with a `[i] `
prefix. If one process fails the others are stopped; the exit status is the first
non-zero one (0 when all succeed). Real clusters start one process per host instead:
docs/distributed.md.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import List, Optional


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_command(command: List[str], port: int, num: int, index: int) -> List[str]:
    """The command line of process `index` of `num`: the script with the distributed flags."""
    flags = ["--config.distributed.enabled=True",
             f"--config.distributed.coordinator_address=127.0.0.1:{port}",
             f"--config.distributed.num_processes={num}",
             f"--config.distributed.process_id={index}"]
    if not any(a.startswith("--config.mesh.num_devices") for a in command):
        flags.append("--config.mesh.num_devices=0")
    script = command[0]
    if script.endswith(".py"):
        return [sys.executable, script] + command[1:] + flags
    return command + flags


def process_env(devices: Optional[int]) -> dict:
    env = dict(os.environ)
    if devices:
        flags = [f for f in env.get("XLA_FLAGS", "").split()
                 if not f.startswith("--xla_force_host_platform_device_count")]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def _forward(proc: subprocess.Popen, index: int) -> None:
    for line in proc.stdout:
        sys.stdout.write(f"[{index}] {line}")
        sys.stdout.flush()


def launch(command: List[str], num: int, devices: Optional[int]) -> int:
    """Runs `command` as `num` processes; returns the first non-zero exit status, or 0."""
    port = free_port()
    procs = [subprocess.Popen(process_command(command, port, num, i), env=process_env(devices),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              bufsize=1, start_new_session=True)
             for i in range(num)]
    threads = [threading.Thread(target=_forward, args=(p, i), daemon=True)
               for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    status = 0
    try:
        while None in [p.poll() for p in procs]:  # (A list: every process polled.)
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed:
                status = failed[0].returncode
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        status = 130
    for p in procs:  # A failed or interrupted run: the others would wait forever.
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for t in threads:
        t.join(timeout=5)
    if status == 0:
        status = next((p.returncode for p in procs if p.returncode), 0)
    for i, p in enumerate(procs):
        if p.returncode:
            print(f"[launch] process {i} exited with status {p.returncode}", file=sys.stderr)
    return status


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: launch.py --processes N [--devices-per-process D] -- SCRIPT ARGS...",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--devices-per-process", type=int, default=0,
                        help="CPU devices per process (XLA_FLAGS); 0: leave XLA_FLAGS alone")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if args.processes < 1 or not command:
        parser.error("--processes must be >= 1 and a command must follow --")
    return launch(command, args.processes, args.devices_per_process or None)


if __name__ == "__main__":
    sys.exit(main())
