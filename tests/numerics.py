"""Tolerances that follow from float32 arithmetic, for tests whose two sides compute the same
mathematical value in different operation orders (sharded vs one device, micro-batched vs
whole, cached vs recomputed, XLA vs NumPy). They hold on any IEEE-754 machine, whatever its
vector width, thread count or reduction order, because they bound every order at once.

u = 2^-24 is float32's unit roundoff. A sum (or dot product) of n terms evaluated in ANY order
has |fl(Σ x_i) − Σ x_i| ≤ γ_{n−1}·Σ|x_i|, γ_k = k·u / (1 − k·u) (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., eq. 4.4 and §3.1); a value computed through a
chain of such reductions carries, to first order, the sum of their γ's times the size of the
terms. Two evaluations in different orders differ by at most twice one evaluation's bound.
"""
import math

import jax
import numpy as np

U32 = 2.0 ** -24                                       # float32 unit roundoff
SQRT_TINY32 = float(np.sqrt(np.finfo(np.float32).tiny))  # below this, x*x underflows


def gamma(k: int, u: float = U32) -> float:
    """Higham's γ_k = k·u / (1 − k·u): the relative error bound of a k-step reduction."""
    if k * u >= 1:
        raise ValueError(f"γ_{k} is undefined (k·u ≥ 1)")
    return k * u / (1 - k * u)


def reorder_atol(chain: int, magnitude: float) -> float:
    """Bound on |a − b| for two float32 evaluations, in different orders, of a value computed
    through reductions of `chain` additions in total whose terms are at most `magnitude`."""
    return 2 * gamma(chain) * magnitude


# XLA CPU's exp, log, log1p, expm1, pow and tanh (and NumPy's float32 SIMD ones) are polynomial
# approximations, not correctly rounded, and a vectorised loop and its scalar tail may differ.
# Each call is charged TRANSCENDENTAL_U roundings (4 ulp); the worst seen here over 5·10^5
# arguments: exp 1.4 u, log 2.0 u, log1p 3.4 u, tanh 4.6 u, expm1 5.7 u.
TRANSCENDENTAL_U = 8


def ref_atol(chain: int, magnitude, transcendentals: int = 0):
    """Bound on |a − exact| for ONE float32 evaluation compared with a float64 or exact value
    (one-sided; two float32 programs get twice this, as reorder_atol): γ_k · magnitude with
    k = `chain` roundings on the longest chain (a reduction of n terms counts n) plus
    TRANSCENDENTAL_U per transcendental call on it; `magnitude` is the size of the terms
    (Σ|x_i| of a sum, not |Σ x_i| when they cancel). Arrays broadcast."""
    return gamma(chain + TRANSCENDENTAL_U * transcendentals) * magnitude


def forward_chain(cfg, length: int) -> int:
    """Additions on the longest reduction chain of one decoder forward pass to the logits:
    per layer two RMS norms (D each), a q/k/v projection (D), scores (head_dim), the softmax
    sum and the weighted sum of values (≤ `length` each), the output projection
    (n_heads·head_dim) and the MLP (D in, d_ff out), and six transcendental calls (two rsqrt,
    RoPE's cos/sin, the softmax's exp, SiLU's exp); then the final norm (D) and the LM head
    (D), plus the log-softmax's sum over the vocabulary (V) and its exp and log."""
    d, f, l, v, h = cfg.d_model, cfg.d_ff, cfg.n_layers, cfg.vocab_size, cfg.head_dim
    per_layer = 2 * d + d + h + 2 * length + cfg.n_heads * h + d + f + 6 * TRANSCENDENTAL_U
    return l * per_layer + 2 * d + v + 3 * TRANSCENDENTAL_U


def gradient_chain(cfg, length: int, tokens: int) -> int:
    """Additions on the longest chain of a parameter gradient of a loss summed over `tokens`
    positions: the backward pass mirrors the forward one (each reduction once more, transposed)
    and the weight gradient sums the per-token contributions."""
    return 2 * forward_chain(cfg, length) + tokens


def assert_forward_close(got, want, cfg, length: int, *, extra: int = 0, magnitude=None):
    """Outputs of a decoder forward pass (logits, log-probs, K/V) computed in two orders
    (cache vs full, padded vs compact, sharded vs one device): |got − want| ≤
    reorder_atol(forward_chain(cfg, length) + extra, magnitude), magnitude = max|want| unless
    given (the outputs stand for the size of the terms they sum; the linear γ_n leaves a factor
    √n for cancellation, against the √n growth of independent rounding errors)."""
    want = np.asarray(want, np.float64)
    if magnitude is None:
        magnitude = float(np.max(np.abs(want), initial=0.0))
    atol = reorder_atol(forward_chain(cfg, length) + extra, magnitude)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=atol)
    return atol


def log_softmax_atol(scaled) -> float:
    """Bound on a float32 log-softmax entry of the float64 logits `scaled` [..., V] against
    its float64 value: the logits' rounding and the max-shift (2 u), an exp, the sum of V
    exps (γ_V, terms ≤ 1), a log and the subtraction (u), all relative to max|scaled| + log V."""
    scaled = np.asarray(scaled, np.float64)
    v = scaled.shape[-1]
    return ref_atol(v + 3, float(np.max(np.abs(scaled))) + np.log(v), transcendentals=2)


def parity_atol(cfg, length: int, want, *, extra: int = 0) -> float:
    """Bound on |ours − transformers'| for a forward pass of `length` positions: two float32
    programs in different orders (forward_chain + `extra`), whose RoPE angles also differ:
    each side forms position·inv_freq in float32 from its own inv_freq (transformers: a float32
    pow, ≤ (ln θ + 2)·u relative), an angle error ≤ length·(ln θ + 3)·u that rotates q and k
    by as much (relative); sizes relative to max|want|."""
    rope = int(np.ceil(length * (np.log(cfg.rope_theta) + 3)))
    return reorder_atol(forward_chain(cfg, length) + extra + rope,
                        float(np.max(np.abs(np.asarray(want, np.float64)), initial=0.0)))


def assert_is_argmax(tokens, logits, atol):
    """Each of `tokens` [...] maximises its row of `logits` [..., V] within 2·`atol`: the
    greedy choice of another evaluation of the same logits, each entry within `atol` of these
    (an exact tie-break cannot be asked of two orders when the top two are that close)."""
    logits = np.asarray(logits, np.float64)
    chosen = np.take_along_axis(logits, np.asarray(tokens)[..., None], -1)[..., 0]
    short = np.max(logits, -1) - chosen
    assert np.all(short <= 2 * atol), (
        f"a chosen token is {float(np.max(short)):.3g} below its row's maximum "
        f"(allowed {2 * atol:.3g})")


def assert_trees_reorder_close(a, b, chain: int):
    """Leaf-wise |a − b| ≤ reorder_atol(chain, max|leaf|): the same float32 computation in two
    orders (the leaf's largest entry stands for the size of the terms that were summed)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        atol = reorder_atol(chain, float(np.max(np.abs(y), initial=0.0)))
        np.testing.assert_allclose(x, y, rtol=0, atol=atol)


def reorder_norm_atol(tree, chain: int) -> float:
    """Bound on the difference of the global norms of two trees that satisfy
    assert_trees_reorder_close(·, tree, chain): |‖a‖ − ‖b‖| ≤ ‖a − b‖ ≤ the norm of the
    per-leaf bounds, plus each norm's own rounding (a sum of n squares and a square root)."""
    leaves = [np.asarray(x, np.float64) for x in jax.tree.leaves(tree)]
    diff = np.sqrt(sum(x.size * reorder_atol(chain, float(np.max(np.abs(x), initial=0.0))) ** 2
                       for x in leaves))
    norm = np.sqrt(sum(float(np.sum(x * x)) for x in leaves))
    return float(diff + 2 * gamma(sum(x.size for x in leaves) + 1) * norm)


def clip_by_global_norm(grads, max_norm: float):
    """optax.clip_by_global_norm in float64: (the gradient leaves an optimizer step used,
    their relative error bound). The float32 step sums n squares (γ_n), takes a square root,
    divides and multiplies (one rounding each), so each entry it used is within γ_{n+3} of the
    float64 value (relative)."""
    leaves = [np.asarray(g, np.float64) for g in jax.tree.leaves(grads)]
    norm = np.sqrt(sum(float(np.sum(g * g)) for g in leaves))
    scale = 1.0 if norm <= max_norm else max_norm / norm
    return [g * scale for g in leaves], gamma(sum(g.size for g in leaves) + 3)


def adam_first_step_atol(g_a, g_b, p_new, *, lr: float, eps: float, rel_err: float = 0.0):
    """Per-entry bound on |p_a − p_b| after one Adam(W) step from the same parameters, where
    side a stepped with gradient `g_a` and side b with `g_b` (arrays: float64 values of what
    each side used, clipping included, each within a relative `rel_err` of it) and `p_new` is
    one side's result.

    Adam's first step moves each entry by lr·φ(g), φ(g) = g / (|g| + eps) (bias-corrected
    moments are g and g²). φ is increasing with φ'(g) = eps / (|g| + eps)², so by the mean
    value theorem |φ(g_a) − φ(g_b)| ≤ eps / (d + eps)² · |g_a − g_b|, d = min(|g_a|, |g_b|)
    if both have one sign, else 0 (then the bound is |g_a − g_b| / eps: a near-zero gradient
    entry turns a last-bit difference into a large step — the reason a fixed tolerance on the
    parameters cannot hold on every machine). On top: each side's float32 evaluation of
    lr·φ (two moment updates, two bias corrections, sqrt, +eps, divide, ×lr: ≤ 12 roundings,
    |φ| ≤ 1) and of p − lr·φ (one rounding of a value ≤ |p_new| + 2·lr); an entry with
    |g| < sqrt(tiny) has g² underflow, where |φ| ≤ sqrt(tiny) / eps on each side.
    """
    g_a, g_b = np.asarray(g_a, np.float64), np.asarray(g_b, np.float64)
    same_sign = np.sign(g_a) * np.sign(g_b) > 0
    d = np.where(same_sign, np.minimum(np.abs(g_a), np.abs(g_b)) * (1 - rel_err), 0.0)
    diff = np.abs(g_a - g_b) + rel_err * (np.abs(g_a) + np.abs(g_b))
    lipschitz = eps / (d + eps) ** 2
    update = lr * (lipschitz * diff + 2 * gamma(12) + 2 * SQRT_TINY32 / eps)
    return update + 2 * U32 * (np.abs(np.asarray(p_new, np.float64)) + 2 * lr)


def assert_adam_first_step_close(p_a, p_b, g_a, g_b, *, lr: float, eps: float,
                                 rel_err: float = 0.0):
    """Leaf-wise |p_a − p_b| ≤ adam_first_step_atol (see there): parameters after one Adam
    step whose gradients (`g_a`, `g_b`: pytrees or leaf lists) may differ in the last bits."""
    la, lb = jax.tree.leaves(p_a), jax.tree.leaves(p_b)
    ga, gb = jax.tree.leaves(g_a), jax.tree.leaves(g_b)
    assert len(la) == len(lb) == len(ga) == len(gb)
    for x, y, gx, gy in zip(la, lb, ga, gb):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        bound = adam_first_step_atol(gx, gy, y, lr=lr, eps=eps, rel_err=rel_err)
        excess = np.abs(x - y) - bound
        assert np.all(excess <= 0), (
            f"{int(np.sum(excess > 0))} of {x.size} entries differ by more than Adam's "
            f"first-step bound; worst excess {float(np.max(excess)):.3g}")


def chi_square_critical(df, z=3.09):
    """Wilson–Hilferty approximation of the chi-square quantile (z = 3.09: p = 0.001)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3
