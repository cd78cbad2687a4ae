"""Wall and CPU seconds of ONE sampler decode step (`sampling.decode_step`) at a model's shape,
the prompts' KV copied to each row or shared by its group (`SamplingConfig.share_prompt_kv`).

    python scripts/decode_step_time.py --preset qwen2.5-0.5b --layout copied --step 256
    python scripts/decode_step_time.py --preset qwen2.5-0.5b --layout shared --step 256

One cache phase of Tp + N - 1 slots (all rows live, `step` completion slots written), random
weights; the step runs `--repeats` times on the same state after a first (compiling) call.
Prints one JSON line with the median wall and CPU seconds. Run the layouts one after another
(interleaved) on an otherwise idle machine to compare them.
"""
import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp

from rlvr_jax import live_rows, sampling
from rlvr_jax.models import decoding, presets, transformer


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="qwen2.5-0.5b")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--layout", choices=("copied", "shared"), default="copied")
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=512)
    p.add_argument("--step", type=int, default=256, help="completion tokens written so far")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    if not 1 <= args.step < args.new_tokens or args.repeats < 1:
        p.error(f"--step must be in [1, --new-tokens) and --repeats >= 1, got {args.step}, "
                f"{args.repeats}")
    mc = presets.get(args.preset, dtype=args.dtype)
    pp, g, tp, n, t = args.prompts, args.samples, args.prompt_len, args.new_tokens, args.step
    b = pp * g
    prepared = jax.jit(lambda: decoding.prepare_params(
        transformer.init_params(mc, jax.random.PRNGKey(0)), mc))()

    def cache():
        prefill = decoding.init_cache(mc, pp, tp)
        prefill = dict(prefill, k=tuple(x + 0.01 for x in prefill["k"]),
                       mask=jnp.ones((pp, tp), jnp.int32), index=jnp.asarray(tp, jnp.int32))
        c = decoding.resize_cache(prefill, tp + n - 1, g, args.layout == "shared")
        written = tp + t - decoding.prefix_slots(c)  # The rows' own slots in use.
        return dict(c, mask=c["mask"].at[:, :written].set(1),
                    index=jnp.asarray(written - 1, jnp.int32))

    sc = sampling.SamplingConfig(max_new_tokens=n, num_samples=1)
    cols = lambda dtype: jnp.zeros((b, n), dtype)  # noqa: E731
    state = live_rows.DecodeState(jnp.asarray(t, jnp.int32), jax.jit(cache)(),
                                  jnp.ones((b,), jnp.int32), jnp.zeros((b,), bool),
                                  cols(jnp.int32), cols(jnp.float32), cols(jnp.int32),
                                  jnp.arange(b, dtype=jnp.int32), None)
    step = jax.jit(lambda prep, st, key: sampling.decode_step(
        prep, st, key, model_config=mc, sampling_config=sc), donate_argnums=(1,))
    key = jax.random.PRNGKey(1)
    start = time.perf_counter()
    state = jax.block_until_ready(step(prepared, state, key))
    first_s, walls, cpus = time.perf_counter() - start, [], []
    for _ in range(args.repeats):  # The same step again: rewind the counter and the index.
        index = state.cache["index"] - 1
        state = state._replace(t=jnp.asarray(t, jnp.int32), cache=dict(state.cache, index=index))
        wall, cpu = time.perf_counter(), time.process_time()
        state = jax.block_until_ready(step(prepared, state, key))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(json.dumps({"preset": args.preset, "layout": args.layout, "rows": b, "step": t,
                      "first_call_s": first_s, "wall_s": statistics.median(walls),
                      "cpu_s": statistics.median(cpus),
                      "device_kind": jax.devices()[0].device_kind}))


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
