"""Turn rewards of multi-turn episodes as per-step device terms (docs/multiturn.md,
"Turn-level credit"): each returns `StepRewards` [B, N] with turn k's reward at the last
model token of turn k (`advantages.turn_ends`). With `rl.turn_advantage = "none"` the scorer
sums them into the episode's reward; otherwise the update credits them per turn.

- `turn_env`: the environment's reward of each turn (`Episodes.turn_reward`, e.g.
  guess_number's `env.turn_reward`), × its weight. Listing it moves the environment's
  rewards from the `env` term (which then adds nothing) to the turns.
- `info_gain` (IGPO): log p(answer | context after turn k and its observation) −
  log p(answer | context before turn k) under the policy, teacher-forced on the device
  (`multiturn.credit`), × its weight, for the open turns (`credit.open_turns`: not the
  last turn, nor guess_number's winning guess, whose credit is the outcome); the answer
  is the reference answer written in the environment's `answer_format` (``[24]`` for
  guess_number, `` #### 56088`` for the calculators).
"""
import jax.numpy as jnp

from rlvr_jax.advantages import turn as turn_lib
from rlvr_jax.multiturn import credit
from rlvr_jax.scoring.process import StepRewards


def place_turns(r, turn_ids, mask):
    """StepRewards [B, N]: per-turn rewards r [B, K] at each turn's last model token."""
    k = r.shape[1]
    ids = jnp.where(turn_ids < k, turn_ids, -1)  # Turns past K get nothing.
    ends = turn_lib.turn_ends(ids, mask) & (ids >= 0)
    values = turn_lib.turns_to_tokens(r, ids, mask)
    return StepRewards(values=jnp.where(ends, values, 0.0), ends=ends)


def _turn_metrics(name, steps, mask):
    per_episode = jnp.sum(steps.values, axis=1)
    turns = jnp.maximum(jnp.sum(steps.ends, axis=1), 1)
    return {f"turn/{name}": jnp.mean(per_episode),
            f"turn/{name}_per_turn": jnp.mean(per_episode / turns)}


def turn_env_term(setup, weight):
    """The per-step device term `turn_env` (None unless `reward.components` names it)."""
    if weight is None:
        return None
    if setup.env is None:
        raise ValueError("reward.components: turn_env needs a multi-turn environment "
                         "(env.name)")

    def fn(rewards, x):
        del rewards
        ro = x.rollout
        steps = place_turns(weight * x.episodes.turn_reward, ro.turn_ids, ro.model_mask)
        return steps, _turn_metrics("env_reward", steps, ro.model_mask)
    return fn


def _answer_ids(setup):
    """(digit ids, prefix ids, suffix ids, minus id) of the env's answer format, checked
    against the tokenizer's own encoding of a few answers."""
    fmt = getattr(setup.env, "answer_format", None)
    if not fmt or setup.tokenizer is None:
        raise ValueError(f"reward.components: info_gain needs an environment with an "
                         f"answer_format (guess_number, calculator, calculator_host), got "
                         f"{type(setup.env).__name__}")
    tok = setup.tokenizer
    ids = {}
    for i, text in enumerate(tok.token_texts()):
        ids.setdefault(text, i)
    digits = tuple(ids.get(str(d), -1) for d in range(10))
    prefix, suffix = fmt.split("{}")
    pre = tuple(tok.encode(prefix)) if prefix else ()
    suf = tuple(tok.encode(suffix)) if suffix else ()
    for a in (0, 7, 24, 408, 56088):
        want = tok.encode(fmt.format(a))
        got = list(pre) + [digits[int(c)] for c in str(a)] + list(suf)
        if -1 in digits or got != list(want):
            raise ValueError(f"reward.components: info_gain writes the answer digit by digit; "
                             f"this tokenizer encodes {fmt.format(a)!r} otherwise")
    return digits, pre, suf, ids.get("-", -1)


def info_gain_term(setup, weight):
    """The per-step device term `info_gain` (None unless `reward.components` names it)."""
    if weight is None:
        return None
    if setup.env is None:
        raise ValueError("reward.components: info_gain needs a multi-turn environment "
                         "(env.name)")
    digits, pre, suf, minus = _answer_ids(setup)
    k = setup.env.max_turns
    is_call = bool(getattr(setup.env, "answer_is_call", False))

    def fn(rewards, x):
        del rewards
        ro = x.rollout
        ids, ids_mask = credit.answer_tokens(x.answers, digit_ids=digits, prefix=pre,
                                             suffix=suf, minus_id=minus)
        logp = credit.answer_logprobs(x.params, ro, ids, ids_mask, num_turns=k,
                                      model_config=x.model_config)
        num_open = credit.open_turns(x.episodes.turns, x.verdicts, answer_is_call=is_call)
        gain = credit.info_gain(logp, num_open)
        steps = place_turns(weight * gain, ro.turn_ids, ro.model_mask)
        metrics = _turn_metrics("info_gain", steps, ro.model_mask)
        metrics["turn/answer_logp_prompt"] = jnp.mean(logp[:, 0])
        metrics["turn/answer_logp_open_end"] = jnp.mean(
            jnp.take_along_axis(logp, num_open[:, None], axis=1))
        return steps, metrics
    return fn
