"""Hints (`rlvr_jax.train.hints`, rl.hint_mode): the hinted prompts, the spliced rows
(hint ++ continuation, the hint masked from the loss) and the choice of groups, against
hand-computed arrays with a stand-in sampler (no model); the step with hints runs in
tests/test_configs.py (hints_arithmetic)."""
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import sampling
from rlvr_jax.train import hints, rl_config

PAD = 0


def _rollout(tokens, mask, tp=3):
    tokens, mask = np.asarray(tokens, np.int32), np.asarray(mask, np.int32)
    b = tokens.shape[0]
    return sampling.Rollout(
        tokens=jnp.asarray(tokens), mask=jnp.asarray(mask),
        logprobs=jnp.asarray(np.where(mask > 0, -0.5, 0.0).astype(np.float32)),
        lengths=jnp.asarray(mask.sum(1).astype(np.int32)),
        finished=jnp.asarray(mask.sum(1) < tokens.shape[1]),
        prompt_tokens=jnp.full((b, tp), 9, jnp.int32), prompt_mask=jnp.ones((b, tp), jnp.int32),
        decode_steps=jnp.zeros((b,), jnp.int32))


def test_hinted_prompts_and_splice():
    prompts = jnp.asarray([[0, 5, 6], [7, 8, 9]])
    pmask = jnp.asarray([[0, 1, 1], [1, 1, 1]])
    sol = jnp.asarray([[11, 12, 13, 2], [21, 22, 2, 0]])
    tokens, mask = hints.hinted_prompts(prompts, pmask, sol, jnp.asarray([2, 0]), PAD)
    np.testing.assert_array_equal(tokens, [[0, 0, 0, 5, 6, 11, 12], [0, 0, 0, 0, 7, 8, 9]])
    np.testing.assert_array_equal(mask, [[0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1]])
    cont = _rollout([[31, 32, 2, 0], [41, 42, 43, 44]], [[1, 1, 1, 0], [1, 1, 1, 1]])
    out = hints.splice(sol, jnp.asarray([2, 1]), cont, PAD)
    np.testing.assert_array_equal(out.tokens, [[11, 12, 31, 32], [21, 41, 42, 43]])
    np.testing.assert_array_equal(out.mask, [[1, 1, 1, 1], [1, 1, 1, 1]])
    np.testing.assert_array_equal(out.loss_mask, [[0, 0, 1, 1], [0, 1, 1, 1]])  # Hint masked.
    np.testing.assert_array_equal(out.logprobs, [[0, 0, -0.5, -0.5], [0, -0.5, -0.5, -0.5]])
    # Row 0: its EOS (2) fell off the end (N = 4): not finished; row 1 never finished.
    assert not np.any(np.asarray(out.finished))


@pytest.mark.parametrize("mode", ["on_fail", "schedule"])
def test_with_hints_replaces_the_failed_groups_only(mode):
    g, n = 2, 4
    first = _rollout(np.full((4, n), 5), np.ones((4, n)))
    batch = {"prompt_tokens": jnp.full((2, 3), 9), "prompt_mask": jnp.ones((2, 3), jnp.int32),
             "answers": jnp.zeros((2,), jnp.int32),
             "solution_tokens": jnp.asarray([[11, 12, 13, 2], [21, 22, 23, 2]]),
             "solution_mask": jnp.ones((2, n), jnp.int32)}
    seen = {}

    def trace(b, rng):
        seen["prompts"] = b["prompt_tokens"].shape  # (Traced inside lax.cond.)
        return _rollout(np.full((4, n), 7), np.ones((4, n)), tp=b["prompt_tokens"].shape[1])

    rl = rl_config.RLConfig(num_prompts=2, hint_mode=mode, hint_fraction=0.7)
    correct = jnp.asarray([False, False, True, False])  # Group 0 all wrong.
    out, metrics = hints.with_hints(first, correct, batch, None, jnp.asarray(0), trace=trace,
                                    rl=rl, group_size=g, pad_id=PAD)
    h = int(np.floor(np.float32(0.7) * 3))  # ⌊0.7 · 3⌋ = 2 tokens (the EOS is no hint).
    hinted = [0, 1] if mode == "on_fail" else [0, 1, 2, 3]
    for row in range(4):
        want = [11 + 10 * (row // 2), 12 + 10 * (row // 2), 7, 7] if row in hinted else [5] * 4
        np.testing.assert_array_equal(out.tokens[row], want)
        np.testing.assert_array_equal(out.loss_mask[row], [0] * h + [1] * (n - h)
                                      if row in hinted else [1] * n)
    assert out.prompt_tokens.shape == (4, 3)  # The original prompts: the hint is completion.
    assert seen["prompts"] == (2, 3 + n)
    assert float(metrics["hint/hinted_group_fraction"]) == (0.5 if mode == "on_fail" else 1.0)
    with pytest.raises(ValueError, match="hint_mode"):
        rl_config.RLConfig(num_prompts=2, hint_mode="always")


def test_hint_fraction_decays():
    rl = rl_config.RLConfig(num_prompts=2, hint_mode="schedule", hint_fraction=0.8,
                            hint_decay_steps=10)
    got = [float(hints.hint_fraction(jnp.asarray(s), rl)) for s in (0, 5, 10, 15)]
    assert got == pytest.approx([0.8, 0.4, 0.0, 0.0])


@pytest.mark.parametrize("correct, want_groups", [
    ([True, True, False, False], [1]),    # Only group 1 is all wrong: it is the one picked.
    ([False, False, False, False], [0]),  # Both are: the first K = 1 of them.
    ([True, False, True, False], []),     # None is: the pass does not run.
])
def test_hint_groups_caps_the_second_pass(correct, want_groups):
    g, n = 2, 4
    first = _rollout(np.full((4, n), 5), np.ones((4, n)))
    batch = {"prompt_tokens": jnp.asarray([[8, 8, 8], [9, 9, 9]]),
             "prompt_mask": jnp.ones((2, 3), jnp.int32), "answers": jnp.zeros((2,), jnp.int32),
             "solution_tokens": jnp.asarray([[11, 12, 13, 2], [21, 22, 23, 2]]),
             "solution_mask": jnp.ones((2, n), jnp.int32)}
    seen = {}

    def trace(b, rng):  # Continues with the prompt's own token (after 2 pads): 8 or 9.
        seen["prompts"] = b["prompt_tokens"].shape
        r = _rollout(np.full((2, n), 7), np.ones((2, n)), tp=b["prompt_tokens"].shape[1])
        return r.replace(tokens=jnp.broadcast_to(jnp.repeat(b["prompt_tokens"][:, 2:3], g, axis=0),
                                                  (g, n)))

    rl = rl_config.RLConfig(num_prompts=2, hint_mode="on_fail", hint_fraction=0.7,
                            hint_groups=1)
    out, metrics = hints.with_hints(first, jnp.asarray(correct), batch, None, jnp.asarray(0),
                                    trace=trace, rl=rl, group_size=g, pad_id=PAD)
    assert seen["prompts"] == (1, 3 + n)  # K = 1 group decoded, not P' = 2.
    for row in range(4):
        group = row // 2
        want = [11 + 10 * group, 12 + 10 * group] + [8 + group] * 2 if group in want_groups \
            else [5] * 4
        np.testing.assert_array_equal(out.tokens[row], want)
        np.testing.assert_array_equal(out.prompt_tokens[row], [9] * 3)  # `first`'s prompts.
    assert float(metrics["hint/hinted_group_fraction"]) == len(want_groups) / 2
    assert float(metrics["hint/decoded_rows"]) == (g if want_groups else 0)
    assert float(metrics["hint/needed_group_fraction"]) == float(
        np.mean(~np.asarray(correct).reshape(2, g).any(1)))
    with pytest.raises(ValueError, match="hint_groups"):
        rl_config.RLConfig(num_prompts=2, hint_mode="on_fail", hint_groups=-1)
