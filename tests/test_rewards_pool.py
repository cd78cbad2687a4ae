"""RewardPool: batched scoring survives errors, crashes and hangs; math-verify behind its timeout."""
import functools
import os
import time

import numpy as np
import pytest

from rlvr_jax.rewards import code as rc
from rlvr_jax.rewards.combine import CombinedReward, RewardTerm
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
    with RewardPool(_moody, num_workers=2, timeout_s=1.0) as p:
        yield p


def test_scores_and_failures(pool):
    comps = ["a", "raise", "b", "hang", "die", "c", "nan", "d"]
    refs = ["a", "x", "x", "x", "x", "c", "x", "d"]
    start = time.monotonic()
    rewards, info = pool.score(comps, refs)
    assert rewards.dtype == np.float32 and rewards.shape == (8,)
    np.testing.assert_array_equal(rewards, [1, 0, 0, 0, 0, 1, 0, 1])
    assert info["timeouts"] == 1
    assert info["errors"] == 3  # raise, die, nan
    assert any("verifier bug" in m for m in info["error_messages"])
    assert time.monotonic() - start < 10.0
    # the pool still works after replacing the killed workers
    rewards, info = pool.score(["z"] * 5, ["z"] * 5)
    np.testing.assert_array_equal(rewards, np.ones(5, np.float32))
    assert info["errors"] == info["timeouts"] == 0


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
    with RewardPool(fn, num_workers=2, timeout_s=5.0) as p:
        rewards, info = p.score(comps, ["7", "7", "7"])
    np.testing.assert_allclose(rewards, [1.5, 1.0, 0.5])
    np.testing.assert_array_equal(info["components"]["correct"], [1, 1, 0])
    np.testing.assert_array_equal(info["components"]["format"], [1, 0, 1])


def test_code_reward_through_pool():
    fn = functools.partial(rc.code_reward, config=rc.SandboxConfig(timeout_s=1.0))
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    loop = "```python\nwhile True:\n    pass\n```"
    tests = ["assert add(1, 2) == 3"]
    with RewardPool(fn, num_workers=2, timeout_s=10.0) as p:
        rewards, info = p.score([good, loop, good], [tests] * 3)
    np.testing.assert_array_equal(rewards, [1, 0, 1])
    assert info["errors"] == info["timeouts"] == 0


def test_math_verify_timeout_enforced_by_pool():
    """math-verify keeps its SIGALRM timer on (a pool worker runs it on its main thread): a
    power tower that makes sympy hang ends with reward 0 within its timeouts, and the pool's
    timeout stays the backstop."""
    pytest.importorskip("math_verify")
    from rlvr_jax.rewards.math import math_verify_reward
    with RewardPool(math_verify_reward, num_workers=1, timeout_s=12.0,
                    preload=("math_verify",)) as p:
        rewards, info = p.score(["so $\\boxed{\\frac{1}{2}}$", "$\\boxed{3}$"], ["0.5", "0.5"])
        np.testing.assert_array_equal(rewards, [1, 0])
        assert info["errors"] == 0  # no SIGALRM / main-thread error inside the worker
        start = time.monotonic()
        rewards, info = p.score(["$\\boxed{9^{9^{9^{9}}}}$"], ["7"])
        assert rewards[0] == 0 and info["errors"] == 0
        assert time.monotonic() - start < 15.0
