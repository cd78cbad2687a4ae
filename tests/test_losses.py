"""rlvr_jax.losses against loop-based NumPy references, plus the properties the trainer relies on."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import losses
from tests import numerics
from tests.reference import losses_ref as ref

B, T = 6, 7
# Per-token values against float64 references: logp − old rounds alike on both sides, then one
# exp and ≤ 2 products (γ_10 = 6e-7 relative, numerics.TRANSCENDENTAL_U per exp): RTOL covers it.
RTOL, ATOL = 1e-5, 1e-5


def _batch(seed, spread=0.3):
    rng = np.random.default_rng(seed)
    mask = rng.random((B, T)) < 0.7
    mask[0] = False                                   # an empty row
    mask[1] = True                                    # a full row
    logp = (rng.normal(size=(B, T)) * 0.5 - 1.0).astype(np.float32)
    old = (logp + rng.normal(size=(B, T)) * spread).astype(np.float32)
    adv_seq = rng.normal(size=(B,)).astype(np.float32)
    adv_tok = rng.normal(size=(B, T)).astype(np.float32)
    return logp, old, adv_seq, adv_tok, mask


def _garbage(x, mask, value):
    return np.where(mask, x, value).astype(np.float32)


POLICY_LOSSES = {
    "ppo_clip": lambda lp, old, a, m: losses.ppo_clip(lp, old, a, m, eps_low=0.2, eps_high=0.28,
                                                      dual_clip=3.0),
    "gspo": lambda lp, old, a, m: losses.gspo(lp, old, a, m, eps_low=0.03, eps_high=0.04),
    "cispo": lambda lp, old, a, m: losses.cispo(lp, old, a, m, eps_high=0.3),
    "reinforce": lambda lp, old, a, m: losses.reinforce(lp, a, m),
    "luspo": lambda lp, old, a, m: losses.luspo(lp, old, a, m, eps_low=0.03, eps_high=0.04),
    "sapo": lambda lp, old, a, m: losses.sapo(lp, old, a, m),
    "dppo_tv": lambda lp, old, a, m: losses.dppo(lp, old, a, m),
    "dppo_binary_kl": lambda lp, old, a, m: losses.dppo(lp, old, a, m, divergence="binary_kl",
                                                        eps_low=0.05, eps_high=0.05),
    "dcpo": lambda lp, old, a, m: losses.dcpo(lp, old, a, m),
    # A = r - r̂ of binary rewards (groups of 2 here: r̂ = 1/2, A = ±1/2); zero advantages are
    # groups without contrast.
    "nft": lambda lp, old, a, m: losses.nft_from_advantages(lp, old, 0.5 * jnp.sign(a), m),
}


@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_ppo_clip_matches_reference(dual_clip):
    logp, old, _, adv, mask = _batch(0, spread=0.5)
    loss, metrics = losses.ppo_clip(logp, old, adv, mask, eps_low=0.2, eps_high=0.28,
                                    dual_clip=dual_clip)
    ref_loss, low, high = ref.ppo_clip(logp, old, adv, mask, 0.2, 0.28, dual_clip)
    np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)
    assert low > 0 and high > 0
    # Exact counts over the same tokens (every ratio is ≥ 3% from a clip bound, so no
    # comparison can flip), one division: ≤ u·frac.
    np.testing.assert_allclose(metrics["clip_frac_low"], low, atol=1e-6)
    np.testing.assert_allclose(metrics["clip_frac_high"], high, atol=1e-6)
    # One exp per ratio; the mean adds ≤ B·T positive terms and a division: γ_{B·T+9} < 1e-5.
    ratios = np.exp((logp - old).astype(np.float64))[mask]
    np.testing.assert_allclose(metrics["ratio_max"], ratios.max(), rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_min"], ratios.min(), rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_mean"], ratios.mean(), rtol=1e-5)


def test_ppo_clip_sequence_advantages_broadcast():
    logp, old, adv, _, mask = _batch(1)
    a, _ = losses.ppo_clip(logp, old, adv, mask)
    b, _ = losses.ppo_clip(logp, old, np.broadcast_to(adv[:, None], (B, T)), mask)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="advantages"):
        losses.ppo_clip(logp, old, adv[:3], mask)


def test_gspo_value_and_gradient_match_sequence_level_reference():
    logp, old, adv, _, mask = _batch(2, spread=0.05)
    kw = dict(eps_low=0.03, eps_high=0.04)
    loss, _ = losses.gspo(logp, old, adv, mask, **kw)
    ref_loss, ref_grad = ref.gspo(logp, old, adv, mask, 0.03, 0.04)
    # The sequence log-ratio (T terms, |Δ| < 1) errs by ≤ γ_T·Σ|Δ| in both (the reference sums
    # in float32 too), which exp makes relative: far below RTOL.
    np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)
    grad = jax.grad(lambda lp: losses.aggregate(losses.gspo(lp, old, adv, mask, **kw)[0], mask,
                                                "seq-mean-token-mean"))(logp)
    # exp, the chain rule and two divisions by counts: γ_{T+14}·|g| ≪ rtol·|g|.
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("eps_low", [None, 0.2])
def test_cispo_matches_reference_and_keeps_gradients(eps_low):
    logp, old, _, adv, mask = _batch(3, spread=0.8)
    loss, metrics = losses.cispo(logp, old, adv, mask, eps_low=eps_low, eps_high=0.3)
    np.testing.assert_allclose(loss, ref.cispo(logp, old, adv, mask, eps_low, 0.3),
                               rtol=RTOL, atol=ATOL)
    assert float(metrics["clip_frac_high"]) > 0
    # The weight is stop-gradient: d loss_t / d logp_t = -w_t A_t, non-zero even when clipped.
    grad = jax.grad(lambda lp: jnp.sum(losses.cispo(lp, old, adv, mask, eps_low=eps_low,
                                                    eps_high=0.3)[0]))(logp)
    lo = 0.0 if eps_low is None else 1 - eps_low
    w = np.clip(np.exp((logp - old).astype(np.float64)), lo, 1.3)
    # One exp and one product: γ_9 relative.
    np.testing.assert_allclose(grad, np.where(mask, -w * adv, 0.0), rtol=1e-5, atol=1e-6)


def test_reinforce_loss_and_gradient():
    logp, _, adv, _, mask = _batch(4)
    loss, _ = losses.reinforce(logp, adv, mask)
    # The same correctly rounded float32 product on both sides: equal.
    np.testing.assert_allclose(loss, np.where(mask, -adv[:, None] * logp, 0.0), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_policy_loss_properties(name):
    fn = POLICY_LOSSES[name]
    logp, old, adv, _, mask = _batch(5)

    def total(lp, a, o=old):
        per_token, _ = fn(lp, o, a, mask)
        return losses.aggregate(per_token, mask, "token-mean")

    # jit equals eager within two float32 evaluations of the longest chain: the ratio mean
    # (B·T terms and a division) after one exp.
    eager = fn(logp, old, adv, mask)
    jitted = jax.jit(fn)(logp, old, adv, mask)
    numerics.assert_trees_reorder_close(jitted, eager, B * T + 1 + numerics.TRANSCENDENTAL_U)
    # Masked tokens do not change results; garbage there gives finite, zero gradients.
    for bad in (-np.inf, np.inf, 1e30, np.nan):
        g_lp, g_old = _garbage(logp, mask, bad), _garbage(old, mask, -bad)
        out = fn(g_lp, g_old, adv, mask)
        jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), eager, out)
        grad = jax.grad(total)(g_lp, adv, g_old)
        assert np.all(np.isfinite(grad)), (name, bad)
        assert np.all(np.asarray(grad)[~mask] == 0.0), (name, bad)
    # Zero advantages give a zero policy gradient.
    grad0 = jax.grad(total)(logp, np.zeros_like(adv))
    assert np.all(np.asarray(grad0) == 0.0)


@pytest.mark.parametrize("name,eps", [("ppo_clip", 0.2), ("gspo", 4e-4)])
def test_bf16_inputs_give_fp32_clip_fractions(name, eps):
    rng = np.random.default_rng(6)
    mask = np.ones((B, T), bool)
    # Log-probs near 0 so that bf16 can represent differences of order eps (GSPO's 4e-4);
    # in bf16 the ratio exp(Δ) itself would round to 1 or 1 ± 0.008.
    center, scale = (-0.05, 0.01) if name == "gspo" else (-2.0, 1.0)
    logp = jnp.asarray(center + scale * rng.normal(size=(B, T)), jnp.bfloat16)
    scale = 2e-3 if name == "gspo" else 0.3
    old = (logp.astype(jnp.float32) + jnp.asarray(rng.normal(size=(B, T)) * scale)).astype(jnp.bfloat16)
    adv = jnp.asarray(rng.normal(size=(B,)), jnp.float32)
    fn = losses.gspo if name == "gspo" else losses.ppo_clip
    _, m16 = fn(logp, old, adv, mask, eps_low=eps, eps_high=eps)
    _, m32 = fn(logp.astype(jnp.float32), old.astype(jnp.float32), adv, mask, eps_low=eps,
                eps_high=eps)
    assert float(m32["clip_frac"]) > 0
    for key in ("clip_frac_low", "clip_frac_high", "clip_frac"):
        assert float(m16[key]) == float(m32[key]), key


def test_truncated_importance_weights():
    logp, old, _, _, mask = _batch(7, spread=0.8)
    w, metrics = losses.truncated_importance_weights(logp, old, mask, cap=2.0)
    ratio = np.exp((logp - old).astype(np.float64))
    np.testing.assert_allclose(w, np.where(mask, np.minimum(ratio, 2.0), 0.0), rtol=1e-5)  # γ_8
    ws, _ = losses.truncated_importance_weights(logp, old, mask, cap=2.0, level="sequence",
                                                mode="mask")
    seq = np.exp(np.sum(np.where(mask, logp - old, 0.0), axis=1, dtype=np.float64))
    expected = np.where(mask, np.where(seq > 2.0, 0.0, seq)[:, None], 0.0)
    # exp turns the row sum's error γ_T·Σ|Δ| (< 1e-5 here) into a relative one, plus γ_8.
    np.testing.assert_allclose(ws, expected, rtol=1e-4)
    assert 0 < float(metrics["is_capped_frac"]) < 1 and float(metrics["sampler_kl_k3"]) > 0
    assert np.all(np.asarray(jax.grad(lambda x: jnp.sum(
        losses.truncated_importance_weights(x, old, mask)[0]))(logp)) == 0)


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_kl_matches_reference(kind):
    logp, ref_logp, _, _, mask = _batch(8)
    # δ rounds alike; k2 once; k3 = expm1(−δ) + δ cancels: ≤ 8u·|expm1(−δ)| + u·k3, which is
    # ≤ atol + rtol·k3 for every δ.
    np.testing.assert_allclose(losses.kl(logp, ref_logp, kind=kind),
                               ref.kl(logp, ref_logp, kind), rtol=1e-5, atol=1e-6)
    out = losses.kl(_garbage(logp, mask, -np.inf), ref_logp, kind=kind, mask=mask)
    np.testing.assert_allclose(out, np.where(mask, ref.kl(logp, ref_logp, kind), 0.0),
                               rtol=1e-5, atol=1e-6)


def test_kl_plus_variants_and_k1_warning():
    logp, ref_logp, _, _, mask = _batch(9)
    for base in ("k1", "k3"):
        plus = losses.kl(logp, ref_logp, kind=base + "+")
        # (k + k2) − k2 with the same eager k: two roundings of terms ≤ |k| + k2 ≤ 3·|k| for
        # |δ| ≤ 2 (here |δ| < 0.72): γ_2·3 = 3.6e-7 relative.
        np.testing.assert_allclose(plus, losses.kl(logp, ref_logp, kind=base), rtol=1e-6)
        g_plus = jax.grad(lambda x: jnp.sum(losses.kl(x, ref_logp, kind=base + "+")))(logp)
        g_k2 = jax.grad(lambda x: jnp.sum(losses.kl(x, ref_logp, kind="k2")))(logp)
        np.testing.assert_allclose(g_plus, g_k2, rtol=1e-6)  # both 0.5·(2δ)·1: exact
    with pytest.warns(UserWarning, match="k1"):
        losses.kl_loss(logp, ref_logp, mask, kind="k1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, metrics = losses.kl_loss(logp, ref_logp, mask, kind="k3", coef=0.1)
    assert float(metrics["kl_mean"]) > 0
    assert np.all(np.asarray(jax.grad(lambda x: jnp.sum(
        losses.kl_penalty(x, ref_logp, mask)))(logp)) == 0)
    beta = losses.adaptive_kl_coef(0.1, 0.5, target=0.1, horizon=1000, num_steps=100)
    np.testing.assert_allclose(beta, 0.1 * (1 + 0.2 * 0.1), rtol=1e-6)  # 6 roundings: γ_6


def test_entropy_matches_reference_and_is_stable():
    rng = np.random.default_rng(10)
    logits = (rng.normal(size=(2, 3, 11)) * 4).astype(np.float32)
    # H = lse + Σ p·(−z), both ≥ 0: the shift, V exps and V-term sums, a log, products and a
    # division: γ_{2V+3+2·8}·(1 + H) = 3.5e-6 at H ≥ 0.44 (here), below atol + rtol·H.
    np.testing.assert_allclose(losses.entropy(logits), ref.entropy(logits.astype(np.float64)),
                               rtol=1e-5, atol=1e-6)
    # z + 1e4 rounds each logit by ≤ u·1e4: |ΔH| ≤ that · Σ p·|z − z̄| ≤ u·1e4·(max z − min z)
    # = 6.9e-3 here (the modelling part; the two float32 evaluations add ≤ 2e-5).
    big = logits + 1e4
    np.testing.assert_allclose(losses.entropy(big), losses.entropy(logits), atol=1e-2)
    bf = losses.entropy(jnp.asarray(logits, jnp.bfloat16))
    assert bf.dtype == jnp.float32 and bf.shape == (2, 3)
    masked = np.concatenate([logits, np.full((2, 3, 2), -np.inf, np.float32)], axis=-1)
    # −inf logits add exact zeros, but 13 terms reduce in another order than 11: two float32
    # evaluations of the chain above.
    h = np.asarray(losses.entropy(logits))
    np.testing.assert_allclose(losses.entropy(masked), h, rtol=0, atol=numerics.reorder_atol(
        2 * 13 + 3 + 2 * numerics.TRANSCENDENTAL_U, 1 + h.max()))
    grad = jax.grad(lambda x: jnp.sum(losses.entropy(x)))(masked)
    assert np.all(np.isfinite(grad))
    # p = 1/4 and z = 0 exactly: one log, 8u = 4.8e-7 relative.
    np.testing.assert_allclose(losses.entropy(np.zeros((4,), np.float32)), np.log(4.0), rtol=1e-6)


def test_entropy_bonus_and_high_entropy_mask():
    rng = np.random.default_rng(11)
    ent = rng.random((B, T)).astype(np.float32)
    _, _, _, _, mask = _batch(11)
    # The same float32 product −0.01·H on both sides.
    np.testing.assert_allclose(losses.entropy_bonus(ent, mask, coef=0.01),
                               np.where(mask, -0.01 * ent, 0.0), rtol=1e-6)
    for frac in (0.2, 0.5, 1.0):
        keep = losses.high_entropy_mask(ent, mask, keep_fraction=frac)
        np.testing.assert_array_equal(keep, ref.high_entropy_mask(ent, mask, frac))
    with pytest.raises(ValueError):
        losses.high_entropy_mask(ent, mask, keep_fraction=0.0)


def test_low_entropy_complement_matches_reference():
    rng = np.random.default_rng(13)
    ent = rng.random((B, T)).astype(np.float32)
    _, _, _, _, mask = _batch(13)
    for frac in (0.2, 0.5):
        top = losses.high_entropy_mask(ent, mask, keep_fraction=frac)
        low = np.asarray(losses.low_entropy_complement(mask, top))
        np.testing.assert_array_equal(low, ref.low_entropy_complement(ent, mask, frac))
        # A partition of the valid tokens; every kept-low entropy <= every high one.
        assert not np.any(low & np.asarray(top)) and np.array_equal(low | top, mask)
        assert ent[low].max() <= ent[np.asarray(top)].min()


@pytest.mark.parametrize("mode", losses.MODES)
def test_aggregate_matches_reference_and_microbatches_add_up(mode):
    rng = np.random.default_rng(12)
    values = rng.normal(size=(8, T)).astype(np.float32)
    mask = rng.random((8, T)) < 0.6
    mask[3] = False
    # Row sums (T), a division, the sum over rows (8) and a division, whose terms are the
    # same aggregate of |v| (the values cancel: a relative tolerance cannot hold).
    chain = T + 8 + 2
    size = ref.aggregate(np.abs(values), mask, mode)
    np.testing.assert_allclose(losses.aggregate(values, mask, mode),
                               ref.aggregate(values, mask, mode), rtol=0,
                               atol=numerics.ref_atol(chain, size))
    np.testing.assert_allclose(losses.aggregate(values, mask, mode, num_tokens=17.0,
                                                num_sequences=5.0, max_len=9),
                               ref.aggregate(values, mask, mode, 17.0, 5.0, 9), rtol=0,
                               atol=numerics.ref_atol(chain, ref.aggregate(np.abs(values), mask,
                                                                           mode, 17.0, 5.0, 9)))
    # Garbage at masked positions is ignored.
    dirty = np.where(mask, values, np.nan).astype(np.float32)
    assert float(losses.aggregate(dirty, mask, mode)) == float(losses.aggregate(values, mask, mode))
    # Micro-batches with the global counts add up to the full batch.
    counts = losses.global_counts(mask)
    num_seq = counts["num_rows"] if mode == "seq-mean-token-sum-norm" else counts["num_sequences"]
    kw = dict(num_tokens=counts["num_tokens"], num_sequences=num_seq, max_len=T)
    agg = jax.jit(lambda v, m: losses.aggregate(v, m, mode, **kw))
    micro = sum(float(agg(values[i:i + 2], mask[i:i + 2])) for i in range(0, 8, 2))
    np.testing.assert_allclose(micro, losses.aggregate(values, mask, mode), rtol=0,
                               atol=numerics.reorder_atol(chain, size))
    with pytest.raises(ValueError, match="mode"):
        losses.aggregate(values, mask, "sum")


@pytest.mark.parametrize("clip", [None, 0.2])
def test_value_loss_matches_reference(clip):
    rng = np.random.default_rng(13)
    _, _, _, _, mask = _batch(13)
    v, old, ret = (rng.normal(size=(B, T)).astype(np.float32) for _ in range(3))
    loss, metrics = losses.value_loss(v, old, ret, mask, clip=clip)
    # The reference rounds the same float32 differences; a square (and max): 2γ_3 relative.
    np.testing.assert_allclose(loss, ref.value_loss(v, old, ret, mask, clip), rtol=1e-5, atol=1e-6)
    grad = jax.grad(lambda x: jnp.sum(losses.value_loss(x, old, _garbage(ret, mask, np.inf), mask,
                                                        clip=clip)[0]))(_garbage(v, mask, np.nan))
    assert np.all(np.isfinite(grad)) and np.all(np.asarray(grad)[~mask] == 0)
    if clip is not None:
        assert 0 < float(metrics["value_clip_frac"]) < 1
