"""Bytes a decode step and a whole rollout move (XLA `cost_analysis`), against their minimum.

    step = step_cost(mc, prompts=8, samples=4, prompt_len=32, new_tokens=128, step=64)
    roll = rollout_cost(mc, prompts=8, samples=4, prompt_len=32, new_tokens=128)
    roll["ratio"]   # bytes of every decode step of the rollout / their minimum

The minimum of a decode step: the weights once, the valid K/V, one new K/V slot, and the
[B, V] float32 logits written and read. The compiled program is the sampler's own decode-loop
body (`sampling.decode_step`, layers unrolled, so every layer counts), its state donated.

Fused gathers. XLA's CPU cost model in the pinned jaxlib charges a gather fused into a loop
fusion as a read of its WHOLE operand: the embedding lookup of B tokens counts as a read of
the [V, D] table. Upstream XLA's `HloCostAnalysis::HandleGather` now sets the operand's
utilisation to the gathered fraction, which makes the fused gather read its rows only. Every
result therefore has both `bytes_accessed` (the pinned cost model) and `bytes_gather_rows`
(the same with each fused gather's table charged for the rows it gathers,
`fused_gather_overcount`); the ratios use them as named.
"""
import re
from typing import Dict, Optional

_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
                "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}
_ARRAY = re.compile(r"\b(pred|[su](?:8|16|32|64)|bf16|f(?:16|32|64))\[([\d,]*)\]")


def _array_bytes(text: str) -> int:
    """Bytes of the first array shape in `text`, e.g. 'f32[8192,256]{1,0}' -> 8388608."""
    m = _ARRAY.search(text)
    if not m:
        return 0
    size = _DTYPE_BYTES[m.group(1)]
    for dim in filter(None, m.group(2).split(",")):
        size *= int(dim)
    return size


def fused_gather_overcount(hlo_text: str) -> int:
    """Bytes the pinned cost model over-charges for gathers inside fusions of the entry
    computation of an optimised HLO module (`compiled.as_text()`): for each fused gather
    whose operand 0 is a parameter of the fused computation used by nothing else, that
    parameter's bytes minus the gather's output bytes."""
    computations = {}
    for block in re.split(r"\n(?=\S)", hlo_text):
        header = re.match(r"(ENTRY )?%(\S+) \((.*?)\) -> .*{", block)
        if header:
            computations["ENTRY" if header.group(1) else header.group(2)] = (header.group(3),
                                                                            block)
    if "ENTRY" not in computations:
        return 0
    called = re.findall(r"fusion\(.*?calls=%([\w.\-]+)", computations["ENTRY"][1])
    over = 0
    for name in called:
        params, body = computations.get(name, ("", ""))
        param_bytes = {p: _array_bytes(shape) for p, shape in
                       re.findall(r"([\w.\-]+): (\w+\[[\d,]*\])", params)}
        for out, table in re.findall(r"= (\S+) gather\(%([\w.\-]+),", body):
            uses = len(re.findall(rf"%{re.escape(table)}\b(?!\s*=)", body))
            if table in param_bytes and uses == 1:
                over += max(param_bytes[table] - _array_bytes(out), 0)
    return over


def _compiled_step(mc, rows: int, new_tokens: int, slots: int):
    """`sampling.decode_step` compiled for abstract inputs (rows, a cache of `slots` slots)."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import sampling
    from rlvr_jax.models import decoding, transformer
    sc = sampling.SamplingConfig(temperature=1.0, max_new_tokens=new_tokens, num_samples=1)
    params = jax.eval_shape(lambda: transformer.init_params(mc, jax.random.PRNGKey(0)))
    prepared = jax.eval_shape(lambda p: decoding.prepare_params(p, mc), params)
    cache = jax.eval_shape(lambda: decoding.init_cache(mc, rows, slots))
    vec = lambda dtype: jax.ShapeDtypeStruct((rows,), dtype)  # noqa: E731
    cols = lambda dtype: jax.ShapeDtypeStruct((rows, new_tokens), dtype)  # noqa: E731
    state = (jax.ShapeDtypeStruct((), jnp.int32), cache, vec(jnp.int32), vec(bool),
             cols(jnp.int32), cols(jnp.float32), cols(jnp.int32))
    fn = jax.jit(lambda p, s, k: sampling.decode_step(p, s, k, model_config=mc,
                                                      sampling_config=sc), donate_argnums=(1,))
    return fn.lower(prepared, state, jax.ShapeDtypeStruct((2,), jnp.uint32)).compile(), params


def _measure(mc, rows: int, new_tokens: int, slots: int) -> Dict[str, float]:
    compiled, params = _compiled_step(mc, rows, new_tokens, slots)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    bytes_accessed = float(cost["bytes accessed"])
    return {"flops": float(cost["flops"]), "bytes_accessed": bytes_accessed,
            "bytes_gather_rows": bytes_accessed - fused_gather_overcount(compiled.as_text()),
            "params": params}


def _minimum_parts(mc, params, rows: int):
    """(weights bytes, K/V bytes per slot, logits bytes written and read)."""
    import jax
    import numpy as np
    weights = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
                  for x in jax.tree.leaves(params))
    kv_slot = mc.n_layers * 2 * mc.n_kv_heads * mc.head_dim * rows * mc.compute_dtype.itemsize
    return weights, kv_slot, 2 * rows * mc.vocab_size * 4


def step_cost(mc, prompts: int, samples: int, prompt_len: int, new_tokens: int, step: int,
              cache_slots: Optional[int] = None) -> Dict[str, float]:
    """One decode step with the state at decode step `step` (slots [0, Tp + step) valid) in
    a cache of `cache_slots` slots (default Tp + N - 1, the single-phase loop).

    Returns {"flops", "bytes_accessed", "bytes_gather_rows", "minimum_bytes", "ratio"
    (bytes_accessed / minimum), "ratio_gather_rows", the minimum's parts, "cache_slots",
    "step"}.
    """
    rows = prompts * samples
    slots = cache_slots or prompt_len + new_tokens - 1
    m = _measure(mc, rows, new_tokens, slots)
    weights, kv_slot, logits = _minimum_parts(mc, m.pop("params"), rows)
    minimum = weights + kv_slot * (prompt_len + step) + kv_slot + logits
    return dict(m, minimum_bytes=minimum, ratio=m["bytes_accessed"] / minimum,
                ratio_gather_rows=m["bytes_gather_rows"] / minimum, weights_bytes=weights,
                valid_kv_bytes=kv_slot * (prompt_len + step), logits_write_read_bytes=logits,
                cache_slots=slots, step=step)


def rollout_cost(mc, prompts: int, samples: int, prompt_len: int, new_tokens: int,
                 cache_window: Optional[int] = None) -> Dict[str, float]:
    """Every decode step of a rollout that generates all N tokens (steps 1 … N - 1), with
    the sampler's cache phases for `cache_window` (None: `sampling.auto_cache_window`):
    one compile per phase, its step's bytes counted once per step it runs.

    Returns {"cache_window", "phases" [(cache slots, steps)], "bytes_accessed",
    "bytes_gather_rows", "minimum_bytes" (summed over the steps), "ratio",
    "ratio_gather_rows", "bytes_per_step", "minimum_per_step"}.
    """
    from rlvr_jax import sampling
    sc = sampling.SamplingConfig(max_new_tokens=new_tokens, cache_window=cache_window)
    window = sampling.cache_window_of(sc)
    rows, total, rows_total, minimum, start, phases = prompts * samples, 0.0, 0.0, 0.0, 1, []
    for size in sampling._cache_phases(prompt_len, new_tokens, window):
        limit = min(new_tokens, size - prompt_len + 1)  # As `generate`: steps t < limit.
        if limit <= start:
            continue
        m = _measure(mc, rows, new_tokens, size)
        weights, kv_slot, logits = _minimum_parts(mc, m.pop("params"), rows)
        steps = limit - start
        total += steps * m["bytes_accessed"]
        rows_total += steps * m["bytes_gather_rows"]
        minimum += sum(weights + kv_slot * (prompt_len + t + 1) + logits
                       for t in range(start, limit))
        phases.append((size, steps))
        start = limit
    n_steps = max(sum(s for _, s in phases), 1)
    return {"cache_window": window, "phases": phases, "bytes_accessed": total,
            "bytes_gather_rows": rows_total, "minimum_bytes": minimum,
            "ratio": total / minimum, "ratio_gather_rows": rows_total / minimum,
            "bytes_per_step": total / n_steps, "minimum_per_step": minimum / n_steps}
