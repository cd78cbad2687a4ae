"""The RL step as the loop runs it: synchronous (`step.make_step`, one program) or
asynchronous rollouts with a staleness bound on split meshes (docs/async.md).

`make_program` returns `program(state, loader) -> (state, metrics, samples, pb)`: it takes
the prompt batches it samples from `loader` and returns the one `pb` it trained on.

Asynchronous (`rl.max_staleness` = k, `mesh.sampler_devices` = s): the sampler runs on its
own mesh (the last s devices), the update on the trainer's. RL step i (the trainer holds
the weights v_i):

  1. weight sync: v_i, cast to the compute dtype, is resharded onto the sampler's mesh
     (async/weight_sync_s, async/weight_sync_bytes);
  2. the sampler is dispatched on prompt batch i + k with v_i (before the first step, on
     batches 0 … k − 1 as well), and queued;
  3. batch i is popped (sampled with v_{max(i − k, 0)}: async/staleness), moved to the
     trainer's mesh, scored and trained on (the update program of `make_split_step`'s seam).

JAX dispatch is asynchronous, so 2 (on the sampler's devices) and 3 (on the trainer's) run
at once with no thread. k = 0 with s > 0 is the synchronous step on split meshes.
The rng: `step_keys(state.rng)` each step as the synchronous step does; batch i + k is
sampled with fold_in(its sample key, j) for the j-th batch dispatched that step.
"""
import collections
import dataclasses
import functools
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp

from rlvr_jax import distributed, sharding
from rlvr_jax.models import decoding
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import build
from rlvr_jax.train.placer import Placer
from rlvr_jax.train.step import make_step, score_and_update, step_keys


def make_program(config, tokenizer, sampler: Sampler, scorer, rl, tx, placer: Placer, *,
                 value_tx=None):
    """The loop's RL step: `program(state, loader) -> (state, metrics, samples, pb)`.

    Synchronous (rl.max_staleness = 0 and mesh.sampler_devices = 0): `step.make_step`'s
    program on `loader`'s next batch, unchanged. Otherwise an `AsyncStep`.
    """
    if not (rl.max_staleness or config.mesh.get("sampler_devices", 0)):
        step = make_step(sampler, scorer, rl, tx, value_tx=value_tx)

        def program(state, loader):
            pb = next(loader)
            batch = build.place_rl_batch(placer, pb, config, tokenizer)
            return (*step(state, batch, pb.examples), pb)
        return program
    sampler_placer = Placer(build.build_sampler_mesh(config), placer.rules, placer.model_config)
    return AsyncStep(config, tokenizer, sampler, scorer, rl, tx, placer, sampler_placer,
                     value_tx=value_tx)


@dataclasses.dataclass
class Pending:
    """A batch in the queue: its prompts (`pb`), what the sampler returned (device arrays
    on the sampler's mesh, not waited for), the policy version (RL step) that sampled it and
    those weights on the trainer's mesh (rl.proximal = "sampler"), else None."""
    pb: Any
    rollout: Any
    episodes: Any
    sample_metrics: dict
    version: int
    proximal: Optional[Any] = None


class AsyncStep:
    """Asynchronous rollouts on split meshes (the module docstring); one per run.

    Args: the run's config, tokenizer, `Sampler` (its kind: plain, device or host
    episodes), `scoring.Scorer`, `RLConfig`, optimizers, and the trainer's and the
    sampler's `Placer`s.
    """

    def __init__(self, config, tokenizer, sampler: Sampler, scorer, rl, tx, placer: Placer,
                 sampler_placer: Placer, *, value_tx=None):
        self.config, self.tokenizer, self.rl = config, tokenizer, rl
        self.placer, self.sampler_placer = placer, sampler_placer
        self.k = rl.max_staleness
        # Decoding on the sampler's own mesh: no re-layout to the trainer's decode rules.
        self.sampler = Sampler(sampler.model_config, sampler.sampling_config, env=sampler.env,
                               tools=sampler.tools)
        self.scorer = scorer
        sc = sampler.sampling_config
        scorer.start()
        self.update = jax.jit(functools.partial(
            score_and_update, scorer=scorer, model_config=sampler.model_config,
            num_samples=sc.num_samples, rl=rl, tx=tx, temperature=sc.temperature,
            value_tx=value_tx), donate_argnums=(0,))
        dtype = sampler.model_config.compute_dtype
        # A copy (never the trainer's buffers, which the update donates) in the compute dtype.
        self._snapshot = jax.jit(lambda p: jax.tree.map(
            jnp.copy, decoding.cast_weights(p, dtype)))
        self.queue = collections.deque()
        self.version = 0  # The RL step of the trainer's weights.

    def sync_weights(self, params):
        """(the weights on the sampler's mesh, on the trainer's mesh, metrics): the trainer's
        `params` copied in the compute dtype and resharded; the transfer timed after the
        update that made them is done."""
        jax.block_until_ready(params)
        t0 = time.perf_counter()
        snapshot = self._snapshot(params)
        on_sampler = self.sampler_placer.params(snapshot)
        jax.block_until_ready(on_sampler)
        seconds = time.perf_counter() - t0
        nbytes = sum(x.nbytes for x in jax.tree.leaves(on_sampler))
        return on_sampler, snapshot, {"async/weight_sync_s": seconds,
                                      "async/weight_sync_bytes": float(nbytes)}

    def dispatch(self, params, proximal, loader, rng, j: int) -> None:
        """Queues the sampler's rollout of `loader`'s next batch with `params` (not waited
        for: the sampler's devices run it while the trainer's update)."""
        pb = next(loader)
        sp = self.sampler_placer
        key = sp.replicated(jax.random.fold_in(rng, j))  # (On the trainer's mesh, then moved.)
        with sharding.activate(sp.mesh, sp.rules):
            batch = build.place_rl_batch(sp, pb, self.config, self.tokenizer)
            rollout, episodes, metrics = self.sampler(params, batch, key, pb.examples)
        self.queue.append(Pending(pb, rollout, episodes, metrics, self.version,
                                  proximal if self.rl.proximal == "sampler" else None))

    def __call__(self, state, loader):
        """One RL step: sync, dispatch, pop, update; (state, metrics, samples, pb)."""
        rng, sample_rng, update_rng = step_keys(state.rng)
        on_sampler, snapshot, metrics = self.sync_weights(state.params)
        j = 0
        while len(self.queue) < self.k + 1:  # k + 1 before the first step, then one.
            self.dispatch(on_sampler, snapshot, loader, sample_rng, j)
            j += 1
        item = self.queue.popleft()
        state, update_metrics, samples = self.train_on(state.replace(rng=rng), item,
                                                       update_rng)
        metrics.update(update_metrics)
        metrics.update(item.sample_metrics)
        metrics["async/staleness"] = float(self.version - item.version)
        metrics["async/queue"] = float(len(self.queue))
        self.version += 1
        return state, metrics, samples, item.pb

    def train_on(self, state, item: Pending, update_rng):
        """The update on a popped batch, moved to the trainer's mesh (host scoring first)."""
        p = self.placer
        g = self.sampler.sampling_config.num_samples
        rollout, episodes = distributed.to_host((item.rollout, item.episodes))
        host = self.scorer.score_host(rollout, item.pb.examples, g)
        batch = build.place_rl_batch(p, item.pb, self.config, self.tokenizer)
        rollout, episodes = p.batch((rollout, episodes), build.data_name(self.config))
        return self.update(state, rollout, episodes, batch.get("answers"), host, update_rng,
                           proximal=item.proximal, batch=batch)

