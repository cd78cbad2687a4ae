"""Turn-level credit for multi-turn episodes: per-turn rewards, returns and advantages.

A multi-turn rollout (`multiturn`) writes each episode as model turn, observation, model
turn, ... into one row; `turn_ids [B, T]` says which model turn each token belongs to (an
observation belongs to the turn it answers; −1 after the end) and `mask [B, T]` marks the
model's own tokens (the loss mask). A turn reward `r_{i,k}` sits at the LAST model token of
turn k (`turn_ends`), like a process step's reward (`advantages.process`); `turn_table`
gathers them into `[B, K]` tables (K = `env.max_turns`) with `present [B, K]` (row i has
turn k). The episode's outcome reward `R_i` is added to its last turn (`with_outcome`).

- Returns over turns: `G_{i,k} = Σ_{j ≥ k} γ^{j−k} r_{i,j}` (`turn_returns`).
- Group (per-turn) normalisation: turn k of episode i against turn k of the other episodes
  of its prompt that have a turn k: `A_{i,k} = (G_{i,k} − mean_k) / (std_k + eps)` (unbiased
  std over those episodes; fewer than 2 of them, or all equal: 0) — SALT / ArenaRL-style
  turn-level group advantages (`turn_group_advantages`).
- GAE over turns with per-turn values `V_{i,k}` (the value model at the turn's first token):
  `δ_k = r_k + γ V_{k+1} − V_k` (`V_{K} = 0` past the last turn), `A_k = δ_k + γλ A_{k+1}`
  (`turn_gae`).

`turns_to_tokens` gives every model token of turn k the advantage of turn k. All outputs
are float32; every function is jittable with a static K.
"""
import jax
import jax.numpy as jnp


def _shifted(x, fill):
    """x[:, t+1] with `fill` in the last column ([B, T])."""
    return jnp.concatenate([x[:, 1:], jnp.full((x.shape[0], 1), fill, x.dtype)], axis=1)


def turn_ends(turn_ids, mask):
    """[B, T] bool: the last model token of each turn (the next token is not a model token of
    the same turn)."""
    ids, m = jnp.asarray(turn_ids), jnp.asarray(mask).astype(bool)
    same_next = _shifted(m, False) & (_shifted(ids, -1) == ids)
    return m & ~same_next


def turn_starts(turn_ids, mask):
    """[B, T] bool: the first model token of each turn."""
    ids, m = jnp.asarray(turn_ids), jnp.asarray(mask).astype(bool)
    prev_m = jnp.concatenate([jnp.zeros_like(m[:, :1]), m[:, :-1]], axis=1)
    prev_ids = jnp.concatenate([jnp.full_like(ids[:, :1], -1), ids[:, :-1]], axis=1)
    return m & ~(prev_m & (prev_ids == ids))


def turn_table(values, turn_ids, mask, num_turns, *, at="end"):
    """(per-turn values [B, K] float32, present [B, K] bool) read at each turn's last ("end")
    or first ("start") model token of `values [B, T]` (a scatter: O(B·(T + K)) memory)."""
    where = (turn_ends if at == "end" else turn_starts)(turn_ids, mask)
    ids = jnp.where(where, jnp.asarray(turn_ids), num_turns)  # Others go to a dropped slot.
    rows = jnp.arange(ids.shape[0])[:, None]
    v = jnp.where(where, jnp.asarray(values, jnp.float32), 0.0)
    table = jnp.zeros((ids.shape[0], num_turns + 1), jnp.float32).at[rows, ids].add(v)
    present = jnp.zeros((ids.shape[0], num_turns + 1), bool).at[rows, ids].max(where)
    return table[:, :num_turns], present[:, :num_turns]


def with_outcome(r, present, outcome):
    """r [B, K] with the episode reward `outcome [B]` added at each row's last present turn."""
    k = jnp.arange(r.shape[1])[None, :]
    last = jnp.max(jnp.where(present, k, -1), axis=1)
    return r + jnp.where(k == last[:, None], jnp.asarray(outcome, jnp.float32)[:, None],
                         0.0)


def turn_returns(r, present, *, gamma=1.0):
    """G [B, K] float32: `Σ_{j ≥ k} γ^{j−k} r_j` over the present turns; 0 where absent."""
    r = jnp.where(present, jnp.asarray(r, jnp.float32), 0.0)

    def step(carry, r_k):
        carry = r_k + gamma * carry
        return carry, carry
    _, g = jax.lax.scan(step, jnp.zeros((r.shape[0],), jnp.float32), r.T, reverse=True)
    return jnp.where(present, g.T, 0.0)


def turn_group_advantages(r, present, *, num_samples, gamma=1.0, eps=1e-6, group_mask=None):
    """Per-turn group-normalised returns [B, K] (turn k vs turn k of the G episodes of a
    prompt; see the module docstring). r, present: [B, K] with B = P·G; group_mask: [P]."""
    g = turn_returns(r, present, gamma=gamma)
    b, k = g.shape
    p = b // num_samples
    gg = g.reshape(p, num_samples, k)
    w = present.reshape(p, num_samples, k).astype(jnp.float32)
    n = jnp.sum(w, axis=1, keepdims=True)
    mean = jnp.sum(w * gg, axis=1, keepdims=True) / jnp.maximum(n, 1.0)
    var = jnp.sum(w * jnp.square(gg - mean), axis=1, keepdims=True) / jnp.maximum(n - 1, 1.0)
    hi = jnp.max(jnp.where(w > 0, gg, -jnp.inf), axis=1, keepdims=True)
    lo = jnp.min(jnp.where(w > 0, gg, jnp.inf), axis=1, keepdims=True)
    flat = (n < 2) | (hi == lo)
    if group_mask is not None:
        flat = flat | ~jnp.asarray(group_mask).astype(bool).reshape(p, 1, 1)
    a = jnp.where(flat | (w == 0), 0.0, (gg - mean) / (jnp.sqrt(var) + eps))
    return a.reshape(b, k)


def turn_gae(r, present, values, *, gamma=1.0, lam=1.0):
    """(advantages [B, K], returns [B, K]) of GAE over turns with per-turn values [B, K]
    (the next turn's value is 0 past the last present turn); 0 where absent."""
    r = jnp.where(present, jnp.asarray(r, jnp.float32), 0.0)
    v = jnp.where(present, jnp.asarray(values, jnp.float32), 0.0)
    v_next = _shifted(v, 0.0)
    delta = r + gamma * v_next - v

    def step(carry, d_k):
        carry = d_k + gamma * lam * carry
        return carry, carry
    _, a = jax.lax.scan(step, jnp.zeros((r.shape[0],), jnp.float32), delta.T, reverse=True)
    a = jnp.where(present, a.T, 0.0)
    return a, jnp.where(present, a + v, 0.0)


def turns_to_tokens(a, turn_ids, mask):
    """[B, T] float32: each model token gets its turn's entry of `a [B, K]`; 0 elsewhere."""
    m = jnp.asarray(mask).astype(bool)
    ids = jnp.clip(jnp.asarray(turn_ids), 0, a.shape[1] - 1)
    return jnp.where(m, jnp.take_along_axis(jnp.asarray(a, jnp.float32), ids, axis=1), 0.0)


def turn_token_advantages(outcome, turn_ids, mask, *, turn_rewards=None, old_values=None,
                          group_mask=None, mode="group", gamma=1.0, lam=1.0, eps=1e-6):
    """Per-token turn-level advantages of B = P·G episodes (`rl.turn_advantage`).

    Args:
      outcome: [P, G] the episodes' rewards (added at each episode's last turn).
      turn_ids, mask: [B, T] (the model's tokens; 0 in rows of invalid groups).
      turn_rewards: [B, T] per-turn rewards at each turn's last model token, or None (0).
      old_values: [B, T] the value model's outputs (mode "gae": V_k at turn k's first token).
      group_mask: [P] valid groups. mode: "group" | "gae". gamma, lam: over turns.

    Returns:
      (advantages [B, T], returns [B, T] for the value loss ("gae") or None).
    """
    p, g = outcome.shape
    num_turns = mask.shape[1]  # Static: at most one turn per token (tables are [B, T]).
    values = jnp.zeros(mask.shape, jnp.float32) if turn_rewards is None else turn_rewards
    r, present = turn_table(values, turn_ids, mask, num_turns)
    r = with_outcome(r, present, jnp.asarray(outcome).reshape(p * g))
    if mode == "group":
        a = turn_group_advantages(r, present, num_samples=g, gamma=gamma, eps=eps,
                                  group_mask=group_mask)
        return turns_to_tokens(a, turn_ids, mask), None
    if mode != "gae":
        raise ValueError(f"mode must be 'group' or 'gae', got {mode!r}")
    v, _ = turn_table(old_values, turn_ids, mask, num_turns, at="start")
    a, ret = turn_gae(r, present, v, gamma=gamma, lam=lam)
    return turns_to_tokens(a, turn_ids, mask), turns_to_tokens(ret, turn_ids, mask)
