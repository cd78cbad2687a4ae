"""Format reward, DAPO overlong penalty (host and jit), majority vote, reward combination."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax.rewards import format as fmt, length
from rlvr_jax.scoring import host_reward, label_free, noise
from tests.reference import rewards_ref
from rlvr_jax.rewards.math import math_reward


# ---------------------------------------------------------------- format

@pytest.mark.parametrize("text,expected", [
    ("<think>3+4=7</think><answer>7</answer>", 1.0),
    ("  <think>\nwork\n</think>\n\n<answer> 7 </answer>\n", 1.0),
    ("<think>work</think>", 0.0),
    ("<answer>7</answer>", 0.0),
    ("<think>a</think><answer>7</answer> trailing text", 0.0),
    ("Sure! <think>a</think><answer>7</answer>", 0.0),
    ("<think>a</think><answer>7</answer><answer>8</answer>", 0.0),
    ("<think>a<think>b</think></think><answer>7</answer>", 0.0),
    ("<answer>7</answer><think>a</think>", 0.0),
    ("<think> </think><answer>7</answer>", 0.0),
    ("Thought process: <think>", 0.0),
])
def test_format_reward(text, expected):
    assert fmt.format_reward(text) == expected


def test_format_reward_options_and_tags():
    assert fmt.format_reward("<think></think><answer>7</answer>", require_nonempty=False) == 1.0
    assert fmt.extract_tag("<answer>1</answer> <answer> 2 </answer>") == "2"
    assert fmt.extract_tag("no tags") is None
    with pytest.raises(ValueError):
        fmt.extract_tag("x", tag="a|b")
    with pytest.raises(ValueError):
        fmt.format_reward(None)


# ---------------------------------------------------------------- overlong penalty

def _dapo_formula(length_, max_length, buffer):
    """Eq. 13 of DAPO, written independently of the implementation."""
    if length_ <= max_length - buffer:
        return 0.0
    if length_ <= max_length:
        return ((max_length - buffer) - length_) / buffer
    return -1.0


def test_overlong_penalty_host_matches_formula():
    for n in range(0, 40):                           # the same float64 formula: equal
        assert length.overlong_penalty(n, max_length=32, buffer_length=8) == pytest.approx(
            _dapo_formula(n, 32, 8))
    assert length.overlong_penalty(24, max_length=32, buffer_length=8) == 0.0
    assert length.overlong_penalty(28, max_length=32, buffer_length=8) == -0.5
    assert length.overlong_penalty(32, max_length=32, buffer_length=8) == -1.0


def test_overlong_penalty_jit_and_numpy_match_host():
    lengths = np.arange(0, 40, dtype=np.int32)
    f = jax.jit(lambda x: length.overlong_penalty_jnp(x, max_length=32, buffer_length=8))
    got = np.asarray(f(jnp.asarray(lengths)))
    expected = np.array([_dapo_formula(int(n), 32, 8) for n in lengths], np.float32)
    assert got.dtype == np.float32
    # Integers over 8: exact in float32 and float64.
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(rewards_ref.overlong_penalty_np(lengths, max_length=32, buffer_length=8),
                               expected, atol=1e-6)
    two_d = f(jnp.asarray(lengths.reshape(4, 10)))
    assert two_d.shape == (4, 10)


@pytest.mark.parametrize("kwargs", [dict(max_length=0, buffer_length=1),
                                    dict(max_length=8, buffer_length=0),
                                    dict(max_length=8, buffer_length=9)])
def test_overlong_penalty_bad_config(kwargs):
    with pytest.raises(ValueError):
        length.overlong_penalty(3, **kwargs)
    with pytest.raises(ValueError):
        length.overlong_penalty_jnp(jnp.zeros((2,), jnp.int32), **kwargs)


def test_overlong_penalty_negative_length():
    with pytest.raises(ValueError):
        length.overlong_penalty(-1, max_length=8, buffer_length=2)
    with pytest.raises(ValueError):
        rewards_ref.overlong_penalty_np([-1], max_length=8, buffer_length=2)


# ---------------------------------------------------------------- majority vote

def test_majority_vote_rewards():
    answers = [["7", "7.0", "8", None],      # 7 wins with two equivalent forms
               ["1/2", "0.5", "3", "3"],     # tie 2-2: first cluster (1/2) wins
               [None, None, None, None],     # no answers: no label
               ["1", "2", "3", "4"]]         # share 1/4
    rewards, info = label_free.majority_vote_rewards(answers, min_share=0.3)
    assert rewards.dtype == np.float32 and rewards.shape == (4, 4)
    np.testing.assert_array_equal(rewards, [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    assert info["majority"][:3] == ["7", "1/2", None] and info["majority"][3] is None
    np.testing.assert_allclose(info["share"], [0.5, 0.5, 0.0, 0.25])  # counts / 4: exact
    np.testing.assert_array_equal(info["has_label"], [True, True, False, False])
    rewards, _ = label_free.majority_vote_rewards(answers[3:], min_share=0.0)
    np.testing.assert_array_equal(rewards, [[1, 0, 0, 0]])


def test_majority_vote_matches_true_reward_when_majority_is_right():
    comps = [["\\boxed{7}", "so 7", "\\boxed{8}"], ["\\boxed{2}", "\\boxed{3}", "\\boxed{3}"]]
    pseudo, info = rewards_ref.majority_vote_from_completions(comps)
    true = np.array([[math_reward(c, ref) for c in g] for g, ref in zip(comps, ["7", "3"])])
    np.testing.assert_array_equal(pseudo, true)


def test_majority_vote_bad_input():
    with pytest.raises(ValueError):
        label_free.majority_vote_rewards([])
    with pytest.raises(ValueError):
        label_free.majority_vote_rewards([["1", "2"], ["1"]])
    with pytest.raises(ValueError):
        label_free.majority_vote_rewards([["1"]], min_share=2.0)


# ---------------------------------------------------------------- combination

def test_combined_reward():
    fn = host_reward.CombinedReward([host_reward.RewardTerm("correct", math_reward, 1.0),
                                      host_reward.RewardTerm("format", lambda c, r: fmt.format_reward(c), 0.2)])
    out = fn("<think>3+4</think><answer>7</answer>", "7")
    # 0 + 1.0 + 0.2 == 1.2 in float64.
    assert out == {"correct": 1.0, "format": 1.0, "reward": pytest.approx(1.2)}
    out = fn("\\boxed{8}", "7")
    assert out == {"correct": 0.0, "format": 0.0, "reward": 0.0}
    with pytest.raises(ValueError):
        host_reward.CombinedReward([])
    with pytest.raises(ValueError):
        host_reward.CombinedReward([host_reward.RewardTerm("a", math_reward),
                                    host_reward.RewardTerm("a", math_reward)])
    with pytest.raises(ValueError):
        host_reward.CombinedReward([host_reward.RewardTerm("reward", math_reward)])


def test_combine_components_arrays_and_jit_lengths():
    correct = np.array([1.0, 0.0, 1.0, 1.0], np.float32)
    lengths = jnp.array([10, 30, 31, 40])
    over = length.overlong_penalty_jnp(lengths, max_length=32, buffer_length=4)
    total, metrics = rewards_ref.combine_components({"correct": correct, "overlong": np.asarray(over)},
                                                {"correct": 1.0, "overlong": 1.0})
    # Sums and means of small dyadic values: exact.
    np.testing.assert_allclose(total, [1.0, -0.5, 0.25, 0.0], atol=1e-6)
    assert metrics["reward/correct/mean"] == pytest.approx(0.75)
    assert metrics["reward/overlong/mean"] == pytest.approx((0 - 0.5 - 0.75 - 1) / 4)
    assert metrics["reward/total/mean"] == pytest.approx(np.mean([1.0, -0.5, 0.25, 0.0]))
    with pytest.raises(ValueError, match="missing"):
        rewards_ref.combine_components({"correct": correct}, {"format": 1.0})
    with pytest.raises(ValueError, match="shapes"):
        rewards_ref.combine_components({"a": correct, "b": correct[:2]}, {"a": 1.0})


# ---------------------------------------------------------------- noise correction

@pytest.mark.parametrize("fn_rate,fp_rate", [(0.1, 0.0), (0.2, 0.05), (0.0, 0.3)])
def test_noise_corrected_reward_is_unbiased(fn_rate, fp_rate):
    corrected = noise.noise_corrected_reward(np.array([0.0, 1.0], np.float32),
                                             fn_rate=fn_rate, fp_rate=fp_rate)
    # E[r~ | r=1] = (1-fn) r~(1) + fn r~(0);  E[r~ | r=0] = fp r~(1) + (1-fp) r~(0)
    # Each r~ rounds 1 − fp (or −fp), the scale and the product in float32: γ_3 relative, so the
    # expectations err by ≤ γ_3·(terms ≤ 1.1) = 2e-7.
    assert (1 - fn_rate) * corrected[1] + fn_rate * corrected[0] == pytest.approx(1.0, abs=1e-6)
    assert fp_rate * corrected[1] + (1 - fp_rate) * corrected[0] == pytest.approx(0.0, abs=1e-6)
    jitted = jax.jit(lambda r: noise.noise_corrected_reward(r, fn_rate=fn_rate, fp_rate=fp_rate))
    np.testing.assert_allclose(jitted(jnp.array([0.0, 1.0])), corrected, rtol=1e-6)  # ≤ 2γ_2


def test_noise_corrected_reward_bad_rates():
    with pytest.raises(ValueError):
        noise.noise_corrected_reward([1.0], fn_rate=0.6, fp_rate=0.5)
    with pytest.raises(ValueError):
        noise.noise_corrected_reward([1.0], fn_rate=-0.1)
