"""SAPO, DPPO, DCPO, LUSPO, NFT and the mass-covering divergences against loop-based float64
NumPy references (values and closed-form gradients), NFT's on-policy equivalence to GRPO,
and their argument checks. The properties every policy loss must have (masked garbage, jit
equals eager, zero advantage → zero gradient) run in tests/test_losses.py (POLICY_LOSSES).

Tolerances: one float32 evaluation against float64 (`numerics.ref_atol`), per element, with the
roundings of the longest chain and the size of the terms that can cancel (named at each use).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import advantages as adv_lib
from rlvr_jax import losses
from tests import numerics
from tests.reference import losses_ref as ref

B, T = 6, 7


def _batch(seed, spread=0.3, center=-1.0):
    rng = np.random.default_rng(seed)
    mask = rng.random((B, T)) < 0.7
    mask[0] = False                                   # an empty row
    mask[1] = True                                    # a full row
    logp = np.minimum(rng.normal(size=(B, T)) * 0.5 + center, -1e-3).astype(np.float32)
    old = np.minimum(logp + rng.normal(size=(B, T)) * spread, -1e-3).astype(np.float32)
    adv_tok = rng.normal(size=(B, T)).astype(np.float32)
    return logp, old, adv_tok, mask


def _grad(fn, logp):
    """d(Σ per-token loss)/d logp (every new token loss depends on its own logp only)."""
    return np.asarray(jax.grad(lambda x: jnp.sum(fn(x)[0]))(jnp.asarray(logp)))


def _assert_ref(got, want, magnitude, chain, transcendentals):
    # One float32 evaluation against float64: γ_{chain + 8·transcendentals} × the size of the
    # terms (numerics.ref_atol), element by element.
    atol = numerics.ref_atol(chain, np.asarray(magnitude, np.float64), transcendentals)
    err = np.abs(np.asarray(got, np.float64) - want)
    # (assert_allclose cannot take a per-element atol here: its message formats it as a scalar.)
    np.testing.assert_array_less(err, np.broadcast_to(atol, err.shape) + 1e-30)


def _delta(logp, old):
    return np.abs(logp.astype(np.float64) - old)


@pytest.mark.parametrize("taus", [(1.0, 1.05), (0.5, 3.0)])
def test_sapo_matches_reference(taus):
    logp, old, adv, mask = _batch(0, spread=0.6)
    fn = lambda lp: losses.sapo(lp, old, adv, mask, tau_pos=taus[0], tau_neg=taus[1])  # noqa: E731
    loss, metrics = fn(logp)
    want, want_grad = ref.sapo(logp, old, adv, mask, *taus)
    rho = np.exp(logp.astype(np.float64) - old)
    tau = np.where(adv > 0, taus[0], taus[1])
    # ρ - 1 cancels: its error ≤ (exp's 8u + u|δ| of the rounded δ)·ρ, which σ' ≤ 1/4 and 4/τ
    # carry to the loss as |A|·ρ(1 + |δ|); the rest (σ, ×4/τ, ×A) is relative to |A|·4σ/τ.
    size = np.abs(adv) * (4.0 / tau + rho * (1.0 + _delta(logp, old)) * tau)
    _assert_ref(loss, want, size, 8, 2)
    # The gradient -A·4σ(1-σ)ρ: 1 - σ cancels as σ → 1 (error ≤ σ's), the same ρ - 1 error
    # through σ'' ≤ 1/10 and ρ: size |A|·ρ·(4 + τρ(1 + |δ|)).
    _assert_ref(_grad(fn, logp), want_grad,
                np.abs(adv) * rho * (4.0 + tau * rho * (1.0 + _delta(logp, old))), 12, 3)
    assert 0 < float(metrics["gate_weight_min"]) < float(metrics["gate_weight_max"]) <= 1.0


@pytest.mark.parametrize("divergence,eps", [("tv", 0.15), ("binary_kl", 0.05)])
def test_dppo_matches_reference(divergence, eps):
    logp, old, adv, mask = _batch(1, spread=0.8, center=-0.7)
    kw = dict(divergence=divergence, eps_low=eps, eps_high=eps, ratio_cap=3.0)
    fn = lambda lp: losses.dppo(lp, old, adv, mask, **kw)  # noqa: E731
    loss, metrics = fn(logp)
    want, want_grad, margin = ref.dppo(logp, old, adv, mask, divergence, eps, eps, 3.0)
    # Keep/drop decisions compare p - q (or D) with a threshold: the float32 values are within
    # ~1e-6 of the float64 ones here, so a margin of 1e-4 means no decision can flip.
    assert margin > 1e-4
    assert 0 < float(metrics["clip_frac"]) < 1 and float(metrics["ratio_capped_frac"]) > 0
    rho = np.minimum(np.exp(logp.astype(np.float64) - old), 3.0)
    size = np.abs(adv) * rho * (1.0 + _delta(logp, old))
    # -A·min(ρ, C)·logp: exp (its error relative, plus u|δ|) and two products.
    _assert_ref(loss, want, size * np.abs(logp), 4, 1)
    _assert_ref(_grad(fn, logp), want_grad, size, 4, 1)


def test_dcpo_bounds_and_loss_match_reference():
    logp, old, adv, mask = _batch(2, spread=0.5, center=-0.4)
    low, high = losses.dcpo_clip_bounds(old, eps_low=0.1, eps_high=0.2, ratio_cap=4.0)
    want = np.vectorize(lambda o: ref.dcpo_bounds(o, 0.1, 0.2, 4.0))(old)
    # q = exp(old) (8u), 4ε/q, 1 ± it, sqrt (correctly rounded), ½ + ½·: x = 1 ∓ 4ε/q errs by
    # Δx ≤ γ_k·(1 + 4ε/q), and |√a - √b| ≤ min(|a - b|/√b, √|a - b|) where 1 - 4ε_low/q
    # cancels (near 0 or clamped at 0); the rest is relative to the bound.
    four_eps_q = 4.0 / np.exp(old.astype(np.float64))
    for got, bound, eps, sign in ((low, want[0], 0.1, -1.0), (high, want[1], 0.2, 1.0)):
        x = np.maximum(1.0 + sign * eps * four_eps_q, 0.0)
        dx = numerics.ref_atol(6, 1.0 + eps * four_eps_q, 1)
        root = 0.5 * np.minimum(dx / np.sqrt(np.maximum(x, 1e-300)), np.sqrt(dx))
        atol = root + numerics.ref_atol(3, bound, 0)
        capped = bound == 4.0
        np.testing.assert_array_less(np.abs(np.asarray(got, np.float64) - bound)[~capped],
                                     atol[~capped])
        assert np.all(np.asarray(got)[capped] == np.float32(4.0))
    kw = dict(eps_low=0.1, eps_high=0.2, ratio_cap=4.0)
    fn = lambda lp: losses.dcpo(lp, old, adv, mask, **kw)  # noqa: E731
    loss, metrics = fn(logp)
    want_loss, want_grad, margin = ref.dcpo(logp, old, adv, mask, 0.1, 0.2, 4.0)
    assert margin > 1e-4  # No ratio within 1e-4 of a bound: no clip decision can flip.
    assert float(metrics["clip_frac_low"]) > 0 and float(metrics["clip_frac_high"]) > 0
    rho = np.exp(logp.astype(np.float64) - old)
    size = np.abs(adv) * (rho * (1.0 + _delta(logp, old)) + 2.0 * want[1] + 10.0)
    _assert_ref(loss, want_loss, size, 10, 2)
    _assert_ref(_grad(fn, logp), want_grad, np.abs(adv) * rho * (1.0 + _delta(logp, old)), 4, 1)


def test_luspo_is_length_weighted_gspo():
    logp, old, _, mask = _batch(3, spread=0.05)
    adv = np.random.default_rng(3).normal(size=(B,)).astype(np.float32)
    kw = dict(eps_low=0.03, eps_high=0.04)
    loss, _ = losses.luspo(logp, old, adv, mask, **kw)
    want, want_grad = ref.luspo(logp, old, adv, mask, 0.03, 0.04)
    # GSPO's value (the row's log-ratio mean: T terms, exp) times an exact integer length.
    n = mask.sum(axis=1, keepdims=True)
    size = np.abs(adv)[:, None] * np.exp(0.2) * n * (1.0 + T * 0.2)
    _assert_ref(loss, want, size, T + 4, 1)
    grad = jax.grad(lambda lp: losses.aggregate(losses.luspo(lp, old, adv, mask, **kw)[0], mask,
                                                "seq-mean-token-mean"))(logp)
    # The same, the chain rule through exp and two divisions by counts.
    _assert_ref(grad, want_grad, size / np.maximum(n, 1), T + 8, 1)
    # TRL's luspo: mean over the B rows of ℓ_i·|o_i| (empty rows count 0) = the sum of the
    # per-token GSPO values / B; ours over the non-empty rows (5 of 6 here).
    gspo_tok, _ = losses.gspo(logp, old, adv, mask, **kw)
    trl = float(np.sum(np.where(mask, gspo_tok, 0.0))) / B
    ours = float(losses.aggregate(loss, mask, "seq-mean-token-mean"))
    np.testing.assert_allclose(ours * 5 / B, trl, rtol=numerics.gamma(2 * B * T + 4))


@pytest.mark.parametrize("prompt_weight", ["none", "negative_rate", "grpo"])
def test_nft_matches_reference(prompt_weight):
    logp, old, _, mask = _batch(4, spread=0.7)
    rewards = np.array([1, 0, 0, 1, 1, 0], np.float32)
    rate = np.array([0.5, 0.5, 0.25, 0.75, 1.0, 0.0], np.float32)  # rows 4, 5: no contrast
    kw = dict(negative_weight=0.8, eps=0.05, prompt_weight=prompt_weight, rate_clip=0.02)
    fn = lambda lp: losses.nft(lp, old, rewards, rate, mask, **kw)  # noqa: E731
    loss, metrics = fn(logp)
    want, want_grad = ref.nft(logp, old, rewards, rate, mask, 0.8, 0.05, prompt_weight, 0.02)
    rho = np.exp(logp.astype(np.float64) - old)
    rh = np.clip(rate, 0.02, 0.98)[:, None].astype(np.float64)
    proxy = (1 - rh * rho) / (1 - rh)
    assert np.all(np.abs(proxy - 0.05)[mask] > 1e-4)  # No floor decision can flip.
    assert float(metrics["negative_floor_frac"]) > 0
    floored = np.maximum(proxy, 0.05)
    # 1 - r̂ρ cancels: its error ≤ γ·(1 + r̂ρ(1 + |δ|)), divided by (1 - r̂) and by the floored
    # value inside the log (its derivative); ω ≤ √49 = 7; plus -ω·δ on correct rows.
    cancel = (1 + rh * rho * (1 + _delta(logp, old))) / ((1 - rh) * floored)
    size = 7.0 * (cancel + np.abs(np.log(floored)) + _delta(logp, old) + 1.0)
    _assert_ref(loss, want, size, 12, 2)
    _assert_ref(_grad(fn, logp), want_grad, size * (1.0 + rh * rho / ((1 - rh) * floored)),
                14, 2)
    assert np.all(np.asarray(loss)[4:] == 0)


@pytest.mark.parametrize("prompt_weight", ["negative_rate", "grpo"])
def test_nft_on_policy_gradient_is_grpo(prompt_weight):
    """At ratio 1 the NFT gradient is -ω(r - r̂)/(1 - r̂)·∇logp: Dr.GRPO's (A = r - r̂) with
    ω = 1 - r̂, and GRPO's with the population std σ = √(r̂(1 - r̂)) with ω = √((1 - r̂)/r̂),
    i.e. `advantages.grpo` (unbiased std) × √(G/(G - 1)). Zero-variance groups: 0 in both."""
    logp, _, _, mask = _batch(5)
    g = 3
    rewards = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], np.float32)  # r̂ = 1/3, 1
    dr = np.asarray(adv_lib.grpo(rewards, scale="none")).reshape(-1)  # NFT's input: r - r̂
    if prompt_weight == "negative_rate":
        a = dr
    else:
        a = adv_lib.grpo(rewards, scale="group", eps=0.0) * np.float32(np.sqrt(g / (g - 1)))
        a = np.asarray(a).reshape(-1)

    def total(loss_fn):
        return jax.grad(lambda lp: losses.aggregate(loss_fn(lp)[0], mask,
                                                    "seq-mean-token-mean"))(jnp.asarray(logp))

    grpo = total(lambda lp: losses.ppo_clip(lp, jax.lax.stop_gradient(lp), a, mask))
    nft = total(lambda lp: losses.nft_from_advantages(lp, jax.lax.stop_gradient(lp), dr, mask,
                                                      prompt_weight=prompt_weight))
    assert np.any(np.asarray(nft) != 0)
    # Both are a per-row constant over counts: the group mean (G terms), std, sqrt and the
    # scale on one side, r̂ decoded (1 - A), ω (√ of a quotient) and 1/(1 - r̂) on the other,
    # then two divisions by counts: ≤ 32 roundings each, relative to the largest entry.
    numerics.assert_trees_reorder_close(nft, grpo, 32)


@pytest.mark.parametrize("kind", ["forward_kl", "js"])
def test_mass_covering_matches_reference_and_vanishes_at_the_reference(kind):
    logp, ref_logp, _, mask = _batch(6, spread=0.8)
    fn = lambda lp: losses.mass_covering(lp, ref_logp, mask, kind=kind, coef=0.5)  # noqa: E731
    values, metrics = fn(logp)
    want, want_grad = ref.mass_covering(logp, ref_logp, mask, kind)
    u = np.exp(logp.astype(np.float64) - ref_logp)
    d = _delta(logp, ref_logp)
    # expm1(δ) - δ and ½[uδ - (1 + u)(softplus(δ) - log 2)] cancel: sizes of their terms,
    # plus the rounding of δ (u|δ|) times the derivative (≤ u + 1).
    size = (u + 1) * (1 + d) + np.log1p(u) + 1
    _assert_ref(values, 0.5 * want, 0.5 * size, 8, 3)
    _assert_ref(_grad(fn, logp), 0.5 * want_grad, 0.5 * size, 10, 3)
    assert np.all(want[mask] > 0) and float(metrics["divergence_mean"]) > 0
    # At π = π_ref: value 0 and gradient 0 exactly (δ = 0, expm1(0) = 0, log 2 - log 2... ).
    at_ref = losses.mass_covering(logp, logp, mask, kind=kind)[0]
    assert np.all(np.abs(np.asarray(at_ref)) <= numerics.ref_atol(4, 1.0, 2))
    g0 = jax.grad(lambda lp: jnp.sum(losses.mass_covering(lp, logp, mask, kind=kind)[0]))(logp)
    assert np.all(np.abs(np.asarray(g0)) <= numerics.ref_atol(4, 1.0, 2))
    # Garbage at masked positions changes nothing and has zero gradient.
    dirty = np.where(mask, logp, np.nan).astype(np.float32)
    np.testing.assert_array_equal(fn(dirty)[0], values)
    g = np.asarray(jax.grad(lambda lp: jnp.sum(fn(lp)[0]))(dirty))
    assert np.all(np.isfinite(g)) and np.all(g[~mask] == 0)


def test_argument_errors_are_one_line():
    logp, old, adv, mask = _batch(7)
    a = adv[:, 0]
    cases = [
        (lambda: losses.sapo(logp, old, adv, mask, tau_pos=0.0), "tau_pos"),
        (lambda: losses.dppo(logp, old, adv, mask, divergence="kl"), "divergence"),
        (lambda: losses.dppo(logp, old, adv, mask, eps_low=-1.0), "eps_low"),
        (lambda: losses.dppo(logp, old, adv, mask, ratio_cap=0.0), "ratio_cap"),
        (lambda: losses.dcpo(logp, old, adv, mask, ratio_cap=1.0), "ratio_cap"),
        (lambda: losses.luspo(logp, old, adv, mask), "advantages"),
        (lambda: losses.nft(logp, old, a, a[:3], mask), "correct_rate"),
        (lambda: losses.nft(logp, old, a, a, mask, eps=1.0), "eps"),
        (lambda: losses.nft(logp, old, a, a, mask, prompt_weight="x"), "prompt_weight"),
        (lambda: losses.nft_from_advantages(logp, old, adv, mask), r"\[B\]"),
        (lambda: losses.mass_covering(logp, old, mask, kind="reverse"), "kind"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert "\n" not in str(info.value)
