"""Asynchronous rollouts (docs/async.md): the off-policy corrections against float64 NumPy
references (`tests/reference/async_ref.py`), their on-policy limit (staleness 0 ⇒ weights 1 ⇒
today's loss), and the knobs' one-line errors. The runs: the synchronous limit bit for bit
and one asynchronous step on split meshes are in tests/test_configs.py (shared programs).

Tolerances: one float32 evaluation against float64 (`numerics.ref_atol`), named at each use.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import losses
from rlvr_jax.train import rl_config
from tests import numerics
from tests.reference import async_ref as ref

B, T = 6, 7


def _batch(seed, spread=0.3):
    rng = np.random.default_rng(seed)
    mask = rng.random((B, T)) < 0.7
    mask[0] = False                                   # an empty row
    mask[1] = True                                    # a full row
    logp = np.minimum(rng.normal(size=(B, T)) * 0.5 - 1.0, -1e-3).astype(np.float32)
    prox = np.minimum(logp + rng.normal(size=(B, T)) * spread, -1e-3).astype(np.float32)
    behav = np.minimum(prox + rng.normal(size=(B, T)) * spread, -1e-3).astype(np.float32)
    adv = rng.normal(size=(B, T)).astype(np.float32)
    garbage = np.where(mask, 0.0, np.float32(1e30)).astype(np.float32)  # Padding: garbage.
    return logp, prox + garbage, behav - garbage, adv, mask


@pytest.mark.parametrize("level,mode", [("token", "truncate"), ("token", "mask"),
                                        ("sequence", "truncate"), ("sequence", "mask")])
def test_decoupled_ppo_matches_reference(level, mode):
    logp, prox, behav, adv, mask = _batch(0)
    cap = 1.5  # Some weights above it, some below (spread 0.3 per token, more per sequence).
    got, metrics = losses.decoupled_ppo(logp, prox, behav, adv, mask, eps_low=0.2,
                                        eps_high=0.28, cap=cap, level=level, mode=mode)
    want = ref.decoupled_ppo(logp, np.where(mask, prox, 0), np.where(mask, behav, 0), adv, mask,
                             0.2, 0.28, cap, level, mode)
    # Each token: exp of a difference (a sequence: a sum of ≤ T of them first), a clip, two
    # products: a chain of T + 4 roundings and 2 transcendentals, relative to |A|·ρ·cap.
    rho = np.exp(np.clip(logp - np.where(mask, prox, 0).astype(np.float64), -20, 20))
    atol = numerics.ref_atol(T + 4, np.abs(adv) * np.maximum(rho, 1.2) * cap, 2)
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= atol + 1e-30)
    assert np.all(np.asarray(got)[~mask] == 0.0)
    assert 0.0 <= float(metrics["is_capped_frac"]) <= 1.0


def test_decoupled_ppo_on_policy_is_ppo_clip_and_its_gradient():
    """Staleness 0 (π_prox = π_behav): every weight is exactly 1 (exp(0)), so the loss and
    its gradient are ppo_clip's exactly, in every mode and level."""
    logp, prox, _, adv, mask = _batch(1)
    want, _ = losses.ppo_clip(logp, prox, adv, mask)
    want_g = jax.grad(lambda x: jnp.sum(losses.ppo_clip(x, prox, adv, mask)[0]))(logp)
    for level in ("token", "sequence"):
        for mode in ("truncate", "mask"):
            f = lambda x: losses.decoupled_ppo(x, prox, prox, adv, mask, level=level,  # noqa
                                               mode=mode)
            got, metrics = f(logp)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(f(x)[0]))(logp), want_g)
            assert float(metrics["is_weight_mean"]) == 1.0


def test_mismatch_kl_matches_reference_and_is_zero_on_policy():
    logp, _, behav, _, mask = _batch(2)
    got = float(losses.mismatch_kl(logp, behav, mask))
    want = ref.mismatch_kl(logp, np.where(mask, behav, 0), mask)
    # A mean of ≤ B·T terms e^d − 1 − d (|d| ≲ 2): γ of that sum's chain plus exp's roundings,
    # relative to the largest term e^|d| + 1 + |d|.
    d = np.abs(logp - np.where(mask, behav, 0).astype(np.float64))[mask]
    assert abs(got - want) <= numerics.ref_atol(B * T + 3, np.max(np.exp(d) + 1 + d), 1)
    assert float(losses.mismatch_kl(logp, logp, mask)) == 0.0


def test_async_knobs_one_line_errors():
    base = dict(num_prompts=4)
    with pytest.raises(ValueError, match="max_staleness must be an integer >= 0"):
        rl_config.RLConfig(**base, max_staleness=-1)
    with pytest.raises(ValueError, match="tis_cap > 0"):
        rl_config.RLConfig(**base, proximal="sampler")
    with pytest.raises(ValueError, match="proximal must be one of"):
        rl_config.RLConfig(**base, proximal="old", tis_cap=2.0)
    with pytest.raises(ValueError, match="tis_level must be one of"):
        rl_config.RLConfig(**base, tis_level="row")
    with pytest.raises(ValueError, match="hint_mode"):
        rl_config.RLConfig(**base, max_staleness=1, hint_mode="on_fail")
    assert rl_config.RLConfig(**base, proximal="trainer", tis_cap=2.0).needs_old_logprobs
    assert not rl_config.RLConfig(**base, max_staleness=2).needs_old_logprobs


def test_sampler_devices_split_and_one_line_error():
    """mesh.sampler_devices = s gives the last s devices to the sampler, 0 shares them all;
    s that leaves the trainer none is a ConfigError naming the field."""
    from rlvr_jax.train import build, config as config_lib
    from rlvr_jax.train.errors import ConfigError
    config = config_lib.default_config()
    devices = list(range(4))
    assert build.split_devices(config, devices) == (devices, devices)
    config.mesh.sampler_devices = 1
    assert build.split_devices(config, devices) == ([0, 1, 2], [3])
    config.mesh.sampler_devices = 4
    with pytest.raises(ConfigError, match="mesh.sampler_devices: 4 of 4 devices"):
        build.split_devices(config, devices)
