"""The training programs of a model shape on a mesh, lowered from abstract sharded inputs
(`jax.ShapeDtypeStruct` + `NamedSharding`; nothing is allocated), for the memory plan and the
collectives table.

    mesh, rules = sharding.make_mesh({"fsdp": -1}), sharding.get_rules("fsdp")
    lowered = lower_update(mc, mesh, rules, workload=Workload(...))
    lowered = lower_rl_step(mc, mesh, rules, workload=Workload(...))

The state is the one a run builds: float32 parameters and AdamW moments sharded by the
rules, a reference model (`train.reference`: the compute dtype, on the devices or in host
memory) when `rl.kl_coef` > 0, a value model for `advantage="gae"`, and optionally a frozen
reward model (its trunk in the compute dtype) scored inside the one-program step. With LoRA
(`mc.lora_rank` > 0) the policy is a frozen base (stored `quantize_base`: none, int8 or nf4)
with adapters attached, AdamW's moments are the adapters' only, and there is no reference
copy (the reference is the base with the adapters off), as `train.build.rl_state` makes it.
The model config is used as given (its `scan_unroll`, `remat`, attention, LoRA fields), so
the program is the one the run compiles.
"""
import dataclasses
from typing import Any, Tuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec


@dataclasses.dataclass(frozen=True)
class Workload:
    """One RL step: P prompts × G samples of Tp prompt + N new tokens, and the update's
    `RLConfig` fields (any `rl_config.RLConfig` keyword in `rl`)."""
    prompts: int = 32
    samples: int = 8
    prompt_len: int = 128
    new_tokens: int = 896
    rl: Tuple[Tuple[str, Any], ...] = (("microbatches", 4), ("logprob_chunk", 128),
                                       ("kl_coef", 0.001))

    def rl_config(self):
        from rlvr_jax.train.rl_config import RLConfig
        return RLConfig(num_prompts=self.prompts, **dict(self.rl))

    def sampling_config(self, cache_window=None):
        from rlvr_jax import sampling
        return sampling.SamplingConfig(temperature=1.0, max_new_tokens=self.new_tokens,
                                       num_samples=self.samples, stop_token_ids=(1,),
                                       pad_id=0, cache_window=cache_window)


def _abstract(tree, shardings):
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                        tree, shardings)


def policy_params(mc, quantize_base="none"):
    """The policy's parameter tree as an RL run holds it (call under `jax.eval_shape`): the
    model's, or with `mc.lora_rank` the base (quantized as `quantize_base` asks) with
    fresh adapters attached (`train.adapters.attach_for_rl`)."""
    from rlvr_jax.models import lora, quant, transformer
    params = transformer.init_params(mc, jax.random.PRNGKey(0))
    if not mc.lora_rank:
        if quantize_base != "none":
            raise ValueError("quantize_base needs LoRA (lora_rank > 0): only a frozen base "
                             "is stored quantized")
        return params
    return lora.attach(quant.quantize_params(params, quantize_base),
                       lora.init_adapters(mc, jax.random.PRNGKey(1)))


def abstract_state(mc, mesh, rules, tx, rl, value_tx=None, reference_memory="device",
                   quantize_base="none", reward_config=None):
    """(TrainState of sharded ShapeDtypeStructs, its shardings) as `train.build` places it
    (the reference in `reference_memory`: "device" or "pinned_host"; with LoRA none, and the
    optimizer state over the adapters only; with `reward_config` (a `ModelConfig`) a frozen
    scalar reward model's parameters, its trunk in the compute dtype
    (`reference.frozen_scorer_params`), sharded by the rules like the policy's)."""
    from rlvr_jax import models, sharding
    from rlvr_jax.models import lora, transformer
    from rlvr_jax.models import reward_model as rm_lib
    from rlvr_jax.train import adapters, reference
    from rlvr_jax.train import state as state_lib
    params = jax.eval_shape(lambda: policy_params(mc, quantize_base))
    specs = lora.specs_like(transformer.param_logical_axes(mc), params, mc)
    param_sh = sharding.logical_to_mesh_sharding(specs, mesh, rules, params)
    trainable = state_lib.split_trainable(params)[0]
    ref = jax.eval_shape(lambda p: reference.compute_dtype_copy(p, mc.compute_dtype), params
                         ) if rl.needs_reference and not lora.has_adapters(params) else None
    value = jax.eval_shape(lambda p: models.init_value_params(
        mc, jax.random.PRNGKey(0), adapters.full_weights(p, mc)),
        params) if rl.needs_value else None
    rm = None if reward_config is None else jax.eval_shape(
        lambda p: reference.frozen_scorer_params(p, reward_config),
        rm_lib.reward_param_shapes(reward_config, 1))
    state = jax.eval_shape(lambda p, r, v, w: state_lib.create_train_state(
        p, tx, jax.random.PRNGKey(0), ref_params=r, value_params=v, value_tx=value_tx,
        kl_coef=rl.kl_coef if rl.adaptive_kl else None, reward_params=w),
        params, ref, value, rm)
    replicated = NamedSharding(mesh, PartitionSpec())
    value_specs = models.value_logical_axes(mc) if value is not None else None
    shardings = state.replace(
        step=replicated, rng=replicated, data_position=replicated,
        params=param_sh,
        opt_state=sharding.optimizer_state_sharding(
            tx, trainable, lora.specs_like(specs, trainable, mc), mesh, rules),
        ref_params=None if ref is None else jax.tree.map(
            lambda sh: sh.with_memory_kind(reference_memory),
            sharding.logical_to_mesh_sharding(specs, mesh, rules, ref)),
        value_params=None if value is None else sharding.logical_to_mesh_sharding(
            value_specs, mesh, rules, value),
        value_opt_state=None if value is None else sharding.optimizer_state_sharding(
            value_tx, value, value_specs, mesh, rules),
        kl_coef=None if state.kl_coef is None else replicated,
        reward_params=None if rm is None else sharding.logical_to_mesh_sharding(
            rm_lib.reward_logical_axes(reward_config), mesh, rules, rm))
    return _abstract(state, shardings), shardings


def _rows(mesh, rules, shape, dtype=jnp.int32):
    from rlvr_jax import sharding
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(
        mesh, sharding.batch_spec(rules, len(shape))))


def lower_update(mc, mesh, rules, workload: Workload = Workload(), reference_memory="device",
                 quantize_base="none"):
    """The split path's update (`step.make_update_fn`) lowered for one batch of B = P·G
    rollouts; returns the `jax.stages.Lowered`."""
    from rlvr_jax import sampling, sharding
    from rlvr_jax.train import state as state_lib
    from rlvr_jax.train import step as step_lib
    w, rl = workload, workload.rl_config()
    tx = state_lib.make_optimizer(learning_rate=1e-6)
    value_tx = tx if rl.needs_value else None
    state, _ = abstract_state(mc, mesh, rules, tx, rl, value_tx, reference_memory,
                              quantize_base)
    b, n, tp = w.prompts * w.samples, w.new_tokens, w.prompt_len
    rollout = sampling.Rollout(
        tokens=_rows(mesh, rules, (b, n)), mask=_rows(mesh, rules, (b, n)),
        logprobs=_rows(mesh, rules, (b, n), jnp.float32), lengths=_rows(mesh, rules, (b,)),
        finished=_rows(mesh, rules, (b,), jnp.bool_), prompt_tokens=_rows(mesh, rules, (b, tp)),
        prompt_mask=_rows(mesh, rules, (b, tp)))
    fn = step_lib.make_update_fn(mc, w.sampling_config(), rl, tx, value_tx=value_tx)
    with sharding.activate(mesh, rules):
        return fn.lower(state, rollout, _rows(mesh, rules, (b,), jnp.float32))


def decode_sampler(mc, mesh, decode_rules, sampling_config):
    """The `Sampler` of a run with `sampling.decode_rules` = `decode_rules` (a preset name;
    "": the training layout), as `train.build.build_sampler` makes it: the sampled tree
    re-laid out by those rules, the rollout's activations constrained by them."""
    from rlvr_jax import sharding
    from rlvr_jax.models import lora, transformer
    from rlvr_jax.sampler import Sampler
    if not decode_rules:
        return Sampler(mc, sampling_config)
    rules, specs = sharding.get_rules(decode_rules), transformer.param_logical_axes(mc)
    return Sampler(mc, sampling_config, decode_rules=rules,
                   decode_shardings=lambda p: sharding.logical_to_mesh_sharding(
                       lora.specs_like(specs, p, mc), mesh, rules, p))


def lower_rl_step(mc, mesh, rules, workload: Workload = Workload(), cache_window=None,
                  decode_rules="", reference_memory="device", quantize_base="none",
                  reward_config=None):
    """The one-program RL step (`step.make_rl_step`: sample, score, update) lowered, decoding
    in the layout of `decode_rules` (`decode_sampler`); with `reward_config` (a
    `ModelConfig`) a reward model scores the B sequences inside it."""
    from rlvr_jax import scoring, sharding
    from rlvr_jax.train import state as state_lib
    from rlvr_jax.train import step as step_lib
    w, rl = workload, workload.rl_config()
    tx = state_lib.make_optimizer(learning_rate=1e-6)
    value_tx = tx if rl.needs_value else None
    state, _ = abstract_state(mc, mesh, rules, tx, rl, value_tx, reference_memory,
                              quantize_base, reward_config)
    batch = {"prompt_tokens": _rows(mesh, rules, (w.prompts, w.prompt_len)),
             "prompt_mask": _rows(mesh, rules, (w.prompts, w.prompt_len)),
             "answers": _rows(mesh, rules, (w.prompts,))}

    def verifier(tokens, mask, answers):  # A stand-in: reward 1 if the first token is even.
        del mask, answers
        return (tokens[:, 0] % 2 == 0).astype(jnp.float32)

    scorer = scoring.token_scorer(
        verifier, rl=rl, max_new_tokens=w.new_tokens, num_samples=w.samples,
        reward_model=None if reward_config is None else scoring.RewardModel(reward_config))
    sampler = decode_sampler(mc, mesh, decode_rules, w.sampling_config(cache_window))
    fn = step_lib.make_rl_step(mc, sampler.sampling_config, rl, tx, scorer=scorer,
                               sampler=sampler, value_tx=value_tx)
    with sharding.activate(mesh, rules):
        return fn.lower(state, batch)
