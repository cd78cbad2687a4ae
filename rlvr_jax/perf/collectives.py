"""The collectives of a compiled program, per step, read from its partitioned HLO text.

    compiled, hlo = compile_partitioned(jitted.lower(*abstract_args))
    rows = collectives(hlo)       # [{"kind", "dtype", "bytes", "count"}], per program run
    print(format_table(rows))

`compile_partitioned` compiles once and also returns the module as XLA's SPMD partitioner
left it (an `xla_dump_to` dump of the pass "spmd-partitioning"): that is the program's own
communication. The CPU backend later rewrites every bf16 collective to float32 (its pass
"float-normalization-bf16": the CPU has no bf16 arithmetic), which a GPU or TPU does not, so
reading `compiled.as_text()` on CPU would report float32 gathers of bf16 weights.

An all-reduce whose every use is a dynamic-slice of its 1/k share counts as a reduce-scatter
(the partitioner's spelling of one; XLA's ReduceScatterCreator rewrites it on GPU and TPU).

Bytes of one collective: the larger of its per-device operand and result (an all-gather's
gathered result, a reduce-scatter's unreduced operand, an all-reduce's buffer), times how
often it runs per program run: collectives inside a `while` body count once per trip when
the loop's condition compares its counter with a constant (`lax.scan`, `fori_loop` with
static bounds). A loop whose trip count the data decide (the packed micro-batch loop; the
sampler's decode loops, whose conditions also test the live rows) counts once and its rows
carry `"dynamic_trips": True`; `dynamic_loop_per_trip` gives one trip's bytes of such loops.
"""
import glob
import os
import re
import shutil
import tempfile
from collections import defaultdict
from typing import Dict, List, Tuple

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "bf16": 2, "f16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_SHAPE = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128)\[([\d,]*)\]")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\((.*)\)\s*->.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([\w\-]+)\((.*)$")
_OP_KINDS = {k: k for k in KINDS}
_OP_KINDS.update({f"{k}-start": k for k in KINDS})


def _shape_bytes(text: str) -> Tuple[int, str]:
    """(bytes, dtype of the first array) of a shape text, e.g. "(f32[4,8], bf16[2])"."""
    total, dtype = 0, None
    for dt, dims in _SHAPE.findall(text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _BYTES.get(dt, 4)
        dtype = dtype or dt
    return total, dtype or "?"


def _parse(hlo: str):
    """{computation: {"instrs": [(name, shape, op, rest)], "shapes": {name: shape}}}, entry."""
    comps, entry, current = {}, None, None
    for line in hlo.splitlines():
        m = _HEADER.match(line)
        if m:
            current = m.group(2)
            comps[current] = {"instrs": [], "shapes": {}, "root": None}
            if m.group(1):
                entry = current
            continue
        if current is None:
            continue
        m = _INSTR.match(line)
        if m:
            name, shape, op, rest = m.groups()
            comps[current]["instrs"].append((name, shape, op, rest))
            comps[current]["shapes"][name] = shape
            if line.lstrip().startswith("ROOT"):
                comps[current]["root"] = name
    return comps, entry


def _trip_count(comps, condition: str):
    """The constant a scan-style loop condition compares its counter with, else None: only
    when that compare is the condition's root. A condition that also tests data (the
    sampler's `t < limit & live rows > size`) bounds the counter, not the trips (its loops
    share the N decode steps, each starting where the last stopped)."""
    comp = comps.get(condition)
    if comp is None or not comp["instrs"]:
        return None
    consts = {n: r for n, s, op, r in comp["instrs"] if op == "constant"}
    root = comp["root"] or comp["instrs"][-1][0]
    for name, _, op, rest in comp["instrs"]:
        if name == root and op == "compare" and "direction=LT" in rest:
            for arg in re.findall(r"%([\w.\-]+)", rest.split(")")[0]):
                if arg in consts:
                    value = re.match(r"\s*(-?\d+)\s*\)", consts[arg])
                    if value:
                        return int(value.group(1))
    return None


def _sliced(comp, name: str, size: int) -> bool:
    """Whether every use of all-reduce `name` is a dynamic-slice of a 1/k share (k > 1): the
    SPMD partitioner's spelling of a reduce-scatter, which XLA's ReduceScatterCreator pass
    rewrites into one on GPU and TPU (the CPU pipeline keeps the pair)."""
    users = [(shape, op) for _, shape, op, rest in comp["instrs"]
             if re.search(rf"%{re.escape(name)}[,)]", rest.split("),")[0] + ")")]
    return bool(users) and all(
        op == "dynamic-slice" and 0 < _shape_bytes(shape)[0] < size
        and size % _shape_bytes(shape)[0] == 0 for shape, op in users)


def records(hlo: str) -> List[Dict]:
    """Every collective instruction of an HLO module: [{"kind", "dtype", "dims" (of the larger
    of its operand and result: the full tensor), "bytes" (one run), "times" (runs per program
    run), "dynamic_trips", "loop" (the body of the innermost enclosing data-dependent loop,
    "" for none), "loop_times" (runs per trip of that loop)}]."""
    comps, entry = _parse(hlo)
    out = []

    def visit(name: str, times: int, dynamic: bool, depth: int = 0, loop: str = "",
              inner: int = 1):
        comp = comps.get(name)
        if comp is None or depth > 64:
            return
        for instr_name, shape, op, rest in comp["instrs"]:
            kind = _OP_KINDS.get(op)
            if kind:
                args = re.findall(r"%([\w.\-]+)", rest.split(")")[0])
                shapes = [comp["shapes"].get(a, "") for a in args]
                operand = sum(_shape_bytes(x)[0] for x in shapes)
                result, dtype = _shape_bytes(shape)
                if op.endswith("-start"):  # Async result tuples hold operand and result.
                    result = result - operand if result > operand else result
                if kind == "all-reduce" and _sliced(comp, instr_name, result):
                    kind = "reduce-scatter"
                full = shape if result >= operand or not shapes else shapes[0]
                dims = _SHAPE.search(full)
                out.append({"kind": kind, "dtype": dtype, "bytes": max(operand, result),
                            "dims": tuple(int(d) for d in dims.group(2).split(",") if d)
                            if dims else (), "times": times, "dynamic_trips": dynamic,
                            "loop": loop, "loop_times": inner})
            if op == "while":
                body = re.search(r"body=%?([\w.\-]+)", rest)
                cond = re.search(r"condition=%?([\w.\-]+)", rest)
                known = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest)
                trips = int(known.group(1)) if known else _trip_count(comps, cond.group(1))
                if trips is not None:
                    visit(body.group(1), times * trips, dynamic, depth + 1, loop, inner * trips)
                else:
                    visit(body.group(1), times, True, depth + 1, body.group(1))
            elif op in ("call", "conditional", "async-start"):  # Not fusions, reductions.
                for callee in re.findall(r"(?:calls|branch_computations|true_computation|"
                                         r"false_computation)=\{?([%\w.\-, ]+)", rest):
                    for c in re.findall(r"[\w.\-]+", callee):
                        visit(c, times, dynamic, depth + 1, loop, inner)

    visit(entry, 1, False)
    return out


def collectives(hlo: str) -> List[Dict]:
    """Collectives of one run of an HLO module: [{"kind", "dtype", "bytes", "count"}, ...]
    summed by (kind, dtype), largest bytes first (plus "dynamic_trips": True where a loop of
    data-dependent length was counted once)."""
    table = defaultdict(lambda: {"bytes": 0, "count": 0, "dynamic_trips": False})
    for r in records(hlo):
        row = table[(r["kind"], r["dtype"])]
        row["bytes"] += r["bytes"] * r["times"]
        row["count"] += r["times"]
        row["dynamic_trips"] |= r["dynamic_trips"]
    rows = [{"kind": k, "dtype": dt, **v} for (k, dt), v in table.items()]
    for r in rows:
        if not r["dynamic_trips"]:
            del r["dynamic_trips"]
    return sorted(rows, key=lambda r: -r["bytes"])


def dynamic_loop_per_trip(hlo: str) -> List[Dict]:
    """Per (kind, dtype): the largest bytes one trip of a data-dependent loop moves (over
    those loops' bodies; e.g. one decode step of the sampler at its full batch, whose loops
    `collectives` counts once each), [{"kind", "dtype", "bytes", "count"}], largest first.
    Times the N - 1 decode steps it bounds a rollout's decode traffic."""
    per = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in records(hlo):
        if r["dynamic_trips"] and r["loop"]:
            cell = per[r["loop"]][(r["kind"], r["dtype"])]
            cell[0] += r["bytes"] * r["loop_times"]
            cell[1] += r["loop_times"]
    best = {}
    for cells in per.values():
        for key, (b, n) in cells.items():
            if b > best.get(key, (0, 0))[0]:
                best[key] = (b, n)
    return sorted(({"kind": k, "dtype": dt, "bytes": b, "count": n}
                   for (k, dt), (b, n) in best.items()), key=lambda r: -r["bytes"])


def compile_partitioned(lowered, compiler_options=None):
    """(compiled, the partitioned HLO text) of a `jax.stages.Lowered`, in one compile (the
    persistent compilation cache is off for it: a cached executable runs no passes to dump)."""
    import jax
    from jax._src import compilation_cache as cc  # Its "checked, not used" switch: private.
    tmp = tempfile.mkdtemp(prefix="rlvr_hlo_")
    saved = (cc._cache_checked, cc._cache_used)
    try:
        cc._cache_checked, cc._cache_used = True, False
        options = dict(compiler_options or {}, xla_dump_to=tmp,
                       xla_dump_hlo_pass_re="spmd-partitioning", xla_dump_hlo_as_text=True)
        compiled = lowered.compile(compiler_options=options)
        found = sorted(glob.glob(os.path.join(tmp, "*after_spmd-partitioning*.txt")))
        if not found:  # One device: nothing is partitioned, the compiled module is the program.
            if len(compiled.input_shardings[0]) and any(
                    len(s.device_set) > 1 for s in jax.tree.leaves(compiled.input_shardings)):
                raise RuntimeError("XLA wrote no partitioned module to read the collectives from")
            return compiled, compiled.as_text()
        with open(found[-1]) as f:
            return compiled, f.read()
    finally:
        cc._cache_checked, cc._cache_used = saved
        shutil.rmtree(tmp, ignore_errors=True)


def format_table(rows: List[Dict]) -> str:
    """A markdown table of `collectives` rows in MiB per step."""
    lines = ["| kind | dtype | count | MiB per step |", "|---|---|---|---|"]
    for r in rows:
        trips = " (a data-dependent loop counted once)" if r.get("dynamic_trips") else ""
        lines.append(f"| {r['kind']} | {r['dtype']} | {r['count']} | "
                     f"{r['bytes'] / 2 ** 20:,.1f}{trips} |")
    return "\n".join(lines)
