"""The scoring room (`rlvr_jax.scoring`): the verifier a config gets, the shapers, and one
meaning of `reward/correct` on the on-device path, the host path and in evaluation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import evaluation, sampling, scoring, tasks
from rlvr_jax.train.rl_config import RLConfig

B, N = 8, 6
# Verifier rewards with partial credit: 3 of 8 completions are fully correct (>= 1).
VERDICTS = np.array([0.0, 0.5, 1.0, 1.0, 0.25, 1.5, 0.0, 0.99], np.float32)
LENGTHS = np.array([6, 2, 6, 5, 1, 4, 6, 3], np.int32)


def _rollout():
    mask = (np.arange(N)[None, :] < LENGTHS[:, None]).astype(np.int32)
    tokens = np.arange(B)[:, None] * np.ones((1, N), np.int32)  # Row i holds token i.
    zeros = jnp.zeros((B, 2), jnp.int32)
    return sampling.Rollout(tokens=jnp.asarray(tokens, jnp.int32), mask=jnp.asarray(mask),
                            logprobs=jnp.zeros((B, N), jnp.float32),
                            lengths=jnp.asarray(LENGTHS), finished=jnp.asarray(LENGTHS < N),
                            prompt_tokens=zeros, prompt_mask=zeros)


def _token_verifier(tokens, mask, answers):
    del mask, answers
    return jnp.asarray(VERDICTS)[tokens[:, 0]]


def _host_verify(text, example):
    return float(VERDICTS[int(text)])


def _scorers(rl):
    """The same verifier scored on device (its token verdicts) and on the host (a sample
    term, since it has no token verdicts)."""
    on_device = scoring.token_scorer(_token_verifier, rl=rl, max_new_tokens=N)
    host_only = scoring.Verifier(verify=_host_verify, answer_key=lambda t: None)
    on_host = scoring.assemble(scoring.Setup(host_only, rl=rl, max_new_tokens=N), {})
    return on_device, on_host


@pytest.mark.parametrize("overlong_buffer", [0, 4])
def test_reward_correct_means_the_same_in_every_path(overlong_buffer):
    """reward/correct = the fraction of completions the verifier scores >= 1, on device,
    on the host and in evaluation (pass@1 of one sample each); rewards are shaped alike."""
    rl = RLConfig(num_prompts=4, overlong_buffer=overlong_buffer, overlong_penalty=1.0)
    rollout = _rollout()
    on_device, on_host = _scorers(rl)
    assert on_device.traceable and not on_host.traceable
    x = scoring.Inputs(rollout, answers=jnp.zeros((B,), jnp.int32), group_size=2)
    d_rewards, d_metrics, d_correct = jax.jit(on_device.score_device)(x)

    class Tok:  # Row i decodes to "i" (its tokens all equal i).
        def decode(self, ids, stop_at_eos=True):
            return str(ids[0])
    on_host.tokenizer = Tok()
    host = on_host.score_host(rollout, [None] * 4, 2)
    h_rewards, h_metrics, h_correct = on_host.score_device(x, host)
    h_metrics.update(host.metrics)
    texts = [str(i) for i in range(B)]
    data = evaluation.EvalData("t", [None] * B, _host_verify, answer_key=lambda t: None)
    eval_correct = evaluation.score([[t] for t in texts], data)["correct"]

    assert float(d_metrics["reward/correct"]) == float(h_metrics["reward/correct"]) == 3 / 8
    assert float(np.mean(eval_correct)) == 3 / 8
    np.testing.assert_array_equal(np.asarray(d_correct), np.asarray(h_correct))
    assert set(d_metrics) == set(h_metrics) - {"reward/host_errors", "reward/host_timeouts"}
    assert float(h_metrics["reward/host_errors"]) == float(h_metrics["reward/host_timeouts"]) == 0
    np.testing.assert_array_equal(np.asarray(d_rewards), np.asarray(h_rewards))
    if overlong_buffer:  # Lengths 5 and 6 of budget 6 with a buffer of 4 are penalised.
        assert float(d_metrics["reward/overlong"]) < 0.0
        assert float(d_rewards[0]) == pytest.approx(VERDICTS[0] - 1.0)  # small dyadics: exact
    else:
        np.testing.assert_array_equal(np.asarray(d_rewards), VERDICTS)


def test_terms_run_in_order_and_merge_metrics():
    """Device terms run in the order given, each seeing the reward of the ones before."""
    rollout = _rollout()

    def plus_one(r, x):
        return r + 1.0, {"reward/plus": jnp.ones(())}

    def doubled(r, x):
        return 2.0 * r, {"reward/doubled": jnp.ones(())}

    verifier = scoring.Verifier(verify=None, answer_key=None, token=_token_verifier)
    terms = (scoring.Term("token", "device", lambda r, x: (r + x.verdicts, {})),
             scoring.Term("plus", "device", plus_one), scoring.Term("doubled", "device", doubled))
    scorer = scoring.Scorer(verifier, terms)
    x = scoring.Inputs(rollout, answers=jnp.zeros((B,), jnp.int32))
    rewards, metrics, _ = scorer.score_device(x)
    # r + 1 rounds once in float32 on both sides, the doubling is exact: equal.
    np.testing.assert_allclose(np.asarray(rewards), 2.0 * (VERDICTS + 1.0))
    assert set(metrics) == {"reward/correct", "reward/plus", "reward/doubled"}
    names = [t.name for t in scoring.token_scorer(_token_verifier).terms]
    assert names == ["token"]
    rl = RLConfig(num_prompts=1, overlong_buffer=2)
    names = [t.name for t in scoring.token_scorer(_token_verifier, rl=rl, max_new_tokens=N).terms]
    assert names == ["token", "overlong"]
    with pytest.raises(ValueError, match="sample, host, then device"):
        scoring.Scorer(verifier, terms[:1] + (scoring.Term("h", "host", plus_one),))


def test_kl_in_reward_sequence_and_token_level():
    kl_tok = jnp.asarray(np.full((4, 3), 0.5, np.float32))
    mask = jnp.ones((4, 3), jnp.int32)
    valid = jnp.asarray([True, True, True, False])
    rewards = jnp.ones((2, 2), jnp.float32)
    seq, metrics = scoring.kl_in_reward(rewards, kl_tok, mask, valid, 0.1, per_token=False)
    # Σ 0.5 = 1.5 exactly; float32(0.1), β·1.5 and 1 − β·1.5 round once each: the error is
    # ≤ u·(0.15 + 0.15 + 0.85) = 6.9e-8 < the default rtol 1e-7 · 0.85.
    np.testing.assert_allclose(np.asarray(seq), 1.0 - 0.1 * 1.5)
    assert float(metrics["kl/reward_kl"]) == pytest.approx(0.5)  # 1.5 / 3, 0.5·3 / 3: exact
    tok_level, _ = scoring.kl_in_reward(rewards, kl_tok, mask, valid, 0.1, per_token=True)
    np.testing.assert_array_equal(np.asarray(tok_level), np.asarray(rewards))


def test_the_verifier_is_chosen_from_the_config_and_the_task(tok):
    arithmetic, countdown = tasks.get("arithmetic"), tasks.get("countdown")
    assert scoring.choose_verifier("auto", arithmetic, tok).token is not None
    assert scoring.choose_verifier("token", arithmetic, tok).token is not None
    host = scoring.choose_verifier("task", arithmetic, tok)
    ex = arithmetic.example(0, seed=0)
    assert host.token is None and host.verify(ex.solution, ex) == 1.0
    assert scoring.choose_verifier("auto", countdown, tok).token is None  # No token verifier.
    math = scoring.choose_verifier("auto", None, tok)
    assert math.token is None and math.check_steps is None
    ex = tasks.Example(prompt="1+1=", answer="2", solution="", task="", key="", split="test")
    assert math.verify("#### 2", ex) == 1.0 and math.answer_key("#### 2") == "2"
    with pytest.raises(ValueError, match="on-device verifier"):
        scoring.choose_verifier("token", countdown, tok)
    with pytest.raises(ValueError, match="data.source"):
        scoring.choose_verifier("task", None, tok)
    with pytest.raises(ValueError, match="reward.verifier"):
        scoring.choose_verifier("llm", arithmetic, tok)
    # maj@k keys: the integer for arithmetic, the normalised tail otherwise.
    assert arithmetic.answer_key("3 #### 12 ") == 12
    assert countdown.answer_key("x ####  1 +  2 ") == "1 + 2"
