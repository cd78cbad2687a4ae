"""File-tree helpers for tests that check what a command wrote (or did not)."""
import os


def snapshot(root) -> dict:
    """{relative path: bytes} of every file under `root`."""
    out = {}
    for base, _, names in os.walk(root):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out
