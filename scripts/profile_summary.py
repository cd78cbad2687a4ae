"""Summarises a `jax.profiler` trace folder: device time per kernel name, largest first.

    python scripts/profile_summary.py TRACE_DIR [--top 40]

Reads the newest `*.xplane.pb` under TRACE_DIR with `jax.profiler.ProfileData` and sums
event durations on the device planes (`/device:GPU:0`, ...), so a profile can be read where
it was taken, without TensorBoard.
"""
import argparse
import collections
import glob
import os


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir")
    parser.add_argument("--top", type=int, default=40)
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
            for event in line.events:
                per_name[event.name] += event.duration_ns
                count[event.name] += 1
            total = sum(per_name.values())
            if not total:
                continue
            print(f"== {plane.name} / {line.name}: {total / 1e6:.2f} ms in "
                  f"{sum(count.values())} events")
            for name, ns in per_name.most_common(args.top):
                print(f"{ns / 1e6:9.3f} ms {100 * ns / total:5.1f}% "
                      f"x{count[name]:6d}  {name[:110]}")


if __name__ == "__main__":
    main()
