"""Times the sampler's token draw on [B, V] float32 logits (temperature 1, no truncation):
the one-pass Gumbel-max reduction (GPU / TPU's draw), the vectorised inverse-CDF draw (CPU's;
`token_sampling._untruncated`), each greedy too, and the four passes before either
(`jax.random.categorical`, `logsumexp`, a gather). Prints one JSON line per variant.

    python scripts/sampler_microbench.py --rows 256 --vocab 151936
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    from rlvr_jax import token_sampling

    def four_pass(logits, rng):
        scaled = logits / 1.0
        tok = jax.random.categorical(rng, scaled, axis=-1).astype(jnp.int32)
        chosen = jnp.take_along_axis(scaled, tok[:, None], axis=-1)[:, 0]
        return tok, chosen - jax.nn.logsumexp(scaled, axis=-1)

    def draw(greedy, vectorised):
        return jax.jit(lambda l, k: token_sampling._untruncated(l, k, None, greedy, vectorised))

    variants = {"one_pass_gumbel": draw(False, False), "inverse_cdf": draw(False, True),
                "one_pass_greedy": draw(True, False), "chunked_greedy": draw(True, True),
                "four_pass": jax.jit(four_pass)}
    logits = jax.random.normal(jax.random.PRNGKey(0), (args.rows, args.vocab)) * 3
    for name, fn in variants.items():
        jax.block_until_ready(fn(logits, jax.random.PRNGKey(1)))
        times = []
        for i in range(args.repeats):
            key = jax.random.PRNGKey(i)
            start = time.perf_counter()
            jax.block_until_ready(fn(logits, key))
            times.append(time.perf_counter() - start)
        print(json.dumps({"variant": name, "rows": args.rows, "vocab": args.vocab,
                          "median_ms": 1e3 * statistics.median(times),
                          "gb_per_s_one_read": args.rows * args.vocab * 4 /
                          statistics.median(times) / 1e9}), flush=True)


if __name__ == "__main__":
    from rlvr_jax.train.cli import script_main
    script_main(main)
