"""The reward-model training pieces (`rlvr_jax.train.bradley_terry`): preference pairs labelled
by the task's own verifier, in the RL layout; the Bradley-Terry loss and accuracy."""
import functools

import jax
import numpy as np
import pytest

from rlvr_jax import tasks
from rlvr_jax.data import datasets
from rlvr_jax.models import reward_model
from rlvr_jax.train import bradley_terry as rm_train
from tests import numerics

TASK = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2, style="steps")


@pytest.fixture(scope="module")
def batch(tok):
    loader = datasets.PromptLoader(datasets.TaskSource(TASK, seed=0), tok, batch_size=64,
                                   max_prompt_len=8)
    return rm_train.preference_batch(loader, np.random.default_rng(0), task=TASK,
                                     max_new_tokens=16), loader


def _completion(tok, batch, row, width=8):
    ids = batch["tokens"][row, width:][batch["attention"][row, width:] == 1]
    return tok.decode(ids, stop_at_eos=True)


def test_pairs_are_labelled_by_the_verifier_in_the_rl_layout(tok, batch):
    batch, loader = batch
    assert batch["tokens"].shape == (128, 8 + 16) and batch["attention"].shape == (128, 24)
    assert set(np.unique(batch["kinds"])) == set(range(len(rm_train.CORRUPTIONS)))
    examples = [loader.source[i] for i in range(64)]  # A TaskSource walks i = 0, 1, ...
    for i, ex in enumerate(examples):
        np.testing.assert_array_equal(batch["tokens"][i, :8], batch["tokens"][64 + i, :8])
        assert TASK.verify(_completion(tok, batch, i), ex) == 1.0
        assert TASK.verify(_completion(tok, batch, 64 + i), ex) == 0.0
        # Left-padded prompt then right-padded completion ending in EOS.
        att = batch["attention"][i]
        assert att[:8].tolist() == sorted(att[:8].tolist())
        last = np.flatnonzero(att)[-1]
        assert batch["tokens"][i, last] == tok.eos_id


def test_steps_corruption_spells_its_wrong_sum():
    ex = TASK.make("add", 58, 67)  # Column sums 15, 12: "15 12 #### 125".
    rng = np.random.default_rng(3)
    for _ in range(20):
        text = rm_train.corrupt(ex, "steps", rng, None)
        steps, answer = text.split(" #### ")
        s = [int(x) for x in steps.split()]
        assert s != [15, 12] and all(0 <= x <= 19 for x in s)
        assert int(answer) == (s[0] % 10) + 10 * (s[1] % 10) + 100 * (s[1] // 10)
        assert TASK.verify(text, ex) == 0.0


def test_bradley_terry_loss_and_accuracy(tok, batch, model_config):
    batch, _ = batch
    params = reward_model.init_reward_params(model_config, jax.random.PRNGKey(0))
    params["score"]["kernel"] = params["score"]["kernel"] * 0.0
    loss_fn = jax.jit(functools.partial(rm_train.bradley_terry_loss, config=model_config))
    loss, m = loss_fn(params, {k: batch[k] for k in ("tokens", "attention")})
    # Equal scores: log 2 = −log_sigmoid(0) (an exp and a log1p), averaged over 64 pairs.
    assert float(loss) == pytest.approx(np.log(2.0), abs=numerics.ref_atol(64, np.log(2.0), 2))
    assert float(m["accuracy"]) == 0.0  # Ties are not right.
    # A head that reads the last token's hidden state: the metric equals a direct count.
    params["score"]["kernel"] = jax.random.normal(jax.random.PRNGKey(1), (64, 1))
    acc = rm_train.pairwise_accuracy(params, [batch], config=model_config)
    scores = np.asarray(reward_model.jit_reward_forward(params, batch["tokens"],
                                                        batch["attention"],
                                                        config=model_config))[:, 0]
    # The same program's scores, so the same comparisons; a count over 64 pairs is exact.
    assert acc["accuracy"] == pytest.approx(np.mean(scores[:64] > scores[64:]))
    assert acc["pairs"] == 64.0
