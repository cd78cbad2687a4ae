"""NumPy references (float64) of on-policy distillation's divergences over a whole
vocabulary (`rlvr_jax.train.distill`), written from their definitions: the reverse KL
KL(π_s‖π_t) and GKD's generalised JSD(β) = β·KL(π_t‖M) + (1 − β)·KL(π_s‖M) with
M = β·π_t + (1 − β)·π_s (Agarwal et al. 2024, eq. 2; TRL's generalized_jsd_loss), and their
gradients in the student's logits by central differences (independent of the closed forms
the library uses)."""
import numpy as np


def log_softmax_np(z):
    z = np.asarray(z, np.float64)
    z = z - np.max(z)
    return z - np.log(np.sum(np.exp(z)))


def reverse_kl_np(student_logits, teacher_logp):
    """KL(π_s‖π_t) = Σ_y π_s(y)·(log π_s(y) − log π_t(y))."""
    s = log_softmax_np(student_logits)
    return float(np.sum(np.exp(s) * (s - np.asarray(teacher_logp, np.float64))))


def jsd_np(student_logits, teacher_logp, beta):
    """GKD's JSD(β) of π_t and π_s (see the module docstring)."""
    s = np.exp(log_softmax_np(student_logits))
    t = np.exp(np.asarray(teacher_logp, np.float64))
    m = beta * t + (1.0 - beta) * s
    return float(beta * np.sum(t * np.log(t / m)) + (1.0 - beta) * np.sum(s * np.log(s / m)))


def grad_np(fn, z, h=1e-6):
    """∂fn/∂z by central differences in float64 (error O(h²) + O(1e-16 / h))."""
    z = np.asarray(z, np.float64)
    out = np.zeros_like(z)
    for i in range(z.size):
        e = np.zeros_like(z)
        e[i] = h
        out[i] = (fn(z + e) - fn(z - e)) / (2 * h)
    return out
