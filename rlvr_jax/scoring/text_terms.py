"""What the split path scores from the decoded texts besides the verifier's verdicts:
label-free components (`scoring.label_free`) and process rewards (`scoring.process`).

    text_scoring = host_text_scoring(verifier, tokenizer, rl, num_samples=G)   # or None
    shapers, steps, metrics = text_scoring(texts, examples, rollout)
"""
import functools
from typing import Callable, Optional

from rlvr_jax.scoring.label_free import label_free_shapers
from rlvr_jax.scoring.process import step_rewards_on_host


def _score(texts, examples, rollout, *, verifier, tokenizer, rl, num_samples):
    shapers = label_free_shapers(verifier.label_free, texts, rollout,
                                 answer_key=verifier.answer_key, tokenizer=tokenizer,
                                 num_samples=num_samples)
    steps, metrics = None, {}
    if rl.process:
        steps, metrics = step_rewards_on_host(
            texts, examples, rollout.tokens, rollout.mask, step_scores=verifier.step_scores,
            tokenizer=tokenizer, verify=verifier.verify if rl.process_gate else None)
    return shapers, steps, metrics


def host_text_scoring(verifier, tokenizer, rl, *, num_samples: int) -> Optional[Callable]:
    """fn(texts [B], examples [B], rollout) -> (shapers, `StepRewards` or None, metrics)
    for `make_host_rl_step`, or None when the run has neither label-free components nor
    process rewards (`rl.process_weight > 0`).

    Raises ValueError (naming `rl.process_weight`) when process rewards are asked of a
    verifier without step checkers.
    """
    if rl.process and verifier.step_scores is None:
        raise ValueError("rl.process_weight: process rewards need a task with step checkers "
                         "(data.source=task)")
    if not (rl.process or verifier.label_free):
        return None
    return functools.partial(_score, verifier=verifier, tokenizer=tokenizer, rl=rl,
                             num_samples=num_samples)
