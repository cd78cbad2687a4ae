"""What the compiled policy update costs at real lengths (XLA `cost_analysis`), against the
model's own FLOPs (`scripts/benchmark.py train --compile-only`).

    cost = update_cost(mc, sc, rl, prompt_lens=p, completion_lens=c, prompt_len=128)
    cost["padded_fraction"], cost["flops_overhead"], cost["f32_vocab_dots"]

- padded_fraction: 1 − real tokens / tokens the update's forward processes.
- flops_overhead: the compiled update's FLOPs per real token ÷ the model's FLOPs per real
  token, 6·(matmul parameters incl. the LM head) + causal attention over each sequence's
  own length (3× the forward's 4·H·Dh·t per layer at key count t).
- f32_vocab_dots: float32 × float32 `dot_general`s with a vocabulary-sized dimension in the
  lowered (StableHLO) text of the update.

Nothing is executed: the update is compiled from abstract inputs. Deep models are compiled
at 2 and 4 layers (unrolled, so every layer counts) and the FLOPs extrapolated linearly in
depth. Loop bodies: XLA counts a while body once, so the caller compiles with one
minibatch and one log-prob chunk (the benchmark forces both); the packed update's
micro-batch loop, whose trip count depends on the lengths, is counted here: its body's FLOPs
(`micro_body_flops`) times the trips the batch's packing plan runs, beyond the one counted.
"""
import re
from typing import Dict

import numpy as np

EXTRAPOLATE_FROM = (2, 4)
_DOT = re.compile(r"dot_general.*:\s*\((tensor<[^>]*>),\s*(tensor<[^>]*>)\)")


def f32_vocab_dots(lowered_text: str, vocab_size: int) -> int:
    """Count of float32 × float32 dot_generals touching a vocab-sized dimension."""
    count = 0
    for line in lowered_text.splitlines():
        m = _DOT.search(line)
        if not m or not all(t.endswith("xf32>") for t in m.groups()):
            continue
        dims = re.findall(r"(\d+)x", line.split(":")[-1])
        count += str(vocab_size) in dims
    return count


def model_flops(mc, seq_lengths: np.ndarray) -> float:
    """The model's training FLOPs over sequences of `seq_lengths` real tokens (see module)."""
    lengths = np.asarray(seq_lengths, np.float64)
    attention = 6 * mc.n_layers * mc.n_heads * mc.head_dim * np.sum(lengths * (lengths + 1))
    return float(6 * mc.num_params(include_embedding=False) * np.sum(lengths) + attention)


def _compiled_cost(mc, sc, rl, rollout, rewards) -> Dict[str, float]:
    """(flops, f32 vocab dots) of `make_update_fn` compiled from abstract inputs."""
    import jax
    from rlvr_jax.models import transformer
    from rlvr_jax.train import state as state_lib
    from rlvr_jax.train import step as step_lib
    tx = state_lib.make_optimizer(learning_rate=1e-6)
    state = jax.eval_shape(lambda: state_lib.create_train_state(
        transformer.init_params(mc, jax.random.PRNGKey(0)), tx, jax.random.PRNGKey(1)))
    lowered = step_lib.make_update_fn(mc, sc, rl, tx).lower(state, rollout, rewards)
    compiled = lowered.compile()
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return {"flops": float(analysis["flops"]),
            "f32_vocab_dots": f32_vocab_dots(lowered.as_text(), mc.vocab_size)}


def micro_body_flops(mc, sc, rl, batch: int, prompt_len: int) -> float:
    """FLOPs of one packed micro-batch's loss and gradient (the packed loop's body), compiled
    from abstract inputs (a sequence-level estimator's [b] advantages)."""
    import functools
    import jax
    import jax.numpy as jnp
    from rlvr_jax.models import transformer
    from rlvr_jax.train import objective
    from rlvr_jax.train.algorithms import resolve
    from rlvr_jax.train.experience import Experience
    from rlvr_jax.train.packing import Micro
    s = lambda shape, dt=jnp.int32: jax.ShapeDtypeStruct(shape, dt)  # noqa: E731
    n, rows, length = sc.max_new_tokens, rl.pack_rows, rl.pack_length
    mb = Experience(
        tokens=s((batch, prompt_len + n)), attention=s((batch, prompt_len + n)),
        mask=s((batch, n)), sampler_logp=s((batch, n), jnp.float32), row_valid=s((batch,), bool),
        advantages=s((batch,), jnp.float32),
        packed=Micro(tokens=s((rows, length)), segments=s((rows, length)),
                     positions=s((rows, length)), index=s((batch, n)), member=s((batch, n), bool)))
    counts = {k: s((), jnp.float32) for k in ("num_tokens", "num_sequences", "num_rows")}
    params = jax.eval_shape(lambda: transformer.init_params(mc, jax.random.PRNGKey(0)))
    grad_fn = jax.value_and_grad(functools.partial(
        objective.policy_objective, model_config=mc, algo=resolve(rl),
        temperature=sc.temperature, logprob_chunk=rl.logprob_chunk), has_aux=True)
    analysis = jax.jit(grad_fn).lower(params, mb, counts).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis["flops"])


def abstract_rollout(batch: int, prompt_len: int, new_tokens: int):
    """A `sampling.Rollout` of `jax.ShapeDtypeStruct`s (B rows, Tp, N)."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import sampling
    s = lambda shape, dt=jnp.int32: jax.ShapeDtypeStruct(shape, dt)  # noqa: E731
    return sampling.Rollout(
        tokens=s((batch, new_tokens)), mask=s((batch, new_tokens)),
        logprobs=s((batch, new_tokens), jnp.float32), lengths=s((batch,)),
        finished=s((batch,), jnp.bool_), prompt_tokens=s((batch, prompt_len)),
        prompt_mask=s((batch, prompt_len)))


def update_cost(mc, sc, rl, *, prompt_lens: np.ndarray, completion_lens: np.ndarray,
                prompt_len: int) -> Dict[str, object]:
    """padded_fraction, flops_overhead and f32_vocab_dots of the update for one length draw.

    Args:
      mc, sc, rl: model, sampling (num_samples, max_new_tokens) and update configs; rl must
        have one minibatch and one epoch (loop bodies counted once).
      prompt_lens: [B] real prompt tokens per row; completion_lens: [B] real completion
        tokens per row; prompt_len: Tp, the prompt bucket.
    """
    import jax
    import jax.numpy as jnp
    from rlvr_jax.train import packing
    if rl.minibatches != 1 or rl.epochs != 1:
        raise ValueError("update_cost counts one minibatch of one epoch")
    batch, n = len(completion_lens), sc.max_new_tokens
    if rl.pack_length:
        rl = packing.with_rows(rl, batch, prompt_len + n)
    seq = np.asarray(prompt_lens) + np.asarray(completion_lens)
    rollout = abstract_rollout(batch, prompt_len, n)
    rewards = jax.ShapeDtypeStruct((batch,), jnp.float32)
    depths = (mc.n_layers,) if mc.n_layers <= EXTRAPOLATE_FROM[-1] else EXTRAPOLATE_FROM
    costs = []
    for depth in depths:
        m = mc.replace(n_layers=depth, scan_unroll=depth)
        cost = _compiled_cost(m, sc, rl, rollout, rewards)
        plan = packing.plan_stats(seq, rl, batch, prompt_len + n)
        if plan["trips"] > 1:
            cost["flops"] += (plan["trips"] - 1) * micro_body_flops(m, sc, rl, batch, prompt_len)
        costs.append(cost)
    flops = costs[0]["flops"]
    if len(depths) > 1:
        per_layer = (costs[1]["flops"] - costs[0]["flops"]) / (depths[1] - depths[0])
        flops += per_layer * (mc.n_layers - depths[0])
    return {"padded_fraction": 1.0 - float(np.sum(seq)) / plan["processed_tokens"],
            "flops_overhead": flops / model_flops(mc, seq),
            "f32_vocab_dots": costs[-1]["f32_vocab_dots"],
            "real_tokens": int(np.sum(seq)), "processed_tokens": int(plan["processed_tokens"]),
            "micro_trips": int(plan["trips"]), "pack_rows": rl.pack_rows,
            "compiled_layers": list(depths), "flops_extrapolated": len(depths) > 1,
            "update_flops": flops}


def fake_rollout(mc, prompts, samples, prompt_len, new_tokens, seed, lengths=None):
    """A Rollout of random tokens: every row full (Tp prompt, N new tokens), or with
    `lengths` = (prompt lengths [B], completion lengths [B]) left-padded prompts and
    right-padded completions of those real lengths."""
    import jax
    import jax.numpy as jnp
    from rlvr_jax import sampling
    b = prompts * samples
    if lengths is None:
        lengths = (np.full((b,), prompt_len), np.full((b,), new_tokens))
    pmask = jnp.asarray(np.arange(prompt_len)[None] >= prompt_len - lengths[0][:, None], jnp.int32)
    mask = jnp.asarray(np.arange(new_tokens)[None] < lengths[1][:, None], jnp.int32)
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    return sampling.Rollout(
        tokens=jax.random.randint(keys[0], (b, new_tokens), 1, mc.vocab_size) * mask,
        mask=mask, logprobs=-jax.random.uniform(keys[1], (b, new_tokens)) * mask,
        lengths=jnp.asarray(lengths[1], jnp.int32),
        finished=jnp.asarray(lengths[1] < new_tokens),
        prompt_tokens=jax.random.randint(keys[2], (b, prompt_len), 1, mc.vocab_size) * pmask,
        prompt_mask=pmask)


def workload_lengths(kind: str, prompts: int, samples: int, prompt_len: int, new_tokens: int):
    """(prompt lengths [B], completion lengths [B]) of a benchmark workload: "forced" (every
    row full) or "real" (`rlvr_jax.workloads`, seed 0; a prompt's length repeated over its
    G samples)."""
    from rlvr_jax import workloads
    b = prompts * samples
    if kind == "forced":
        return np.full((b,), prompt_len), np.full((b,), new_tokens)
    prompt = np.repeat(workloads.prompt_lengths(prompts, prompt_len), samples)
    return prompt, workloads.completion_lengths(b, new_tokens)
