"""Measuring tools: nothing here runs in training.

- `benchmarks`: the `scripts/benchmark.py` commands (sampler, update, RL step, costs).
- `decode_cost`, `update_cost`: XLA cost analysis of a decode step / rollout and of the update.
- `memory_plan`: per-device memory and collectives of the compiled RL step (`scripts/memory_plan.py`).
- `programs`: the training programs lowered from abstract, sharded inputs.
- `collectives`: the collectives table (kind, dtype, bytes per step) of a compiled program.
"""
