"""A frozen scoring model (reward model, PRM, judge) held in the compute dtype
(`train.reference.frozen_scorer_params`, issue 36): half the bytes, the same scores."""
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax.models import init_params, presets
from rlvr_jax.models import reward_model as rm_lib
from rlvr_jax.models.value import trunk_hidden
from rlvr_jax.train import reference
from tests import numerics

U_BF16 = 2.0 ** -8  # bfloat16's unit roundoff (8 significand bits).


def test_frozen_scorer_is_held_in_bf16_and_scores_as_stored():
    config = presets.get("tiny", dtype="bfloat16", param_dtype="float32")
    stored = rm_lib.init_reward_params(config, jax.random.PRNGKey(0))
    held = reference.frozen_scorer_params(stored, config)
    dtypes = {jax.tree_util.keystr(k): x.dtype for k, x in
              jax.tree_util.tree_leaves_with_path(held)}
    # Kernels, biases and the embedding in bf16; norm scales and the [D, 1] score head (both
    # read in float32 by the forward) as stored.
    assert dtypes["['trunk']['layers']['mlp']['up_kernel']"] == jnp.bfloat16
    assert dtypes["['trunk']['embed']"] == jnp.bfloat16
    assert {d for k, d in dtypes.items() if "scale" in k or "score" in k} == {jnp.dtype("float32")}
    held_bytes, stored_bytes = (sum(x.nbytes for x in jax.tree.leaves(t)) for t in (held, stored))
    assert held_bytes < 0.6 * stored_bytes
    # A judge (an LM tree) the same way; a float32 model is returned as it is.
    lm = jax.eval_shape(lambda: init_params(config, jax.random.PRNGKey(0)))
    lm_held = jax.eval_shape(lambda p: reference.frozen_scorer_params(p, config), lm)
    assert lm_held["layers"]["attn"]["q_kernel"].dtype == jnp.bfloat16
    f32 = config.replace(dtype="float32")
    assert reference.frozen_scorer_params(stored, f32) is stored

    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(1, config.vocab_size, (4, 12)), jnp.int32)
    mask = jnp.asarray(np.arange(12)[None] >= rng.integers(0, 4, (4, 1)), jnp.int32)
    scores = jax.jit(lambda p: (rm_lib.reward_forward(p, tokens, mask, config=config),
                                rm_lib.token_scores(p, tokens, mask, config=config)))
    (want, want_t), (got, got_t) = scores(stored), scores(held)
    # The forward rounds those leaves to bf16 before every use, so both sides compute with the
    # same values (bit for bit here). Where XLA drops a float32 → bf16 → float32 cast pair
    # (excess precision), the stored side reads a weight unrounded: a relative u_bf16 on each
    # of the 4 weight matrices per layer and the embedding on the longest chain, and on each
    # of its ~11 bf16-rounded activations per layer (+ embedding, final norm) the roundings
    # may then differ; two sides: twice γ of those, relative to the score's terms Σ|h||w|.
    hidden = np.abs(np.asarray(trunk_hidden(stored["trunk"], tokens, mask, config=config),
                               np.float64))
    terms = hidden @ np.abs(np.asarray(stored["score"]["kernel"], np.float64))  # [B, T, 1]
    atol = 2 * numerics.gamma(15 * config.n_layers + 3, U_BF16) * float(terms.max())
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=atol)
    np.testing.assert_allclose(np.asarray(got_t), np.asarray(want_t), rtol=0, atol=atol)
