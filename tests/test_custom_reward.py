"""Your own reward: `reward.components=PATH.py:function` (or `module:function`), scored in the
host pool by name, weighted, logged as `reward/<function>`, with one-line errors."""
import pickle
import textwrap

import numpy as np
import pytest

from rlvr_jax import scoring, tasks
from rlvr_jax.data.tokenizers import load_tokenizer
from rlvr_jax.scoring import custom, terms
from rlvr_jax.train.config import arithmetic_config
from rlvr_jax.train.rl_config import from_config

BREVITY = textwrap.dedent("""
    def brevity(completion_text, example):
        '''1 for a completion of at most 12 characters that ends with the answer.'''
        return float(len(completion_text) <= 12 and completion_text.endswith(example.answer))

    def noisy(completion_text, example):
        return float("nan")

    def one_arg(completion_text):
        return 1.0

    import jax.numpy as jnp
    from rlvr_jax import scoring

    @scoring.device_reward
    def short(tokens, mask, answers):
        '''1 - length / N, NaN where the answer is 7 (a broken reward).'''
        score = 1.0 - mask.sum(-1) / mask.shape[-1]
        return jnp.where(answers == 7, jnp.nan, score)

    @scoring.device_reward
    def flat(tokens, mask, answers):
        return mask

    @scoring.device_reward
    def two_args(tokens, mask):
        return mask.sum(-1)
""")


@pytest.fixture(autouse=True)
def registry():
    """Each test's custom terms leave the process's registry as they found it."""
    before = dict(terms.TERMS)
    yield
    terms.TERMS.clear()
    terms.TERMS.update(before)


@pytest.fixture
def path(tmp_path):
    file = tmp_path / "my_rewards.py"
    file.write_text(BREVITY)
    return str(file)


def _scorer(components, weights, workers):
    config = arithmetic_config()
    config.reward.components, config.reward.weights = components, weights
    config.reward.num_workers, config.reward.timeout_s = workers, 600.0
    return scoring.scorer_from_config(config, tasks.get("arithmetic"), load_tokenizer("builtin"),
                                      rl=from_config(config))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_function_in_a_file_is_a_weighted_component_in_the_pool(path, workers):
    """With 2 workers the pool imports the function by its file (the spec is pickled, not
    the function): the issue's `RuntimeError: reward worker failed to start` is gone."""
    scorer = _scorer(f"task,{path}:brevity", "1,0.5", workers)
    assert [t.name for t in scorer.terms] == ["task", "brevity"]
    examples = [tasks.get("arithmetic").make("add", 12, 34)] * 3
    texts = ["6 4 #### 46", "a long detour then #### 46", "#### 47"]
    with scorer.host_scorer() as pool:
        values, parts, info = pool(texts, examples)
    np.testing.assert_allclose(values, [1.5, 1.0, 0.0])
    np.testing.assert_array_equal(parts["brevity"], [1.0, 0.0, 0.0])
    assert info["errors"] == 0
    fn = pickle.loads(pickle.dumps(scorer.samples[1].fn))  # Only the spec travels.
    assert fn("#### 46", examples[0]) == 1.0


def test_a_module_function_works_too(path, monkeypatch):
    import os
    monkeypatch.syspath_prepend(os.path.dirname(path))
    scorer = _scorer("my_rewards:brevity", "", 0)
    assert [t.name for t in scorer.samples] == ["brevity"]


@pytest.mark.parametrize("spec,message", [
    ("{dir}/absent.py:f", "reward.components: {dir}/absent.py:f: no such file"),
    ("{path}:missing", "has no function 'missing'"),
    ("{path}:one_arg", "must take (completion_text, example); has one_arg(completion_text)"),
    ("no_such_module_xyz:f", "cannot be imported: ModuleNotFoundError"),
    ("{path}:task", "its name 'task' is already a component"),
])
def test_bad_specs_are_one_line_errors(path, tmp_path, spec, message):
    spec = spec.format(dir=tmp_path, path=path)
    with pytest.raises(ValueError) as e:
        _scorer(spec, "", 0)
    assert message.format(dir=tmp_path) in str(e.value) and "\n" not in str(e.value)


def test_a_non_finite_return_is_an_error_naming_the_function(path):
    ex = tasks.get("arithmetic").make("add", 1, 2)
    with pytest.raises(ValueError, match=r"my_rewards.py:noisy returned nan, not a finite"):
        custom.CustomReward(f"{path}:noisy")("#### 3", ex)


def test_a_custom_reward_runs_before_device_terms(path):
    """A user's function is a sample term registered after the built-in device terms
    (overlong shaping here); the scorer still runs sample, host, then device terms, and a
    scorer with host work refuses to score on device without its host stage."""
    config = arithmetic_config()
    config.reward.components, config.reward.weights = f"task,{path}:brevity", ""
    config.reward.num_workers, config.reward.timeout_s = 0, 600.0
    config.rl.overlong_buffer = 4
    scorer = scoring.scorer_from_config(config, tasks.get("arithmetic"),
                                        load_tokenizer("builtin"), rl=from_config(config))
    wheres = [t.where for t in scorer.terms]
    assert "device" in wheres and wheres == sorted(
        wheres, key=("sample", "host", "device").index)
    assert [t.name for t in scorer.samples] == ["task", "brevity"]
    with pytest.raises(ValueError, match="give score_device the host stage"):
        scorer.score_device(None)


def test_a_device_reward_is_scored_inside_the_compiled_step(path):
    """`@scoring.device_reward` makes a device term: the scorer stays traceable (one
    compiled program with the token verifier), adds weight · score, logs its mean and
    counts a non-finite score as 0; a wrong shape or signature is a one-line error when the
    scorer is built."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import sampling
    scorer = _scorer(f"token,{path}:short", "1,0.5", 0)
    assert scorer.traceable and [(t.name, t.where) for t in scorer.terms] == [
        ("token", "device"), ("short", "device")]
    lengths = np.array([1, 2, 4, 4])  # N = 4: scores 0.75, 0.5, 0, and NaN (answer 7) -> 0
    mask = (np.arange(4)[None, :] < lengths[:, None]).astype(np.int32)
    zeros = jnp.zeros((4, 2), jnp.int32)
    rollout = sampling.Rollout(tokens=jnp.zeros((4, 4), jnp.int32), mask=jnp.asarray(mask),
                               logprobs=jnp.zeros((4, 4)), lengths=jnp.asarray(lengths),
                               finished=jnp.ones(4, bool), prompt_tokens=zeros,
                               prompt_mask=zeros)
    x = scoring.Inputs(rollout, answers=jnp.asarray([1, 2, 3, 7], jnp.int32),
                       verdicts=jnp.asarray([1.0, 0.0, 1.0, 0.0]))
    term = scorer.terms[1].fn
    rewards, metrics = jax.jit(term)(jnp.zeros(4), x)
    # 1 - k/4 and 0.5 · (1 - k/4) are exact in float32 (multiples of 1/8).
    np.testing.assert_array_equal(np.asarray(rewards), [0.375, 0.25, 0.0, 0.0])
    assert float(metrics["reward/short"]) == (0.75 + 0.5) / 4
    assert float(metrics["reward/short_nonfinite"]) == 1.0
    with pytest.raises(ValueError, match=r"flat returned shape \(2, \d+\) for B=2 completions"):
        _scorer(f"token,{path}:flat", "", 0)
    with pytest.raises(ValueError, match=r"must take \(tokens, mask, answers\)"):
        _scorer(f"{path}:two_args", "", 0)
