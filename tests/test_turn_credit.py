"""Turn-level credit (#45): per-turn advantages against the NumPy references
(tests/reference/turn_ref.py)."""
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax.advantages import turn
from tests import numerics
from tests.reference import turn_ref

K, G, P, T = 4, 4, 3, 24


def _episodes(seed):
    """Random episodes: 1..K model turns of 1..3 tokens, each (but the last) followed by 1..3
    observation tokens (mask 0, same turn id); −1 and mask 0 after the end."""
    rng = np.random.default_rng(seed)
    ids, mask = np.full((P * G, T), -1, np.int32), np.zeros((P * G, T), np.float32)
    for i in range(P * G):
        t = 0
        for k in range(int(rng.integers(1, K + 1))):
            n_model = int(rng.integers(1, 4))
            ids[i, t:t + n_model], mask[i, t:t + n_model] = k, 1
            t += n_model
            n_obs = int(rng.integers(1, 4))
            ids[i, t:t + n_obs] = k
            t += n_obs
    values = rng.normal(size=(P * G, T)).astype(np.float32)
    outcome = rng.integers(0, 2, size=(P * G,)).astype(np.float32)
    return ids, mask, values, outcome


def _tables(ids, mask, values, outcome):
    r, present = turn.turn_table(values, ids, mask, K)
    return turn.with_outcome(r, present, outcome), present


def _atol(want, rets, std):
    """JAX float32 vs the float64 reference of (G_k − mean) / (std + eps): the return sums
    ≤ K terms, then the mean and variance reductions over G and one sqrt: the difference
    G_k − mean carries γ_chain · (|G_k| + |mean|) ≤ γ_chain · 2 max|G|, over the smallest
    non-zero std; the std's relative error moves A by the same γ_chain · |A|."""
    chain = K + 3 * G + 4
    mag = 2 * np.max(np.abs(rets)) / std + np.max(np.abs(want))
    return numerics.ref_atol(chain, mag, transcendentals=1)


def _min_std(rets, present):
    """The smallest non-zero per-turn group std (float64)."""
    rets, present = rets.reshape(P, G, K), present.reshape(P, G, K)
    stds = [np.std(rets[p, present[p, :, k], k], ddof=1) for p in range(P) for k in range(K)
            if present[p, :, k].sum() >= 2]
    return min(s for s in stds if s > 0)


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_turn_group_advantages_match_reference(gamma):
    for seed in range(3):
        ids, mask, values, outcome = _episodes(seed)
        r, present = _tables(ids, mask, values, outcome)
        a = turn.turn_group_advantages(r, present, num_samples=G, gamma=gamma)
        got = np.asarray(turn.turns_to_tokens(a, ids, mask))
        want = turn_ref.group_advantages(values, ids, mask, outcome, G, gamma=gamma)
        rets = np.asarray(turn.turn_returns(r, present, gamma=gamma))
        std = _min_std(rets, np.asarray(present))
        np.testing.assert_allclose(got, want, rtol=0, atol=_atol(want, rets, std))
        assert np.all(got[mask == 0] == 0)


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.8)])
def test_turn_gae_matches_reference(gamma, lam):
    for seed in range(3):
        ids, mask, values, outcome = _episodes(seed)
        token_values = np.random.default_rng(seed + 10).normal(size=values.shape)
        token_values = token_values.astype(np.float32)
        r, present = _tables(ids, mask, values, outcome)
        v, _ = turn.turn_table(token_values, ids, mask, K, at="start")
        a, ret = turn.turn_gae(r, present, v, gamma=gamma, lam=lam)
        got = np.asarray(turn.turns_to_tokens(a, ids, mask))
        want = turn_ref.gae(values, ids, mask, outcome, token_values, gamma=gamma, lam=lam)
        # A_k sums ≤ 3K terms (δ's, each of 3 values of size ≤ max|x|): float32 rounding.
        mag = 3 * K * (np.max(np.abs(values)) + np.max(np.abs(token_values)) + 1)
        np.testing.assert_allclose(got, want, rtol=0, atol=numerics.ref_atol(3 * K, mag))
        np.testing.assert_allclose(np.asarray(ret), np.asarray(a) + np.where(present, v, 0),
                                   rtol=0, atol=numerics.ref_atol(1, mag))


def test_turn_ends_and_starts():
    ids = jnp.array([[0, 0, 0, 1, 1, 1, 2, -1]])
    mask = jnp.array([[1, 1, 0, 1, 1, 0, 1, 0]])
    ends = np.asarray(turn.turn_ends(ids, mask)).astype(int)
    assert ends.tolist() == [[0, 1, 0, 0, 1, 0, 1, 0]]
    starts = np.asarray(turn.turn_starts(ids, mask)).astype(int)
    assert starts.tolist() == [[1, 0, 0, 1, 0, 0, 1, 0]]


def test_flat_turn_gets_zero():
    """Turn k equal across the group (or present in < 2 episodes) gets exactly 0."""
    r = jnp.array([[1.0, 2.0], [1.0, 3.0], [1.0, 0.0]])
    present = jnp.array([[True, True], [True, False], [True, False]])
    a = np.asarray(turn.turn_group_advantages(r, present, num_samples=3, gamma=0.0))
    assert np.all(a == 0)


# ----------------------------------------------------------------------------- information gain

def _digit_ids(tok):
    ids = {}
    for i, text in enumerate(tok.token_texts()):
        ids.setdefault(text, i)
    return ids


def test_answer_tokens_spell_the_answer(tok):
    from rlvr_jax.multiturn import credit
    ids = _digit_ids(tok)
    digits = tuple(ids[str(d)] for d in range(10))
    out, mask = credit.answer_tokens(jnp.array([24, 7, 1009]), digit_ids=digits,
                                     prefix=(ids["["],), suffix=(ids["]"],), width=4)
    texts = ["".join(tok.token_texts()[t] for t, m in zip(row, mrow) if m)
             for row, mrow in zip(np.asarray(out), np.asarray(mask))]
    assert texts == ["[24]", "[7]", "[1009]"]


def _compact_answer_logps(params, cfg, rows):
    """log p(answer | context) of each (context, answer) row, left-padded to one width with
    the real tokens contiguous (no holes), in one batched forward pass."""
    from rlvr_jax import models
    a = max(len(ans) for _, ans in rows)
    width = max(len(c) for c, _ in rows) + a
    tokens = np.zeros((len(rows), width), np.int32)
    attn, amask = np.zeros_like(tokens), np.zeros((len(rows), a), np.float64)
    for i, (context, answer) in enumerate(rows):
        seq = list(context) + list(answer) + [0] * (a - len(answer))  # answer padding at end
        tokens[i, width - len(seq):] = seq
        attn[i, width - len(seq):width - a + len(answer)] = 1
        amask[i, :len(answer)] = 1
    logp, _ = models.completion_logprobs(params, jnp.asarray(tokens), jnp.asarray(attn), a,
                                         config=cfg)
    return np.sum(np.asarray(logp, np.float64) * amask, axis=1)


def test_info_gain_telescopes(params, model_config, tok):
    """Σ_k gain_k = log p(answer | episode) − log p(answer | prompt), the two ends computed
    independently on contiguous sequences; every L_k (holes masked out) equals the same
    contiguous computation of its cut."""
    from rlvr_jax import sampling
    from rlvr_jax.multiturn import credit
    rng = np.random.default_rng(0)
    b, tp, n, k = 4, 5, 12, 3
    v = tok.vocab_size
    prompt = rng.integers(3, v, size=(b, tp)).astype(np.int32)
    pmask = np.ones((b, tp), np.int32)
    pmask[1, :2] = 0  # left padding
    tokens = rng.integers(3, v, size=(b, n)).astype(np.int32)
    turn_ids = np.array([[0] * 4 + [1] * 4 + [2] * 3 + [-1],
                         [0] * 6 + [1] * 6,
                         [0] * 3 + [-1] * 9,
                         [0] * 2 + [1] * 5 + [2] * 5], np.int32)
    mask = (turn_ids >= 0).astype(np.int32)
    ro = sampling.Rollout(tokens=jnp.asarray(tokens), mask=jnp.asarray(mask),
                          logprobs=jnp.zeros((b, n)), lengths=jnp.asarray(mask.sum(1)),
                          finished=jnp.ones((b,), bool), prompt_tokens=jnp.asarray(prompt),
                          prompt_mask=jnp.asarray(pmask), loss_mask=jnp.asarray(mask),
                          turn_ids=jnp.asarray(turn_ids))
    ids = _digit_ids(tok)
    ans, amask = credit.answer_tokens(jnp.array([24, 7, 13, 60]),
                                      digit_ids=tuple(ids[str(d)] for d in range(10)),
                                      prefix=(ids["["],), suffix=(ids["]"],), width=2)
    logp = np.asarray(credit.answer_logprobs(params, ro, ans, amask, num_turns=k,
                                             model_config=model_config), np.float64)
    gain = np.asarray(credit.info_gain(jnp.asarray(logp, jnp.float32)), np.float64)
    rows = []
    for i in range(b):
        answer = [int(t) for t, m in zip(np.asarray(ans)[i], np.asarray(amask)[i]) if m]
        p_real = [int(t) for t, m in zip(prompt[i], pmask[i]) if m]
        rows += [(p_real + [int(t) for t, tid, m in zip(tokens[i], turn_ids[i], mask[i])
                            if m and tid < c], answer) for c in range(k + 1)]
    compact = _compact_answer_logps(params, model_config, rows).reshape(b, k + 1)
    for i in range(b):
        want, answer = list(compact[i]), rows[i * (k + 1)][1]
        length = tp + n + len(answer)
        # Each L_k: one forward pass in two orders (holes masked vs contiguous) summed over
        # ≤ 4 answer tokens: the forward chain plus that sum, relative to Σ |log p|.
        numerics.assert_forward_close(logp[i], want, model_config, length,
                                      extra=len(answer), magnitude=max(abs(x) for x in want))
        # The telescoping sum: K float32 subtractions and K − 1 additions of terms ≤ 2 max|L|
        # on top of the two ends' forward bounds.
        telescoped = float(np.float32(np.sum(gain[i].astype(np.float32))))
        atol = (numerics.reorder_atol(numerics.forward_chain(model_config, length)
                                      + len(answer), max(abs(x) for x in want)) * 2
                + numerics.ref_atol(2 * k, 2 * k * max(abs(x) for x in want)))
        assert abs(telescoped - (want[-1] - want[0])) <= atol, (telescoped, want)


def test_open_turns_and_masked_gains_telescope():
    """The term's gains (open turns only) sum to L[num_open] − L[0]; guess_number's winning
    guess and every episode's last turn earn none."""
    from rlvr_jax.multiturn import credit
    turns, verdicts = jnp.array([4, 4, 1]), jnp.array([1.0, 0.0, 1.0])
    assert credit.open_turns(turns, verdicts, answer_is_call=True).tolist() == [2, 3, 0]
    assert credit.open_turns(turns, verdicts, answer_is_call=False).tolist() == [3, 3, 0]
    logp = jnp.array([[-3.0, -2.5, -1.0, -4.0, -9.0]] * 3)
    gain = np.asarray(credit.info_gain(logp, jnp.array([2, 3, 0])), np.float64)
    # Differences and sums of a few float32 values ≤ 9 in size: γ_4 · 4 · 9.
    atol = numerics.ref_atol(4, 4 * 9.0)
    np.testing.assert_allclose(gain.sum(1), [-1.0 + 3.0, -4.0 + 3.0, 0.0], rtol=0, atol=atol)
    assert np.all(gain[0, 2:] == 0) and np.all(gain[2] == 0)


# ----------------------------------------------------------------------------- the terms

def _turn_rollout():
    """Two episodes [2, 10] of 3 and 2 turns (model tokens, observations) and their Episodes."""
    from rlvr_jax import sampling
    from rlvr_jax.multiturn import Episodes
    ids = np.array([[0, 0, 0, 0, 1, 1, 1, 2, -1, -1], [0, 0, 0, 1, 1, -1, -1, -1, -1, -1]])
    model = np.array([[1, 1, 0, 0, 1, 0, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0, 0, 0, 0, 0]])
    z = jnp.zeros((2, 10))
    ro = sampling.Rollout(tokens=jnp.zeros((2, 10), jnp.int32), mask=jnp.asarray(ids >= 0),
                          logprobs=z, lengths=jnp.array([8, 5]), finished=jnp.ones(2, bool),
                          prompt_tokens=jnp.zeros((2, 2), jnp.int32),
                          prompt_mask=jnp.ones((2, 2), jnp.int32), loss_mask=jnp.asarray(model),
                          turn_ids=jnp.asarray(ids))
    turn_reward = jnp.array([[0.5, 0.25, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    eps = Episodes(turns=jnp.array([3, 2]), calls=jnp.array([2, 1]), errors=jnp.zeros(2, int),
                   env_reward=jnp.sum(turn_reward, 1), turn_reward=turn_reward,
                   turn_error=jnp.zeros((2, 4), jnp.int32))
    return ro, eps


def test_turn_env_places_rewards_and_sums_like_the_env_term():
    """turn_env puts turn k's env reward at turn k's last model token; without per-turn credit
    (score_device without with_steps) the episode reward is today's env sum, exactly."""
    from rlvr_jax import scoring
    from rlvr_jax.scoring.scorer import assemble
    from rlvr_jax.scoring.terms import Setup
    from rlvr_jax.scoring.verifiers import Verifier
    ro, eps = _turn_rollout()
    v = Verifier(verify=None, answer_key=None, token=lambda t, m, a: jnp.zeros(t.shape[0]))
    env = type("Env", (), {"max_turns": 4})()
    x = scoring.Inputs(ro, answers=jnp.zeros(2, jnp.int32), group_size=2, episodes=eps)
    listed = assemble(Setup(v, env=env, components=("turn_env",)), {"turn_env": 1.0})
    plain = assemble(Setup(v, env=env), {})
    r_turns, m, _, steps = listed.score_device(x, with_steps=True)
    assert np.asarray(steps.values).tolist()[0] == [0, 0.5, 0, 0, 0.25, 0, 0, 0, 0, 0]
    assert np.asarray(steps.values).tolist()[1] == [1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert np.asarray(steps.ends).astype(int).tolist() == [[0, 1, 0, 0, 1, 0, 0, 1, 0, 0],
                                                            [1, 0, 0, 0, 1, 0, 0, 0, 0, 0]]
    assert np.all(np.asarray(r_turns) == 0)  # Credited per turn: not in the episode reward.
    r_summed, _, _ = listed.score_device(x)
    r_plain, _, _ = plain.score_device(x)
    # Sums of two or three dyadic rationals: exact in float32.
    assert np.asarray(r_summed).tolist() == np.asarray(r_plain).tolist() == [0.75, 1.0]
    # Turn 1: 0.25 and 0 over the two episodes that reached it.
    assert float(m["turn/1/env_reward"]) == 0.125 and float(m["turn/0/fraction"]) == 1.0


def test_turn_level_config_errors():
    from rlvr_jax.train.rl_config import RLConfig
    with pytest.raises(ValueError, match="turn_advantage must be one of"):
        RLConfig(num_prompts=1, turn_advantage="token")
    with pytest.raises(ValueError, match="needs the value model"):
        RLConfig(num_prompts=1, turn_advantage="gae")
    with pytest.raises(ValueError, match="turn_discount must be in"):
        RLConfig(num_prompts=1, turn_discount=1.5)
    # The turn path reads the per-step rewards and adds no per-token KL reward: refused
    # rather than dropped without a word.
    with pytest.raises(ValueError, match="both read the per-step rewards"):
        RLConfig(num_prompts=1, turn_advantage="group", process_weight=0.5)
    with pytest.raises(ValueError, match="does not carry the per-token KL reward"):
        RLConfig(num_prompts=1, turn_advantage="gae", advantage="gae", kl_in_reward=True,
                 kl_coef=0.1)


def test_one_turn_group_credit_is_grpo():
    """With one turn per episode and no turn rewards, per-turn group normalisation is GRPO's
    advantage on every model token (the same formula, the same float32 operations up to
    order: two reductions over G)."""
    from rlvr_jax import advantages as adv
    rng = np.random.default_rng(0)
    outcome = rng.integers(0, 2, size=(3, 4)).astype(np.float32)
    outcome[1] = 1.0  # A flat group: exactly 0 in both.
    mask = np.zeros((12, 6), np.int32)
    mask[:, :3] = 1
    ids = np.where(mask > 0, 0, -1).astype(np.int32)
    got, ret = adv.turn_token_advantages(jnp.asarray(outcome), jnp.asarray(ids),
                                         jnp.asarray(mask))
    want = adv.broadcast_to_tokens(adv.grpo(jnp.asarray(outcome)).reshape(-1), jnp.asarray(mask))
    assert ret is None
    # |r − mean| ≤ 1 over a std ≥ 0.5 (a mixed 0/1 group of 4): terms ≤ 4 through the mean,
    # variance (G each) and a few element-wise roundings, in two orders.
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0,
                               atol=numerics.reorder_atol(2 * 4 + 4, 2.0 / 0.5))
