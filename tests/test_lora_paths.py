"""LoRA on the run's other paths: one RL program with an on-device tool (multi-turn), a frozen
reward model and a KL term to the base; and the sampler re-laid out for decoding
(`sampling.decode_rules`) under an 8-device FSDP mesh."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlvr_jax import models, scoring, sharding
from rlvr_jax.models import lora
from rlvr_jax.multiturn.env import DeviceEnv
from rlvr_jax.train import build
from rlvr_jax.train import placer as placer_lib
from rlvr_jax.train import state as state_lib
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.config import default_config
from tests import numerics
from tests.multiturn_helpers import prompt_arrays, sampling_config

R = 4
PROMPTS = ["12+3=", "7+8=", "1+1=", "40+2=", "9+9=", "3+4=", "5+0=", "2+2="]


@dataclasses.dataclass(frozen=True)
class EveryTokenCalls(DeviceEnv):
    """Every model token but the stop token ends a turn with a call; the observation is
    (31, 32) and earns 0.5."""

    def reset(self, prompt_tokens, prompt_mask, answers):
        return {"count": jnp.zeros((prompt_tokens.shape[0],), jnp.int32)}

    def step(self, state, turn, turn_len):
        b = turn.shape[0]
        obs = jnp.zeros((b, self.max_obs_tokens), jnp.int32).at[:, :2].set(
            jnp.asarray((31, 32), jnp.int32))
        return ({"count": state["count"] + 1},
                self.reply(obs, jnp.full((b,), 2), reward=jnp.full((b,), 0.5),
                           error=jnp.zeros((b,), bool)))


def _verifier(tokens, mask, answers):
    del answers
    odd = jnp.sum(((tokens % 2) == 1) & (mask != 0), axis=1)
    return (odd % 2 == 0).astype(jnp.float32)


def _lora(model_config, params, dtype=None):
    """(config with rank-R adapters on all targets, base + adapters as after training:
    A as initialised, B non-zero so that the policy differs from the base)."""
    cfg = model_config.replace(lora_rank=R, lora_alpha=2.0 * R, lora_targets=lora.TARGETS,
                               **({"dtype": dtype} if dtype else {}))
    fresh = lora.init_adapters(cfg, jax.random.PRNGKey(1))
    trained = jax.tree_util.tree_map_with_path(
        lambda path, x: x if path[-1].key.endswith("_a") else
        0.05 * jax.random.normal(jax.random.PRNGKey(2), x.shape, x.dtype), fresh)
    return cfg, lora.attach(jax.tree.map(jnp.copy, params), trained)


def test_one_program_with_a_tool_a_reward_model_and_kl_trains_only_the_adapters(
        params, model_config, tok):
    cfg, policy = _lora(model_config, params)
    env = EveryTokenCalls(call_end_ids=tuple(i for i in range(cfg.vocab_size)
                                             if i != tok.eos_id),
                          max_turns=3, max_turn_tokens=4, max_obs_tokens=3)
    prompts, pmask = prompt_arrays(tok, PROMPTS[:4])
    batch = {"prompt_tokens": prompts, "prompt_mask": pmask, "answers": jnp.zeros((4,), jnp.int32)}
    rm_config = model_config.replace(n_layers=1)
    rm = scoring.RewardModel(config=rm_config, weight=0.5)
    scorer = scoring.token_scorer(_verifier, reward_model=rm, env=env, num_samples=2)
    tx = optax.adamw(1e-2)
    rl = step_lib.RLConfig(num_prompts=4, aggregation="token-mean", kl_coef=0.1)
    rl_step = step_lib.make_rl_step(cfg, sampling_config(tok, max_new_tokens=12, num_samples=2),
                                    rl, tx, scorer=scorer, return_rollout=True, env=env)
    rm_params = models.init_reward_params(rm_config, jax.random.PRNGKey(5))
    state = state_lib.create_train_state(policy, tx, jax.random.PRNGKey(4),
                                         reward_params=rm_params)
    assert state.ref_params is None  # The reference is the base: no copy.
    adapters, base = lora.split(policy)
    assert jax.tree.structure(state.opt_state) == jax.tree.structure(tx.init(adapters))
    # Host copies: the step donates its state.
    adapters, base, rm_params = jax.tree.map(np.asarray, (adapters, base, rm_params))
    new, m, s = rl_step(state, batch)
    # The rollout went through the tool (every model token is a call) and was scored by all.
    assert float(m["tool/calls"]) > 0 and "reward/reward_model_agreement" in m
    # KL to the reference = the base with the adapters off, which the policy is not (B ≠ 0).
    assert float(m["loss/kl"]) > 0
    # Only the adapters moved: the base and the frozen reward model are bitwise unchanged.
    new_adapters, new_base = lora.split(new.params)
    for a, b in zip(jax.tree.leaves(new_base), jax.tree.leaves(base)):
        np.testing.assert_array_equal(np.asarray(a), b)
    for a, b in zip(jax.tree.leaves(new.reward_params), jax.tree.leaves(rm_params)):
        np.testing.assert_array_equal(np.asarray(a), b)
    assert all(not np.array_equal(np.asarray(a), b)
               for a, b in zip(jax.tree.leaves(new_adapters), jax.tree.leaves(adapters)))


@pytest.mark.skipif(jax.device_count() < 8, reason="needs the 8 fake devices of conftest")
@pytest.mark.parametrize("quantize_base", ["none", "nf4"])
def test_decode_rules_lay_out_a_lora_tree(params, model_config, tok, quantize_base):
    """`sampling.decode_rules` with LoRA (adapters, a quantized base): the decode layout is the
    sampled tree's (it once was the plain model's, and such a tree failed to lay out), and the
    re-laid-out sampler draws what the FSDP-sharded one draws."""
    from rlvr_jax.models import quant
    cfg, policy = _lora(model_config, params)
    policy = lora.attach(quant.quantize_params(lora.base_of(policy), quantize_base),
                         lora.split(policy)[0])
    config = default_config()
    config.model.preset, config.sampling.max_new_tokens = "tiny", 6
    config.rl.num_samples, config.mesh.num_devices = 2, 8
    mesh, rules = sharding.make_mesh({"data": 1, "fsdp": 8, "tensor": 1}), sharding.get_rules(
        "fsdp")
    placer = placer_lib.Placer(mesh, rules, cfg)
    policy = placer.params(policy)
    assert policy["layers"]["attn"]["q_lora_a"].sharding.spec != jax.sharding.PartitionSpec()
    plain = build.build_sampler(config, cfg, tok, placer)
    config.sampling.decode_rules = "dp"
    relaid = build.build_sampler(config, cfg, tok, placer)
    prompts, pmask = prompt_arrays(tok, PROMPTS)
    batch = sharding.make_global_batch(
        {"prompt_tokens": prompts, "prompt_mask": pmask, "answers": jnp.zeros((8,), jnp.int32)},
        mesh, rules=rules, same_on_all_processes=True)
    with sharding.activate(mesh, rules):
        want, _ = plain._jitted(policy, batch, jax.random.PRNGKey(3))
        got, _ = relaid._jitted(policy, batch, jax.random.PRNGKey(3))
    np.testing.assert_array_equal(np.asarray(got.tokens), np.asarray(want.tokens))
    # Sharded and replicated weights sum the same products in another order.
    numerics.assert_forward_close(got.logprobs, want.logprobs, cfg, prompts.shape[1] + 6)
