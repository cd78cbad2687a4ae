"""Tests for rlvr_jax.sampling: the jit-compiled sampler.

Every `generate` configuration costs one compilation (several seconds on CPU),
so the model-level tests share a few module-scoped rollouts.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import cache_phases, live_rows, sampling, token_sampling
from rlvr_jax.models import sequence_logprobs, transformer
from rlvr_jax.sampling import SamplingConfig

from tests import numerics

# Left-padded prompts of lengths 3, 6 and 1 (Tp = 6).
PROMPTS = np.array([[0, 0, 0, 11, 12, 13],
                    [21, 22, 23, 24, 25, 26],
                    [0, 0, 0, 0, 0, 31]], np.int32)
PROMPT_MASK = (np.arange(6)[None, :] >= np.array([3, 0, 5])[:, None]).astype(np.int32)
N = 7


def naive_greedy(params, config, prompts, mask, n):
    """Reference: a full forward over the growing sequence at every step, no cache.

    The sequence lives in a fixed [P, Tp + n] buffer (completion right after the
    prompt, future slots masked) so that a single compiled forward serves all steps.
    """
    p, tp = prompts.shape
    buf = np.concatenate([prompts, np.zeros((p, n), np.int32)], axis=1)
    buf_mask = np.concatenate([mask, np.zeros((p, n), np.int32)], axis=1)
    out = np.zeros((p, n), np.int32)
    for s in range(n):
        logits = transformer.jit_forward(params, jnp.asarray(buf), jnp.asarray(buf_mask),
                                         config=config)
        out[:, s] = np.argmax(np.asarray(logits[:, tp - 1 + s]), axis=-1)
        buf[:, tp + s] = out[:, s]
        buf_mask[:, tp + s] = 1
    return out


_jit_sequence_logprobs = jax.jit(sequence_logprobs, static_argnames=("config", "temperature"))
_jit_filter_logits = jax.jit(token_sampling.filter_logits, static_argnames=("top_k", "top_p"))
_jit_sample_tokens = jax.jit(token_sampling.sample_tokens,
                             static_argnames=("temperature", "top_k", "top_p", "greedy"))
_jit_untruncated = jax.jit(token_sampling._untruncated, static_argnums=(3, 4))


def recomputed_logprobs(params, config, rollout, temperature):
    """The training-side log-probs of the rollout's completion tokens, [B, N]."""
    tokens, mask = rollout.sequences()
    logp, _ = _jit_sequence_logprobs(params, tokens, mask, config=config,
                                     temperature=temperature)
    return np.asarray(logp[:, rollout.prompt_tokens.shape[1]:])


def check_rollout_structure(rollout, sc):
    """Mask is a prefix of ones; stop tokens end rows; pads and zero log-probs after."""
    tokens, mask = np.asarray(rollout.tokens), np.asarray(rollout.mask)
    logp, lengths = np.asarray(rollout.logprobs), np.asarray(rollout.lengths)
    finished = np.asarray(rollout.finished)
    n = tokens.shape[1]
    np.testing.assert_array_equal(mask, (np.arange(n)[None] < lengths[:, None]).astype(np.int32))
    assert (lengths >= 1).all()
    stops = np.isin(tokens, sc.stop_token_ids) & (mask == 1)
    for row in range(tokens.shape[0]):
        length = lengths[row]
        if finished[row]:
            assert tokens[row, length - 1] in sc.stop_token_ids
            assert stops[row].sum() == 1  # Only the last real token is a stop token.
        else:
            assert length == n and not stops[row].any()
        assert (tokens[row, length:] == sc.pad_id).all()
        assert (logp[row, length:] == 0).all()
        assert (logp[row, :length] < 0).all()


@pytest.fixture(scope="module")
def greedy_config():
    return SamplingConfig(greedy=True, temperature=1.5, max_new_tokens=N, num_samples=2)


@pytest.fixture(scope="module")
def greedy_rollout(tiny_params, tiny_config, greedy_config):
    return sampling.jit_generate(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(0),
                                 model_config=tiny_config, sampling_config=greedy_config)


@pytest.fixture(scope="module")
def sampled_config():
    # Stop on a quarter of the vocabulary so rows end at different lengths.
    return SamplingConfig(temperature=0.7, top_k=20, top_p=0.95, max_new_tokens=12,
                          num_samples=4, stop_token_ids=tuple(range(1, 128, 4)), pad_id=0)


@pytest.fixture(scope="module")
def trainer_like_generate(tiny_config, sampled_config):
    """`generate` traced inside an outer jit, as the trainer's rl_step does."""
    @jax.jit
    def step(params, prompts, mask, rng):
        rollout = sampling.generate(params, prompts, mask, rng, model_config=tiny_config,
                                    sampling_config=sampled_config)
        return rollout, jnp.sum(rollout.lengths)
    return step


def test_greedy_matches_naive_reference_loop(tiny_params, tiny_config, greedy_rollout):
    ref = naive_greedy(tiny_params, tiny_config, PROMPTS, PROMPT_MASK, N)
    tokens = np.asarray(greedy_rollout.tokens).reshape(3, 2, N)
    np.testing.assert_array_equal(tokens[:, 0], ref)
    np.testing.assert_array_equal(tokens[:, 1], ref)  # Both samples of a prompt.
    assert np.asarray(greedy_rollout.mask).all()
    assert not np.asarray(greedy_rollout.finished).any()
    np.testing.assert_array_equal(greedy_rollout.lengths, np.full(6, N))
    np.testing.assert_array_equal(greedy_rollout.prompt_tokens, np.repeat(PROMPTS, 2, axis=0))
    np.testing.assert_array_equal(greedy_rollout.prompt_mask, np.repeat(PROMPT_MASK, 2, axis=0))


def test_greedy_logprobs_match_training_forward(tiny_params, tiny_config, greedy_rollout,
                                                greedy_config):
    ref = recomputed_logprobs(tiny_params, tiny_config, greedy_rollout,
                              greedy_config.temperature)
    numerics.assert_forward_close(greedy_rollout.logprobs, ref, tiny_config, 6 + N)


def test_phased_cache_window_gives_the_same_greedy_output(tiny_params, tiny_config,
                                                         greedy_rollout, greedy_config):
    sc = greedy_config.replace(cache_window=3)  # Cache sizes 9, 12 (= Tp + N - 1).
    assert cache_phases.cache_sizes(6, N, 3) == (9, 12)
    rollout = sampling.jit_generate(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(0),
                                    model_config=tiny_config, sampling_config=sc)
    np.testing.assert_array_equal(rollout.tokens, greedy_rollout.tokens)
    numerics.assert_forward_close(rollout.logprobs, greedy_rollout.logprobs, tiny_config, 6 + N)


def test_automatic_cache_window_picks_four_phases_from_128_and_eight_from_512_new_tokens():
    assert [cache_phases.auto_cache_window(n) for n in (1, 127, 128, 130, 200, 511, 512, 1024)] == \
        [0, 0, 32, 33, 50, 128, 64, 128]
    for n in range(128, 2100, 7):  # Always 4 (8 from N = 512) phases of about equal length.
        sizes = (10,) + cache_phases.cache_sizes(10, n, cache_phases.auto_cache_window(n))
        lengths = np.diff(sizes)
        assert len(lengths) == (8 if n >= 512 else 4), (n, sizes)
        assert lengths.max() - lengths.min() <= len(lengths) - 1, (n, sizes)  # ceil(/k).
    assert cache_phases.cache_window_of(SamplingConfig(max_new_tokens=128)) == 32  # None: auto.
    assert cache_phases.cache_window_of(SamplingConfig(max_new_tokens=128, cache_window=0)) == 0
    assert cache_phases.cache_sizes(32, 128, 32) == (64, 96, 128, 159)
    assert cache_phases.cache_sizes(32, 100, cache_phases.auto_cache_window(100)) == (131,)
    assert SamplingConfig(cache_window=np.int64(8)).cache_window == 8
    assert [cache_phases.cache_window_setting(v) for v in (-1, 0, 8)] == [None, 0, 8]  # Configs.
    with pytest.raises(ValueError, match="must be -1"):
        cache_phases.cache_window_setting(-2)
    # Off CPU one phase: each phase is one more compiled loop body.
    assert [cache_phases.auto_cache_window(n, "gpu") for n in (127, 128, 512)] == [0, 0, 0]


def test_automatic_phases_sample_what_one_phase_samples(tiny_params, tiny_config):
    """At 128 new tokens the default decodes in 4 phases (4 loop bodies): same tokens as
    one loop over the whole cache, log-probs equal to float32 rounding."""
    sc = SamplingConfig(temperature=1.0, max_new_tokens=128, num_samples=2)
    run = lambda c: sampling.jit_generate(tiny_params, PROMPTS, PROMPT_MASK,  # noqa: E731
                                          jax.random.PRNGKey(3), model_config=tiny_config,
                                          sampling_config=c)
    phased, single = run(sc), run(sc.replace(cache_window=0))
    np.testing.assert_array_equal(phased.tokens, single.tokens)
    np.testing.assert_array_equal(phased.mask, single.mask)
    numerics.assert_forward_close(phased.logprobs, single.logprobs, tiny_config, 6 + 128)


def test_compaction_batch_sizes():
    """Multiples of 8 shrinking by the ratio down to 8; off at 0 and for small batches."""
    assert live_rows.batch_sizes(256, 0.7) == (256, 184, 136, 96, 72, 56, 40, 32, 24, 16, 8)
    assert live_rows.batch_sizes(32, 0.5) == (32, 16, 8)
    assert live_rows.batch_sizes(256, 0.0) == (256,) and live_rows.batch_sizes(12, 0.5) == (12,)
    assert live_rows.ratio_of(SamplingConfig(max_new_tokens=127)) == 0.0
    assert live_rows.ratio_of(SamplingConfig(max_new_tokens=128)) == live_rows.AUTO_RATIO
    # Off CPU, automatic: halving down to 32 rows (fewer compiled loop bodies); a ratio that
    # is set goes down to 8 rows everywhere.
    auto, set_ = SamplingConfig(max_new_tokens=512), SamplingConfig(max_new_tokens=512,
                                                                   compact_ratio=0.5)
    assert live_rows.sizes_of(256, auto, "gpu") == (256, 128, 64, 32)
    assert live_rows.sizes_of(64, auto, "gpu") == (64, 32)
    assert live_rows.sizes_of(256, set_, "gpu") == (256, 128, 64, 32, 16, 8)
    assert live_rows.sizes_of(256, auto) == live_rows.batch_sizes(256, 0.7)  # CPU.


def test_compaction_samples_what_every_row_would_have_sampled(tiny_params, tiny_config):
    """32 rows with per-row budgets and stop tokens (top-k + top-p, two cache phases): the
    loop continuing on its live rows at 16 then 8 rows gives every row the tokens, mask and
    `finished` of the loop that carries all 32 to the end (each row keeps its noise by its
    original id), with fewer row-steps. Log-probs: the same float32 forward with a different
    batch in the dots (accumulation order), so equal within a forward's reordering bound."""
    p, g, n = 4, 8, 16
    prompts = np.random.default_rng(0).integers(1, tiny_config.vocab_size, (p, 6))
    budgets = jnp.asarray(np.random.default_rng(1).integers(1, n + 1, p * g), jnp.int32)
    sc = SamplingConfig(temperature=0.9, top_k=20, top_p=0.9, max_new_tokens=n, num_samples=g,
                        stop_token_ids=tuple(range(1, 128, 16)), cache_window=8,
                        compact_ratio=0.5)
    run = lambda c: sampling.jit_generate(  # noqa: E731
        tiny_params, jnp.asarray(prompts, jnp.int32), jnp.ones((p, 6), jnp.int32),
        jax.random.PRNGKey(3), model_config=tiny_config, sampling_config=c, budgets=budgets)
    compact, full = run(sc), run(sc.replace(compact_ratio=0.0))
    for name in ("tokens", "mask", "lengths", "finished"):
        np.testing.assert_array_equal(getattr(compact, name), getattr(full, name))
    numerics.assert_forward_close(compact.logprobs, full.logprobs, tiny_config, 6 + n)
    lengths, stopped = np.asarray(full.lengths), np.asarray(full.finished)
    assert (lengths[~stopped] == np.asarray(budgets)[~stopped]).all()  # Ended by the budget.
    assert (lengths[stopped] <= np.asarray(budgets)[stopped]).all() and 0 < stopped.sum() < p * g
    assert (np.asarray(full.decode_steps) == lengths.max()).all()  # Carried to the end.
    assert np.asarray(compact.decode_steps).sum() < np.asarray(full.decode_steps).sum()
    assert live_rows.useful_fraction(compact) > live_rows.useful_fraction(full)


def test_stop_token_ends_the_sequence(tiny_params, tiny_config, greedy_rollout, greedy_config):
    free = np.asarray(greedy_rollout.tokens)
    stop = int(free[0, 2])  # Row 0 (prompt 0) must now stop at or before its third token.
    sc = greedy_config.replace(stop_token_ids=(stop,), pad_id=127 if stop != 127 else 126)
    rollout = sampling.sample(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(0),
                              model_config=tiny_config, sampling_config=sc, buckets=None)
    check_rollout_structure(rollout, sc)
    tokens, lengths = np.asarray(rollout.tokens), np.asarray(rollout.lengths)
    for row in range(tokens.shape[0]):
        hits = np.flatnonzero(free[row] == stop)
        expected = hits[0] + 1 if hits.size else N
        assert lengths[row] == expected
        assert bool(rollout.finished[row]) == bool(hits.size)
        np.testing.assert_array_equal(tokens[row, :expected], free[row, :expected])
    assert lengths[0] <= 3


def test_sampled_rollout_inside_outer_jit(tiny_params, tiny_config, sampled_config,
                                          trainer_like_generate):
    rollout, total = trainer_like_generate(tiny_params, PROMPTS, PROMPT_MASK,
                                           jax.random.PRNGKey(3))
    assert rollout.tokens.shape == (12, 12) and rollout.tokens.dtype == jnp.int32
    assert rollout.logprobs.dtype == jnp.float32
    assert int(total) == int(np.asarray(rollout.mask).sum())
    check_rollout_structure(rollout, sampled_config)
    lengths = np.asarray(rollout.lengths)
    assert lengths.min() < lengths.max()  # Stops at different steps.
    # Log-probs are those of softmax(logits / T) before top-k/top-p: same as training.
    ref = recomputed_logprobs(tiny_params, tiny_config, rollout, sampled_config.temperature)
    mask = np.asarray(rollout.mask) == 1
    numerics.assert_forward_close(np.asarray(rollout.logprobs)[mask], ref[mask], tiny_config,
                                  rollout.tokens.shape[1] + PROMPTS.shape[1])
    # Every sampled token lies in its step's top-k of the training logits.
    tokens_full, mask_full = rollout.sequences()
    logits = transformer.jit_forward(tiny_params, tokens_full, mask_full, config=tiny_config)
    tp = PROMPTS.shape[1]
    step_logits = np.asarray(logits[:, tp - 1:-1])
    kth = np.sort(step_logits, axis=-1)[..., -sampled_config.top_k]
    chosen = np.take_along_axis(step_logits, np.asarray(rollout.tokens)[..., None], -1)[..., 0]
    assert (chosen[mask] >= kth[mask] - 1e-5).all()


def test_deterministic_for_a_fixed_rng(tiny_params, tiny_config, trainer_like_generate):
    a, _ = trainer_like_generate(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(5))
    b, _ = trainer_like_generate(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(5))
    c, _ = trainer_like_generate(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(6))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.tokens, c.tokens)
    # The G samples of one prompt are different draws.
    groups = np.asarray(a.tokens).reshape(3, 4, -1)
    assert any(not np.array_equal(groups[p, 0], groups[p, g]) for p in range(3) for g in (1, 2, 3))


# ----------------------------------------------------------------------------- one step


def numpy_keep_set(logits, top_k, top_p):
    """Reference: the token ids top-k then top-p keep, for one row."""
    order = np.argsort(-logits, kind="stable")
    if top_k:
        order = order[:top_k]
    probs = np.exp(logits[order] - logits[order].max())
    probs /= probs.sum()
    kept, mass = [], 0.0
    for token, prob in zip(order, probs):
        if mass >= top_p:
            break
        kept.append(int(token))
        mass += prob
    return set(kept)


HAND_MADE = np.log(np.array([
    [0.05, 0.40, 0.10, 0.25, 0.02, 0.18],
    [0.30, 0.30, 0.20, 0.10, 0.06, 0.04],   # A tie at the top.
    [0.90, 0.02, 0.02, 0.02, 0.02, 0.02],
    [1 / 6] * 6,                            # Uniform: ties everywhere.
]))


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (1, 1.0), (3, 1.0), (0, 0.45), (0, 0.75),
                                         (0, 0.88), (4, 0.85), (2, 0.6), (6, 0.99)])
def test_filtering_matches_numpy_reference(top_k, top_p):
    filtered = np.asarray(_jit_filter_logits(jnp.asarray(HAND_MADE, jnp.float32),
                                                 top_k=top_k, top_p=top_p))
    for row in range(HAND_MADE.shape[0]):
        kept = set(np.flatnonzero(np.isfinite(filtered[row])).tolist())
        assert kept == numpy_keep_set(HAND_MADE[row], top_k, top_p), (row, top_k, top_p)
        idx = sorted(kept)
        # Kept logits pass through: one float32 rounding of the float64 constants (u < 1e-6).
        np.testing.assert_allclose(filtered[row, idx], HAND_MADE[row, idx], rtol=1e-6)


@pytest.mark.parametrize("temperature,top_k,top_p,one_pass", [
    (1.0, 0, 1.0, False), (0.6, 0, 1.0, False), (1.3, 3, 1.0, False), (1.0, 0, 0.7, False),
    (0.8, 4, 0.9, False), (1.0, 0, 1.0, True), (0.6, 0, 1.0, True)])
def test_sampled_frequencies_match_the_distribution(temperature, top_k, top_p, one_pass):
    """`sample_tokens` (on CPU, untruncated: the inverse-CDF draw) and, with `one_pass`, the
    GPU / TPU's one-pass Gumbel-max draw (`token_sampling._untruncated(vectorised=False)`)
    run here: chi-square of 40,000 draws at p = 0.001, untruncated log-probs."""
    logits = np.array([1.0, 0.2, -0.5, 2.0, 0.0, -1.5], np.float32)
    draws = 40_000
    batch = jnp.broadcast_to(jnp.asarray(logits)[None], (draws, logits.size))
    if one_pass:
        tokens, logp = _jit_untruncated(batch / temperature, jax.random.PRNGKey(11), None,
                                        False, False)
    else:
        tokens, logp = _jit_sample_tokens(batch, jax.random.PRNGKey(11),
                                          temperature=temperature, top_k=top_k, top_p=top_p)
    tokens = np.asarray(tokens)
    scaled = logits.astype(np.float64) / temperature
    keep = sorted(numpy_keep_set(scaled, top_k, top_p))
    expected = np.zeros(logits.size)
    expected[keep] = np.exp(scaled[keep] - scaled[keep].max())
    expected /= expected.sum()
    counts = np.bincount(tokens, minlength=logits.size)
    assert counts[expected == 0].sum() == 0  # Nothing outside the kept set.
    support = expected > 0
    if support.sum() > 1:
        e = expected[support] * draws
        stat = np.sum((counts[support] - e) ** 2 / e)
        assert stat < numerics.chi_square_critical(support.sum() - 1), (stat, counts, e)
    # Log-probs are untruncated: log softmax(logits / T) of the drawn token.
    full = scaled - np.log(np.sum(np.exp(scaled)))
    np.testing.assert_allclose(np.asarray(logp), full[tokens], rtol=0,
                               atol=numerics.log_softmax_atol(scaled))


def test_greedy_step_takes_argmax_and_reports_tempered_logprob():
    logits = jnp.asarray(HAND_MADE[:3], jnp.float32)
    tokens, logp = _jit_sample_tokens(logits, jax.random.PRNGKey(0), temperature=2.0,
                                          greedy=True, top_k=2)
    np.testing.assert_array_equal(tokens, np.argmax(HAND_MADE[:3], axis=-1))
    scaled = HAND_MADE[:3] / 2.0
    ref = scaled - np.log(np.exp(scaled).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp, ref[np.arange(3), np.asarray(tokens)], rtol=0,
                               atol=numerics.log_softmax_atol(scaled))


@pytest.mark.parametrize("greedy", [True, False])
def test_vocab_limit_never_draws_ids_past_it(greedy):
    """A model vocabulary padded past the tokenizer's: ids >= vocab_limit are never drawn,
    even where they hold the largest logits; below the limit nothing changes."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 32)).astype(np.float32)
    logits[:, 20:] += 5.0  # The padded ids would win almost every draw.
    sc = SamplingConfig(greedy=greedy, top_k=0, vocab_limit=20)
    tokens, logp = jax.jit(sampling.sample_token, static_argnums=2)(
        jnp.asarray(logits), jax.random.PRNGKey(1), sc)
    assert (np.asarray(tokens) < 20).all() and np.isfinite(np.asarray(logp)).all()
    if greedy:
        np.testing.assert_array_equal(tokens, np.argmax(logits[:, :20], axis=-1))
    same = SamplingConfig(greedy=greedy, vocab_limit=32)  # At V: off.
    np.testing.assert_array_equal(
        sampling.sample_token(jnp.asarray(logits), jax.random.PRNGKey(1), same)[0],
        sampling.sample_token(jnp.asarray(logits), jax.random.PRNGKey(1),
                         SamplingConfig(greedy=greedy))[0])


# ----------------------------------------------------------------------------- input checks


@pytest.mark.parametrize("kwargs", [dict(temperature=-1.0), dict(temperature=0.0),
                                    dict(num_samples=0), dict(max_new_tokens=0),
                                    dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-2),
                                    dict(cache_window=-1), dict(cache_window=1.5),
                                    dict(cache_window=True), dict(stop_token_ids=(-3,)),
                                    dict(max_length=8, max_new_tokens=8),
                                    dict(cache_dtype="notatype"), dict(vocab_limit=-1),
                                    dict(compact_ratio=1.0), dict(compact_ratio=-0.5)])
def test_bad_sampling_config_raises(kwargs):
    with pytest.raises((ValueError, TypeError)):
        SamplingConfig(**kwargs)


@pytest.fixture
def no_compile(monkeypatch):
    """Fails the test if `sample` reaches the compiled function."""
    def fail(*args, **kwargs):
        raise AssertionError("reached jit_generate: input was not rejected before compiling")
    monkeypatch.setattr(sampling, "jit_generate", fail)


@pytest.mark.parametrize("case", ["empty_row", "right_padded", "too_long", "bad_rank",
                                  "token_out_of_vocab", "shape_mismatch", "stop_out_of_vocab"])
def test_bad_prompts_raise_before_compiling(tiny_params, tiny_config, no_compile, case):
    tokens, mask = PROMPTS.copy(), PROMPT_MASK.copy()
    sc = SamplingConfig(max_new_tokens=4, max_length=10)
    if case == "empty_row":
        mask[2] = 0
    elif case == "right_padded":
        mask[0] = mask[0][::-1]
    elif case == "too_long":
        sc = sc.replace(max_length=9)  # Longest prompt 6 + 4 new tokens > 9.
    elif case == "bad_rank":
        tokens, mask = tokens[0], mask[0]
    elif case == "token_out_of_vocab":
        tokens[1, 3] = tiny_config.vocab_size
    elif case == "shape_mismatch":
        mask = mask[:, 1:]
    elif case == "stop_out_of_vocab":
        sc = sc.replace(stop_token_ids=(tiny_config.vocab_size,))
    with pytest.raises(ValueError):
        sampling.sample(tiny_params, tokens, mask, jax.random.PRNGKey(0),
                        model_config=tiny_config, sampling_config=sc)


def test_generate_rejects_bad_shapes_at_trace_time(tiny_params, tiny_config):
    sc = SamplingConfig(max_new_tokens=4, max_length=8)
    with pytest.raises(ValueError, match="max_length"):  # 6 + 4 > 8, found while tracing.
        jax.eval_shape(lambda p, t, m: sampling.generate(
            p, t, m, jax.random.PRNGKey(0), model_config=tiny_config, sampling_config=sc),
            tiny_params, PROMPTS, PROMPT_MASK)


def test_sample_trims_padding_columns_to_fit_the_cache(tiny_params, tiny_config, no_compile,
                                                       monkeypatch):
    seen = {}

    def record(params, tokens, mask, rng, **kwargs):
        seen["shape"] = tokens.shape
        return tokens, mask

    monkeypatch.setattr(sampling, "jit_generate", record)
    sc = SamplingConfig(max_new_tokens=4, max_length=11)
    wide_tokens, wide_mask = sampling.left_pad(PROMPTS, PROMPT_MASK, 20)
    tokens, mask = sampling.sample(tiny_params, wide_tokens, wide_mask, jax.random.PRNGKey(0),
                                   model_config=tiny_config, sampling_config=sc)
    assert seen["shape"] == (3, 7)  # Bucket 32 capped at 11 - 4 = 7 columns.
    np.testing.assert_array_equal(np.asarray(tokens)[:, 1:], PROMPTS)
    np.testing.assert_array_equal(np.asarray(mask)[:, 1:], PROMPT_MASK)
    assert not np.asarray(mask)[:, 0].any()


def test_bucket_length():
    assert sampling.bucket_length(1) == 16
    assert sampling.bucket_length(16) == 16
    assert sampling.bucket_length(17) == 32
    assert sampling.bucket_length(5, buckets=(4, 8)) == 8
    assert sampling.bucket_length(9, buckets=(4, 8)) == 16
    assert sampling.bucket_length(17, buckets=(8, 4)) == 24
    with pytest.raises(ValueError):
        sampling.bucket_length(0)
    with pytest.raises(ValueError):
        sampling.bucket_length(3, buckets=())


def test_rollout_is_a_pytree():
    b, n, tp = 2, 3, 4
    rollout = sampling.Rollout(
        tokens=jnp.zeros((b, n), jnp.int32), mask=jnp.ones((b, n), jnp.int32),
        logprobs=jnp.zeros((b, n)), lengths=jnp.full((b,), n), finished=jnp.zeros((b,), bool),
        prompt_tokens=jnp.ones((b, tp), jnp.int32), prompt_mask=jnp.ones((b, tp), jnp.int32))
    assert len(jax.tree.leaves(rollout)) == 7
    doubled = jax.tree.map(lambda x: x * 2, rollout)
    assert int(doubled.lengths[0]) == 2 * n
    tokens, mask = rollout.sequences()
    assert tokens.shape == (b, tp + n) and mask.shape == (b, tp + n)


@pytest.mark.parametrize("window,share", [(0, False), (3, False), (3, True)])
def test_batch_sharded_over_a_mesh_gives_the_same_rollout(tiny_params, tiny_config,
                                                          greedy_rollout, greedy_config, window,
                                                          share):
    """Prompts sharded over a 3-device data axis (the caller's shardings), params replicated;
    one phase, and phases whose cache copies run on the sharded batch (with the prompts' KV
    copied to their rows, or shared: `share_prompt_kv`)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as PS
    mesh = Mesh(np.array(jax.devices()[:3]), ("data",))
    batch = NamedSharding(mesh, PS("data"))
    replicated = NamedSharding(mesh, PS())
    sc = greedy_config.replace(cache_window=window, share_prompt_kv=share)
    run = jax.jit(
        lambda p, t, m, r: sampling.generate(p, t, m, r, model_config=tiny_config,
                                             sampling_config=sc),
        in_shardings=(replicated, batch, batch, replicated), out_shardings=batch)
    rollout = run(tiny_params, PROMPTS, PROMPT_MASK, jax.random.PRNGKey(0))
    assert rollout.tokens.sharding.spec == PS("data")
    np.testing.assert_array_equal(rollout.tokens, greedy_rollout.tokens)
    numerics.assert_forward_close(rollout.logprobs, greedy_rollout.logprobs, tiny_config, 6 + N)


# ----------------------------------------------------------------------------- decode bytes

DECODE_STEP_BYTES = 776_821  # Tiny model, 8 rows, 31-slot cache, CPU, jax 0.10.2 (issue 18).


def test_decode_step_bytes_stay_near_their_minimum(tiny_config):
    """XLA's bytes accessed by ONE decode-loop body (every layer counted).

    At commit 8fd322f this step moved 1,699,374 bytes (per-layer weight copies out of the
    stacked arrays, transposed K/V copies, a rolled Threefry loop); after issue 18, 776,821
    (minimum 407,808: weights + valid K/V + logits). Fails if it grows past 1.1× that.
    Session 15: 801,893 (minimum 409,856), the CPU draw's second pass over the logits and its
    chunk search (`token_sampling._inverse_cdf`); the same under --xla_cpu_max_isa=AVX2,
    SSE4_2 and AVX512."""
    from rlvr_jax.perf import decode_cost
    cost = decode_cost.step_cost(tiny_config, prompts=4, samples=2, prompt_len=8,
                                 new_tokens=24, step=8)
    assert cost["bytes_accessed"] <= 1.1 * DECODE_STEP_BYTES, cost
    assert cost["bytes_accessed"] <= 2.0 * cost["minimum_bytes"], cost


def test_sample_benchmark_at_real_lengths_stops_each_row_at_its_drawn_length(capsys):
    """`benchmark.py sample --lengths real`: rows end at `workloads.completion_lengths`, and
    the useful fraction is reported (16 rows, compacted to 8 once at most 8 are live)."""
    from rlvr_jax import workloads
    from rlvr_jax.perf import benchmarks
    benchmarks.main(["sample", "--preset", "tiny", "--prompts", "2", "--samples", "8",
                     "--prompt-len", "8", "--new-tokens", "32", "--lengths", "real",
                     "--compact-ratio", "0.5", "--repeats", "1"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["generated_tokens"] == int(workloads.completion_lengths(16, 32, seed=0).sum())
    assert out["batch_sizes"] == [16, 8] and 0 < out["useful_fraction"] <= 1
    assert out["real_tokens_per_s"] == out["tokens_per_s"] > 0
