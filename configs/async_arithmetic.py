"""Asynchronous rollouts (docs/async.md): the quickstart's GRPO on 1-2 digit addition with
the sampler on its own device, one step behind the trainer (rl.max_staleness=1), corrected
by AReaL's decoupled PPO (the clip around the weights the sampler used, recomputed by the
trainer; their behaviour weight π_prox / π_sampler truncated at 2, per token).

Two CPU devices (one samples batch i + 1 while the other trains on batch i):

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        python scripts/train.py --config configs/async_arithmetic.py --workdir runs/async

measured (seed 0, 300 steps): held-out greedy pass@1 0.386 after the warm-up → 0.706
(0.668–0.746) after RL (the quickstart: 0.704). Add --xla_cpu_multi_thread_eigen=false to
XLA_FLAGS for one thread (one core) per device, the set-up of the steps/s comparison in
docs/async.md (without it each program may use every core, and the two then share them).
"""
from rlvr_jax.train.config import arithmetic_config


def get_config():
    config = arithmetic_config(algorithm="grpo")
    config.rl.kl_coef = 0.0          # No reference model: faster on CPU (as the quickstart).
    config.eval.every = 50
    config.rl.max_staleness = 1      # Batch i was sampled with the weights of step i - 1.
    config.rl.proximal = "sampler"   # Decoupled PPO: clip around the sampler's weights,
    config.rl.tis_cap = 2.0          # the behaviour weight π_prox / π_sampler ≤ 2,
    config.rl.tis_level = "token"    # per token ("sequence": one per completion).
    config.mesh.num_devices = 2      # Device 0 trains, device 1 samples.
    config.mesh.sampler_devices = 1
    return config
