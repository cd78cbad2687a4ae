"""RewardPool: batched scoring survives errors, crashes and hangs; math-verify behind its timeout."""
import functools
import os
import time

import numpy as np
import pytest

from rlvr_jax.rewards import code as rc
from rlvr_jax.scoring.host_reward import CombinedReward, RewardTerm
from rlvr_jax.rewards.format import format_reward
from rlvr_jax.rewards.math import math_reward
from rlvr_jax.rewards.pool import RewardPool


def _moody(completion, reference):
    """A verifier that misbehaves on command (module level, so workers can import it)."""
    if completion == "raise":
        raise RuntimeError("verifier bug")
    if completion == "hang":
        time.sleep(60)
    if completion == "die":
        os._exit(3)
    if completion == "nan":
        return float("nan")
    return float(completion == reference)


def _format_only(completion, reference):
    return format_reward(completion)


@pytest.fixture(scope="module")
def pool():
    """For samples that end by themselves: a budget they cannot hit on a loaded machine."""
    with RewardPool(_moody, num_workers=2, timeout_s=600.0) as p:
        yield p


def test_scores_and_failures(pool):
    comps = ["a", "raise", "die", "b", "c", "nan", "d"]  # "b" was queued behind "die"
    refs = ["a", "x", "x", "x", "c", "x", "d"]
    rewards, info = pool.score(comps, refs)
    assert rewards.dtype == np.float32 and rewards.shape == (7,)
    np.testing.assert_array_equal(rewards, [1, 0, 0, 0, 1, 0, 1])
    assert info["timeouts"] == 0
    assert info["errors"] == 3  # raise, die, nan
    assert any("verifier bug" in m for m in info["error_messages"])
    # the pool still works after replacing the dead worker
    rewards, info = pool.score(["z"] * 5, ["z"] * 5)
    np.testing.assert_array_equal(rewards, np.ones(5, np.float32))
    assert info["errors"] == info["timeouts"] == 0


def test_hung_samples_are_cut_at_their_timeout():
    """Each hung sample (a 60 s sleep) scores 0 as a timeout and its worker is replaced; the
    one queued behind it is sent again. Uncut, each would end after its sleep as a plain 0
    with no timeout counted."""
    with RewardPool(_moody, num_workers=1, timeout_s=1.0) as p:
        rewards, info = p.score(["hang", "hang"], ["x", "x"])
        assert p.restarts == 2
    np.testing.assert_array_equal(rewards, [0, 0])
    assert info["timeouts"] == 2 and info["errors"] == 0
    assert all("timed out after 1s" in m for m in info["error_messages"])


def test_bad_input(pool):
    with pytest.raises(ValueError):
        pool.score(["a"], [])
    with pytest.raises(ValueError):
        RewardPool(_moody, num_workers=0)
    with pytest.raises(ValueError):
        RewardPool(_moody, context="fork")
    rewards, info = pool.score([], [])
    assert rewards.shape == (0,)


def test_worker_that_cannot_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="failed to start"):
        with RewardPool(_moody, num_workers=1, preload=("no_such_module_rlvr",)) as p:
            p.score(["a"], ["a"])


def test_closed_pool_refuses():
    p = RewardPool(_moody, num_workers=1, timeout_s=1.0, context="spawn")
    p.close()
    p.close()  # idempotent
    with pytest.raises(RuntimeError):
        p.score(["a"], ["a"])


def test_combined_reward_components_reported():
    fn = CombinedReward([RewardTerm("correct", math_reward, 1.0),
                         RewardTerm("format", _format_only, 0.5)])
    comps = ["<think>3+4</think><answer>7</answer>", "\\boxed{7}", "<think>x</think><answer>8</answer>"]
    with RewardPool(fn, num_workers=2, timeout_s=600.0) as p:
        rewards, info = p.score(comps, ["7", "7", "7"])
    np.testing.assert_allclose(rewards, [1.5, 1.0, 0.5])
    np.testing.assert_array_equal(info["components"]["correct"], [1, 1, 0])
    np.testing.assert_array_equal(info["components"]["format"], [1, 0, 1])


def test_code_reward_through_pool():
    """The sandbox's own 1 s timeout cuts the loop (no pool error or timeout); the pool's
    budget and the honest programs' are out of reach."""
    loop_fn = functools.partial(rc.code_reward, config=rc.SandboxConfig(timeout_s=1.0))
    good_fn = functools.partial(rc.code_reward, config=rc.SandboxConfig(timeout_s=600.0))
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    loop = "```python\nwhile True:\n    pass\n```"
    tests = ["assert add(1, 2) == 3"]
    for fn, comps, expected in ((good_fn, [good, good], [1, 1]), (loop_fn, [loop], [0])):
        with RewardPool(fn, num_workers=2, timeout_s=600.0) as p:
            rewards, info = p.score(comps, [tests] * len(comps))
        np.testing.assert_array_equal(rewards, expected)
        assert info["errors"] == info["timeouts"] == 0


@pytest.mark.timeout(300)  # The hang guard: without its timeouts the power tower never ends.
def test_math_verify_timeout_enforced_by_pool():
    """math-verify keeps its SIGALRM timer on (a pool worker runs it on its main thread): a
    power tower that makes sympy hang ends with reward 0 at math-verify's own timeout (the
    pool's is out of reach: no pool timeout), and with math-verify's timeouts off the
    pool's timeout is the backstop."""
    pytest.importorskip("math_verify")
    from rlvr_jax.rewards.math import math_verify_reward
    tower = (["$\\boxed{9^{9^{9^{9}}}}$"], ["7"])
    # Timeouts armed but out of reach: the verdicts (a main-thread error would score 0).
    armed = functools.partial(math_verify_reward, timeout_s=600)
    with RewardPool(armed, num_workers=1, timeout_s=6000.0, preload=("math_verify",)) as p:
        rewards, info = p.score(["so $\\boxed{\\frac{1}{2}}$", "$\\boxed{3}$"], ["0.5", "0.5"])
        np.testing.assert_array_equal(rewards, [1, 0])
        assert info["errors"] == info["timeouts"] == 0
    with RewardPool(functools.partial(math_verify_reward, timeout_s=1), num_workers=1,
                    timeout_s=6000.0, preload=("math_verify",)) as p:
        rewards, info = p.score(*tower)
        assert rewards[0] == 0 and info["errors"] == info["timeouts"] == 0
    off = functools.partial(math_verify_reward, timeout_s=None)
    with RewardPool(off, num_workers=1, timeout_s=2.0, preload=("math_verify",)) as p:
        rewards, info = p.score(*tower)
        assert rewards[0] == 0 and info["timeouts"] == 1 and info["errors"] == 0
