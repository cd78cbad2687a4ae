"""The algorithm presets (`rlvr_jax.train.algorithms`) on the tiny model, and the real-model
config (`configs/qwen2p5_0p5b_grpo.py`) end to end with a tiny substituted checkpoint.

Each preset runs `step.update` (through `make_update_fn`) on one hand-built rollout, so
sampling randomness is out of the picture. Compile time dominates: every preset is compiled
once per module (`_program`) and its first update is shared (`_first_update`).

Shapes: P = 4 prompts, G = 2 samples, B = 8 rows, Tp = 10 prompt tokens, N = 8 new tokens.
"""
import functools
import importlib.util
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import advantages as adv_lib
from rlvr_jax import models, sampling, tasks
from rlvr_jax.data import datasets
from rlvr_jax.models import init_params, presets
from rlvr_jax.train import algorithms, build, loop
from rlvr_jax.train.rl_config import from_config as rl_from_config
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.config import default_config
from rlvr_jax.train.state import create_train_state, make_optimizer
from tests import numerics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P, G, TP, N = 4, 2, 10, 8
LENGTHS = np.array([8, 3, 5, 1, 8, 6, 2, 7], np.int32)
# Groups 0, 2 have variance; group 1 is all-correct, group 3 all-wrong.
REWARDS = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]], np.float32)
# The presets added with the value model and token-level estimators (cispo and lite_ppo,
# older, run through configs/*_arithmetic.py in tests/test_configs.py).
NEW_PRESETS = ("ppo", "reinforce_pp", "reinforce_pp_baseline", "gpg", "nsr", "w_reinforce",
               "entropy_8020", "kl_reward_adaptive")
TX = make_optimizer(learning_rate=1e-2, weight_decay=0.0, max_grad_norm=1.0)
VALUE_TX = make_optimizer(learning_rate=1e-3, weight_decay=0.0, max_grad_norm=1.0)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def rollout(tok):
    """A hand-built Rollout of B = P·G rows with the completion lengths LENGTHS."""
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    pb = next(datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                    max_prompt_len=TP))
    pmask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    rng = np.random.default_rng(0)
    valid = np.arange(N)[None, :] < LENGTHS[:, None]
    tokens = np.where(valid, rng.integers(4, tok.vocab_size, size=(P * G, N)), tok.pad_id)
    return sampling.Rollout(
        tokens=jnp.asarray(tokens.astype(np.int32)), mask=jnp.asarray(valid.astype(np.int32)),
        logprobs=jnp.asarray(np.where(valid, -np.log(tok.vocab_size), 0.0).astype(np.float32)),
        lengths=jnp.asarray(LENGTHS), finished=jnp.asarray(LENGTHS < N),
        prompt_tokens=jnp.asarray(np.repeat(pb.tokens, G, axis=0)),
        prompt_mask=jnp.asarray(np.repeat(pmask, G, axis=0)))


def rl_config(name, **overrides):
    """The RLConfig of preset `name` as `loop.run` builds it, with P groups."""
    config = default_config(algorithm=name)
    config.rl.num_prompts = P
    for key, value in overrides.items():
        setattr(config.rl, key, value)
    return rl_from_config(config)


@functools.lru_cache(maxsize=None)
def _program(rl, tok_vocab):
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(1,),
                                 pad_id=0)
    config = presets.get("tiny", vocab_size=tok_vocab)
    return step_lib.make_update_fn(config, sc, rl, TX,
                                   value_tx=VALUE_TX if rl.needs_value else None)


def fresh_state(rl, params, model_config, *, ref_params=None):
    params = jax.tree.map(jnp.copy, params)
    value_params = models.init_value_params(model_config, jax.random.PRNGKey(2), params) \
        if rl.needs_value else None
    if rl.needs_reference and ref_params is None:
        ref_params = jax.tree.map(jnp.copy, params)
    return create_train_state(params, TX, jax.random.PRNGKey(1), ref_params=ref_params,
                              value_params=value_params,
                              value_tx=VALUE_TX if rl.needs_value else None,
                              kl_coef=rl.kl_coef if rl.adaptive_kl else None)


_FIRST = {}


def _first_update(name, tok, params, model_config, rollout):
    """(rl, state before, state after, metrics) of one update of preset `name` on REWARDS."""
    if name not in _FIRST:
        rl = rl_config(name)
        before = fresh_state(rl, params, model_config)
        keep = jax.tree.map(jnp.copy, before)  # The update donates its input state.
        after, metrics = _program(rl, tok.vocab_size)(before, rollout,
                                                      jnp.asarray(REWARDS.reshape(-1)))
        _FIRST[name] = (rl, keep, after, {k: float(v) for k, v in metrics.items()})
    return _FIRST[name]


def _max_change(a, b):
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a),
                                                               jax.tree.leaves(b)))


# ----------------------------------------------------------------------------- every preset

@pytest.mark.parametrize("name", NEW_PRESETS)
def test_preset_runs_one_update(name, tok, params, model_config, rollout):
    rl, before, after, metrics = _first_update(name, tok, params, model_config, rollout)
    assert algorithms.PRESETS[name]["policy_loss"] == rl.policy_loss
    bad = {k: v for k, v in metrics.items() if not np.isfinite(v)}
    assert not bad, bad
    assert metrics["train/grad_norm"] > 0.0
    assert _max_change(after.params, before.params) > 1e-4  # The policy moved.
    assert int(after.step) == rl.epochs * rl.minibatches


def test_every_preset_is_a_valid_config():
    for name in algorithms.names():
        rl = rl_config(name)
        for key, value in algorithms.PRESETS[name].items():
            if hasattr(rl, key):
                assert getattr(rl, key) == value, (name, key)


def test_unknown_preset_and_bad_fields():
    with pytest.raises(ValueError, match="unknown algorithm"):
        default_config(algorithm="not_an_algorithm")
    with pytest.raises(ValueError, match="gpg_alpha"):
        step_lib.RLConfig(num_prompts=1, gpg_alpha="x")
    with pytest.raises(ValueError, match="kl_target"):
        step_lib.RLConfig(num_prompts=1, kl_target=0.1)  # Needs kl_in_reward and kl_coef.
    with pytest.raises(ValueError, match="value_clip"):
        step_lib.RLConfig(num_prompts=1, value_clip=-1.0)


def test_new_policy_losses_are_checked_and_log_the_clip_fractions():
    """The losses of issue 46 (sapo, dppo, dcpo, nft, luspo): one-line errors on their fields,
    and through `resolve` every one logs the clip fractions the trainer's records require
    (eager, tiny arrays: no compilation)."""
    rl = step_lib.RLConfig
    for kwargs, match in (
            (dict(sapo_tau_neg=0.0), "sapo_tau_neg"),
            (dict(policy_loss="dppo", eps_high=-0.1), "eps_high"),
            (dict(dppo_divergence="kl"), "dppo_divergence"),
            (dict(dcpo_ratio_cap=1.0), "dcpo_ratio_cap"),
            (dict(nft_eps=0.0), "nft_eps"),
            (dict(nft_prompt_weight="x"), "nft_prompt_weight"),
            (dict(policy_loss="nft"), "advantage_scale='none'"),
            (dict(policy_loss="nft", advantage_scale="none", positive_weight=0.0), "nft"),
            (dict(policy_loss="luspo", advantage="reinforce_pp"), "one advantage per sequence"),
            (dict(policy_loss="luspo", process_weight=0.5), "process_weight")):
        with pytest.raises(ValueError, match=match) as info:
            rl(num_prompts=1, **kwargs)
        assert "\n" not in str(info.value)
    rng = np.random.default_rng(0)
    mask = np.arange(N)[None, :] < LENGTHS[:, None]
    logp = (rng.normal(size=(P * G, N)) * 0.3 - 1.0).astype(np.float32)
    adv = np.asarray(adv_lib.grpo(REWARDS, scale="none")).reshape(-1)
    for name in ("sapo", "dppo", "nft", "luspo"):
        algo = algorithms.resolve(rl_config(name))
        per_token, metrics = algo.policy_loss(logp, logp - 0.1, adv, mask)
        assert per_token.shape == (P * G, N) and np.all(np.isfinite(per_token))
        assert {"clip_frac_low", "clip_frac_high", "clip_frac"} <= set(metrics), name
    algo = algorithms.resolve(rl_config("grpo", policy_loss="dcpo"))
    assert "clip_high_mean" in algo.policy_loss(logp, logp - 0.1, adv, mask)[1]


# ----------------------------------------------------------------------------- PPO + GAE

def test_ppo_value_loss_decreases_and_both_models_move(tok, params, model_config, rollout):
    rl, before, after, first = _first_update("ppo", tok, params, model_config, rollout)
    assert rl.needs_value and rl.minibatches == 2 and rl.value_clip == 0.5
    assert _max_change(after.value_params, before.value_params) > 1e-4
    assert _max_change(after.params, before.params) > 1e-4
    # The value trunk started as a copy of the policy trunk and trains on its own.
    np.testing.assert_array_equal(before.value_params["trunk"]["embed"], before.params["embed"])
    assert _max_change(after.value_params["trunk"]["embed"], after.params["embed"]) > 0
    # A few more updates on the same batch: the targets (γ = λ = 1: returns = outcome) are
    # fixed, so the value loss goes down.
    fn, state = _program(rl, tok.vocab_size), after
    losses = [first["value/loss"]]
    for _ in range(6):
        state, m = fn(state, rollout, jnp.asarray(REWARDS.reshape(-1)))
        losses.append(float(m["value/loss"]))
    assert losses[-1] < 0.6 * losses[0], losses
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 5, losses
    assert np.isfinite(m["value/value_clip_frac"])


def _whitened_atol(raw):
    """float32 whitening of the n values `raw` (and a mean of the results) against float64:
    the mean and the variance are sums of n terms (γ_n each, relative to max|raw|), which
    reach an advantage through (x − mean) / std scaled by max|raw| / std, once for the shift
    and twice for the variance's square root; then a division and the metric's own mean of n
    values (γ_n relative to max|A|)."""
    n, big = raw.size, float(np.max(np.abs(raw)))
    std = float(np.std(raw, ddof=1))
    white = float(np.max(np.abs((raw - raw.mean()) / std)))
    return numerics.ref_atol(2 * n + 6, (big / std) * (1 + 2 * white) + white, 1)


def test_gae_advantages_are_whitened_token_level(tok, params, model_config, rollout):
    """With values 0 (the head starts at 0) and γ = λ = 1, A_t = R − 0 on every token, then
    whitened over the valid tokens: the metrics match the formula computed here in numpy."""
    _, _, _, m = _first_update("ppo", tok, params, model_config, rollout)
    valid = np.arange(N)[None, :] < LENGTHS[:, None]
    raw = np.where(valid, REWARDS.reshape(-1)[:, None], 0.0)[valid]
    white = (raw - raw.mean()) / np.sqrt(raw.var(ddof=1) + 1e-8)
    atol = _whitened_atol(raw)
    np.testing.assert_allclose(m["advantages/mean"], 0.0, atol=atol)
    np.testing.assert_allclose(m["advantages/min"], white.min(), atol=atol)
    np.testing.assert_allclose(m["advantages/max"], white.max(), atol=atol)
    np.testing.assert_allclose(m["advantages/abs_mean"], np.abs(white).mean(), atol=atol)


def test_gae_needs_a_value_model(tok, params, model_config, rollout):
    rl = rl_config("ppo")
    state = create_train_state(jax.tree.map(jnp.copy, params), TX, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="value_params"):
        step_lib.update(state, rollout, jnp.asarray(REWARDS.reshape(-1)), jax.random.PRNGKey(0),
                        num_samples=G, model_config=model_config, rl=rl, tx=TX,
                        temperature=1.0, value_tx=VALUE_TX)


# ----------------------------------------------------------------------------- REINFORCE++

def test_reinforce_pp_advantages_match_the_estimator(tok, params, model_config, rollout):
    """The reference equals the policy, so k1 KL is exactly 0: A = reinforce_plus_plus(
    token_rewards(R)) over the valid tokens."""
    _, _, _, m = _first_update("reinforce_pp", tok, params, model_config, rollout)
    assert m["kl/reward_kl"] == 0.0
    mask = jnp.asarray(np.arange(N)[None, :] < LENGTHS[:, None])
    expected = np.asarray(adv_lib.reinforce_plus_plus(
        adv_lib.token_rewards(jnp.asarray(REWARDS.reshape(-1)), mask), mask))[np.asarray(mask)]
    assert expected.std() > 0.5
    # The same float32 estimator in two programs: twice the whitening bound of its returns.
    token_r = np.asarray(adv_lib.token_rewards(jnp.asarray(REWARDS.reshape(-1)), mask))
    returns = np.cumsum(token_r[:, ::-1], axis=1)[:, ::-1]  # γ = 1: exact sums of 0/1
    atol = 2 * _whitened_atol(returns[np.asarray(mask)])
    np.testing.assert_allclose(m["advantages/min"], expected.min(), atol=atol)
    np.testing.assert_allclose(m["advantages/max"], expected.max(), atol=atol)
    np.testing.assert_allclose(m["advantages/abs_mean"], np.abs(expected).mean(), atol=atol)


def test_reinforce_pp_baseline_advantages_match_the_estimator(tok, params, model_config,
                                                              rollout):
    _, _, _, m = _first_update("reinforce_pp_baseline", tok, params, model_config, rollout)
    mask = jnp.asarray(np.arange(N)[None, :] < LENGTHS[:, None])
    expected = np.asarray(adv_lib.reinforce_plus_plus_baseline(
        jnp.asarray(REWARDS), mask))[np.asarray(mask)]
    # The group baseline (exact: means of two 0/1 values), then whitening over the tokens.
    centred = (REWARDS - REWARDS.mean(1, keepdims=True)).reshape(-1)
    atol = 2 * _whitened_atol(np.broadcast_to(centred[:, None], mask.shape)[np.asarray(mask)])
    np.testing.assert_allclose(m["advantages/min"], expected.min(), atol=atol)
    np.testing.assert_allclose(m["advantages/max"], expected.max(), atol=atol)
    assert "loss/kl" in m  # KL in the loss for the baseline variant.


# ----------------------------------------------------------------------------- GPG, NSR

def test_gpg_alpha_paper_and_verl():
    # Groups: mixed, all-correct, all-correct, all-wrong: B = 8 samples.
    r = jnp.asarray([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    valid = jnp.ones((4,), bool)
    paper = np.asarray(adv_lib.gpg(r, alpha="paper", group_mask=valid))
    verl = np.asarray(adv_lib.gpg(r, alpha="verl", group_mask=valid))
    centered = np.asarray([[0.5, -0.5], [0, 0], [0, 0], [0, 0]])
    np.testing.assert_allclose(paper, centered * 8 / 2)  # 2 samples in non-zero groups.
    np.testing.assert_allclose(verl, centered * 8 / 5)   # 5 samples with a non-zero reward.
    # Invalid groups count neither in B nor in n.
    half = np.asarray(adv_lib.gpg(r, group_mask=jnp.asarray([True, True, False, False])))
    np.testing.assert_allclose(half, centered * 4 / 2)


def test_gpg_preset_scales_advantages(tok, params, model_config, rollout):
    _, _, _, m = _first_update("gpg", tok, params, model_config, rollout)
    # REWARDS: 4 of 8 samples are in groups with variance: α = 2, A = ±0.5·2 (α = B/n, the
    # centring and the product: ≤ 3 roundings, γ_3 < approx's 1e-6).
    assert m["advantages/max"] == pytest.approx(1.0) and m["advantages/min"] == pytest.approx(-1.0)
    assert "loss/logp_mean" in m  # The plain REINFORCE loss.


def test_true_psr_and_inverted_entropy_mask_resolve():
    """PSR (+1 right, 0 wrong) is w_reinforce with weights 1 / 0; the inverted 80/20 mask
    trains on the valid tokens outside the high-entropy ones (no update step needed)."""
    psr = algorithms.resolve(rl_config("nsr", positive_weight=1.0, negative_weight=0.0))
    a = np.asarray(psr.group_advantages(jnp.asarray(REWARDS), jnp.ones((P,), bool)))
    np.testing.assert_allclose(a, np.where(REWARDS > 0.5, 1.0, 0.0))
    mask = jnp.array([[True, True, True, False]])
    high = jnp.array([[True, False, False, False]])
    inv = algorithms.resolve(rl_config("entropy_8020", entropy_mask_invert=True))
    np.testing.assert_array_equal(inv.entropy_tokens(mask, high), [[False, True, True, False]])
    top = algorithms.resolve(rl_config("entropy_8020"))
    np.testing.assert_array_equal(top.entropy_tokens(mask, high), high)


@pytest.mark.parametrize("name,positive", [("nsr", 0.0), ("w_reinforce", 0.1)])
def test_negative_sample_weighting(name, positive, tok, params, model_config, rollout):
    rl = rl_config(name)
    a = np.asarray(algorithms.resolve(rl).group_advantages(jnp.asarray(REWARDS), jnp.ones((P,), bool)))
    np.testing.assert_allclose(a, np.where(REWARDS > 0.5, positive, -1.0))
    _, _, _, m = _first_update(name, tok, params, model_config, rollout)
    assert m["advantages/max"] == pytest.approx(positive)
    assert m["advantages/min"] == -1.0


# ----------------------------------------------------------------------------- 80/20, KL

def test_entropy_8020_keeps_a_fifth_of_the_tokens(tok, params, model_config, rollout):
    rl, _, _, m = _first_update("entropy_8020", tok, params, model_config, rollout)
    assert rl.entropy_keep_fraction == 0.2
    n_valid = int(LENGTHS.sum())
    assert m["train/entropy_kept_fraction"] == pytest.approx(np.ceil(0.2 * n_valid) / n_valid)
    assert np.isfinite(m["train/entropy"])


def test_random_token_mask_keeps_the_same_share_of_other_tokens(tok, params, model_config,
                                                                rollout):
    """rl.entropy_mask_random (the 80/20 control): the same ⌈0.2·N⌉ tokens per minibatch,
    chosen by uniform scores instead of entropy, so the update differs from top-20%'s."""
    rl = rl_config("entropy_8020", entropy_mask_random=True)
    after, m = _program(rl, tok.vocab_size)(fresh_state(rl, params, model_config), rollout,
                                            jnp.asarray(REWARDS.reshape(-1)))
    n_valid = int(LENGTHS.sum())
    assert float(m["train/entropy_kept_fraction"]) == pytest.approx(
        np.ceil(0.2 * n_valid) / n_valid)
    _, _, top_after, _ = _first_update("entropy_8020", tok, params, model_config, rollout)
    assert _max_change(after.params, top_after.params) > 0.0
    with pytest.raises(ValueError, match="entropy_mask_random needs"):
        rl_config("grpo", entropy_mask_random=True)


def test_adaptive_kl_coefficient_moves_towards_the_target(tok, params, model_config, rollout):
    rl, before, after, m = _first_update("kl_reward_adaptive", tok, params, model_config,
                                         rollout)
    # Reference == policy: observed KL 0 < target, β shrinks by the maximal step.
    assert m["kl/reward_kl"] == 0.0 and m["kl/coef"] == pytest.approx(rl.kl_coef)
    expected_down = rl.kl_coef * (1 - 0.2 * P * G / rl.kl_horizon)
    assert float(after.kl_coef) == pytest.approx(expected_down, rel=1e-6)
    # A reference far from the policy: observed KL > target, β grows.
    noisy = jax.tree.map(lambda x: x + 0.5 * jax.random.normal(jax.random.PRNGKey(3), x.shape),
                         params)
    state = fresh_state(rl, params, model_config, ref_params=noisy)
    state2, m2 = _program(rl, tok.vocab_size)(state, rollout, jnp.asarray(REWARDS.reshape(-1)))
    observed = float(m2["kl/reward_kl"])
    assert observed > rl.kl_target
    err = np.clip(observed / rl.kl_target - 1.0, -0.2, 0.2)
    assert float(state2.kl_coef) == pytest.approx(rl.kl_coef * (1 + err * P * G / rl.kl_horizon),
                                                  rel=1e-6)
    assert float(state2.kl_coef) > rl.kl_coef
    assert float(m2["reward/kl_penalty"]) < 0.0


# ----------------------------------------------------------------------------- configs

NEW_CONFIGS = {"ppo_arithmetic": "ppo", "reinforce_pp_arithmetic": "reinforce_pp",
               "reinforce_pp_baseline_arithmetic": "reinforce_pp_baseline",
               "cispo_arithmetic": "cispo", "lite_ppo_arithmetic": "lite_ppo",
               "gpg_arithmetic": "gpg", "nsr_arithmetic": "nsr",
               "entropy_8020_arithmetic": "entropy_8020",
               "kl_reward_adaptive_arithmetic": "kl_reward_adaptive"}


def load_config(name):
    path = os.path.join(ROOT, "configs", name + ".py")
    spec = importlib.util.spec_from_file_location("config_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


@pytest.mark.parametrize("name", sorted(NEW_CONFIGS))
def test_algorithm_configs_use_their_preset(name):
    config = load_config(name)
    assert config.is_locked and config.rl.algorithm == NEW_CONFIGS[name]
    rl = rl_from_config(config)
    assert rl.advantage == algorithms.PRESETS[NEW_CONFIGS[name]]["advantage"]


# ----------------------------------------------------------------------------- real model

def _byte_level_tokenizer(directory, texts):
    """A small byte-level BPE tokenizer.json (Qwen's kind) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models as tok_models, pre_tokenizers, trainers
    t = Tokenizer(tok_models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(texts, trainer)
    t.save(os.path.join(directory, "tokenizer.json"))


def test_qwen_config_loads_with_the_preset_shapes(tmp_path, tok):
    from rlvr_jax.models import hf
    config = load_config("qwen2p5_0p5b_grpo")
    assert config.is_locked
    assert (config.data.source, config.reward.verifier) == ("jsonl", "math")
    assert (config.model.dtype, config.model.remat) == ("bfloat16", "full")
    assert (config.mesh.fsdp, config.mesh.num_devices, config.mesh.rules) == (-1, 0, "fsdp")
    assert config.tokenizer == config.model.hf_checkpoint
    # An HF directory holding Qwen2.5-0.5B's config.json gives exactly the preset's shapes.
    preset = presets.get("qwen2.5-0.5b")
    (tmp_path / "config.json").write_text(json.dumps(hf.config_to_hf(preset)))
    config.model.hf_checkpoint = str(tmp_path)
    built = build.build_model_config(config, tok)
    assert built == preset.replace(dtype="bfloat16", param_dtype="float32", remat="full")


def test_qwen_config_runs_one_step_with_a_tiny_checkpoint(tmp_path):
    """JSONL data + host math verifier (split path) + HF import + fsdp mesh, end to end."""
    from rlvr_jax.models import hf
    hf_dir, data = tmp_path / "hf", tmp_path / "math.jsonl"
    hf_dir.mkdir()
    rng = np.random.default_rng(0)
    rows = [{"prompt": f"What is {a} + {b}? Answer:", "answer": str(a + b)}
            for a, b in rng.integers(0, 50, size=(24, 2))]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    _byte_level_tokenizer(str(hf_dir), [r["prompt"] + " " + r["answer"] for r in rows])
    tiny = presets.get("tiny", vocab_size=320)
    hf.save_hf_checkpoint(init_params(tiny, jax.random.PRNGKey(0)), tiny, hf_dir)

    config = load_config("qwen2p5_0p5b_grpo")
    config.model.hf_checkpoint = config.tokenizer = str(hf_dir)
    config.data.path = str(data)
    config.data.max_prompt_len = 16
    config.sampling.max_new_tokens = 8
    config.rl.steps, config.rl.num_prompts, config.rl.num_samples = 1, 8, 2
    config.rl.microbatches = 2
    config.eval.num_prompts = config.eval.batch_size = 8
    config.eval.every, config.checkpoint.every = 0, 0
    summary = loop.run(config, str(tmp_path / "run"), progress=False)
    state = summary["state"]
    assert state.params["embed"].shape == (320, tiny.d_model)
    assert len(state.params["embed"].sharding.device_set) == len(jax.devices())  # FSDP.
    with open(tmp_path / "run" / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    rl_rec = [r for r in records if r["phase"] == "rl"]
    assert len(rl_rec) == 1
    for key in ("train/loss", "train/grad_norm", "rollout/reward_mean", "reward/correct"):
        assert np.isfinite(rl_rec[0][key]), key
    assert 0.0 <= summary["after_rl"]["eval/pass@1"] <= 1.0
