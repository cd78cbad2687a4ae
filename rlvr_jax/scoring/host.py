"""Host scoring of decoded completions: in-process, or in a `RewardPool` of processes.

    scorer = HostScorer(fn, num_workers=2, timeout_s=5.0)    # fn(text, example) -> reward
    verdicts, components, info = scorer(texts, examples)      # [B], {name: [B]}, counts
    scorer.close()

`fn` returns a float, or ``{"reward": float, name: float, ...}`` (e.g.
`rlvr_jax.scoring.host_reward.HostReward`, whose ``"correct"`` entry is the verdict that
`reward/correct` counts). With ``num_workers > 0`` the samples run in a
`rlvr_jax.rewards.RewardPool` (``forkserver`` processes): a sample that raises, returns a
non-finite value, kills its worker or runs past ``timeout_s`` scores 0 and is counted
(``info["errors"]``, ``info["timeouts"]``); the run goes on. With ``num_workers = 0`` the
samples run one after another in this process: a raising sample scores 0 and is counted,
but nothing bounds a sample's time.
"""
import math
import sys
from typing import Callable, Dict, Sequence, Tuple

import numpy as np


class HostScorer:
    """Scores completion texts [B] against their examples [B] with `fn` on the host.

    Args:
      fn: ``fn(completion_text, example) -> float | {"reward": float, name: float}``;
        picklable (module-level, a bound method of a picklable object, or a
        ``functools.partial``) when ``num_workers > 0``.
      num_workers: 0 scores in this process; n > 0 in a `RewardPool` of n processes,
        started here (their start-up is not charged to any sample).
      timeout_s: per-sample wall-clock limit in the pool.
      preload: modules each pool worker imports before it is ready (e.g. "math_verify").
      names: component names `fn` reports (always present in the output, 0 where a
        sample failed).
    """

    def __init__(self, fn: Callable, *, num_workers: int = 0, timeout_s: float = 5.0,
                 preload: Sequence[str] = (), names: Sequence[str] = ()):
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        self.fn, self.num_workers, self.timeout_s = fn, int(num_workers), float(timeout_s)
        self.names, self.pool = tuple(names), None
        self.warned = False
        if self.num_workers:
            from rlvr_jax.rewards.pool import RewardPool
            self.pool = RewardPool(fn, num_workers=self.num_workers, timeout_s=self.timeout_s,
                                   preload=tuple(preload))

    def __call__(self, texts: Sequence[str], examples: Sequence
                 ) -> Tuple[np.ndarray, Dict[str, np.ndarray], Dict]:
        """(verdicts float32 [B], components {name: float32 [B]}, info) where info has
        ``errors``, ``timeouts`` (ints) and ``error_messages`` (the first five)."""
        if len(texts) != len(examples):
            raise ValueError(f"{len(texts)} completions but {len(examples)} examples")
        if self.pool is not None:
            verdicts, info = self.pool.score(list(texts), list(examples))
            components = info.pop("components")
        else:
            verdicts, components, info = self._serial(texts, examples)
        for name in self.names:
            components.setdefault(name, np.zeros((len(texts),), np.float32))
        if info["error_messages"] and not self.warned:  # Once per run: the metric counts.
            self.warned = True
            print(f"warning: host reward failures (scored 0, counted in reward/host_errors "
                  f"and reward/host_timeouts): {info['error_messages'][:3]}", file=sys.stderr)
        return verdicts, components, info

    def _serial(self, texts, examples):
        n = len(texts)
        verdicts = np.zeros((n,), np.float32)
        components: Dict[str, np.ndarray] = {}
        errors, messages = 0, []
        from rlvr_jax.rewards.pool import split_output  # Lazily: the pool is host-only.
        for i, (text, example) in enumerate(zip(texts, examples)):
            try:  # (reward, components): the `RewardPool` convention.
                value, parts = split_output(self.fn(text, example))
                if not math.isfinite(value):
                    raise ValueError(f"non-finite reward {value}")
            except Exception as e:  # noqa: BLE001 - a failing verifier is a 0 reward
                errors += 1
                messages.append(f"sample {i}: {type(e).__name__}: {str(e)[:200]}")
                continue
            verdicts[i] = value
            for k, v in parts.items():
                components.setdefault(k, np.zeros((n,), np.float32))[i] = v
        return verdicts, components, {"errors": errors, "timeouts": 0,
                                      "error_messages": messages[:5]}

    def close(self) -> None:
        """Stops the pool's workers (a no-op in-process)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
