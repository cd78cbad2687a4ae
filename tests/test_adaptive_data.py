"""Data that adapts to the policy (rlvr_jax.data.adaptive): pass-rate tracking and the
online filter against a NumPy restatement, the curriculum's promotions, mixture weights
(fixed within binomial bounds, adaptive against the formula), exact resume of every scheme
with the loader. A real run killed and resumed with the filter on is
tests/test_checkpoint.py's resume test (its tiny config filters its 6 prompts)."""
import hashlib
import json

import numpy as np
import pytest

from rlvr_jax import tasks
from rlvr_jax.data import adaptive, datasets, tokenizers
from tests.reference import adaptive_ref as ref

G = 4


@pytest.fixture(scope="module")
def tok():
    return tokenizers.load_tokenizer("builtin")


def _kind(key: str) -> int:
    """0: a prompt the fake policy always solves, 1: never, 2: sometimes."""
    return hashlib.sha256(key.encode()).digest()[0] % 3


def _fake_correct(batch, step):
    """[P, G] bools of a fake policy: fixed per prompt kind, the middle kind varying by step."""
    out = np.zeros((len(batch.examples), G), bool)
    for row, ex in enumerate(batch.examples):
        kind = _kind(ex.key)
        if kind == 0:
            out[row] = True
        elif kind == 2:
            out[row] = np.arange(G) < 1 + (step + row) % (G - 1)
    return out


def _signature(batch):
    return (batch.tokens.tobytes(), [e.key for e in batch.examples], batch.indices.tolist(),
            batch.epochs.tolist())


def _filtered_loader(tok, n=12, **kw):
    source = datasets.TaskSource(tasks.Arithmetic(), seed=0, size=n)
    loader = datasets.PromptLoader(source, tok, batch_size=4, max_prompt_len=8, seed=1)
    f = adaptive.PromptFilter(n, **kw)
    loader.admit = f.admit
    return loader, f


def _curriculum_loader(tok):
    levels = [tasks.Arithmetic(min_digits=1, max_digits=d) for d in (1, 2, 3)]
    source = adaptive.Curriculum(levels, seed=0, promote_at=0.5, window=2)
    return datasets.PromptLoader(source, tok, batch_size=4, max_prompt_len=9), source


def _mixture_loader(tok):
    task = adaptive.MixtureTask({"add": tasks.Arithmetic(), "mul": tasks.Arithmetic(
        ops=("mul",), max_digits=1)}, [1.0, 1.0])
    source = adaptive.Mixture(task, seed=0, adaptive=True, group_size=G)
    return datasets.PromptLoader(source, tok, batch_size=4, max_prompt_len=8), source


MAKERS = {"filter": lambda tok: _filtered_loader(tok, readmit_epochs=1),
          "curriculum": _curriculum_loader, "mixture": _mixture_loader}


def _steps(loader, adapt, steps, start=0):
    sigs = []
    for step in range(start, steps):
        batch = next(loader)
        sigs.append(_signature(batch))
        adapt.observe(batch, _fake_correct(batch, step))
    return sigs


@pytest.mark.parametrize("scheme", sorted(MAKERS))
def test_resume_is_exact(tok, scheme):
    """Saved (JSON round trip) after 5 steps, a fresh loader + scheme continue with exactly
    the batches the uninterrupted pair produced."""
    loader, adapt = MAKERS[scheme](tok)
    reference = _steps(loader, adapt, 12)
    loader, adapt = MAKERS[scheme](tok)
    _steps(loader, adapt, 5)
    saved = json.loads(json.dumps({"loader": loader.state(), "data": adapt.state()}))
    fresh_loader, fresh = MAKERS[scheme](tok)
    fresh_loader.restore(saved["loader"])
    fresh.restore(saved["data"])
    assert _steps(fresh_loader, fresh, 12, start=5) == reference[5:]
    if scheme == "filter":
        assert saved["loader"]["filtered"] > 0  # The filter did act before the save.
    if scheme == "curriculum":
        assert fresh.level > 0


def test_pass_rates_match_reference():
    rng = np.random.default_rng(0)
    n, ema = 7, 0.4
    f = adaptive.PromptFilter(n, ema=ema)
    visits = []
    for epoch in range(5):
        idx = rng.permutation(n)[:4]
        correct = rng.random((4, G)) < 0.5
        batch = datasets.PromptBatch(None, None, None, None, np.ones(4, bool), [], [], idx,
                                     np.full(4, epoch))
        f.observe(batch, correct)
        visits += list(zip(idx.tolist(), correct))
    want = ref.tracked_rates(n, visits, ema)
    for i in range(n):
        if want[i] is None:
            assert f.visits[i] == 0
        else:
            # Float64 EMAs in another order: 3 roundings per visit, not amplified, ≪ 1e-12.
            np.testing.assert_allclose(f.rate[i], want[i], rtol=1e-12)


@pytest.mark.parametrize("readmit", [0, 1, 2])
def test_filter_rule_matches_reference(readmit):
    f = adaptive.PromptFilter(4, low=0.0, high=1.0, readmit_epochs=readmit)
    f.rate[:], f.visits[:], f.last_epoch[:] = [0.0, 1.0, 0.5, 0.0], [1, 2, 3, 0], [3, 3, 3, -1]
    for i in range(4):
        for epoch in range(3, 8):
            rate = None if f.visits[i] == 0 else f.rate[i]
            assert f.admit(i, epoch) == ref.admitted(rate, f.last_epoch[i], epoch, low=0.0,
                                                     high=1.0, readmit_epochs=readmit)


def test_filter_skips_extremes_and_readmits(tok):
    """Every row the loader yields satisfies the rule given what was observed before it;
    always/never-solved prompts are skipped after their first visit."""
    loader, f = _filtered_loader(tok, n=12, readmit_epochs=1)
    seen_rate, seen_epoch = {}, {}
    for step in range(15):
        batch = next(loader)
        for i, epoch in zip(batch.indices, batch.epochs):
            assert ref.admitted(seen_rate.get(int(i)), seen_epoch.get(int(i), -1), int(epoch),
                                low=0.0, high=1.0, readmit_epochs=1)
        correct = _fake_correct(batch, step)
        f.observe(batch, correct)
        for i, epoch, c in zip(batch.indices, batch.epochs, correct):
            seen_rate[int(i)], seen_epoch[int(i)] = c.mean(), int(epoch)
    state = loader.state()
    assert state["filtered"] > 0 and state["forced"] == 0
    m = f.metrics()
    assert m["data/visited_fraction"] == 1.0 and 0 < m["data/solved_fraction"] < 1


def test_filter_never_stalls_when_everything_is_solved(tok):
    loader, f = _filtered_loader(tok, n=6, readmit_epochs=0)
    for _ in range(6):
        batch = next(loader)
        assert batch.valid.all() and len(batch.examples) == 4
        f.observe(batch, np.ones((4, G), bool))
    assert loader.state()["forced"] > 0
    assert f.metrics()["data/solved_fraction"] == 1.0


def test_curriculum_promotes_after_a_full_window(tok):
    loader, source = _curriculum_loader(tok)
    batch = next(loader)
    assert all(len(str(ex.meta["a"])) == 1 for ex in batch.examples)
    source.observe(batch, np.ones((4, G), bool))
    assert source.level == 0  # The window (2 steps) is not full yet.
    source.observe(batch, np.zeros((4, G), bool))
    assert source.level == 1 and source.history == []  # Mean 0.5 >= promote_at.
    for _ in range(6):
        source.observe(batch, np.ones((4, G), bool))
    assert source.level == 2  # The last level is kept.
    assert source.metrics() == {"data/level": 2.0, "data/level_pass_rate": 1.0}
    batch = next(loader)
    assert max(len(str(ex.meta["a"])) for ex in batch.examples) <= 3
    with pytest.raises(ValueError, match="level 5"):
        source.restore({"level": 5, "history": []})


def test_mixture_fixed_weights_within_binomial_bounds():
    task = adaptive.MixtureTask({"a": tasks.Arithmetic(), "s": tasks.Sorting()}, [3, 1])
    n = 4000
    names = [task.choose(i, seed=5) for i in range(n)]
    k = names.count("a")
    assert abs(k - 0.75 * n) < 4 * np.sqrt(n * 0.75 * 0.25)
    ex = task.example(3, seed=5)
    assert ex.task == names[3]
    solution = ex.solution
    assert task.verify(solution, ex) == 1.0 and task.check_steps(solution, ex)
    assert task.token_verifier(tokenizers.load_tokenizer("builtin")) is None  # mixed classes
    with pytest.raises(ValueError, match="not from this mixture"):
        task.verify(solution, tasks.Arithmetic().example(0, seed=0))


def test_mixture_adaptive_weights_match_formula(tok):
    loader, source = _mixture_loader(tok)
    p = np.full(2, 0.5)
    for step in range(6):
        batch = next(loader)
        correct = np.zeros((4, G), bool)
        correct[:, :G // 2] = True  # mul half right (informative), add mastered:
        correct[[ex.task == "add" for ex in batch.examples]] = True
        source.observe(batch, correct)
        for k, name in enumerate(("add", "mul")):
            rows = [r for r, ex in zip(correct, batch.examples) if ex.task == name]
            if rows:
                p[k] = 0.3 * np.mean(rows) + 0.7 * p[k]
        # Float64: the EMA as above; the weights' 1 − p^G − (1 − p)^G ≥ floor = 0.05 cancels by
        # ≤ 2/0.05, times ~30 roundings (two pows at 8 each): 40·γ_30 = 1.3e-13 (u = 2^-53).
        np.testing.assert_allclose(source.pass_rate, p, rtol=1e-12)
        np.testing.assert_allclose(source.weights(), ref.mixture_weights(
            [1.0, 1.0], p, G, 0.05), rtol=1e-12)
    assert source.weights()[0] < 0.5  # The mastered task is drawn less.


def test_bad_arguments():
    with pytest.raises(ValueError, match="low < high"):
        adaptive.PromptFilter(3, low=0.5, high=0.5)
    with pytest.raises(ValueError, match="ema"):
        adaptive.PromptFilter(3, ema=0.0)
    with pytest.raises(ValueError, match="answer formats"):
        adaptive.MixtureTask({"a": tasks.Arithmetic(), "b": tasks.Arithmetic(
            answer_format="tags")}, [1, 1])
    with pytest.raises(ValueError, match="non-negative weights"):
        adaptive.MixtureTask({"a": tasks.Arithmetic()}, [-1])
    f = adaptive.PromptFilter(3)
    with pytest.raises(ValueError, match="data.size"):
        f.restore({"rate": [0.0] * 4, "visits": [0] * 4, "last_epoch": [0] * 4})


def test_curriculum_levels_of_a_list_knob_from_the_config():
    """`ops` levels given as strings ("add", "add+mul", as the command line gives them)
    become the tuples the task takes; warm-up and evaluation use the last level."""
    from rlvr_jax.train import adaptive as train_adaptive
    from rlvr_jax.train.config import arithmetic_config
    config = arithmetic_config()
    config.data.curriculum.knob = "ops"
    config.data.curriculum.levels = ("add", "add+mul")
    train_adaptive.check(config)
    task, train, test, warmup = train_adaptive.task_and_sources(config)
    assert [t.ops for t in train.tasks] == [("add",), ("add", "mul")]
    assert task.ops == warmup.task.ops == test.task.ops == ("add", "mul")
