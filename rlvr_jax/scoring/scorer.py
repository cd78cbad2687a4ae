"""The scorer of a run: its verifier and its ordered reward terms, in two stages.

    scorer = scoring.scorer_from_config(config, task, tokenizer)      # or token_scorer(...)
    host = scorer.score_host(rollout, examples, G)   # None when every term is on device
    rewards, metrics, correct = scorer.score_device(inputs, host)    # jittable

The host stage decodes the completions (the model's own tokens, `rollout.model_mask`), runs
the sample terms in one pass of the host pool (their weighted sum is the reward the others
start from; the verifier's verdict comes with it), then the host terms in order. The device
stage starts from the host stage's reward, or, with no host term, from 0 and the verifier's
on-device verdicts; then it runs the device terms in order. Whether the reward needs the
host is decided here, once, from the terms (`traceable`); nothing else asks.
"""
import functools
from typing import Any, Dict, Optional, Sequence, Tuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax.scoring import components as comp
from rlvr_jax.scoring import custom
from rlvr_jax.scoring.host import HostScorer
from rlvr_jax.scoring.host_reward import HostReward
from rlvr_jax.scoring.noise import check_noise_config
from rlvr_jax.scoring.shaping import check_length_config
from rlvr_jax.scoring.score import decode_completions, is_correct, reward_metrics, score_shared
from rlvr_jax.scoring.terms import TERMS, WHERE, Inputs, Setup, Term
from rlvr_jax.scoring.verifiers import VERIFIERS, Verifier, choose_verifier, weighted_verdicts


@flax.struct.dataclass
class HostScores:
    """The host stage's output for B completions: rewards [B] float32, verdicts [B] float32
    (the verifier's: `reward/correct` counts those >= 1), steps (`StepRewards` [B, N] or
    None) and metrics {name: scalar} (pytree leaves like the rest: a compiled step that
    takes a `HostScores` sees the same program every step, whatever their values)."""
    rewards: jax.Array
    verdicts: jax.Array
    steps: Any = None
    metrics: Dict = flax.struct.field(default_factory=dict)


class Scorer:
    """A verifier and its ordered reward terms (`scoring.terms.Term`).

    Args:
      verifier: decides correctness (`Verifier`); its `token` scores on device when no term
        needs the host.
      terms: the configured terms; sample terms first, then host terms, then device terms.
      tokenizer: decodes the completions for host terms.
      num_workers, timeout_s: the host pool of the sample terms (`HostScorer`; 0: in this
        process), started by `start` (the split RL step's construction) or the first host
        stage.
    """

    def __init__(self, verifier: Verifier, terms: Sequence[Term], *, tokenizer=None,
                 num_workers: int = 0, timeout_s: float = 5.0):
        for t in terms:
            if t.where not in WHERE:
                raise ValueError(f"term {t.name!r}: where must be one of {WHERE}, "
                                 f"got {t.where!r}")
        order = {"sample": 0, "host": 1, "device": 2}
        ranks = [order[t.where] for t in terms]
        if ranks != sorted(ranks):
            raise ValueError(f"terms run sample, host, then device terms; got "
                             f"{[(t.name, t.where) for t in terms]}")
        self.verifier, self.tokenizer, self.terms = verifier, tokenizer, tuple(terms)
        self.samples = tuple(t for t in terms if t.where == "sample")
        self.host_terms = tuple(t for t in terms if t.where == "host")
        self.device_terms = tuple(t for t in terms if t.where == "device")
        # The one question: does the reward need the host (decoded texts, a pool)?
        self.traceable = not (self.samples or self.host_terms)
        if self.traceable and verifier.token is None:
            raise ValueError("every term is on device but the verifier has no on-device "
                             "verdict (Verifier.token)")
        if not self.traceable and not self.samples:
            raise ValueError("host terms need a sample term for the verdict (the verifier)")
        self.num_workers, self.timeout_s, self._pool = num_workers, timeout_s, None

    # ------------------------------------------------------------------------- host stage

    def _pool_fn(self):
        """(fn(text, example) -> float or {"reward", name..., "correct"}, names)."""
        only = self.samples[0] if len(self.samples) == 1 else None
        if only is not None and only.name == "verifier" and only.weight == 1.0:
            return only.fn, ()  # The verifier alone: its verdict is the reward.
        correct = next((t.name for t in self.samples if t.name in comp.CORRECTNESS), None)
        reward = HostReward([(t.name, t.fn, t.weight) for t in self.samples], correct=correct,
                            correct_fn=None if correct else self.verifier.verify)
        return reward, reward.names

    def start(self) -> None:
        """Starts the host pool now (not charged to the first step's samples); a no-op when
        every term is on device."""
        if not self.traceable:
            self.host_scorer()

    def host_scorer(self) -> HostScorer:
        """The sample terms' `HostScorer` (started on the first call)."""
        if self._pool is None:
            fn, names = self._pool_fn()
            preload = self.verifier.preload + tuple(
                "math_verify" for t in self.samples if t.name == "math_verify")
            self._pool = HostScorer(fn, num_workers=self.num_workers, timeout_s=self.timeout_s,
                                    preload=tuple(dict.fromkeys(preload)), names=names)
        return self._pool

    def score_host(self, rollout, examples: Sequence, group_size: int
                   ) -> Optional[HostScores]:
        """The host stage of B = P'·G completions of the P' `examples` (each repeated G =
        `group_size` times here); None when every term is on device."""
        if self.traceable:
            return None
        texts = decode_completions(self.tokenizer, rollout.tokens, rollout.model_mask)
        exs = [ex for ex in examples for _ in range(group_size)]
        values, parts, info = score_shared(self.host_scorer(), texts, exs)
        verdicts = parts.pop("correct", None)
        verdicts = np.asarray(values if verdicts is None else verdicts, np.float32)
        metrics = dict(reward_metrics(verdicts, parts))
        metrics["reward/host_errors"] = jnp.asarray(info["errors"], jnp.float32)
        metrics["reward/host_timeouts"] = jnp.asarray(info["timeouts"], jnp.float32)
        x = Inputs(rollout, verdicts=verdicts, group_size=group_size, texts=texts, examples=exs)
        rewards, steps, term_metrics = self.apply_host_terms(jnp.asarray(values), x)
        return HostScores(rewards, jnp.asarray(verdicts), steps, dict(metrics, **term_metrics))

    def apply_host_terms(self, rewards, x: Inputs):
        """(rewards [B], per-step rewards or None, metrics) after the host terms in order,
        from the sample terms' `rewards` [B]; `x.texts` / `x.examples` set."""
        steps, metrics = None, {}
        for term in self.host_terms:
            if term.per_step:
                steps, m = term.fn(rewards, x)
            else:
                rewards, m = term.fn(rewards, x)
            metrics.update(m)
        return rewards, steps, metrics

    # ------------------------------------------------------------------------- device stage

    def score_device(self, x: Inputs, host: Optional[HostScores] = None, *,
                     with_steps: bool = False):
        """(rewards [B], metrics, correct [B] bool): the device terms in order from the host
        stage's reward (its metrics included), or (host None) from 0 and the verifier's on-device verdicts of the
        model's own tokens (`rollout.model_mask`). Jittable.

        A per-step device term (the turn rewards of `scoring.turns`) returns `StepRewards`
        [B, N]: summed into each row's reward, or, `with_steps`, kept per step and returned
        as a 4th element (their sum over the terms, or None without one)."""
        if host is None:
            if not self.traceable:
                raise ValueError("this scorer has sample or host terms: give score_device the "
                                 "host stage (score_host)")
            verdicts = self.verifier.token(x.rollout.tokens, x.rollout.model_mask, x.answers)
            metrics, rewards = reward_metrics(verdicts), jnp.zeros_like(verdicts)
        else:
            verdicts, metrics, rewards = host.verdicts, dict(host.metrics), host.rewards
        x = x.replace(verdicts=verdicts, host_steps=x.host_steps if host is None else host.steps)
        steps = None
        for term in self.device_terms:
            if term.per_step:
                s, m = term.fn(rewards, x)
                steps = s if steps is None else steps.replace(
                    values=steps.values + s.values, ends=steps.ends | s.ends)
                if not with_steps:
                    rewards = rewards + jnp.sum(jnp.where(s.ends, s.values, 0.0), axis=1)
            else:
                rewards, m = term.fn(rewards, x)
            metrics.update(m)
        if with_steps:
            return rewards, metrics, is_correct(verdicts), steps
        return rewards, metrics, is_correct(verdicts)

    def learn(self, x: Inputs, correct):
        """(reward_params, metrics) after each online-learned device term's step (a term fn
        with an `update` attribute: the implicit PRM, `scoring.implicit_prm`) on the rollout
        `x` and its verdicts correct [B] bool; `x.reward_params` and {} without one.
        Jittable."""
        params, metrics = x.reward_params, {}
        for term in self.device_terms:
            update = getattr(term.fn, "update", None)
            if update is not None:
                params, m = update(params, x, correct)
                metrics.update(m)
        return params, metrics

    def close(self) -> None:
        """Stops the host pool's workers, if any."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


# ----------------------------------------------------------------------------- from config

def _names(text: str) -> Tuple[str, ...]:
    return tuple(p.strip() for p in str(text).split(",") if p.strip())


def _components(text: str) -> Tuple[str, ...]:
    """The component names of `reward.components`; a user function (`PATH.py:fn`,
    `module:fn`: `scoring.custom`) is registered and named after its function."""
    return tuple(custom.register_custom(n) if custom.is_custom(n) else n for n in _names(text))


def parse_components(reward) -> Tuple[Tuple[str, float], ...]:
    """((name, weight), ...) of a `config.reward` that `check_reward_config` accepts; ()
    without components."""
    names = _components(reward.components)
    weights = [float(w) for w in _names(reward.weights)] or [1.0] * len(names)
    return tuple(zip(names, weights))


def check_reward_config(reward) -> None:
    """Raises ValueError, naming the field (`reward.components: ...`), for a bad
    `config.reward`: an unknown verifier or component, a repeated component, weights that
    are not numbers or not one per component, `token` mixed with host components,
    num_workers < 0, timeout_s <= 0. Cheap: no compilation, no device."""
    if reward.verifier not in VERIFIERS:
        raise ValueError(f"reward.verifier: unknown verifier {reward.verifier!r}; known: "
                         f"{', '.join(VERIFIERS)}")
    names = _components(reward.components)
    known = [n for n, kind in TERMS.items() if kind.component]
    for name in names:
        if name in TERMS and not TERMS[name].component:
            raise ValueError(f"reward.components: {name!r} is not a component (it is set by "
                             "other fields; docs/verifiers.md)")
        if name not in known:
            raise ValueError(f"reward.components: unknown component {name!r}; known: "
                             f"{', '.join(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"reward.components: a component is repeated in {reward.components!r}")
    weights = _names(reward.weights)
    try:
        [float(w) for w in weights]
    except ValueError:
        raise ValueError(f"reward.weights: not a comma-separated list of numbers: "
                         f"{reward.weights!r}") from None
    if weights and len(weights) != len(names):
        raise ValueError(f"reward.weights: {len(weights)} weights for {len(names)} components "
                         f"({', '.join(names) or 'none'})")
    device = {n for n in names if TERMS[n].where == "device"}
    if "token" in names and set(names) - device:
        raise ValueError("reward.components: 'token' scores on device and combines only with "
                         f"device terms ({', '.join(sorted(device))}); got "
                         f"{reward.components!r} (use 'task' for the host)")
    comp.check_reward_model(reward, names)
    comp.check_judge(reward, names)
    comp.check_prm(reward, names)
    if names and not set(names) - {"overlong", "length_penalty"}:
        raise ValueError(f"reward.components: {reward.components!r} alone is no reward; add "
                         "a correctness or format component")
    if reward.num_workers < 0:
        raise ValueError(f"reward.num_workers: must be >= 0, got {reward.num_workers}")
    if reward.timeout_s <= 0:
        raise ValueError(f"reward.timeout_s: must be > 0, got {reward.timeout_s}")
    check_noise_config(reward)
    check_length_config(reward)


def run_verifier(reward, names: Sequence[str], task, tokenizer) -> Verifier:
    """The verifier that decides correctness in a run with `config.reward` and its component
    `names` (`parse_components`): `choose_verifier(reward.verifier, ...)` without components;
    else the first correctness component's; with device components only, the task's
    on-device one; else `reward.verifier`'s host one."""
    if not names:
        return choose_verifier(reward.verifier, task, tokenizer)
    correct = next((n for n in names if n in comp.CORRECTNESS), None)
    if correct:
        return comp.correctness_verifier(correct, task, tokenizer)
    if all(TERMS[n].where == "device" for n in names):
        return comp.on_device_verifier(task, tokenizer)
    name = reward.verifier  # E.g. format or label-free only: its host verifier decides.
    return choose_verifier("task" if name in ("auto", "token") and task is not None else name,
                           task, None)


def build_terms(setup: Setup, weights: Dict[str, float]) -> tuple:
    """The configured `Term`s: each kind's builder with `weights[name]` (None when
    `reward.components` does not name it), sample, then host, then device terms, each in
    registry order (a term registered later, e.g. a user's function, joins its kind)."""
    out = []
    for name, kind in TERMS.items():
        weight = weights.get(name)
        fn = kind.build(setup, weight)
        if fn is not None:
            out.append(Term(name, kind.where, fn, 1.0 if weight is None else float(weight),
                            kind.per_step))
    order = ("sample", "host", "device")  # The stages' order (`Scorer`).
    return tuple(sorted(out, key=lambda t: order.index(t.where)))


def _verdict_term(verifier: Verifier, *, host: bool, weight: float, log: bool) -> Term:
    """The verifier as a term: its host `verify` (a sample term) or its on-device verdicts."""
    if host:
        return Term("verifier", "sample", verifier.verify, weight)
    return Term("token", "device", functools.partial(weighted_verdicts, weight=weight, log=log))


def assemble(setup: Setup, weights: Dict[str, float], **scorer_kwargs) -> Scorer:
    """A `Scorer` of `setup.verifier` and the registered terms `weights` lists (and those
    configured by other fields), with the verifier itself as a term where no listed
    correctness term stands for it: on the host when any term is, else on device."""
    built = build_terms(setup, weights)
    host = any(t.where != "device" for t in built) or setup.verifier.token is None
    if not any(t.where == "sample" or t.name == "token" for t in built):
        listed = bool(setup.components)  # Listed terms only: the verifier measures (weight 0).
        verdict = _verdict_term(setup.verifier, host=host, weight=0.0 if listed else 1.0,
                                log=listed)
        built = (verdict,) + built
    return Scorer(setup.verifier, built, tokenizer=setup.tokenizer, **scorer_kwargs)


def token_scorer(verifier, *, rl=None, max_new_tokens: int = 0, num_samples: int = 1,
                 reward_model=None, env=None) -> Scorer:
    """The scorer of a jittable token verifier fn(tokens [B, N], mask [B, N], answers [B])
    -> [B] (weight 1), with `rl.overlong_*`, a reward model (`RewardModel`, its weight) and
    an environment's rewards when given: every term on device."""
    v = Verifier(verify=None, answer_key=None, token=verifier)
    setup = Setup(v, rl=rl, reward_model=reward_model, env=env, num_samples=num_samples,
                  max_new_tokens=max_new_tokens)
    return assemble(setup, {})


def scorer_from_config(config, task, tokenizer, *, rl, reward_model=None,
                       env=None) -> Scorer:
    """The scorer of a run from `config.reward` (verifier, components and weights, noise,
    host pool) and `rl` (its `RLConfig`: overlong, process rewards), with the run's
    `scoring.RewardModel` and multi-turn environment (or None). Raises ValueError naming
    the field."""
    check_reward_config(config.reward)
    pairs = parse_components(config.reward)
    names = tuple(n for n, _ in pairs)
    setup = Setup(run_verifier(config.reward, names, task, tokenizer), reward=config.reward,
                  rl=rl, task=task, tokenizer=tokenizer, reward_model=reward_model, env=env,
                  num_samples=config.rl.num_samples,
                  max_new_tokens=config.sampling.max_new_tokens,
                  components=names)
    scorer = assemble(setup, dict(pairs), num_workers=config.reward.num_workers,
                      timeout_s=config.reward.timeout_s)
    if rl is not None and rl.device_steps and rl.process and not any(
            t.per_step for t in scorer.device_terms):
        raise ValueError("rl.process_source: 'learned' needs a learned step scorer in "
                         "reward.components (prm, implicit_prm)")
    return scorer
