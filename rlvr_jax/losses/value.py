"""Value-function (critic) loss for PPO with GAE."""
import jax
import jax.numpy as jnp


def value_loss(values, old_values, returns, mask, *, clip=None):
    """Per-token (optionally clipped) squared-error value loss.

    Formula: `ℓ_t = ½ (V_t - R_t)²`; with `clip = c`,
    `V^clip_t = V^old_t + clip(V_t - V^old_t, -c, c)` and `ℓ_t = ½ max((V_t - R_t)², (V^clip_t - R_t)²)`.
    Paper: Schulman et al. 2017 (PPO; value clipping from the OpenAI baselines implementation).
    verl: `critic.cliprange_value`; TRL PPO: `cliprange_value`, `vf_coef`.

    Args:
      values: `[B, T]` current value predictions (any float dtype).
      old_values: `[B, T]` value predictions at sampling time (no gradient is taken).
      returns: `[B, T]` targets (e.g. from `advantages.gae`; no gradient is taken).
      mask: `[B, T]` bool/0-1 response-token mask.
      clip: optional `c > 0`.

    Returns:
      `(per_token_loss, metrics)`: `[B, T]` float32 (0 where masked; aggregate with
      `losses.aggregate`) and `value_clip_frac` (tokens where the clipped term is larger),
      `value_mean`, `value_error_mean` (mean |V - R|) over valid tokens.
    """
    m = jnp.asarray(mask).astype(bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be [B, T], got {m.shape}")
    arrays = []
    for name, x in (("values", values), ("old_values", old_values), ("returns", returns)):
        x = jnp.asarray(x)
        if x.shape != m.shape:
            raise ValueError(f"{name} must be [B, T] = {m.shape}, got {x.shape}")
        arrays.append(jnp.where(m, x.astype(jnp.float32), 0.0))
    v, old, ret = arrays
    old, ret = jax.lax.stop_gradient(old), jax.lax.stop_gradient(ret)
    err = jnp.square(v - ret)
    n = jnp.maximum(jnp.sum(m.astype(jnp.float32)), 1.0)
    metrics = {"value_mean": jnp.sum(jax.lax.stop_gradient(v)) / n,
               "value_error_mean": jnp.sum(jax.lax.stop_gradient(jnp.abs(v - ret))) / n}
    if clip is None:
        loss = 0.5 * err
        metrics["value_clip_frac"] = jnp.zeros((), jnp.float32)
    else:
        if clip <= 0:
            raise ValueError(f"clip must be > 0, got {clip}")
        v_clip = old + jnp.clip(v - old, -clip, clip)
        err_clip = jnp.square(v_clip - ret)
        loss = 0.5 * jnp.maximum(err, err_clip)
        metrics["value_clip_frac"] = jnp.sum(
            (jax.lax.stop_gradient(err_clip > err) & m).astype(jnp.float32)) / n
    return jnp.where(m, loss, 0.0), metrics
