"""On-policy distillation: a frozen teacher scores the student's sampled tokens inside the
RL step, and its per-token divergence enters the advantages (docs/algorithms.md).

    rl.teacher = "runs/quickstart"     # a scripts/train.py workdir, or an HF directory
    rl.teacher_coef = 1.0              # w of the per-token term
    rl.teacher_divergence = "reverse_kl" | "jsd"  (rl.teacher_jsd_beta: GKD's β)

Per valid token t of a sampled completion y (s = log π_student(y_t | ·), u = log π_teacher):

    reverse_kl:  d_t = s − u                                  (Thinking Machines, Tinker)
    jsd:         d_t = (1 − β)·(s − m),  m = log(β·e^u + (1 − β)·e^s)   (GKD's JSD(β),
                 M = β·π_teacher + (1 − β)·π_student)

and the advantage of token t gains −w·d_t (stop-gradient, no baseline, no discount). Both are
exact score-function forms: Σ_y π_s(y)·d(y)·∇log π_s(y) is ∇KL(π_s‖π_t) for reverse_kl and
∇JSD(β) for jsd (the constant of ∂f/∂π_s vanishes since Σ_y ∇π_s(y) = 0), so the policy
gradient of the term is the divergence's gradient in expectation over the student's samples.

The teacher's parameters are frozen in `TrainState.teacher_params` (a `Teacher`: the
parameters and their static `ModelConfig`, so the teacher may be another size of the same
tokenizer), placed like the policy's, in the compute dtype, never checkpointed (read again
from `rl.teacher` on resume).
"""
from typing import Any, Dict, Optional, Tuple

import flax.struct
import jax
import jax.numpy as jnp

from rlvr_jax.models import ModelConfig
from rlvr_jax.numerics import masked_mean
from rlvr_jax.train import frozen, microbatch, objective, reference
from rlvr_jax.train.errors import user_input
from rlvr_jax.train.experience import Experience

DIVERGENCES = ("reverse_kl", "jsd")
Metrics = Dict[str, jax.Array]


@flax.struct.dataclass
class Teacher:
    """A frozen teacher: `params` (a pytree) and its `config` (static)."""
    params: Any
    config: ModelConfig = flax.struct.field(pytree_node=False)


def token_divergence(student_logp: jax.Array, teacher_logp: jax.Array, *,
                     divergence: str = "reverse_kl", beta: float = 0.5) -> jax.Array:
    """d_t of the module docstring, elementwise ([B, N] -> [B, N] float32)."""
    s, u = student_logp.astype(jnp.float32), teacher_logp.astype(jnp.float32)
    if divergence == "reverse_kl":
        return s - u
    if divergence == "jsd":
        m = jnp.logaddexp(jnp.log(beta) + u, jnp.log1p(-beta) + s)
        return (1.0 - beta) * (s - m)
    raise ValueError(f"teacher_divergence must be one of {DIVERGENCES}, got {divergence!r}")


def distill_advantages(advantages: jax.Array, d: jax.Array, mask: jax.Array,
                       coef: float) -> jax.Array:
    """Advantages [B] or [B, N] plus −coef·d_t on the valid tokens: [B, N]."""
    a = advantages if advantages.ndim == 2 else jnp.broadcast_to(advantages[:, None],
                                                                 mask.shape)
    return (a - coef * jax.lax.stop_gradient(d)) * mask.astype(a.dtype)


def teacher_stage(state, exp: Experience, student_logp, *, rl, model_config: ModelConfig,
                  temperature: float) -> Tuple[Experience, Metrics]:
    """The teacher's log-probs of the B sampled completions (one no-gradient pass per
    micro-batch, like the reference's), the divergence into `exp.advantages`, and metrics:
    distill/reverse_kl (per-token mean of s − u over valid tokens), distill/divergence,
    distill/teacher_logp.

    student_logp: [B, N] the policy's log-probs of the sampled tokens (None: computed here).
    """
    if state.teacher_params is None:
        raise ValueError("rl.teacher needs state.teacher_params (rl_state loads it)")
    teacher = state.teacher_params

    def logprobs_of(params, config):
        return microbatch.scoring_passes(lambda p, x: objective.logprobs_of(
            p, x, model_config=config, temperature=temperature, chunk=rl.logprob_chunk,
            with_entropy=False), exp, rl, params)[0]

    if student_logp is None:
        student_logp = logprobs_of(state.params, model_config)
    teacher_logp = logprobs_of(reference.to_device_memory(teacher.params), teacher.config)
    d = token_divergence(student_logp, teacher_logp, divergence=rl.teacher_divergence,
                         beta=rl.teacher_jsd_beta)
    exp = exp.replace(advantages=distill_advantages(exp.advantages, d, exp.mask,
                                                    rl.teacher_coef))
    mask = exp.mask.astype(jnp.float32)
    return exp, {"distill/reverse_kl": masked_mean(student_logp - teacher_logp, mask),
                 "distill/divergence": masked_mean(d, mask),
                 "distill/teacher_logp": masked_mean(teacher_logp, mask)}


# ----------------------------------------------------------------------------- loading

def teacher_of(rl, student: ModelConfig, placer) -> Optional[Teacher]:
    """`load_teacher(rl.teacher, ...)` (None without rl.teacher); a problem is a one-line
    `ConfigError` naming rl.teacher."""
    if not rl.teacher:
        return None
    with user_input("rl.teacher"):
        return load_teacher(rl.teacher, student, placer)


def load_teacher(path: str, student: ModelConfig, placer) -> Teacher:
    """The `Teacher` of `path` (any frozen LM `train/frozen.py` reads: a scripts/train.py
    workdir or a Hugging Face model directory, of the student's tokenizer), placed like the
    policy's by `placer`, in the student's compute dtype. ValueError (one line) otherwise."""
    config = frozen.lm_config(path, student.vocab_size, dtype=student.dtype,
                              param_dtype=student.param_dtype, what="rl.teacher")
    params = frozen.lm_params(path, config, placer)
    return Teacher(reference.compute_dtype_copy(params, jnp.dtype(config.compute_dtype)),
                   config)
