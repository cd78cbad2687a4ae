"""Mass-covering divergences to the reference policy, estimated on a bank of its own samples.

The reverse KL(π‖π_ref) of the usual KL term (`losses.kl`, sampled from π) is mode-seeking:
it lets π drop whole modes of π_ref, one cause of RLVR's pass@k collapse. Forward KL and
Jensen-Shannon are mass-covering: they penalise π for giving little probability to what
π_ref generates. With samples y ~ π_ref (drawn once, e.g. at the start of training) an
f-divergence needs no sampling from π: `D_f(π‖π_ref) = E_{π_ref}[f(π/π_ref)]`.

Use (not wired into `config.rl`; the trainer has no reference-sample bank):
  1. before RL, sample completions of the training prompts from the reference policy
     (`sampling.generate`) and keep their tokens, masks and log-probs `ref_logp` [B, T];
  2. in each update, compute the current policy's log-probs `logp` of a slice of the bank
     (`models.completion_logprobs`) and add
     `losses.aggregate(mass_covering(logp, ref_logp, mask, kind="js", coef=β)[0], mask, ...)`
     to the policy loss (DPH-RL adds it for the samples of the prompts the policy already
     solves, to keep their diversity).
"""
import jax
import jax.numpy as jnp

from rlvr_jax.losses.policy import LOG_RATIO_CLAMP, _mask, _tokens

DIVERGENCES = ("forward_kl", "js")
_LOG2 = 0.6931471805599453


def mass_covering(logp, ref_logp, mask, *, kind="js", coef=1.0):
    """Per-token f-divergence `coef · f(π/π_ref)` on tokens sampled from the reference policy.

    Formula: `δ = clamp(logp - ref_logp, ±20)`, `u = exp(δ)` (π/π_ref of the bank's token):
      - "forward_kl": `f(u) = u - 1 - log u = expm1(δ) - δ` (≥ 0; its mean over y ~ π_ref is
        KL(π_ref‖π), the `u - 1` term has mean 0 and lowers the variance);
        `∂f/∂logp = expm1(δ)`;
      - "js": `f(u) = ½[u log u - (1 + u) log((1 + u)/2)]` (≥ 0, ≤ log 2 · (1 + u)/2; its mean
        is JS(π‖π_ref)); `∂f/∂logp = ½ u (log 2 + log σ(δ))`.
    Both are 0 with zero gradient at π = π_ref. Per token these estimate the divergence of the
    next-token distributions along the bank's prefixes.
    Paper: "The Choice of Divergence: A Neglected Key to Mitigating Diversity
    Collapse in Reinforcement Learning with Verifiable Reward" (2025; DPH-RL: forward KL and
    JS with generator functions on reference samples). verl / TRL: —.

    Args:
      logp: `[B, T]` log-probs of the bank's tokens under the current policy (any float dtype).
      ref_logp: `[B, T]` their log-probs under the reference policy (no gradient is taken).
      mask: `[B, T]` bool/0-1 mask of the bank's completion tokens.
      kind: "forward_kl" | "js".
      coef: β.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 (0 where masked) and
      `{"divergence_mean": ...}` (of f, before coef, over valid tokens).
    """
    if kind not in DIVERGENCES:
        raise ValueError(f"kind must be one of {DIVERGENCES}, got {kind!r}")
    m = _mask(mask, jnp.shape(logp))
    lp = _tokens("logp", logp, m)
    ref = _tokens("ref_logp", jax.lax.stop_gradient(ref_logp), m)
    delta = jnp.clip(lp - ref, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    if kind == "forward_kl":
        f = jnp.expm1(delta) - delta
    else:
        u = jnp.exp(delta)
        f = 0.5 * (u * delta - (1.0 + u) * (jax.nn.softplus(delta) - _LOG2))
    f = jnp.where(m, f, 0.0)
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32)), 1.0)
    return coef * f, {"divergence_mean": jax.lax.stop_gradient(jnp.sum(f) / n)}
