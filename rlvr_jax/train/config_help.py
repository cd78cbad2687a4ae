"""Every config field with its default and its comment, for `scripts/train.py --help`.

The comments are the ones in the source: `# ...` after `c.section.field = value` (and the
comment lines that continue it) in `train/config.py`, the `Attributes:` of `RLConfig` for
`rl.*` fields of the update, and the `Fields:` of `distributed.default_config`.
"""
import inspect
import re
from typing import Dict, List, Tuple

import ml_collections

from rlvr_jax import distributed
from rlvr_jax.train import config as config_lib
from rlvr_jax.train import rl_config

_ASSIGN = re.compile(r"^\s*c\.([\w.]+)\s*=.*?#\s?(.*)$")
_CONTINUED = re.compile(r"^\s*#\s{10,}(.*)$")  # "    #      more" under a field's comment.


def _source_comments() -> Dict[str, str]:
    """{dotted field: comment} from the assignments in train/config.py."""
    out, last = {}, None
    for line in inspect.getsource(config_lib).splitlines():
        match, more = _ASSIGN.match(line), _CONTINUED.match(line)
        if match:
            last = match.group(1)
            out[last] = match.group(2).strip()
        elif more and last is not None:
            out[last] += " " + more.group(1).strip()
        else:
            last = None
    return out


def _docstring_entries(doc: str, section: str) -> Dict[str, str]:
    """{name: text} from a Google-style docstring section (`names: text` + indented lines);
    "a, b: text" gives both names the text."""
    out, names, inside = {}, [], False
    for line in inspect.cleandoc(doc or "").splitlines():
        if line.strip() == f"{section}:":
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith(" " * 4):
            if not line.startswith(" " * 2):
                break
            head, _, text = line.strip().partition(": ")
            names = [n.strip() for n in head.split(",")]
            for name in names:
                out[name] = text.strip()
        elif line.strip():
            for name in names:
                out[name] += " " + line.strip()
    return out


def field_help(config: ml_collections.ConfigDict) -> List[Tuple[str, object, str]]:
    """[(dotted field, current value, help text or "")] for every leaf of `config`."""
    comments = _source_comments()
    rl_docs = _docstring_entries(rl_config.RLConfig.__doc__, "Attributes")
    dist_docs = _docstring_entries(distributed.default_config.__doc__, "Fields")
    out, rank = [], _source_order(list(comments) + ["rl." + k for k in rl_docs] +
                                  ["distributed." + k for k in dist_docs])

    def walk(node, prefix):
        # Source order, not alphabetical: a "..." comment continues the field above it.
        for key in sorted(node.keys(), key=lambda k: (rank.get(prefix + k, len(rank)), k)):
            dotted, value = prefix + key, node[key]
            if isinstance(value, ml_collections.ConfigDict) and dotted not in (
                    "data.task_kwargs", "data.mixture_tasks"):
                walk(value, dotted + ".")
                continue
            text = comments.get(dotted, "")
            if not text and dotted.startswith("rl."):
                text = rl_docs.get(key, "")
            if not text and dotted.startswith("distributed."):
                text = dist_docs.get(key, "")
            out.append((dotted, value, text))

    walk(config, "")
    return out


def _source_order(names: List[str]) -> Dict[str, int]:
    """{dotted name or section: position of its first field in `names`}."""
    rank: Dict[str, int] = {}
    for i, name in enumerate(names):
        parts = name.split(".")
        for j in range(1, len(parts) + 1):
            rank.setdefault(".".join(parts[:j]), i)
    return rank


def format_help(config: ml_collections.ConfigDict, width: int = 100) -> str:
    """The fields as `--config.a.b=DEFAULT  text` lines (text wrapped under the name)."""
    import textwrap
    lines = []
    for dotted, value, text in field_help(config):
        if isinstance(value, ml_collections.ConfigDict):
            value = value.to_dict()
        lines.append(f"  --config.{dotted}={value!r}")
        if text:
            lines += textwrap.wrap(text, width=width, initial_indent=" " * 6,
                                   subsequent_indent=" " * 6)
    return "\n".join(lines)
