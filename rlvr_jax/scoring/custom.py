"""Your own reward function, named in a config: `reward.components=PATH.py:function` or
`package.module:function` (README, "Bring your own reward").

The function has a task verifier's signature, `fn(completion_text, example) -> float`
(`example.prompt` and `example.answer` are the data row's fields; `example.meta` holds
`data.metadata_fields`). It is a sample term (`scoring.terms`): scored per completion in the
host pool, weighted by `reward.weights`, logged as `reward/<function>`. The pool's workers
import it by its name (`CustomReward` pickles the spec, not the function), so it works with
`reward.num_workers` > 0.

The on-device variant is a function marked with `@scoring.device_reward`: jittable,
`fn(tokens [B, N] int32, mask [B, N] int32, answers [B] int32) -> [B] float32` (the
signature of a task's token verifier: the completions' tokens, 1 on the model's own tokens,
the integer reference answers or 0 where a row has none). It is a device term, scored inside
the compiled RL step (no host stage, no pool); a non-finite score counts 0 and is logged as
`reward/<function>_nonfinite`.

Problems are one-line `ValueError`s naming the component: a file or module that is missing
or fails to import, no such function, a wrong signature, and (when it runs) a return value
that is not a finite number (a device function: one that does not trace to one score per
completion, checked when the scorer is built).
"""
import functools
import importlib
import importlib.util
import inspect
import math
import os
from typing import Callable, Dict

from rlvr_jax.scoring.terms import TERMS, register


def is_custom(name: str) -> bool:
    """Whether component `name` names a function (`PATH.py:fn` or `module:fn`)."""
    return ":" in name


def load(spec: str) -> Callable:
    """The function `spec` names, its signature checked."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr.isidentifier():
        raise ValueError(f"reward.components: {spec!r} is not PATH.py:function or "
                         "package.module:function")
    try:
        if where.endswith(".py"):
            if not os.path.isfile(where):
                raise ValueError(f"reward.components: {spec}: no such file: {where}")
            module_spec = importlib.util.spec_from_file_location(
                f"_rlvr_reward_{abs(hash(os.path.abspath(where)))}", where)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ValueError:
        raise
    except Exception as e:  # The user's module failed: say how, in one line.
        first = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"reward.components: {spec}: cannot be imported: "
                         f"{type(e).__name__}: {first}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"reward.components: {spec}: {where} has no function {attr!r}")
    args = ("tokens", "mask", "answers") if _on_device(fn) else ("completion_text", "example")
    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        raise ValueError(f"reward.components: {spec}: must take ({', '.join(args)}); "
                         f"has {attr}{inspect.signature(fn)}") from None
    return fn


def device_reward(fn: Callable) -> Callable:
    """Marks `fn` as an on-device reward for `reward.components=PATH.py:fn`: jittable,
    fn(tokens [B, N] int32, mask [B, N] int32, answers [B] int32) -> [B] float32. Returns
    `fn` itself (still callable as is)."""
    fn.rlvr_device_reward = True
    return fn


def _on_device(fn) -> bool:
    return getattr(fn, "rlvr_device_reward", False) is True


_LOADED: Dict[str, Callable] = {}  # spec -> function, once per process (a pool worker too).


class CustomReward:
    """Picklable `fn(text, example) -> float` of a named user function: only `spec`
    travels to a pool worker, which imports the function once (its first call)."""

    def __init__(self, spec: str):
        self.spec = spec

    def __call__(self, text: str, example) -> float:
        fn = _LOADED.get(self.spec)
        if fn is None:
            fn = _LOADED[self.spec] = load(self.spec)
        value = fn(text, example)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            raise ValueError(f"reward.components: {self.spec} returned {value!r}, not a finite "
                             "number")
        return float(value)


def _term(setup, weight, *, spec: str):
    del setup
    return None if weight is None else CustomReward(spec)


def _check_device_shape(fn, spec: str, n: int) -> None:
    """A one-line error unless fn maps [2, n] tokens and mask and [2] answers to [2]."""
    import jax  # Lazily: sample terms need no JAX in a pool worker.
    rows = jax.ShapeDtypeStruct((2, n), "int32")
    try:
        out = jax.eval_shape(fn, rows, rows, jax.ShapeDtypeStruct((2,), "int32"))
    except Exception as e:  # The user's function failed to trace: say how, in one line.
        first = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"reward.components: {spec}: cannot be traced on [B, N] tokens: "
                         f"{type(e).__name__}: {first}") from None
    if getattr(out, "shape", None) != (2,):
        raise ValueError(f"reward.components: {spec} returned shape "
                         f"{getattr(out, 'shape', type(out).__name__)} for B=2 completions, "
                         "not (2,): one score per completion")


def _device_term(setup, weight, *, spec: str):
    """weight · fn(tokens, model mask, answers) added on device, its mean logged."""
    if weight is None:
        return None
    fn, name = _LOADED[spec], spec.rpartition(":")[2]
    _check_device_shape(fn, spec, max(1, setup.max_new_tokens))

    def term(rewards, x):
        import jax.numpy as jnp
        score = jnp.asarray(fn(x.rollout.tokens, x.rollout.model_mask, x.answers))
        finite = jnp.isfinite(score)
        score = jnp.where(finite, score, 0.0).astype(jnp.float32)
        nonfinite = jnp.sum(~finite).astype(jnp.float32)
        return rewards + weight * score, {f"reward/{name}": jnp.mean(score),
                                          f"reward/{name}_nonfinite": nonfinite}
    return term


def register_custom(spec: str) -> str:
    """Loads (checks) `spec` and registers it as a sample term (or, marked with
    `device_reward`, a device term) named after its function; returns that name.
    Registering the same spec again is a no-op."""
    name = spec.rpartition(":")[2]
    kind = TERMS.get(name)
    if kind is not None:
        if getattr(kind.build, "keywords", {}).get("spec") == spec:
            return name
        raise ValueError(f"reward.components: {spec}: its name {name!r} is already a "
                         "component; rename the function")
    fn = _LOADED[spec] = load(spec)
    if _on_device(fn):
        register(name, functools.partial(_device_term, spec=spec), "device")
    else:
        register(name, functools.partial(_term, spec=spec), "sample")
    return name
