"""A generative judge scored on device (`scoring.judge`): its P(yes) of the judge rows built
from the rollout's tokens equals an independent float64 NumPy computation from the judge's
logits of the compact text; jit = eager; masked tokens change nothing; inside the one RL
program with its parameters sharded over 8 fake devices; config errors name the field."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from rlvr_jax import models, sampling, scoring, sharding, tasks
from rlvr_jax.data import datasets
from rlvr_jax.models import hf
from rlvr_jax.scoring import judge as judge_lib
from rlvr_jax.train import frozen, judges
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.placer import Placer
from rlvr_jax.train.state import create_train_state
from tests import numerics

P, G, TP, N = 8, 2, 10, 8
TEMPLATE = "Q: {question} Ref: {reference} A: {answer} ok? "
MESH = {"data": 2, "fsdp": 4, "tensor": 1}


@pytest.fixture(scope="module")
def setup(tok, model_config):
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    pb = next(datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                    max_prompt_len=TP))
    pmask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    answers = np.array(pb.answers, np.int32)
    answers[0] = -answers[0] - 7  # A negative reference too.
    rng = np.random.default_rng(1)
    chars = np.array(tok.encode("0123456789+= "), np.int32)  # Text that round-trips.
    tokens = chars[rng.integers(0, len(chars), size=(P * G, N))]
    lengths = rng.integers(1, N + 1, size=P * G)
    mask = (np.arange(N)[None, :] < lengths[:, None]).astype(np.int32)
    tokens[np.arange(0, P * G, 2), lengths[::2] - 1] = tok.eos_id  # Half end with the stop.
    rollout = sampling.Rollout(
        tokens=jnp.asarray(tokens), mask=jnp.asarray(mask), logprobs=jnp.zeros((P * G, N)),
        lengths=jnp.asarray(lengths), finished=jnp.ones((P * G,), bool),
        prompt_tokens=jnp.asarray(np.repeat(pb.tokens, G, 0)),
        prompt_mask=jnp.asarray(np.repeat(pmask, G, 0)))
    # A judge of another shape than the policy (3 layers), random, logits scaled up.
    jc = model_config.replace(n_layers=3)
    jp = models.init_params(jc, jax.random.PRNGKey(5))
    jp["embed"] = jp["embed"] * 30.0
    return rollout, jnp.repeat(jnp.asarray(answers), G), jc, jp


def _compact_rows(tok, rollout, answers):
    """Each row's judge prompt as a list of ids, built on the host from the text."""
    rows = []
    for b in range(rollout.tokens.shape[0]):
        q = [int(t) for t, m in zip(rollout.prompt_tokens[b], rollout.prompt_mask[b])
             if m and t != tok.bos_id]
        a = [int(t) for t, m in zip(rollout.tokens[b], rollout.mask[b]) if m and t != tok.eos_id]
        text = TEMPLATE.format(question=tok.decode(q), answer=tok.decode(a),
                               reference=str(int(answers[b])))
        rows.append([tok.bos_id] + tok.encode(text))
    return rows


def _reference_p(jp, jc, rows, judge):
    """float64 NumPy P(yes) from the judge's float32 logits after each compact row (all
    right-padded into one batch: causal, so the last real token reads no padding), and the
    bound on those logits against the padded rows' (two forward orders)."""
    width = max(len(r) for r in rows)
    ids = np.array([r + [0] * (width - len(r)) for r in rows], np.int32)
    att = (np.arange(width)[None, :] < np.array([len(r) for r in rows])[:, None]).astype(np.int32)
    out = np.asarray(models.jit_forward(jp, jnp.asarray(ids), jnp.asarray(att), config=jc))
    logits = out[np.arange(len(rows)), [len(r) - 1 for r in rows]].astype(np.float64)
    atol = numerics.reorder_atol(numerics.forward_chain(jc, width + TP + N),
                                 np.abs(logits).max())
    if judge.no >= 0:
        p = 1.0 / (1.0 + np.exp(logits[:, judge.no] - logits[:, judge.yes]))
    else:
        v = logits[:, :judge.vocab]
        m = v.max(1, keepdims=True)
        p = np.exp(v[:, judge.yes] - m[:, 0] - np.log(np.sum(np.exp(v - m), 1)))
    return p, atol, logits


@pytest.mark.parametrize("no", ["n", ""])
def test_p_yes_equals_numpy_from_the_compact_text(setup, tok, no):
    """P(yes) of the padded on-device rows = float64 P(yes) of the compact text rows; the
    builtin tokenizer spells the template's pieces as the whole text (character-level)."""
    rollout, answers, jc, jp = setup
    judge = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no=no)
    got_jit = jax.jit(lambda p, r, a: scoring.judge_scores(p, r, a, judge=judge))(
        jp, rollout, answers)
    got_eager = scoring.judge_scores(jp, rollout, answers, judge=judge)
    rows = _compact_rows(tok, rollout, answers)
    tokens, mask = judge_lib.judge_inputs(judge, rollout, answers)
    for b, ids in enumerate(rows):  # The device rows, padding dropped, are the text rows.
        assert list(np.asarray(tokens[b])[np.asarray(mask[b]) == 1]) == ids
    want, logit_atol, logits = _reference_p(jp, jc, rows, judge)
    assert np.std(np.log(want)) > 1e-3  # P(yes) differs between rows: a real comparison.
    # Each logit within logit_atol (two forward orders); log P(yes) moves by at most twice
    # that (its logit and the log-sum-exp, or l_yes − l_no), plus the float32 log-softmax's
    # own error and the exp: a bound relative to p (|Δp| ≤ p·|Δ log p|, to first order).
    rtol = 2.1 * logit_atol + numerics.log_softmax_atol(logits) + numerics.ref_atol(
        2, 1.0, transcendentals=2)
    for got in (got_jit, got_eager):
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=0)
    # jit and eager: the same float32 operations in possibly different fusions.
    np.testing.assert_allclose(np.asarray(got_jit), np.asarray(got_eager), rtol=2 * rtol)


def test_masked_tokens_change_nothing(setup, tok):
    """Other ids under mask 0 (prompt padding, after the stop): bitwise the same P(yes):
    a masked key's softmax weight is exactly 0 and no real token reads a masked one."""
    rollout, answers, jc, jp = setup
    judge = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no="n", microbatches=2)
    score = jax.jit(lambda r: scoring.judge_scores(jp, r, answers, judge=judge))
    rng = np.random.default_rng(7)
    other = rollout.replace(
        tokens=jnp.where(rollout.mask == 1, rollout.tokens,
                         jnp.asarray(rng.integers(30, 60, rollout.tokens.shape), jnp.int32)),
        prompt_tokens=jnp.where(rollout.prompt_mask == 1, rollout.prompt_tokens,
                                jnp.asarray(rng.integers(30, 60, (P * G, TP)), jnp.int32)))
    np.testing.assert_array_equal(np.asarray(score(rollout)), np.asarray(score(other)))


def test_in_the_rl_step_sharded_over_8_devices(setup, tok, model_config, params):
    """The judge alone trains the policy (the verifier measures): the program's rewards are
    weight · P(yes) of its own samples; the judge is sharded and frozen."""
    _, _, jc, jp = setup
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    pb = next(datasets.PromptLoader(datasets.TaskSource(task, seed=0), tok, batch_size=P,
                                    max_prompt_len=TP))
    pmask = (np.arange(TP)[None, :] >= TP - pb.lengths[:, None]).astype(np.int32)
    batch = {"prompt_tokens": pb.tokens, "prompt_mask": pmask, "answers": pb.answers}
    mesh, rules = sharding.make_mesh(MESH), sharding.get_rules("fsdp")
    placer = Placer(mesh, rules, model_config)
    placed = jax.device_put(jax.tree.map(jnp.copy, jp),  # The step donates its state.
                            placer.shardings(jp, models.param_logical_axes(jc)))
    assert any(not leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(placed))
    tx = optax.adam(1e-3)
    pp = placer.params(jax.tree.map(jnp.copy, params))
    state = create_train_state(pp, tx, jax.random.PRNGKey(3), reward_params=placed)
    state = state.replace(opt_state=placer.opt_state(state.opt_state, tx, pp))
    judge = scoring.make_judge(jc, tok, weight=2.0, yes="y", no="n")
    sc = sampling.SamplingConfig(max_new_tokens=N, num_samples=G, stop_token_ids=(tok.eos_id,),
                                 pad_id=tok.pad_id)
    verifier = tasks.make_token_verifier(tok)
    setup_ = scoring.Setup(scoring.Verifier(verify=None, answer_key=None, token=verifier),
                           reward_model=judge, num_samples=G, components=("judge",))
    rl_step = step_lib.make_rl_step(model_config, sc, step_lib.RLConfig(num_prompts=P), tx,
                                    return_rollout=True,
                                    scorer=scoring.assemble(setup_, {"judge": 2.0}))
    with sharding.activate(mesh, rules):
        new, metrics, samples = rl_step(state, placer.batch(batch))
    rollout = sampling.Rollout(
        tokens=jnp.asarray(samples["tokens"]), mask=jnp.asarray(samples["mask"]),
        logprobs=jnp.zeros((P * G, N)), lengths=jnp.asarray(np.sum(samples["mask"], 1)),
        finished=jnp.ones((P * G,), bool), prompt_tokens=jnp.asarray(np.repeat(pb.tokens, G, 0)),
        prompt_mask=jnp.asarray(np.repeat(pmask, G, 0)))
    want = np.asarray(scoring.judge_scores(jp, rollout, judge=judge))
    # Two float32 forward passes (sharded vs one device) into a sigmoid (slope ≤ 1/4, so
    # |Δp| ≤ |Δ(l_yes − l_no)| / 4 ≤ 2·logit bound / 4); the weight 2 is exact.
    logits = np.asarray(judge_lib.judge_logits(jp, *judge_lib.judge_inputs(judge, rollout),
                                               config=jc))
    atol = numerics.reorder_atol(numerics.forward_chain(jc, TP + N + 40),
                                 np.abs(logits).max()) + numerics.ref_atol(2, 1.0, 1)
    np.testing.assert_allclose(np.asarray(samples["rewards"]) / 2.0, want, rtol=0, atol=atol)
    assert "reward/judge_fp" in metrics and "reward/judge_fn" in metrics
    for a, b in zip(jax.tree.leaves(new.reward_params), jax.tree.leaves(jp)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # Frozen.


def test_open_from_an_hf_directory(setup, tok, tmp_path):
    """reward.judge_path: an HF *ForCausalLM directory read born placed; the same params."""
    _, _, jc, jp = setup
    hf.save_hf_checkpoint(jp, jc, str(tmp_path))
    config = ml_collections.ConfigDict({
        "model": {"dtype": "float32", "param_dtype": "float32"},
        "data": {"max_prompt_len": TP}, "sampling": {"max_new_tokens": N},
        "reward": {"judge_path": str(tmp_path), "judge_template": TEMPLATE, "judge_yes": "y",
                   "judge_no": "n", "judge_microbatches": 1, "judge_unique_fraction": 1.0,
                   "judge_samples": 0}})
    judge = judges.open_judge(config, tok, weight=0.5)
    assert judge.weight == 0.5 and judge.config.n_layers == 3
    placer = Placer(sharding.make_mesh({"data": 1, "fsdp": 1, "tensor": 1},
                                       devices=jax.devices()[:1]), sharding.get_rules("fsdp"), jc)
    loaded = frozen.lm_params(str(tmp_path), judge.config, placer)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(jp)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("fields, message", [
    ({"components": "judge"}, "reward.judge_path: is empty"),
    ({"components": "token", "judge_path": "/x"}, "'judge' is not in reward.components"),
    ({"components": "judge,reward_model", "judge_path": "/x", "reward_model_path": ""},
     "reward.reward_model_path"),
    ({"components": "judge", "judge_path": "/x", "judge_template": "{answer}"},
     "reward.judge_template: judge template: must end with literal text"),
    ({"components": "judge", "judge_path": "/x", "judge_template": "{q} {answer}?"},
     "unknown placeholder {q}"),
])
def test_config_errors_name_the_field(fields, message):
    from rlvr_jax.train.config import default_config
    config = default_config()
    for k, v in fields.items():
        config.reward[k] = v
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        scoring.check_reward_config(config.reward)


def test_bad_verdict_token_is_one_line(setup, tok):
    _, _, jc, _ = setup
    with pytest.raises(ValueError, match="judge yes: 'yes!' is 4 tokens"):
        scoring.make_judge(jc, tok, yes="yes!")


@pytest.mark.parametrize("fraction", [0.75, 0.5])
def test_identical_completions_are_judged_once(setup, tok, fraction):
    """unique_fraction < 1: a group's copies of one completion (other ids under mask 0) get
    their first copy's P(yes), bitwise; every row's P(yes) is the all-rows one within two
    forward orders' bound (the distinct rows run in a batch of another size). 5 of the 8
    groups hold a copy: 11 distinct rows, read as 12 (fraction 0.75) or, over 8 (0.5), all 16."""
    rollout, answers, jc, jp = setup
    dup = np.arange(P * G)
    dup[[1, 5, 7, 11, 15]] -= 1  # Row 2k+1 copies row 2k in groups 0, 2, 3, 5, 7.
    pad = jnp.asarray(np.random.default_rng(3).integers(30, 60, (P * G, N)), jnp.int32)
    mask = rollout.mask[dup]
    copied = rollout.replace(tokens=jnp.where(mask == 1, rollout.tokens[dup], pad), mask=mask,
                             lengths=rollout.lengths[dup])
    np.testing.assert_array_equal(np.asarray(judge_lib.first_copies(copied, G)), dup)
    full = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no="n")
    once = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no="n",
                              unique_fraction=fraction)
    got = np.asarray(jax.jit(lambda r: scoring.judge_scores(jp, r, answers, judge=once,
                                                            group_size=G))(copied))
    want = np.asarray(jax.jit(lambda r: scoring.judge_scores(jp, r, answers, judge=full))(copied))
    np.testing.assert_array_equal(got, got[dup])
    tokens, att = judge_lib.judge_inputs(full, copied, answers)
    logits = np.asarray(judge_lib.judge_logits(jp, tokens, att, config=jc))
    logit_atol = numerics.reorder_atol(numerics.forward_chain(jc, tokens.shape[1]),
                                       np.abs(logits).max())
    # sigmoid(l_yes − l_no): two logits, each within logit_atol of the other order's; the
    # relative change of p is at most |Δ(l_yes − l_no)| (d log σ(x)/dx = 1 − σ ≤ 1).
    rtol = 2.1 * logit_atol + numerics.ref_atol(2, 1.0, transcendentals=2)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    with pytest.raises(ValueError, match="unique_fraction"):
        scoring.make_judge(jc, tok, template=TEMPLATE, unique_fraction=0.0)


RUBRIC_TEMPLATE = "Q: {question} A: {answer} Check: {criterion} ok? "
RUBRICS = ([{"criterion": "sum right", "weight": 3}, ["digits", 1.5], ["says 7", -2]],
           [["short", 1]])  # Prompts alternate between them; the second has 2 absent slots.


def test_a_rubric_is_the_weighted_sum_of_its_criteria(setup, tok):
    """A {criterion} judge reads one row per criterion, each equal (padding dropped) to the
    compact text with that criterion spelt in; the reward is Σ w P / Σ max(w, 0) of float64
    P(yes) from those texts' logits; absent criteria (weight 0) count nothing."""
    from rlvr_jax.data import rubrics
    rollout, answers, jc, jp = setup
    examples = [tasks.Example(prompt="", answer="", solution="", task="", key=f"k{i}",
                              split="", meta={"rubric": RUBRICS[i % 2]}) for i in range(P)]
    arrays = rubrics.rubric_arrays(examples, tok, field="rubric", size=3, max_tokens=12)
    rubric = scoring.Rubric.of_batch({k: jnp.asarray(v) for k, v in arrays.items()}, G)
    judge = scoring.make_judge(jc, tok, template=RUBRIC_TEMPLATE, yes="y", no="n")
    assert judge.rubric
    got = np.asarray(jax.jit(lambda r, u: scoring.judge_scores(jp, r, judge=judge, rubric=u))(
        rollout, rubric))
    tokens, mask = judge_lib.judge_inputs(judge, rollout, rubric=rubric)
    rows, weights = [], []
    for b in range(P * G):
        q = [int(t) for t, m in zip(rollout.prompt_tokens[b], rollout.prompt_mask[b])
             if m and t != tok.bos_id]
        a = [int(t) for t, m in zip(rollout.tokens[b], rollout.mask[b]) if m and t != tok.eos_id]
        crit = rubrics.parse_rubric(RUBRICS[(b // G) % 2], "rubric")
        for k in range(3):
            text, w = crit[k] if k < len(crit) else ("", 0.0)
            ids = [tok.bos_id] + tok.encode(RUBRIC_TEMPLATE.format(
                question=tok.decode(q), answer=tok.decode(a), criterion=text))
            assert list(np.asarray(tokens[b * 3 + k])[np.asarray(mask[b * 3 + k]) == 1]) == ids
            rows.append(ids)
            weights.append(w)
    p, logit_atol, _ = _reference_p(jp, jc, rows, judge)
    w = np.asarray(weights).reshape(P * G, 3)
    want = np.sum(w * p.reshape(P * G, 3), 1) / np.sum(np.maximum(w, 0), 1)
    # Each p_k within the sigmoid bound of the earlier tests (relative ≤ 2.1·logit bound +
    # float32 rounding); the combination sums |w_k|·|Δp_k| over Σ max(w, 0) ≥ 1 (weights
    # and the float32 sum of ≤ 3 terms: 3 ulps of the result).
    rtol = 2.1 * logit_atol + numerics.ref_atol(2, 1.0, transcendentals=2)
    atol = np.sum(np.abs(w) * p.reshape(P * G, 3), 1) * rtol + numerics.ref_atol(3, 1.0)
    assert np.std(want) > 1e-3
    np.testing.assert_array_less(np.abs(got - want), atol)
    with pytest.raises(ValueError, match="no rubric"):
        judge_lib.judge_inputs(judge, rollout)


@pytest.mark.parametrize("value, message", [
    ([], "non-empty list"), ([["x", True]], "finite number"), ([{"criterion": "x"}], "expected"),
    ([["", 1]], "non-empty string"), ([["a", 1]] * 4, "4 criteria, more than"),
    ([["a" * 13, 1]], "13 tokens, more than"),
])
def test_bad_rubrics_are_one_line_errors(tok, value, message):
    from rlvr_jax.data import rubrics
    ex = tasks.Example(prompt="", answer="", solution="", task="", key="row7", split="",
                       meta={"rubric": value})
    with pytest.raises(ValueError, match=message) as e:
        rubrics.rubric_arrays([ex], tok, field="rubric", size=3, max_tokens=12)
    assert "row7" in str(e.value) and "\n" not in str(e.value)


def test_sampled_verdicts_estimate_p_yes(setup, tok):
    """judge.samples = k: the term's reward is the share of k Bernoulli(P(yes)) draws, a
    multiple of 1/k, seeded by the rollout (the same rollout, the same draws); over k = 4096
    its mean error is within 5 standard errors (σ ≤ 1/2 / √k per row)."""
    rollout, answers, jc, jp = setup
    x = scoring.Inputs(rollout, answers=answers, verdicts=jnp.zeros(P * G), group_size=G,
                       reward_params=jp)
    plain = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no="n")
    p = np.asarray(scoring.judge_scores(jp, rollout, answers, judge=plain))
    tokens, att = judge_lib.judge_inputs(plain, rollout, answers)
    logits = np.asarray(judge_lib.judge_logits(jp, tokens, att, config=jc))
    # The term's P(yes) (another program) vs this one: σ(l_yes − l_no) of logits within two
    # forward orders' bound, relative change ≤ |Δ(l_yes − l_no)| (as in the test above).
    rtol = 2.1 * numerics.reorder_atol(numerics.forward_chain(jc, tokens.shape[1]),
                                       np.abs(logits).max()) + numerics.ref_atol(2, 1.0, 2)
    for k in (3, 4096):
        judge = scoring.make_judge(jc, tok, template=TEMPLATE, yes="y", no="n", samples=k)
        fn = judge_lib.judge_term(scoring.Setup(None, reward_model=judge), 1.0)
        term = jax.jit(lambda r: fn(jnp.zeros(P * G), x.replace(rollout=r)))
        got, metrics = term(rollout)
        got = np.asarray(got)
        np.testing.assert_array_equal(got, np.asarray(term(rollout)[0]))
        # Multiples of 1/k: k zeros and ones sum exactly in float32 (k < 2^24); the mean's
        # division (or a product with a rounded 1/k: two roundings) moves it by ≤ 2·2^-24
        # relative, so got·k is within 2k·2^-24 (< 5e-4) of an integer.
        np.testing.assert_allclose(got * k, np.round(got * k), rtol=0, atol=2 * k * 2.0 ** -24)
        # The metrics still read P(yes), not the draws: a mean of 16 P's, each within rtol,
        # plus the 16-term sum's own rounding.
        np.testing.assert_allclose(np.asarray(metrics["reward/judge"]), p.mean(),
                                   rtol=rtol + numerics.gamma(P * G))
    assert np.abs(got - p).max() < 5 * 0.5 / np.sqrt(4096)
    with pytest.raises(ValueError, match="samples"):
        scoring.make_judge(jc, tok, template=TEMPLATE, samples=-1)


def test_a_rubric_run_from_a_jsonl_file(setup, tmp_path, capsys, monkeypatch):
    """The README's path: rows with a `rubric` field, a {criterion} judge (an HF directory)
    beside the math verifier at weight 0: one RL step runs and logs the judge's reward; a
    template reading {criterion} without data.rubric_field is a one-line error, exit 2."""
    import json
    import os
    from rlvr_jax.train import cli
    from rlvr_jax.train.logging import read_metrics
    _, _, jc, jp = setup
    hf.save_hf_checkpoint(jp, jc, str(tmp_path / "judge"))
    path = tmp_path / "rubric.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "answer": str(2 * i),
                                        "rubric": RUBRICS[i % 2]}) + "\n" for i in range(24)))
    quick = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "configs", "quickstart.py")
    args = ["--config", quick, "--config.data.source=jsonl", f"--config.data.path={path}",
            "--config.reward.components=math,judge", "--config.reward.weights=0,1",
            f"--config.reward.judge_path={tmp_path / 'judge'}", "--config.reward.judge_yes=y",
            f"--config.reward.judge_template={RUBRIC_TEMPLATE}", "--config.reward.judge_no=n",
            "--config.data.rubric_size=3", "--config.data.rubric_tokens=12",
            "--config.sft.steps=0", "--config.rl.steps=1", "--config.rl.num_prompts=4",
            "--config.eval.every=0", "--config.eval.num_prompts=2", "--config.eval.batch_size=2",
            "--config.reward.num_workers=0"]
    monkeypatch.setenv("RLVR_JAX_NO_PROGRESS", "1")
    capsys.readouterr()
    assert cli.main(args + ["--workdir", str(tmp_path / "bad")]) == 2
    assert capsys.readouterr().err.startswith("error: reward.judge_template: reads {criterion}")
    status = cli.main(args + ["--workdir", str(tmp_path / "run"),
                              "--config.data.rubric_field=rubric"])
    assert status == 0, capsys.readouterr().err
    rec = [r for r in read_metrics(str(tmp_path / "run" / "metrics.jsonl")) if "reward/judge" in r]
    assert rec and 0.0 < rec[0]["reward/judge"] < 1.0
