"""Bytes a decode step and a whole rollout move (XLA `cost_analysis`), against their minimum.

    step = step_cost(mc, prompts=8, samples=4, prompt_len=32, new_tokens=128, step=64)
    roll = rollout_cost(mc, prompts=8, samples=4, prompt_len=32, new_tokens=128)
    roll["ratio"]   # bytes of every decode step of the rollout / their minimum

The minimum of a decode step: the weights it reads, once (the prepared compute-dtype weights;
of the embedding table only the looked-up rows), the valid K/V, one new K/V slot, and the
[B, V] float32 logits written and read. The compiled program is the sampler's own decode-loop
body (`sampling.decode_step`, layers unrolled, so every layer counts), its state donated.

Fused gathers. The pinned jaxlib's CPU cost model charges a gather fused into a loop fusion as
a read of its WHOLE operand: the embedding lookup of B tokens counts as a read of the [V, D]
table. XLA's GPU cost model charges a fused operand by its utilisation, which
`HloCostAnalysis::HandleGather` sets to the gathered fraction. Every result therefore has both
`bytes_accessed` (the backend's cost model) and `bytes_gather_rows` (the same with each fused
gather's table charged for the rows it gathers, `fused_gather_overcount`; applied only where
`cost_model_overcharges_fused_gathers` finds the overcharge); the ratios use them as named.
On CPU the decode step no longer gathers (`models.decoding._embed` copies its B rows by a loop
of slices, which the cost model charges by the rows), so there the two agree.
"""
import functools
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


_UNARY = ("convert", "bitcast", "copy", "reshape")


def fused_gather_overcount(hlo_text: str) -> int:
    """Bytes the pinned CPU cost model over-charges for gathers inside the fusions that the
    entry computation of an optimised HLO module (`compiled.as_text()`) calls: for each fused
    gather whose operand 0 is a fusion parameter (possibly through converts, bitcasts, copies
    or reshapes) used by nothing else, that parameter's bytes minus the gathered rows' bytes
    (the gather's elements at the parameter's element size). Gathers elsewhere (while
    bodies, nested fusions) are not corrected."""
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
        shapes = dict(re.findall(r"([\w.\-]+): (\w+\[[\d,]*\])", params))
        producers = dict(re.findall(r"%([\w.\-]+) = \S+ (?:" + "|".join(_UNARY) +
                                    r")\(%([\w.\-]+)\)", body))
        uses = lambda v: len(re.findall(rf"%{re.escape(v)}\b(?!\s*=)", body))  # noqa: E731
        for out, operand in re.findall(r"= (\S+) gather\(%([\w.\-]+),", body):
            chain = [operand]
            while chain[-1] in producers and len(chain) < 8:
                chain.append(producers[chain[-1]])
            table = chain[-1]
            if table in shapes and all(uses(v) == 1 for v in chain):
                table_bytes = _array_bytes(shapes[table])
                table_elements = table_bytes // _DTYPE_BYTES[shapes[table].split("[")[0]]
                rows = _array_bytes(out) // _DTYPE_BYTES[out.split("[")[0]]
                over += max(table_bytes - table_bytes * rows // max(table_elements, 1), 0)
    return over


@functools.lru_cache(maxsize=None)
def cost_model_overcharges_fused_gathers() -> bool:
    """Whether this backend's cost model charges a bare embedding lookup fused with its
    consumer as a read of the whole table (the pinned jaxlib's CPU model does; a model that
    charges the gathered rows needs no correction)."""
    import jax
    import jax.numpy as jnp
    table = jax.ShapeDtypeStruct((4096, 64), jnp.float32)
    ids = jax.ShapeDtypeStruct((16, 1), jnp.int32)
    compiled = jax.jit(lambda t, i: jnp.sin(jnp.take(t, i, axis=0)).sum(-1)).lower(
        table, ids).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["bytes accessed"]) > 4096 * 64 * 4 / 2


def _prepared(mc):
    """`decoding.prepare_params` of the model's parameters, as abstract arrays."""
    import jax
    from rlvr_jax.models import decoding, transformer
    params = jax.eval_shape(lambda: transformer.init_params(mc, jax.random.PRNGKey(0)))
    return jax.eval_shape(lambda p: decoding.prepare_params(p, mc), params)


def _cost(compiled) -> Dict[str, float]:
    """{"flops", "bytes_accessed", "bytes_gather_rows"} of a compiled program."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    accessed = float(cost["bytes accessed"])
    over = (fused_gather_overcount(compiled.as_text())
            if cost_model_overcharges_fused_gathers() else 0)
    return {"flops": float(cost.get("flops", 0.0)), "bytes_accessed": accessed,
            "bytes_gather_rows": accessed - over}


def _sampler_cache(mc, prompts: int, samples: int, prompt_len: int, slots: int,
                   share: bool = False):
    """The abstract cache of the sampler's decode loop: P prompts' prefill cache of Tp slots
    repeated for (or `share`d by) G samples each (`decoding.resize_cache`), `slots` slots in
    all."""
    import jax
    from rlvr_jax.models import decoding
    return jax.eval_shape(lambda: decoding.resize_cache(
        decoding.init_cache(mc, prompts, prompt_len), slots, samples, share))


def _step(mc, prepared, cache, new_tokens: int) -> Dict[str, float]:
    """The cost of `sampling.decode_step` over the abstract `cache`."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import live_rows, sampling
    sc = sampling.SamplingConfig(temperature=1.0, max_new_tokens=new_tokens, num_samples=1)
    rows = cache["mask"].shape[0]
    vec = lambda dtype: jax.ShapeDtypeStruct((rows,), dtype)  # noqa: E731
    cols = lambda dtype: jax.ShapeDtypeStruct((rows, new_tokens), dtype)  # noqa: E731
    state = live_rows.DecodeState(jax.ShapeDtypeStruct((), jnp.int32), cache, vec(jnp.int32),
                                  vec(bool), cols(jnp.int32), cols(jnp.float32),
                                  cols(jnp.int32), vec(jnp.int32), None)
    fn = jax.jit(lambda p, s, k: sampling.decode_step(p, s, k, model_config=mc,
                                                      sampling_config=sc), donate_argnums=(1,))
    return _cost(fn.lower(prepared, state, jax.ShapeDtypeStruct((2,), jnp.uint32)).compile())


def _resize(cache, size: int, repeats: int, share: bool) -> float:
    """Bytes of `decoding.resize_cache` of the abstract `cache` to `size` slots."""
    import jax
    from rlvr_jax.models import decoding
    fn = jax.jit(lambda c: decoding.resize_cache(c, size, repeats, share))
    return _cost(fn.lower(cache).compile())["bytes_accessed"]


def _minimum_parts(mc, prepared, rows: int):
    """(bytes of the weights a decode step reads, K/V bytes per slot, logits bytes written
    and read). The weights are the prepared (compute-dtype) ones; of the embedding table
    the lookup reads only its `rows` rows (a tied head is counted as the head)."""
    import jax
    import numpy as np
    nbytes = lambda tree: sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize  # noqa: E731
                              for x in jax.tree.leaves(tree))
    embed = prepared["embed"]
    weights = (nbytes({k: v for k, v in prepared.items() if k != "embed"})
               + rows * embed.shape[1] * np.dtype(embed.dtype).itemsize)
    kv_slot = mc.n_layers * 2 * mc.n_kv_heads * mc.head_dim * rows * mc.compute_dtype.itemsize
    return weights, kv_slot, 2 * rows * mc.vocab_size * 4


def step_cost(mc, prompts: int, samples: int, prompt_len: int, new_tokens: int, step: int,
              cache_slots: Optional[int] = None, share: bool = False) -> Dict[str, float]:
    """One decode step with the state at decode step `step` (slots [0, Tp + step) valid) in
    the sampler's cache of `cache_slots` slots (default Tp + N - 1, the single-phase loop),
    the prompts' KV copied to their G rows or `share`d (`SamplingConfig.share_prompt_kv`).

    Returns {"flops", "bytes_accessed", "bytes_gather_rows", "minimum_bytes", "ratio"
    (bytes_accessed / minimum), "ratio_gather_rows", the minimum's parts, "cache_slots",
    "step"}.
    """
    rows = prompts * samples
    slots = cache_slots or prompt_len + new_tokens - 1
    prepared = _prepared(mc)
    m = _step(mc, prepared, _sampler_cache(mc, prompts, samples, prompt_len, slots, share),
              new_tokens)
    weights, kv_slot, logits = _minimum_parts(mc, prepared, rows)
    minimum = weights + kv_slot * (prompt_len + step) + kv_slot + logits
    return dict(m, minimum_bytes=minimum, ratio=m["bytes_accessed"] / minimum,
                ratio_gather_rows=m["bytes_gather_rows"] / minimum, weights_bytes=weights,
                valid_kv_bytes=kv_slot * (prompt_len + step), logits_write_read_bytes=logits,
                cache_slots=slots, step=step)


def rollout_cost(mc, prompts: int, samples: int, prompt_len: int, new_tokens: int,
                 cache_window: Optional[int] = None, share: bool = False) -> Dict[str, float]:
    """Every decode step of a rollout that generates all N tokens (steps 1 … N - 1), with
    the sampler's cache phases for `cache_window` (None: `cache_phases.auto_cache_window`):
    one compile per phase, its step's bytes counted once per step it runs, plus the cache
    copies into each phase's cache (`decoding.resize_cache`, the first from the P prompts'
    prefill cache, repeated G times or, with `share`, shared). The minimum counts each
    row's prompt K/V (a shared prefix reads less than that).

    Returns {"cache_window", "phases" [(cache slots, steps)], "bytes_accessed",
    "bytes_gather_rows", "resize_bytes" (included in both), "minimum_bytes" (summed over
    the steps), "ratio", "ratio_gather_rows", "bytes_per_step", "minimum_per_step"}.
    """
    import jax
    from rlvr_jax import cache_phases, sampling
    from rlvr_jax.models import decoding
    sc = sampling.SamplingConfig(max_new_tokens=new_tokens, cache_window=cache_window)
    window = cache_phases.cache_window_of(sc)
    rows = prompts * samples
    prepared = _prepared(mc)
    weights, kv_slot, logits = _minimum_parts(mc, prepared, rows)
    steps_total, rows_total, minimum, resize, start, phases = 0.0, 0.0, 0.0, 0.0, 1, []
    before = jax.eval_shape(lambda: decoding.init_cache(mc, prompts, prompt_len))  # Prefill.
    for i, size in enumerate(cache_phases.cache_sizes(prompt_len, new_tokens, window)):
        limit = min(new_tokens, size - prompt_len + 1)  # As `generate`: steps t < limit.
        resize += _resize(before, size, samples if i == 0 else 1, share)
        before = _sampler_cache(mc, prompts, samples, prompt_len, size, share)
        if limit <= start:
            continue
        m = _step(mc, prepared, before, new_tokens)
        steps = limit - start
        steps_total += steps * m["bytes_accessed"]
        rows_total += steps * m["bytes_gather_rows"]
        minimum += sum(weights + kv_slot * (prompt_len + t + 1) + logits
                       for t in range(start, limit))
        phases.append((size, steps))
        start = limit
    total, rows_total = steps_total + resize, rows_total + resize
    n_steps = max(sum(s for _, s in phases), 1)
    return {"cache_window": window, "phases": phases, "bytes_accessed": total,
            "bytes_gather_rows": rows_total, "resize_bytes": resize, "minimum_bytes": minimum,
            "ratio": total / minimum, "ratio_gather_rows": rows_total / minimum,
            "bytes_per_step": total / n_steps, "minimum_per_step": minimum / n_steps}
