"""Static checks of a finding's comparisons, before any run (`reproduce.py run` refuses on a
"refuse", `report` prints every problem next to its check):

- refuse: the two arms of a check differ only in keys that act through the rewards and the
  advantage estimator, and on a sample batch of rewards those give the same advantages (up
  to the estimator's ε and float32 rounding): the arms would train identically, so the check
  cannot test anything (e.g. a backward-corrected noisy reward under GRPO's std
  normalisation, an affine map it cancels).
- flag: the arms differ in more than the check's named variable (`Check.varies`; default:
  more than one key), in keys that cannot act (clip bounds with one minibatch and one
  epoch: the PPO ratio is exactly 1), or in samples drawn per RL step.

Checks naming a warm-up arm (RL against no RL) are not audited.
"""
import dataclasses
import types
from typing import Any, Dict, List, Tuple

import numpy as np

from rlvr_jax.lab.spec import Finding
from rlvr_jax.train import workdir

# Keys that reach the update only through the rewards and the group advantage estimator.
ADVANTAGE_KEYS = frozenset({
    "reward.noise_fn_rate", "reward.noise_fp_rate", "reward.noise_seed",
    "reward.correction_fn_rate", "reward.correction_fp_rate", "rl.advantage",
    "rl.advantage_scale", "rl.advantage_eps", "rl.positive_weight", "rl.negative_weight",
    "rl.gpg_alpha"})
# Inert on-policy (one minibatch, one epoch: ratio exactly 1).
CLIP_KEYS = ("rl.eps_low", "rl.eps_high", "rl.dual_clip")
SAMPLE_GROUPS = 64  # Groups in the sample batch of `identical_advantages`.
# Advantages count as identical within this absolute tolerance: they are O(1) (|A| ≤ √G
# for binary rewards), GRPO's ε = 1e-6 moves them by ≤ ε/σ ≈ 3e-6 (σ ≥ 0.33 for a mixed
# group of 8) and float32 rounding by a few 1e-7; a real difference (another reward
# pattern, another scale) moves some advantage by ≥ 0.05.
ADVANTAGE_ATOL = 1e-4


@dataclasses.dataclass(frozen=True)
class Problem:
    """One audit finding on check `check` (its index): kind "refuse" or "flag"."""
    check: int
    kind: str
    message: str


def arm_configs(finding: Finding, a: str, b: str):
    """The configs of arms `a` and `b` at seed 0 (runner.arm_config)."""
    from rlvr_jax.lab import runner
    return runner.arm_config(finding, a, 0), runner.arm_config(finding, b, 0)


def differences(config_a, config_b) -> Dict[str, Tuple[Any, Any]]:
    """{dotted key: (value in a, value in b)} for every config key whose values differ."""
    return {k: (a, b) for k, a, b in workdir.config_diff(config_a.to_dict(),
                                                          config_b.to_dict())}


def samples_per_step(config) -> float:
    """Completions sampled per RL step: P · G, times the oversampling of dynamic sampling."""
    rl = config.rl
    return rl.num_prompts * rl.num_samples * (rl.oversample if rl.dynamic_sampling else 1.0)


def sample_advantages(config, seed: int = 0) -> np.ndarray:
    """The group advantages [P, G] `config` gives a fixed sample batch of binary rewards
    (P = SAMPLE_GROUPS groups of G = rl.num_samples, success rates spread over [0, 1]) after
    its reward noise / correction terms (`scoring.noise`)."""
    from rlvr_jax.scoring import noise, terms
    from rlvr_jax.train import algorithms, rl_config
    g = config.rl.num_samples
    rng = np.random.default_rng(seed)
    rate = rng.random((SAMPLE_GROUPS, 1))
    rewards = (rng.random((SAMPLE_GROUPS, g)) < rate).astype(np.float32).reshape(-1)
    rollout = types.SimpleNamespace(  # What the noise term reads: the tokens' hash.
        prompt_tokens=rng.integers(1, 100, (rewards.size, 6)),
        tokens=rng.integers(1, 100, (rewards.size, 8)))
    setup, x = terms.Setup(None, reward=config.reward), terms.Inputs(rollout)
    for build in (noise.noise_term, noise.correction_term):  # The run's terms, in its order.
        term = build(setup, None)
        if term is not None:
            rewards, _ = term(rewards, x)
    algo = algorithms.resolve(rl_config.from_config(config))
    valid = np.ones(SAMPLE_GROUPS, bool)
    return np.asarray(algo.group_advantages(np.asarray(rewards).reshape(SAMPLE_GROUPS, g),
                                            valid))


def identical_advantages(config_a, config_b) -> bool:
    """Whether two configs give the same advantages on the sample batch (ADVANTAGE_ATOL);
    token-level estimators (no group advantages) are never called identical."""
    from rlvr_jax.train import rl_config
    if rl_config.from_config(config_a).token_level or rl_config.from_config(config_b).token_level:
        return False
    x, y = sample_advantages(config_a), sample_advantages(config_b)
    return x.shape == y.shape and bool(np.allclose(x, y, rtol=0.0, atol=ADVANTAGE_ATOL))


def audit(finding: Finding) -> List[Problem]:
    """Every problem of `finding`'s checks (see the module docstring), in check order."""
    out: List[Problem] = []
    for i, c in enumerate(finding.checks):
        if finding.is_warmup(c.a) or finding.is_warmup(c.b):
            continue
        ca, cb = arm_configs(finding, c.a, c.b)
        diff = differences(ca, cb)
        if set(diff) <= ADVANTAGE_KEYS and identical_advantages(ca, cb):
            out.append(Problem(i, "refuse", f"{c.a} and {c.b} differ only in "
                               f"{', '.join(diff) or 'nothing'} and give identical advantages "
                               f"on a sample batch: the arms train identically"))
        on_policy = all(x.rl.minibatches == 1 and x.rl.epochs == 1 for x in (ca, cb))
        inert = [k for k in CLIP_KEYS if k in diff and on_policy]
        if inert:
            out.append(Problem(i, "flag", f"{', '.join(inert)} differ(s) but cannot act: one "
                               f"minibatch and one epoch (the PPO ratio is exactly 1)"))
        named = set(c.varies)
        extra = [k for k in diff if k not in named and k not in inert]
        if (named and extra) or (not named and len(extra) > 1):
            out.append(Problem(i, "flag", f"{c.a} and {c.b} differ in more than "
                               f"{' / '.join(c.varies) or 'one key'}: {', '.join(extra)}"))
        sa, sb = samples_per_step(ca), samples_per_step(cb)
        if sa != sb:
            out.append(Problem(i, "flag", f"samples per RL step differ: {c.a} {sa:g}, "
                               f"{c.b} {sb:g}"))
    return out
