"""Checkpoint integrity: checksums of a step's files, verified before a step is used.

`seal(step_dir)` writes `<step_dir>/checksums.json` ({relative path: [size, blake2b hex]} of
every file of the step) once orbax has finished the step (process 0). `verify(step_dir)`
says what is wrong with a step (a missing, truncated or changed file; for a step a kill left
unsealed, a missing or empty metadata file) or None. `newest_good(directory)` walks the
steps newest first and returns the newest verifying one with the damaged ones above it;
`set_aside` renames a damaged step to `<step>.damaged` (never deleted); `clean_tmp` removes
what a killed save left (`*.orbax-checkpoint-tmp*`).
"""
import hashlib
import json
import os
import shutil
from typing import Dict, List, Optional, Tuple

CHECKSUMS = "checksums.json"
TMP_MARK = ".orbax-checkpoint-tmp"
# Written by orbax in every complete step (a step saved before checksums existed, or one
# whose sealing a kill interrupted, is checked against these alone).
REQUIRED = ("_CHECKPOINT_METADATA", "state/_METADATA", "extra/metadata")


def _files(step_dir: str) -> List[str]:
    out = []
    for root, _, names in os.walk(step_dir):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), step_dir)
            if rel != CHECKSUMS and not rel.endswith(".tmp"):
                out.append(rel)
    return sorted(out)


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "blake2b").hexdigest()


def checksums(step_dir: str) -> Dict[str, list]:
    """{relative path: [size in bytes, blake2b hex digest]} of the files of `step_dir`."""
    return {rel: [os.path.getsize(os.path.join(step_dir, rel)),
                  _digest(os.path.join(step_dir, rel))] for rel in _files(step_dir)}


def seal(step_dir: str) -> None:
    """Writes `step_dir/checksums.json` (atomically) unless it is there already."""
    path = os.path.join(step_dir, CHECKSUMS)
    if os.path.exists(path) or not os.path.isdir(step_dir):
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(checksums(step_dir), f, indent=0, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def verify(step_dir: str) -> Optional[str]:
    """What is wrong with the checkpoint step `step_dir` (a short phrase), or None."""
    for rel in REQUIRED:
        p = os.path.join(step_dir, rel)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            return f"{rel} is {'empty' if os.path.isfile(p) else 'missing'}"
    try:
        with open(os.path.join(step_dir, CHECKSUMS), encoding="utf-8") as f:
            want = json.load(f)
    except FileNotFoundError:
        return None  # Unsealed (older or interrupted): the structure is all we can check.
    except (OSError, ValueError):
        return f"{CHECKSUMS} is unreadable"
    for rel, (size, digest) in sorted(want.items()):
        p = os.path.join(step_dir, rel)
        if not os.path.isfile(p):
            return f"{rel} is missing"
        if os.path.getsize(p) != size:
            return f"{rel} has {os.path.getsize(p)} bytes, {size} were written"
        if _digest(p) != digest:
            return f"{rel} does not match its checksum"
    return None


def steps(directory: str) -> List[int]:
    """The step directories (named by their number) in `directory`, ascending."""
    if not os.path.isdir(directory):
        return []
    return sorted(int(n) for n in os.listdir(directory)
                  if n.isdigit() and os.path.isdir(os.path.join(directory, n)))


def newest_good(directory: str) -> Tuple[Optional[int], List[Tuple[int, str]]]:
    """(the newest verifying step or None, [(step, what is wrong)] of the damaged newer ones).
    Reads only; older steps than the newest good one are not read."""
    damaged = []
    for step in reversed(steps(directory)):
        problem = verify(os.path.join(directory, str(step)))
        if problem is None:
            return step, damaged
        damaged.append((step, problem))
    return None, damaged


def describe(directory: str, good: Optional[int], damaged: List[Tuple[int, str]],
             moved: bool = True) -> str:
    """The one-line notice about damaged steps (`damaged` non-empty)."""
    what = "; ".join(f"step {s}: {p}" for s, p in damaged)
    where = f"using step {good}" if good is not None else "no intact checkpoint is left"
    aside = " (moved aside as <step>.damaged)" if moved else ""
    return f"{directory}: damaged checkpoint{'s' if len(damaged) > 1 else ''} {what}{aside}; {where}"


def set_aside(directory: str, step: int) -> str:
    """Renames `directory/<step>` to `<step>.damaged` (`.damaged-2`, ... if taken); the path."""
    target, n = os.path.join(directory, f"{step}.damaged"), 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(directory, f"{step}.damaged-{n}")
    os.rename(os.path.join(directory, str(step)), target)
    return target


def clean_tmp(directory: str) -> List[str]:
    """Removes the partial step directories a killed save left; their names."""
    if not os.path.isdir(directory):
        return []
    gone = [n for n in os.listdir(directory) if TMP_MARK in n]
    for name in gone:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return gone
