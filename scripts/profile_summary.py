"""Summarises a `jax.profiler` trace folder: device time per kernel name, largest first, and
per op class (matmuls, the decode-attention kernel, reductions, cache writes and copies, other
fusions), optionally per decode step.

    python scripts/profile_summary.py TRACE_DIR [--top 40] [--steps 511]

Reads the newest `*.xplane.pb` under TRACE_DIR with `jax.profiler.ProfileData` and sums
event durations on the device planes (`/device:GPU:0`, ...), so a profile can be read where
it was taken, without TensorBoard; also the span from the first event to the end of the last
and the idle share of it (gaps between kernels: launch latency, host syncs). `--steps N` also prints each class's time divided by N
(the decode steps of the traced rollout: one decode step's profile per op class).
"""
import argparse
import collections
import glob
import os

# (class, substrings of XLA GPU kernel names), first match wins.
CLASSES = (
    ("decode attention kernel", ("decode_attention",)),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul", "dot")),
    ("reduction", ("reduce",)),
    ("cache write / copy", ("dynamic_update_slice", "memcpy", "memset", "copy", "transpose")),
    ("concatenate", ("concatenate",)),
)


def op_class(name: str) -> str:
    """The op class of a kernel name (`CLASSES`), "other fusion" when none matches."""
    low = name.lower()
    for label, keys in CLASSES:
        if any(k in low for k in keys):
            return label
    return "other fusion"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--steps", type=int, default=0,
                        help="decode steps in the trace: also print ms per step per class")
    args = parser.parse_args()
    from jax.profiler import ProfileData
    files = sorted(glob.glob(os.path.join(args.trace_dir, "**", "*.xplane.pb"), recursive=True),
                   key=os.path.getmtime)
    if not files:
        raise SystemExit(f"no *.xplane.pb under {args.trace_dir}")
    data = ProfileData.from_file(files[-1])
    for plane in data.planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            per_name, count = collections.Counter(), collections.Counter()
            first, last = float("inf"), 0.0
            for event in line.events:
                per_name[event.name] += event.duration_ns
                count[event.name] += 1
                first = min(first, event.start_ns)
                last = max(last, event.start_ns + event.duration_ns)
            total = sum(per_name.values())
            if not total:
                continue
            span = last - first  # Busy + gaps between kernels (launches, host syncs).
            print(f"== {plane.name} / {line.name}: {total / 1e6:.2f} ms in "
                  f"{sum(count.values())} events over {span / 1e6:.2f} ms "
                  f"({100 * (1 - total / span):.1f}% idle between them)")
            for name, ns in per_name.most_common(args.top):
                print(f"{ns / 1e6:9.3f} ms {100 * ns / total:5.1f}% "
                      f"x{count[name]:6d}  {name[:110]}")
            _print_classes(per_name, count, total, args.steps)


def _print_classes(per_name, count, total, steps):
    per_class, kernels = collections.Counter(), collections.Counter()
    for name, ns in per_name.items():
        per_class[op_class(name)] += ns
        kernels[op_class(name)] += count[name]
    head = "per class" + (f" (and per decode step, {steps} steps)" if steps else "")
    print(f"-- {head}: ms, share, kernels" + (", ms/step, kernels/step" if steps else ""))
    for label, ns in per_class.most_common():
        row = f"{ns / 1e6:9.3f} ms {100 * ns / total:5.1f}% x{kernels[label]:7d}"
        if steps:
            row += f"  {ns / 1e6 / steps:8.4f} ms/step {kernels[label] / steps:7.1f}/step"
        print(f"{row}  {label}")


if __name__ == "__main__":
    main()
