"""Self-verification (`rlvr_jax.train.verify`, rl.verify_groups): the verification rows
(prompt, then the verified completion, the template and the sampled verdict, the prefix
masked from the loss), the groups they replace and their rewards, against hand-computed
arrays with a stand-in sampler (no model); the warm-up's verification rows; the step with
self-verification runs in tests/test_configs.py (self_verify_arithmetic)."""
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import tasks
from rlvr_jax.train import rl_config, verify
from tests.test_hints import _rollout

PAD, EOS, YES, NO = 0, 2, 40, 41


def test_verification_rows_replace_the_all_equal_groups_and_score_the_verdict():
    g, n = 2, 8
    # 3 groups: group 0 mixed, group 1 all wrong, group 2 all right (both all-equal).
    tokens = np.array([[11, 12, EOS, 0, 0, 0, 0, 0], [13, EOS, 0, 0, 0, 0, 0, 0],
                       [14, 15, 16, EOS, 0, 0, 0, 0], [17, EOS, 0, 0, 0, 0, 0, 0],
                       [18, 19, 20, 21, 22, 23, 24, EOS],  # Too long to verify (h >= N).
                       [25, EOS, 0, 0, 0, 0, 0, 0]])
    first = _rollout(tokens, (tokens != 0).astype(np.int32))
    correct = jnp.asarray([True, False, False, False, True, True])
    batch = {"prompt_tokens": jnp.asarray([[0, 5, 6], [7, 8, 9], [3, 4, 5]]),
             "prompt_mask": jnp.asarray([[0, 1, 1], [1, 1, 1], [1, 1, 1]]),
             "answers": jnp.zeros((3,), jnp.int32),
             "verify_template": jnp.tile(jnp.asarray([[30, 31]]), (3, 1)),
             "verify_verdicts": jnp.tile(jnp.asarray([[YES, NO]]), (3, 1))}
    seen = {}

    def trace(b, rng):  # Each verification prompt's G continuations: YES EOS, then NO EOS.
        seen["prompts"], seen["mask"] = b["prompt_tokens"], b["prompt_mask"]
        k = b["prompt_tokens"].shape[0]
        cont = np.tile(np.array([[YES, EOS] + [0] * (n - 2), [NO, EOS] + [0] * (n - 2)]), (k, 1))
        return _rollout(cont, (cont != 0).astype(np.int32), tp=b["prompt_tokens"].shape[1])

    out, checks, metrics = verify.self_verification(
        first, correct, batch, jax.random.PRNGKey(0), trace=trace, k=2, group_size=g,
        pad_id=PAD)
    # The two all-equal groups (1, 2) are replaced; group 0 keeps its solving rows.
    np.testing.assert_array_equal(np.asarray(checks.rows), [0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(out.tokens[:2]), tokens[:2])
    src = [r for r in range(6) if r != 4]  # Row 4 does not fit N: never a source.
    seen_src = []
    for slot in (1, 2):
        rows = out.tokens[2 * slot:2 * slot + 2]
        # Which completion was verified: the row's tokens before the template.
        head = np.asarray(rows[0])
        cut = int(np.flatnonzero(head == 30)[0])
        s = [r for r in src if list(tokens[r][:cut]) == list(head[:cut])
             and tokens[r][cut] == EOS][0]
        seen_src.append(s)
        want = list(tokens[s][:cut]) + [30, 31]
        for j, verdict in enumerate((YES, NO)):
            row = list(want) + [verdict, EOS]
            row = (row + [0] * n)[:n]
            np.testing.assert_array_equal(np.asarray(rows[j]), row)
            lm = np.asarray(out.loss_mask[2 * slot + j])
            assert lm[:cut + 2].sum() == 0 and lm[cut + 2:cut + 4].all()  # Verdict, EOS.
            np.testing.assert_array_equal(np.asarray(out.prompt_tokens[2 * slot + j]),
                                          np.asarray(first.prompt_tokens[s]))  # The source's.
            right = bool(correct[s]) == (verdict == YES)
            assert float(checks.reward[2 * slot + j]) == float(right)
    assert len(set(seen_src)) == 2
    # The verification prompts: the source's prompt, its completion less EOS, the template.
    p0 = [int(t) for t, m in zip(seen["prompts"][0], seen["mask"][0]) if m]
    s = seen_src[0]
    assert p0 == [int(t) for t, m in zip(batch["prompt_tokens"][s // g],
                                         batch["prompt_mask"][s // g]) if m] + \
        [int(t) for t in tokens[s] if t not in (0, EOS)] + [30, 31]
    assert float(metrics["verify/accuracy"]) == 0.5 and float(metrics["verify/groups"]) == 2
    assert float(metrics["verify/solve_correct"]) == 0.5  # Group 0: one of two right.
    n_c = 2.0 * sum(bool(correct[s]) for s in seen_src)
    assert float(metrics["verify/rows_correct_source"]) == n_c
    assert float(metrics["verify/right_correct_source"]) == n_c / 2  # One YES per source.
    assert float(metrics["verify/right_wrong_source"]) == (4 - n_c) / 2
    rewards, ok = verify.with_verification(jnp.full((6,), 7.0), correct, checks)
    np.testing.assert_array_equal(np.asarray(rewards[:2]), [7.0, 7.0])
    np.testing.assert_array_equal(np.asarray(rewards[2:]), np.asarray(checks.reward[2:]))
    np.testing.assert_array_equal(np.asarray(ok[2:]), np.asarray(checks.reward[2:]) > 0)


def test_warmup_rows_teach_the_verdict_only(tok):
    task = tasks.get("arithmetic", ops=("add",), min_digits=1, max_digits=2)
    examples = task.generate(40, seed=0)
    from rlvr_jax.data import datasets
    comp, mask = datasets.completion_arrays([e.solution for e in examples], tok, max_len=48)
    targets = mask.astype(np.int32)
    rl = rl_config.RLConfig(num_prompts=4, verify_groups=1, verify_template=" ok? ",
                            verify_yes="y", verify_no="n")
    new, new_mask, new_targets = verify.warmup_rows(examples, comp, mask, targets, tok, rl,
                                                    0.5, np.random.default_rng(0))
    changed = np.flatnonzero(np.any(new != comp, axis=1) | np.any(new_targets != targets, 1))
    assert 8 <= len(changed) <= 32
    verdicts = set()
    for i in changed:
        text = tok.decode([int(t) for t in new[i][new_mask[i]] if t != tok.eos_id])
        head, verdict = text[:-1], text[-1]
        verdicts.add(verdict)
        assert head.endswith(" ok? ") and verdict in "yn"
        answer = head[:-len(" ok? ")].rsplit(" ", 1)[-1]
        assert (answer == examples[i].answer) == (verdict == "y")
        assert new_targets[i].sum() == 2  # The verdict and its EOS.
    assert verdicts == {"y", "n"}


def test_sources_alternate_correct_and_wrong_while_both_last():
    correct = jnp.asarray([True, False, False, False, True, False, False, False])
    eligible = jnp.asarray([True, True, True, True, True, True, True, False])
    for k, want_correct in ((2, 1), (4, 2), (6, 2)):
        slots, src, filled = verify.choose(correct, jax.random.PRNGKey(k), eligible,
                                           group_size=1, k=k)
        src = np.asarray(src)
        assert len(set(src.tolist())) == k and np.asarray(eligible)[src].all()
        assert int(np.asarray(correct)[src].sum()) == want_correct
        assert np.asarray(filled).all() and len(np.asarray(slots)) == k
    # Group 1 (rows 2, 3) is all equal (both wrong) and group 3 too: replaced first.
    slots, _, _ = verify.choose(correct, jax.random.PRNGKey(0), eligible, group_size=2, k=2)
    assert sorted(np.asarray(slots).tolist()) == [1, 3]
