"""Transformer, KV cache, chunked log-probs and value model."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlvr_jax import models
from rlvr_jax.models import presets, transformer

from tests import numerics


def _left_padded_batch(rng, vocab, lengths, total):
    tokens = np.zeros((len(lengths), total), np.int32)
    mask = np.zeros((len(lengths), total), np.int32)
    for i, n in enumerate(lengths):
        tokens[i, total - n:] = rng.integers(1, vocab, size=n)
        mask[i, total - n:] = 1
    return jnp.asarray(tokens), jnp.asarray(mask)


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_presets_are_valid_and_count_parameters(name):
    cfg = presets.get(name)
    shapes = jax.eval_shape(lambda: models.init_params(cfg, jax.random.PRNGKey(0)))
    assert sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes)) == cfg.num_params()


def test_published_parameter_counts():
    # Published sizes (with embeddings; tied heads counted once).
    assert abs(presets.get("qwen2.5-0.5b").num_params() / 1e6 - 494.0) < 1.0
    assert abs(presets.get("qwen3-0.6b").num_params() / 1e6 - 596.0) < 2.0
    assert abs(presets.get("llama3.2-1b").num_params() / 1e6 - 1235.8) < 1.0
    assert abs(presets.get("llama3.1-8b").num_params() / 1e9 - 8.03) < 0.01


def test_lab_preset_sizes():
    # The lab's two CPU models (lab.ladder): tiny ~82k parameters, small in the issue's
    # 1-2M range (exact: counted from the shapes, no float arithmetic involved).
    assert 50_000 < presets.get("tiny").num_params() < 150_000
    assert 1_000_000 <= presets.get("small").num_params() <= 2_000_000


def test_logical_axes_match_params(tiny_config, tiny_params):
    axes = models.param_logical_axes(tiny_config)
    leaves, treedef = jax.tree.flatten(tiny_params)
    specs = treedef.flatten_up_to(axes)
    for leaf, spec in zip(leaves, specs):
        assert len(spec) == leaf.ndim
    assert axes["layers"]["attn"]["q_kernel"] == jax.sharding.PartitionSpec(
        "layers", "embed", "heads", "kv")


def test_bad_config_raises():
    with pytest.raises(ValueError, match="n_kv_heads"):
        presets.get("tiny", n_heads=3)
    with pytest.raises(ValueError, match="remat"):
        presets.get("tiny", remat="sometimes")
    with pytest.raises(ValueError, match="unknown model preset"):
        presets.get("gpt5")


def test_padding_does_not_change_real_token_logits(tiny_config, tiny_params):
    tokens, mask = _left_padded_batch(np.random.default_rng(0), tiny_config.vocab_size, [7], 7)
    padded = jnp.concatenate([jnp.zeros((1, 3), jnp.int32), tokens], axis=1)
    padded_mask = jnp.concatenate([jnp.zeros((1, 3), jnp.int32), mask], axis=1)
    full = models.jit_forward(tiny_params, tokens, mask, config=tiny_config)
    left = models.jit_forward(tiny_params, padded, padded_mask, config=tiny_config)
    numerics.assert_forward_close(left[:, 3:], full, tiny_config, 10)
    assert np.isfinite(np.asarray(left)).all()


def test_kv_cache_decoding_reproduces_full_forward(tiny_config, tiny_params):
    """Prefill a left-padded batch, decode one token at a time: logits equal the full forward."""
    rng = np.random.default_rng(1)
    prompt_len, extra = 6, 5
    lengths = [6, 3, 1]
    prompt, prompt_mask = _left_padded_batch(rng, tiny_config.vocab_size, lengths, prompt_len)
    continuation = jnp.asarray(rng.integers(1, tiny_config.vocab_size, (3, extra)), jnp.int32)
    tokens = jnp.concatenate([prompt, continuation], axis=1)
    mask = jnp.concatenate([prompt_mask, jnp.ones_like(continuation)], axis=1)
    full = models.jit_forward(tiny_params, tokens, mask, config=tiny_config)

    @jax.jit
    def step(cache, toks, m):
        return models.forward(tiny_params, toks, config=tiny_config, attention_mask=m, cache=cache)

    cache = models.init_cache(tiny_config, 3, prompt_len + extra)
    logits, cache = step(cache, prompt, prompt_mask)
    got = [logits]
    for t in range(extra):
        logits, cache = step(cache, continuation[:, t:t + 1], jnp.ones((3, 1), jnp.int32))
        got.append(logits)
    got = jnp.concatenate(got, axis=1)
    real = np.asarray(mask, bool)
    numerics.assert_forward_close(np.asarray(got)[real], np.asarray(full)[real], tiny_config,
                                  prompt_len + extra)
    assert int(cache["index"]) == prompt_len + extra


def test_segment_ids_pack_independent_sequences(tiny_config, tiny_params):
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.integers(1, 100, (1, 4)), jnp.int32)
    b = jnp.asarray(rng.integers(1, 100, (1, 3)), jnp.int32)
    packed = jnp.concatenate([a, b, jnp.zeros((1, 1), jnp.int32)], axis=1)
    seg = jnp.asarray([[1, 1, 1, 1, 2, 2, 2, 0]], jnp.int32)
    out, _ = models.forward(tiny_params, packed, config=tiny_config, segment_ids=seg)
    out_a, _ = models.forward(tiny_params, a, config=tiny_config)
    out_b, _ = models.forward(tiny_params, b, config=tiny_config)
    numerics.assert_forward_close(out[:, :4], out_a, tiny_config, 8)
    numerics.assert_forward_close(out[:, 4:7], out_b, tiny_config, 8)


def test_padding_holes_do_not_move_positions(tiny_config, tiny_params):
    """A mask with zeros inside a row: the real tokens keep the positions (and so the
    logits) they have with the hole removed; packed segments still restart at 0."""
    seg = jnp.asarray([[1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 0, 1], [1, 0, 2, 0, 2, 0]], jnp.int32)
    np.testing.assert_array_equal(transformer.default_positions(seg)[np.asarray(seg) > 0],
                                  [0, 1, 2, 3, 0, 1, 2, 0, 0, 1])
    tokens = jnp.asarray(np.random.default_rng(4).integers(1, 100, (1, 6)), jnp.int32)
    holed, _ = models.forward(tiny_params, tokens, config=tiny_config,
                              attention_mask=seg[:1])
    compact, _ = models.forward(tiny_params, tokens[:, jnp.asarray([0, 1, 4, 5])],
                                config=tiny_config)
    numerics.assert_forward_close(holed[:, jnp.asarray([0, 1, 4, 5])], compact, tiny_config, 6)


@pytest.mark.parametrize("overrides", [
    dict(qk_norm=True, qkv_bias=False, family="qwen3"),
    dict(tie_embeddings=False, qkv_bias=False, family="llama",
         rope_scaling=("llama3", 8.0, 1.0, 4.0, 16)),
])
def test_family_variants_cache_consistency(overrides):
    cfg = presets.get("tiny", **overrides)
    params = models.init_params(cfg, jax.random.PRNGKey(3))
    tokens = jnp.asarray(np.random.default_rng(3).integers(1, 100, (2, 40)), jnp.int32)
    full, _ = models.forward(params, tokens, config=cfg)
    cache = models.init_cache(cfg, 2, 40)
    first, cache = models.forward(params, tokens[:, :39], config=cfg, cache=cache)
    last, _ = models.forward(params, tokens[:, 39:], config=cfg, cache=cache)
    numerics.assert_forward_close(jnp.concatenate([first, last], 1), full, cfg, 40)


def test_llama3_rope_scaling_changes_low_frequencies_only():
    base = presets.get("tiny", rope_theta=500000.0)
    scaled = base.replace(rope_scaling=("llama3", 8.0, 1.0, 4.0, 64))
    f0, f1 = transformer.rope_frequencies(base), transformer.rope_frequencies(scaled)
    assert f1[0] == f0[0]  # Highest frequency untouched.
    np.testing.assert_allclose(f1[-1], f0[-1] / 8.0)  # Lowest frequency divided by the factor.


def test_bf16_compute_and_remat_match_fp32(tiny_config, tiny_params):
    tokens = jnp.asarray(np.random.default_rng(4).integers(1, 100, (2, 12)), jnp.int32)
    ref = models.jit_forward(tiny_params, tokens, jnp.ones_like(tokens), config=tiny_config)
    bf16 = models.jit_forward(tiny_params, tokens, jnp.ones_like(tokens),
                              config=tiny_config.replace(dtype="bfloat16"))
    assert bf16.dtype == jnp.float32
    # bfloat16 (unit roundoff 2^-9) rounds each op's output on the way: ≤ 16 roundings a layer
    # (norms, q/k/v, scores, probabilities, attention out, projection, residuals, MLP) and 4
    # after (final norm, head), each relative to the size of the values (≤ max|logits|).
    bound = numerics.gamma(16 * tiny_config.n_layers + 4, u=2.0 ** -9)
    np.testing.assert_allclose(bf16, ref, rtol=0, atol=bound * float(np.max(np.abs(ref))))

    def loss(p, cfg):
        return jnp.sum(models.forward(p, tokens, config=cfg)[0] ** 2)

    g_ref = jax.grad(loss)(tiny_params, tiny_config)
    for policy in ("full", "dots_no_batch"):
        g = jax.grad(loss)(tiny_params, tiny_config.replace(remat=policy))
        numerics.assert_trees_reorder_close(g, g_ref,
                                            numerics.gradient_chain(tiny_config, 12, 2 * 12))


def _naive_logprobs(logits, targets, temperature):
    logp = jax.nn.log_softmax(np.asarray(logits, np.float64) / temperature, axis=-1)
    chosen = np.take_along_axis(np.asarray(logp), np.asarray(targets)[..., None], -1)[..., 0]
    ent = -np.sum(np.exp(logp) * logp, axis=-1)
    return chosen, ent


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 64])
def test_chunked_logprobs_match_naive(chunk_size):
    rng = np.random.default_rng(5)
    hidden = jnp.asarray(rng.normal(size=(3, 10, 16)), jnp.float32)
    head = jnp.asarray(rng.normal(size=(16, 50)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 50, (3, 10)), jnp.int32)
    logp, ent = models.chunked_logprobs(hidden, targets, head, temperature=0.7,
                                        chunk_size=chunk_size, with_entropy=True)
    logits = np.asarray(hidden) @ np.asarray(head)
    want_logp, want_ent = _naive_logprobs(logits, targets, 0.7)
    # Both float32 (the naive one through jax): the head's dot (D = 16), the log-sum-exp over
    # V = 50 and, for the entropy, the sum of p·log p over V; terms ≤ max|logits/T| + log V.
    magnitude = float(np.max(np.abs(logits))) / 0.7 + np.log(50)
    atol = numerics.reorder_atol(16 + 2 * 50, magnitude)
    np.testing.assert_allclose(logp, want_logp, rtol=0, atol=atol)
    np.testing.assert_allclose(ent, want_ent, rtol=0, atol=atol)


def test_chunked_logprobs_gradient_matches_naive():
    rng = np.random.default_rng(6)
    hidden = jnp.asarray(rng.normal(size=(2, 9, 8)), jnp.float32)
    head = jnp.asarray(rng.normal(size=(8, 30)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 30, (2, 9)), jnp.int32)

    def chunked(h, w):
        return jnp.sum(models.chunked_logprobs(h, targets, w, chunk_size=4)[0])

    def naive(h, w):
        logp = jax.nn.log_softmax(h @ w, axis=-1)
        return jnp.sum(jnp.take_along_axis(logp, targets[..., None], -1))

    # Backward of the same reductions, then the head's gradient sums B·T = 18 positions.
    numerics.assert_trees_reorder_close(jax.grad(chunked, (0, 1))(hidden, head),
                                        jax.grad(naive, (0, 1))(hidden, head),
                                        2 * (8 + 2 * 30) + 18)


@pytest.mark.parametrize("length,chunk,plan", [(159, 128, (2, 80)), (128, 128, (1, 128)),
                                               (16, 128, (1, 16)), (10, 4, (3, 4)),
                                               (512, 128, (4, 128)), (1, 7, (1, 1))])
def test_chunk_plan_is_equal_chunks_without_padding(length, chunk, plan):
    n, c = models.logprobs.chunk_plan(length, chunk)
    assert (n, c) == plan
    assert c <= chunk and n * c >= length and n * c - length < n


@pytest.mark.parametrize("chunk_size", [4, 10])
@pytest.mark.parametrize("temperature,with_entropy", [(1.0, True), (0.7, True), (0.7, False)])
def test_chunked_logprobs_gradient_with_an_overlapping_last_chunk(chunk_size, temperature,
                                                                  with_entropy):
    """T = 10 in chunks of 4: the last chunk [6, 10) overlaps [4, 8); no position counts twice.

    The gradient (log-prob and entropy terms, temperature) against autodiff of the naive
    full-vocabulary formula; chunk_size 10 is the single-chunk path."""
    rng = np.random.default_rng(7)
    hidden = jnp.asarray(rng.normal(size=(2, 10, 8)), jnp.float32)
    head = jnp.asarray(rng.normal(size=(8, 30)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 30, (2, 10)), jnp.int32)
    weights = jnp.asarray(rng.normal(size=(2, 10)), jnp.float32)

    def chunked(h, w):
        logp, ent = models.chunked_logprobs(h, targets, w, chunk_size=chunk_size,
                                            temperature=temperature, with_entropy=with_entropy)
        return jnp.sum(weights * (logp + ent if with_entropy else logp))

    def naive(h, w):
        logp = jax.nn.log_softmax(h @ w / temperature, axis=-1)
        ent = -jnp.sum(jnp.exp(logp) * logp, axis=-1) if with_entropy else 0.0
        return jnp.sum(weights * (jnp.take_along_axis(logp, targets[..., None], -1)[..., 0] + ent))

    # The value sums B·T = 20 weighted terms of a dot (D = 8) and two sums over V = 30; its
    # size is bounded by Σ|weight|·max|log p + entropy| (≤ max|logits/T| + 2 log V each).
    logits = np.asarray(hidden) @ np.asarray(head) / temperature
    terms = float(np.sum(np.abs(weights))) * (float(np.max(np.abs(logits))) + 2 * np.log(30))
    chain = 8 + 2 * 30 + 20
    np.testing.assert_allclose(chunked(hidden, head), naive(hidden, head), rtol=0,
                               atol=numerics.reorder_atol(chain, terms))
    numerics.assert_trees_reorder_close(jax.grad(chunked, (0, 1))(hidden, head),
                                        jax.grad(naive, (0, 1))(hidden, head), 2 * chain)


def test_completion_logprobs_equal_the_tail_of_sequence_logprobs(tiny_config, tiny_params):
    rng = np.random.default_rng(8)
    tokens = jnp.asarray(rng.integers(1, tiny_config.vocab_size, (3, 12)), jnp.int32)
    mask = jnp.asarray(np.arange(12)[None, :] >= np.array([[0], [2], [5]]), jnp.int32)
    full, full_ent = models.sequence_logprobs(tiny_params, tokens, mask, config=tiny_config,
                                              temperature=0.8, with_entropy=True)
    logp, ent = models.completion_logprobs(tiny_params, tokens, mask, 5, config=tiny_config,
                                           temperature=0.8, chunk_size=2, with_entropy=True)
    assert logp.shape == (3, 5)
    numerics.assert_forward_close(logp, full[:, -5:], tiny_config, 12)
    numerics.assert_forward_close(ent, full_ent[:, -5:], tiny_config, 12,
                                  extra=tiny_config.vocab_size)
    with pytest.raises(ValueError, match="num_new"):
        models.completion_logprobs(tiny_params, tokens, mask, 12, config=tiny_config)


def test_chunked_logprobs_never_materialise_full_logits():
    """The compiled program holds one chunk of logits, not [B, T, V]."""
    b, t, d, v = 2, 256, 8, 4096
    hidden = jax.ShapeDtypeStruct((b, t, d), jnp.float32)
    targets = jax.ShapeDtypeStruct((b, t), jnp.int32)
    head = jax.ShapeDtypeStruct((d, v), jnp.float32)

    def f(h, tg, w):
        return jnp.sum(models.chunked_logprobs(h, tg, w, chunk_size=16, with_entropy=True)[0])

    compiled = jax.jit(jax.grad(f)).lower(hidden, targets, head).compile()
    mem = compiled.memory_analysis()
    full_logits_bytes = b * t * v * 4
    assert mem.temp_size_in_bytes < full_logits_bytes / 4, mem


def test_sequence_logprobs_align_with_forward(tiny_config, tiny_params):
    tokens, mask = _left_padded_batch(np.random.default_rng(7), tiny_config.vocab_size, [5, 8], 8)
    logp, ent = models.sequence_logprobs(tiny_params, tokens, mask, config=tiny_config,
                                         chunk_size=3, with_entropy=True)
    logits = models.jit_forward(tiny_params, tokens, mask, config=tiny_config)
    want, want_ent = _naive_logprobs(logits[:, :-1], tokens[:, 1:], 1.0)
    numerics.assert_forward_close(logp[:, 1:], want, tiny_config, 8)
    numerics.assert_forward_close(ent[:, 1:], want_ent, tiny_config, 8,
                                  extra=tiny_config.vocab_size)
    assert np.all(np.asarray(logp[:, 0]) == 0)


def test_value_model_initialises_from_policy(tiny_config, tiny_params):
    vparams = models.init_value_params(tiny_config, jax.random.PRNGKey(1), tiny_params)
    tokens = jnp.ones((2, 5), jnp.int32)
    values = models.value_forward(vparams, tokens, jnp.ones_like(tokens), config=tiny_config)
    assert values.shape == (2, 5) and values.dtype == jnp.float32
    np.testing.assert_array_equal(values, 0.0)  # Zero-initialised head.
    np.testing.assert_array_equal(vparams["trunk"]["embed"], tiny_params["embed"])
    axes = models.value_logical_axes(tiny_config)
    assert jax.tree.structure(vparams) == jax.tree.structure(
        axes, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    grads = jax.grad(lambda p: jnp.sum(models.value_forward(
        p, tokens, jnp.ones_like(tokens), config=tiny_config)))(vparams)
    assert float(jnp.abs(grads["value_head"]["kernel"]).sum()) > 0


def test_forward_rejects_bad_input(tiny_config, tiny_params):
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        models.forward(tiny_params, jnp.ones((5,), jnp.int32), config=tiny_config)
    with pytest.raises(ValueError, match="not both"):
        models.forward(tiny_params, jnp.ones((1, 2), jnp.int32), config=tiny_config,
                       attention_mask=jnp.ones((1, 2)), segment_ids=jnp.ones((1, 2), jnp.int32))
    with pytest.raises(ValueError, match="cache"):
        models.forward(tiny_params, jnp.ones((2, 2), jnp.int32), config=tiny_config,
                       cache=models.init_cache(tiny_config, 3, 4))


_HLO_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\((.*)$")


def _hlo_computations(text):
    """{computation name: [(name, result type, opcode, rest of line)]} of HLO text."""
    comps, current = {}, None
    for line in text.splitlines():
        header = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*->.*\{\s*$", line)
        if header:
            current = comps.setdefault(header.group(1), [])
        elif current is not None and (m := _HLO_INSTRUCTION.match(line)):
            current.append(m.groups())
    return comps


def test_decode_step_updates_the_cache_in_place(tiny_config, tiny_params):
    """A compiled 1-token step holds no cache-sized op but the in-place new-token writes.

    Any op (outside fusion bodies) with as many elements as one layer's k or v — a copy, a
    transpose, a slice of it — fails, unless it is the in-place write of the new token.
    """
    batch, slots = 3, 40
    cache = models.init_cache(tiny_config, batch, slots)
    assert len(cache["k"]) == tiny_config.n_layers
    cache_elems = int(np.prod(cache["k"][0].shape))  # [B, Hkv, S, Dh]
    new_token_elems = batch * tiny_config.n_kv_heads * tiny_config.head_dim  # [B, Hkv, 1, Dh]
    step = jax.jit(lambda p, t, c: models.forward(p, t, config=tiny_config, cache=c)[1],
                   donate_argnums=2)
    text = step.lower(tiny_params, jnp.ones((batch, 1), jnp.int32), cache).compile().as_text()
    comps = _hlo_computations(text)
    fused = {m.group(1) for ops in comps.values() for (_, _, op, rest) in ops if op == "fusion"
             for m in [re.search(r"calls=%?([\w.\-]+)", rest)] if m}
    types = {name: typ for ops in comps.values() for (name, typ, _, _) in ops}

    def numel(typ):
        m = re.match(r"\w+\[([\d,]*)\]", typ)
        if m is None:  # A tuple.
            return -1
        return int(np.prod([int(d) for d in m.group(1).split(",") if d]))

    def check_update(dus_rest):  # The update (second operand) is only the new token's K/V.
        update = re.findall(r"%([\w.\-]+)", dus_rest)[1]
        assert numel(types[update]) == new_token_elems, (update, types[update])

    writes = 0
    for comp, ops in comps.items():
        if comp in fused:
            continue
        for name, typ, op, rest in ops:
            if numel(typ) != cache_elems or op in (
                    "parameter", "get-tuple-element", "bitcast", "tuple"):
                continue
            if op == "dynamic-update-slice":
                check_update(rest)
            else:
                assert op == "fusion", f"cache-sized {op} in {comp}: {name} {typ}"
                callee = re.search(r"calls=%?([\w.\-]+)", rest).group(1)
                root = [i for i in comps[callee] if i[2] == "dynamic-update-slice"
                        and numel(i[1]) == cache_elems]
                assert len(root) == 1, f"cache-sized fusion {name} is not an in-place update"
                check_update(root[0][3])
            writes += 1
    assert writes == 2 * tiny_config.n_layers  # K and V of every layer, once each.


def test_decode_writes_only_the_new_slot_and_matches_greedy_full_forward(tiny_config,
                                                                          tiny_params):
    rng = np.random.default_rng(8)
    batch, slots, steps = 2, 16, 6
    cache = models.init_cache(tiny_config, batch, slots)
    shape = cache["k"][0].shape  # [B, Hkv, S, Dh] per layer

    def noise():
        return tuple(jnp.asarray(rng.normal(size=shape), jnp.float32) for _ in cache["k"])
    cache = dict(cache, k=noise(), v=noise())
    prompt, mask = _left_padded_batch(rng, tiny_config.vocab_size, [5, 3], 5)
    step = jax.jit(lambda c, t, m: models.forward(tiny_params, t, config=tiny_config,
                                                  attention_mask=m, cache=c))
    logits, cache = step(cache, prompt, mask)
    tokens = prompt
    for _ in range(steps):
        nxt = jnp.argmax(logits[:, -1:], axis=-1).astype(jnp.int32)
        tokens = jnp.concatenate([tokens, nxt], axis=1)
        before = cache
        logits, cache = step(cache, nxt, jnp.ones_like(nxt))
        index = int(before["index"])
        for name in ("k", "v"):  # Every other slot is untouched, bit for bit.
            np.testing.assert_array_equal(np.delete(np.stack(cache[name]), index, axis=3),
                                          np.delete(np.stack(before[name]), index, axis=3))
        assert int(cache["index"]) == index + 1
    # Greedy decoding through the cache picks exactly the tokens the full forward would.
    full_mask = jnp.concatenate([mask, jnp.ones((batch, steps), jnp.int32)], axis=1)
    full = models.jit_forward(tiny_params, tokens, full_mask, config=tiny_config)
    atol = numerics.assert_forward_close(logits[:, 0], full[:, -1], tiny_config, 5 + steps)
    numerics.assert_is_argmax(tokens[:, 5:], full[:, 4:-1], atol)


def test_layer_scan_unrolled_or_not_gives_the_same_forward(tiny_config, tiny_params):
    tokens = jnp.asarray(np.random.default_rng(9).integers(1, tiny_config.vocab_size, (2, 7)),
                         jnp.int32)
    assert tiny_config.layer_unroll == tiny_config.n_layers  # auto: shallow models unroll
    deep = tiny_config.replace(n_layers=40)
    assert deep.layer_unroll == 1 and deep.replace(scan_unroll=3).layer_unroll == 3
    unrolled = transformer.forward(tiny_params, tokens, config=tiny_config)[0]
    scanned = transformer.forward(tiny_params, tokens, config=tiny_config.replace(scan_unroll=1))[0]
    numerics.assert_forward_close(unrolled, scanned, tiny_config, 7)
    with pytest.raises(ValueError, match="scan_unroll"):
        tiny_config.replace(scan_unroll=tiny_config.n_layers + 1)


def test_lm_head_backward_runs_in_the_compute_dtype():
    """bf16: the logits' float32 cotangent is rounded to bf16 once, then both backward dots
    accumulate in float32, so each gradient entry is within 2·u_bf16·Σ|g||w| of the float32
    dot of the unrounded cotangent (rounding g: u_bf16 relative per term; the float32 sum of
    K terms: γ_K ≪ u_bf16, counted as a second u_bf16) plus the result's rounding to bf16
    (u_bf16·|ref|); u_bf16 = 2^-8 (8 significand bits). No float32 × float32 dot over the
    vocabulary is left in the lowered program (it has one per backward dot in float32)."""
    from rlvr_jax.perf import update_cost
    u_bf16 = 2.0 ** -8
    rng = np.random.default_rng(8)
    hidden = jnp.asarray(rng.normal(size=(2, 5, 16)), jnp.bfloat16)
    head = jnp.asarray(rng.normal(size=(16, 96)), jnp.bfloat16)
    g = jnp.asarray(rng.normal(size=(2, 5, 96)), jnp.float32)
    _, vjp = jax.vjp(models.logprobs.head_logits, hidden, head)
    d_hidden, d_head = vjp(g)
    assert d_hidden.dtype == d_head.dtype == jnp.bfloat16
    h64, w64, g64 = (np.asarray(x, np.float64) for x in (hidden, head, g))
    for got, want, size in ((d_hidden, np.einsum("bcv,dv->bcd", g64, w64),
                             np.einsum("bcv,dv->bcd", np.abs(g64), np.abs(w64))),
                            (d_head, np.einsum("bcd,bcv->dv", h64, g64),
                             np.einsum("bcd,bcv->dv", np.abs(h64), np.abs(g64)))):
        np.testing.assert_array_less(np.abs(np.asarray(got, np.float64) - want),
                                     2 * u_bf16 * size + u_bf16 * np.abs(want) + 1e-30)

    targets = jnp.zeros((2, 5), jnp.int32)

    def loss(h, w):
        logp, ent = models.chunked_logprobs(h, targets, w, chunk_size=2, with_entropy=True)
        return jnp.sum(logp) + jnp.sum(ent)
    count = {dtype: update_cost.f32_vocab_dots(jax.jit(jax.grad(loss, (0, 1))).lower(
        hidden.astype(dtype), head.astype(dtype)).as_text(), 96)
        for dtype in (jnp.bfloat16, jnp.float32)}
    # float32 (where the counter must see them): the chunk's forward dot, two backward dots.
    assert count == {jnp.bfloat16: 0, jnp.float32: 3}
