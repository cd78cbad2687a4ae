"""A finding: a small declarative spec of arms, config overrides, seeds, metrics, claim, verdict.

A config file under `configs/repro/NAME.py` defines `finding() -> Finding`. The runner
(`rlvr_jax.lab.runner`) trains every arm × seed from that seed's shared warm-up, evaluates
pass@k on held-out prompts; `rlvr_jax.lab.stats` turns the per-seed metrics into paired
differences and `rlvr_jax.lab.verdict` into the pre-registered (v1) and v2 verdicts from
`checks`, `gates`, `schedule` and `prereg`.
"""
import dataclasses
import glob
import importlib.util
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

WARMUP = "warm-up"  # The arm name reserved for "no RL: the shared warm-up checkpoint itself".
EXPECTATIONS = (">", "<", ">=", "<=", "~")


@dataclasses.dataclass(frozen=True)
class Check:
    """One comparison of the verdict: the paired per-seed difference `metric(a) - metric(b)`.

    expect: ">" (a beats b), "<" (a is below b), ">=" (a is not worse by `margin` or more),
      "<=" (a is not better by `margin` or more), "~" (a matches b within ±margin).
    margin: m, the smallest effect of interest, declared before any run: the margin of
      ">=" / "<=" / "~", and for ">" / "<" the size below which a difference counts as "no
      effect" (TOST). A finding's checks must have m > 0 (`Finding`).
    varies: the config keys this comparison is about (the "named variable"); `lab.audit`
      flags arms that differ in any other key (default: flag when more than one differs).
    v1 (`stats.judge`, the pre-registered rule): supported / contradicted / undecided from
    the 95% seed-bootstrap interval. v2 (`lab.verdict`): paired t-tests with Holm across the
    finding's checks: supported / contradicted / no effect ≥ m / undecided / not testable.
    """
    metric: str
    a: str
    b: str
    expect: str
    margin: float = 0.0
    note: str = ""
    varies: Tuple[str, ...] = ()

    def __post_init__(self):
        if self.expect not in EXPECTATIONS:
            raise ValueError(f"Check.expect must be one of {EXPECTATIONS}, got {self.expect!r}")
        if self.margin < 0:
            raise ValueError(f"Check.margin must be >= 0, got {self.margin}")


GATE_OPS = (">=", "<=")


@dataclasses.dataclass(frozen=True)
class Gate:
    """A mechanism (manipulation) gate, declared with the finding: the mean over seeds of
    `metric` on `arm` (minus that of `minus` when given, e.g. the trace error pass@1 −
    cot_pass@1) must be `op` `threshold`; otherwise the checks it guards (`checks`: their
    indices in Finding.checks; empty: all) are "not testable here", naming `name`."""
    name: str
    metric: str
    arm: str
    op: str
    threshold: float
    minus: str = ""
    checks: Tuple[int, ...] = ()

    def __post_init__(self):
        if self.op not in GATE_OPS:
            raise ValueError(f"Gate.op must be one of {GATE_OPS}, got {self.op!r}")


@dataclasses.dataclass(frozen=True)
class Prereg:
    """What was registered before the first run, when it differs from the current spec:
    `checks` (empty: the current ones) judged on the first `seeds` seeds (0: all) with
    `rule` ("v1": the findings written before lab v2; "v2": a finding registered under v2,
    whose pre-registered verdict is its v2 verdict) give the pre-registered verdict; `note`
    discloses what changed, and when."""
    checks: Sequence[Check] = ()
    seeds: int = 0
    note: str = ""
    rule: str = "v1"

    def __post_init__(self):
        if self.rule not in ("v1", "v2"):
            raise ValueError(f"Prereg.rule must be 'v1' or 'v2', got {self.rule!r}")


EVAL_PROMPTS = ("stream", "all")
CRITERION_STREAM = 1_000_003  # The warm-up criterion's prompts: test stream seed + 1 + this.


@dataclasses.dataclass(frozen=True)
class EvalSpec:
    """Held-out evaluation of every arm × seed: `num_samples` completions per prompt at
    `temperature`, pass@k for each k in `ks` with the unbiased estimator (k <= num_samples),
    plus mean@n and maj@k; the per-prompt values of the checked metrics are stored too (for
    the seed × prompt bootstrap of the report).

    prompts: "stream" — `num_prompts` prompts drawn from the seed's own test stream (each
      seed its own draw); "all" — the task's whole fixed test split, the same prompts for
      every seed, each once (`lab.heldout.whole_test_split`: small enumerable splits only,
      e.g. 1–2 digit addition's ~1000 problems; `num_prompts` is then unused).
    """
    num_prompts: int = 200
    num_samples: int = 64
    ks: Tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    temperature: float = 1.0
    batch_size: int = 50  # Prompts per compiled sampling call.
    prompts: str = "stream"

    def __post_init__(self):
        if any(not 1 <= k <= self.num_samples for k in self.ks):
            raise ValueError(f"EvalSpec.ks must lie in [1, num_samples={self.num_samples}]")
        if self.prompts not in EVAL_PROMPTS:
            raise ValueError(f"EvalSpec.prompts must be one of {EVAL_PROMPTS}, got "
                             f"{self.prompts!r}")
        if self.prompts == "stream" and self.num_prompts % self.batch_size:
            raise ValueError("EvalSpec.num_prompts must be a multiple of batch_size")

    def key(self) -> Dict[str, Any]:
        """What a stored pair's evaluation is identified by (`runner.pair_path`): the fields,
        less `prompts` at its default (pairs stored before it existed keep their path)."""
        d = dict(self.__dict__)
        if d["prompts"] == "stream":
            del d["prompts"]
        return d


@dataclasses.dataclass(frozen=True)
class WarmupCriterion:
    """The shared warm-up trained to a criterion instead of a fixed step count: every
    `every` supervised steps, greedy pass@1 on `num_prompts` held-out prompts (the test
    split's stream at seed + 1 + CRITERION_STREAM: not the evaluation's draw, though with
    `EvalSpec(prompts="all")` they lie inside the evaluated split); the warm-up stops at the
    first check with pass@1 ≥ `until_pass1`, else after `max_steps` (0: the config's
    sft.steps). Each seed's stopping step is stored with its results and reported."""
    until_pass1: float
    every: int = 50
    max_steps: int = 0
    num_prompts: int = 128

    def __post_init__(self):
        if not 0.0 <= self.until_pass1 <= 1.0:
            raise ValueError(f"WarmupCriterion.until_pass1 must lie in [0, 1], got "
                             f"{self.until_pass1}")
        if self.every < 1 or self.max_steps < 0 or self.num_prompts < 1:
            raise ValueError("WarmupCriterion: every >= 1, max_steps >= 0, num_prompts >= 1")


@dataclasses.dataclass(frozen=True)
class Finding:
    """A paper's claim tested at this scale.

    Attributes:
      name: the command-line name (the config file's stem).
      paper: the paper's title as published.
      claim: the claim in one or two sentences, as tested here.
      base: fn() -> the locked ml_collections config every arm starts from (its warm-up
        settings — model, data, sft, seed — make the shared warm-up).
      arms: {arm name: {dotted config key: value}}; `WARMUP` (or any arm with
        "rl.steps": 0) is the warm-up checkpoint itself, evaluated without RL.
      checks: the comparisons the verdict is made of (`lab.verdict`).
      seeds: training seeds 0..seeds-1 (every arm of seed s starts from warm-up s): the
        first stage of `schedule`.
      schedule: the seed counts of the looks, fixed in advance (e.g. (5, 10)): after each
        look the finding stops unless its v2 verdict is "inconclusive"; each look tests at
        alpha / len(schedule) (Bonferroni over looks). Empty: one look at `seeds`.
      alpha: the family-wise error of the v2 verdict (Holm across the checks).
      gates: mechanism gates (`Gate`); a failed one makes its checks "not testable here".
      prereg: the pre-registered checks / seed count, when the current ones differ.
      eval: the pass@k evaluation.
      warmup: a `WarmupCriterion` (None: the config's fixed sft.steps).
      curves: training metrics (metrics.jsonl keys) kept per seed for the dynamics plot;
        each also gives the metrics "train:KEY" (its mean over the last 10% of the RL
        steps) and "train_avg:KEY" (over all of them), which checks may compare between
        RL arms (`runner.train_metrics`).
      quick: overrides for `--quick` (applied to every arm; plus `quick_eval`, `quick_seeds`).
      notes: what this scale can and cannot test (printed into results.json).
      reference: the arm the pass@k plot subtracts (default: the first arm).
    """
    name: str
    paper: str
    claim: str
    base: Callable[[], Any]
    arms: Dict[str, Dict[str, Any]]
    checks: Sequence[Check]
    seeds: int = 3
    schedule: Tuple[int, ...] = ()
    alpha: float = 0.05
    gates: Sequence[Gate] = ()
    prereg: Prereg = Prereg()
    eval: EvalSpec = EvalSpec()
    warmup: Optional[WarmupCriterion] = None
    curves: Sequence[str] = ("rollout/reward_mean", "train/entropy")
    quick: Dict[str, Any] = dataclasses.field(default_factory=dict)
    quick_eval: Optional[EvalSpec] = None
    quick_seeds: int = 2
    notes: str = ""
    reference: str = ""

    def __post_init__(self):
        for c in self.checks:
            for arm in (c.a, c.b):
                if arm not in self.arms:
                    raise ValueError(f"finding {self.name}: check names unknown arm {arm!r}")
            if not _metric_known(c.metric, self.eval, self.curves):
                raise ValueError(f"finding {self.name}: check metric {c.metric!r} is not "
                                 f"measured (pass@k / maj@k / cot_pass@k for k in "
                                 f"{self.eval.ks}, mean@n, train:KEY / train_avg:KEY for KEY "
                                 f"in curves)")
            if _is_train_metric(c.metric) and (self.is_warmup(c.a) or self.is_warmup(c.b)):
                raise ValueError(f"finding {self.name}: check {c.metric!r} names a warm-up arm, "
                                 f"which has no RL training metrics")
            if c.margin <= 0:
                raise ValueError(f"finding {self.name}: check {c.metric} {c.a} {c.expect} "
                                 f"{c.b} declares no smallest effect of interest (margin > 0)")
        for g in self.gates:
            if g.arm not in self.arms:
                raise ValueError(f"finding {self.name}: gate {g.name!r} names unknown arm "
                                 f"{g.arm!r}")
            for m in (g.metric, g.minus):
                if m and not _metric_known(m, self.eval, self.curves):
                    raise ValueError(f"finding {self.name}: gate {g.name!r} metric {m!r} is "
                                     f"not measured")
            if any(not 0 <= i < len(self.checks) for i in g.checks):
                raise ValueError(f"finding {self.name}: gate {g.name!r} guards a check index "
                                 f"outside 0..{len(self.checks) - 1}")
        if self.schedule and (self.schedule[0] != self.seeds or list(self.schedule) != sorted(
                set(self.schedule))):
            raise ValueError(f"finding {self.name}: schedule must increase and start at seeds="
                             f"{self.seeds}, got {self.schedule}")
        if self.reference and self.reference not in self.arms:
            raise ValueError(f"finding {self.name}: reference {self.reference!r} is not an arm")
        if self.seeds < 1:
            raise ValueError("Finding.seeds must be >= 1")

    @property
    def stages(self) -> Tuple[int, ...]:
        """The seed counts of the looks (`schedule`, or just `seeds`)."""
        return tuple(self.schedule) or (self.seeds,)

    @property
    def reference_arm(self) -> str:
        return self.reference or next(iter(self.arms))

    def is_warmup(self, arm: str) -> bool:
        return arm == WARMUP or self.arms[arm].get("rl.steps", None) == 0

    def quick_version(self) -> "Finding":
        """The `--quick` smoke version: tiny warm-up / RL / evaluation, `quick_seeds` seeds;
        checks on metrics the quick evaluation lacks are mapped to its largest k; a warm-up
        criterion is checked every step on 8 prompts up to the quick sft.steps. Arms that
        differ only in what `quick` overrides (e.g. their RL steps) become one pair."""
        ev = self.quick_eval or EvalSpec(num_prompts=8, num_samples=4, ks=(1, 2, 4),
                                         batch_size=8)
        top = max(ev.ks)
        checks = [dataclasses.replace(c, metric=_clip_metric(c.metric, top)) for c in self.checks]
        # The quick overrides win (one warm-up for all, a few RL steps even for a long arm);
        # a warm-up arm stays one.
        arms = {a: {**o, **self.quick, **({"rl.steps": 0} if self.is_warmup(a) else {})}
                for a, o in self.arms.items()}
        gates = [dataclasses.replace(g, metric=_clip_metric(g.metric, top),
                                     minus=g.minus and _clip_metric(g.minus, top))
                 for g in self.gates]
        prereg = dataclasses.replace(self.prereg, seeds=0, checks=[
            dataclasses.replace(c, metric=_clip_metric(c.metric, top))
            for c in self.prereg.checks])
        warmup = self.warmup and dataclasses.replace(self.warmup, every=1, max_steps=0,
                                                     num_prompts=8)
        return dataclasses.replace(self, arms=arms, checks=checks, seeds=self.quick_seeds,
                                   eval=ev, schedule=(), gates=gates, prereg=prereg,
                                   warmup=warmup)


def _is_train_metric(metric: str) -> bool:
    return metric.startswith(("train:", "train_avg:"))


def _metric_known(metric: str, ev: EvalSpec, curves: Sequence[str] = ()) -> bool:
    if metric == f"mean@{ev.num_samples}":
        return True
    if _is_train_metric(metric):
        return metric.partition(":")[2] in curves
    name, _, k = metric.partition("@")
    return name in ("pass", "maj", "cot_pass") and k.isdigit() and int(k) in ev.ks


def _clip_metric(metric: str, top: int) -> str:
    name, _, k = metric.partition("@")
    return f"{name}@{min(int(k), top)}" if k.isdigit() else metric


def repro_dir() -> str:
    """configs/repro/ of this checkout."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                        "repro")


def names(directory: Optional[str] = None) -> list:
    """The findings' names (the config files' stems), sorted."""
    paths = glob.glob(os.path.join(directory or repro_dir(), "*.py"))
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in paths
                  if not os.path.basename(p).startswith("_"))


def load(name: str, directory: Optional[str] = None) -> Finding:
    """The `Finding` of configs/repro/NAME.py (its `finding()`); unknown names raise
    ValueError listing the known ones."""
    path = os.path.join(directory or repro_dir(), f"{name}.py")
    if not os.path.exists(path):
        raise ValueError(f"unknown finding {name!r}; known: {', '.join(names(directory))}")
    spec = importlib.util.spec_from_file_location(f"repro_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    finding = module.finding()
    if finding.name != name:
        raise ValueError(f"{path}: finding().name is {finding.name!r}, expected {name!r}")
    return finding
