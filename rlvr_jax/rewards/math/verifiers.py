"""The two math verifiers, ``(completion, reference) -> float``, and :func:`get_math_verifier`.

``math_verify_reward`` shares our extraction (``<answer>`` over ``<think>``, retractions,
negations, several boxes) and normalisation with ``math_reward``, keeps the answer-choice,
unit, percent and decimal-approximation conventions of the rule verifier, and leaves the
rest of the equivalence to math-verify, whose own timeouts stay on unless the caller turns
them off (``timeout_s=None``): on the main thread they use ``SIGALRM``; from any other
thread the call runs in a one-worker :class:`~rlvr_jax.rewards.pool.RewardPool` (main thread
there, plus a kill deadline).
"""
from __future__ import annotations

import contextlib
import functools
import math
import re
import signal
import threading
import time

from rlvr_jax.rewards.math import choices as _choices
from rlvr_jax.rewards.math import equiv as _equiv
from rlvr_jax.rewards.math import forms as _forms
from rlvr_jax.rewards.math import normalize as _norm
from rlvr_jax.rewards.math import parse as _parse
from rlvr_jax.rewards.math import units as _units
from rlvr_jax.rewards.math.extract import (_answer_region, _box_spans, extract_answer,
                                           final_list, live_boxes)

MV_TIMEOUT_S = 3           # default per parse and per comparison (SIGALRM: whole seconds)
THREAD_POOL_TIMEOUTS = 5   # the helper process is killed after this many times timeout_s


def math_reward(completion: str, reference, *, fallback_last_number: bool = True,
                several_boxed: str = "reject") -> float:
    """1.0 when the completion's final answer equals ``reference``, else 0.0 (rule verifier).

    See :func:`extract_answer` for the extraction order and :func:`answers_equivalent`
    for equivalence.
    """
    pred = _prediction(completion, reference, fallback_last_number=fallback_last_number,
                       several_boxed=several_boxed)
    return 1.0 if _decided_by_rules(completion, pred, reference) else 0.0


def _decided_by_rules(completion: str, pred, reference) -> bool:
    """The rule verdict: equivalence, or a letter and a value matched through the options
    the completion lists (:mod:`.choices`)."""
    return (_equiv.answers_equivalent(pred, reference)
            or _choices.via_options(completion, pred, reference))


def _prediction(completion: str, reference, **kw) -> str | None:
    """:func:`extract_answer`; several live boxes that disagree count as one list answer only
    when the reference is a list (each solution boxed separately), else as no answer."""
    pred = extract_answer(completion, **kw)
    if pred is None and kw.get("several_boxed", "reject") == "reject" and reference is not None:
        boxes = live_boxes(completion)
        parts = boxes if len(boxes) >= 2 else [] if boxes else final_list(completion)
        if len(parts) >= 2 and _list_reference_of(reference, len(parts)):
            return ", ".join(parts)  # Each solution boxed, or "so $x = -3$ or $x = 2$."
    return pred


def _list_reference_of(reference, count: int) -> bool:
    """Whether `reference` is a set or point of `count` elements."""
    try:
        ref = _equiv.structure(_norm.normalize_answer(reference))
    except (ValueError, RecursionError):
        return False
    return ref[0] in ("set", "point") and len(ref[2] if ref[0] == "point" else ref[1]) == count


# --------------------------------------------------------------------------- math-verify

def math_verify_available() -> bool:
    """Whether the optional ``math-verify`` package can be imported."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return False
    return True


def _import_math_verify():
    try:
        import math_verify
    except ImportError as e:
        raise ImportError(
            "math_verify_reward needs the optional 'math-verify' package: "
            "pip install 'rlvr_jax[math]' (or math-verify==0.9.0); "
            "math_reward is the dependency-free rule verifier.") from e
    import logging
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return math_verify


def _to_latex(s: str) -> str:
    """A normalised answer in LaTeX that math-verify reads (matrices back to ``pmatrix``,
    ``1.2e-3`` → ``1.2\\times10^{-3}``)."""
    s = re.sub(r"\\matrix\{(.*)\}$", lambda m: "\\begin{pmatrix}" + m.group(1).replace(
        ";", "\\\\").replace("&", " & ") + "\\end{pmatrix}", s)
    s = re.sub(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([-+]?\d+)(?![\w.])", r"\1\\times10^{\2}", s)
    return s.replace("%", "\\%")


def _rule_decides(a: str, b: str) -> bool:
    """Whether the rule verifier's conventions decide this pair: answer-choice letters, a unit
    on both sides, a percentage, a decimal approximation of a non-terminating value, or one of
    the written forms of :func:`_written_forms`."""
    if _norm.split_choice(a) or _norm.split_choice(b):
        return True
    if _units.split_unit(a)[1] and _units.split_unit(b)[1]:
        return True
    if a.rstrip().endswith("%") or b.rstrip().endswith("%"):
        return True
    if _written_forms(a, b):
        return True
    if re.search(r"\d\.\d", a) and "," not in a + b:
        try:
            pa, pb = _parse.parse_expr(a), _parse.parse_expr(b)
            return not (_parse.variables(pa) or _parse.variables(pb))
        except (_parse.ParseError, ValueError, RecursionError):
            return False
    return False


def _written_forms(a: str, b: str) -> bool:
    """The conventions for the answers people write (docs/verifiers.md, issue #48) that
    math-verify reads otherwise: decimal commas, ratios, named points, tuples vs sets,
    set-builder / ``\\mathbb{R}`` / ``x \\neq a``, ``i, j, k`` vectors, engineering ``j``,
    degrees, word answers."""
    sa, sb = _equiv.structure(a), _equiv.structure(b)
    kinds = {sa[0], sb[0]}
    braced = a.startswith("\\{") or b.startswith("\\{")
    if kinds & {"ratio", "point"} or (kinds == {"set", "interval"} and braced):
        return True  # a tuple is never a set written as one
    for s, other in ((a, sb), (b, sa)):
        value, unit = _units.split_unit(s)
        if (_forms.decimal_comma(value) or _forms.set_rewrite(s) or _equiv.is_text(s)
                or (unit and _units.angle_scale(unit))):
            return True
        if re.search(r"(?<![a-zA-Z\\])[jk](?![a-zA-Z])", s) and other[0] in ("atom", "interval"):
            return True
    return False


def _math_verify_core(completion: str, reference, timeout_s: int | None) -> float:
    mv = _import_math_verify()
    pred = _prediction(completion, reference)
    if pred is None or reference is None:
        return 0.0  # no committed answer: nothing, negated, alternatives, retracted
    a, b = _norm.normalize_answer(pred), _norm.normalize_answer(reference)
    if not a or not b:
        return 0.0
    short = max(len(a), len(b)) <= _parse.MAX_ANSWER_CHARS
    if short and _rule_decides(a, b):
        return 1.0 if _decided_by_rules(completion, pred, reference) else 0.0
    region, tagged = _answer_region(completion)
    preds = [f"${_to_latex(_units.split_unit(a)[0])}$"] if len(a) <= _parse.MAX_ANSWER_CHARS else []
    if not tagged and not _box_spans(region):
        preds.append(region[-4000:])  # no box and no tag: also math-verify's own extraction
    # The fallback parse and the last parse start within these (no limit: timeouts off).
    fallback_by, last_by = (timeout_s / 3, timeout_s + 0.5) if timeout_s else (math.inf, math.inf)
    start = time.monotonic()
    with _outer_alarm_kept() if timeout_s else contextlib.nullcontext():
        try:
            gold = mv.parse(f"${_to_latex(_units.split_unit(b)[0])}$",
                            parsing_timeout=timeout_s) if short else []
            if not gold and time.monotonic() - start < fallback_by:  # e.g. a worked reference
                gold = mv.parse(str(reference)[-4000:], parsing_timeout=timeout_s)
            for text in preds:  # the region only when math-verify cannot read our answer
                if not gold or time.monotonic() - start > last_by:
                    break
                got = mv.parse(text, parsing_timeout=timeout_s)
                if got:
                    return 1.0 if mv.verify(gold, got, timeout_seconds=timeout_s) else 0.0
            return 0.0
        except Exception:  # noqa: BLE001 - math-verify's TimeoutException and parse failures
            return 0.0


@contextlib.contextmanager
def _outer_alarm_kept():
    """math-verify cancels any ``SIGALRM`` timer when its own ends; re-arm a caller's timer
    (e.g. pytest-timeout) with the time it had left."""
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()
    try:
        yield
    finally:
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, left - (time.monotonic() - start)))


_THREAD_POOLS: dict = {}  # timeout_s -> its helper RewardPool
_THREAD_POOL_LOCK = threading.Lock()


def _score_off_main_thread(completion: str, reference, timeout_s: int) -> float:
    """math-verify from a non-main thread: one call in a helper process (one per
    ``timeout_s``), whose main thread keeps math-verify's ``SIGALRM`` timeouts, killed after
    :data:`THREAD_POOL_TIMEOUTS` times ``timeout_s``."""
    from rlvr_jax.rewards.pool import RewardPool
    with _THREAD_POOL_LOCK:
        pool = _THREAD_POOLS.get(timeout_s)
        if pool is None:
            import atexit
            pool = _THREAD_POOLS[timeout_s] = RewardPool(
                functools.partial(_math_verify_core, timeout_s=timeout_s), num_workers=1,
                timeout_s=THREAD_POOL_TIMEOUTS * timeout_s, preload=("math_verify",))
            atexit.register(pool.close)
        rewards, _ = pool.score([completion], [reference])
    return float(rewards[0])


def math_verify_reward(completion: str, reference, *,
                       timeout_s: int | None = MV_TIMEOUT_S) -> float:
    """1.0 when ``math-verify`` judges the completion's final answer equal to ``reference``.

    The answer is extracted and normalised as in :func:`math_reward`; answer-choice letters,
    units on both sides, percentages and decimal approximations follow the rule verifier's
    conventions; the rest is math-verify's ``parse``/``verify`` with its timeouts on. Off the
    main thread the call runs in a helper process.

    Args:
      completion: the model's response.
      reference: the reference answer (or a worked solution ending in one).
      timeout_s: math-verify's timeout per parse and per comparison, whole seconds (its
        ``SIGALRM`` timer takes no fractions), on the clock: under load a slow parse can
        time out and score 0. The reference as written is parsed only when the normal form
        failed within a third of it, and no parse starts after ``timeout_s + 0.5``; off the
        main thread the helper process is killed after :data:`THREAD_POOL_TIMEOUTS` times
        it. ``None``: no timeout, no budget and no decision on the clock, on any thread (the
        call then runs in the calling thread: no signals needed); a pathological input
        (``9^{9^{9^{9}}}``) can hang the caller, so bound the call yourself (e.g. a
        :class:`~rlvr_jax.rewards.pool.RewardPool` with its ``timeout_s``).
    """
    if not isinstance(completion, str):
        raise ValueError(f"completion must be a str, got {type(completion).__name__}")
    if timeout_s is not None and (type(timeout_s) is not int or timeout_s < 1):
        raise ValueError(f"timeout_s must be a whole number of seconds >= 1 or None, "
                         f"got {timeout_s!r}")
    if timeout_s is not None and threading.current_thread() is not threading.main_thread():
        _import_math_verify()
        return _score_off_main_thread(completion, reference, timeout_s)
    return _math_verify_core(completion, reference, timeout_s)


def get_math_verifier(name: str = "rule"):
    """``"rule"`` → :func:`math_reward`; ``"math_verify"`` → :func:`math_verify_reward`
    (ImportError with install hint when missing); ``"auto"`` → math-verify when installed,
    else the rule verifier (with a warning)."""
    if name == "rule":
        return math_reward
    if name == "math_verify":
        _import_math_verify()
        return math_verify_reward
    if name == "auto":
        if math_verify_available():
            return math_verify_reward
        import warnings
        warnings.warn("math-verify is not installed; using the rule verifier (math_reward).")
        return math_reward
    raise ValueError(f"unknown math verifier {name!r}; expected 'rule', 'math_verify' or 'auto'")
