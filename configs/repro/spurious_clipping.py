"""Random rewards and the clipping bias ("Spurious Rewards: Rethinking Training Signals in
RLVR", Shao et al. 2025; "Exploration v.s. Exploitation: Rethinking RLVR through Clipping,
Entropy, and Spurious Reward", 2025): with rewards that carry no information (Bernoulli(0.5)
whatever the answer), PPO's clipped ratio is biased toward the policy's already likely
tokens once updates go off-policy (several minibatches per batch), so entropy falls and
pass@1 can rise; without clipping, or on-policy (one update per batch: the ratio is 1 and
the clip never acts), the random rewards teach nothing.

A setting where the mechanism can act (lab v2 (b), issue #40): the quickstart's set-up
(1-2 digit addition, 400 warm-up steps, then 100 RL steps of GRPO, 16 prompts x 8, no KL,
learning rate 1e-4) with every reward replaced by Bernoulli(0.5) (`reward.noise_fn_rate` =
`reward.noise_fp_rate` = 0.5, seeded by the rollout's tokens).

Arms (paired by seed; only the named variables differ):
- on_policy: one minibatch per batch, clip 0.2 / 0.2 (the clip never acts).
- clip: 8 minibatches per batch (8 optimizer steps on the same samples), clip 0.2 / 0.2.
- no_clip: 8 minibatches, clip range 1000 / 1000 (the ratio is never clipped).

Checks (chosen before any run): (1) the clip arm's token entropy at the end of training is
below no_clip's by at least m = 0.025 nats; (2) clip's pass@1 is above no_clip's by at least
one point; (3) clip's pass@1 is above on_policy's by at least one point. Gate: the clip acts
in the clip arm (its `loss/clip_frac_high`, the share of tokens the upper clip cut, averages
at least 0.005 over training), else the three checks are not testable here.

    python scripts/reproduce.py run spurious_clipping
"""
from rlvr_jax.lab import Check, Finding, Gate
from rlvr_jax.lab.common import EVAL, M_ENTROPY, M_PASS, QUICK, SCHEDULE, base_config

_OFF = {"rl.minibatches": 8}
_VARIES = ("rl.minibatches", "rl.eps_low", "rl.eps_high")


def _base():
    config = base_config("grpo")
    config.reward.noise_fn_rate = 0.5   # Every reward Bernoulli(0.5) whatever the answer.
    config.reward.noise_fp_rate = 0.5
    return config


def finding():
    return Finding(
        name="spurious_clipping",
        paper="Spurious Rewards: Rethinking Training Signals in RLVR; Exploration v.s. "
              "Exploitation: Rethinking RLVR through Clipping, Entropy, and Spurious Reward",
        claim="Under random rewards, off-policy PPO updates with clipping lower the entropy "
              "and raise pass@1 relative to the same updates without clipping and to "
              "on-policy updates.",
        base=_base,
        arms={"on_policy": {},
              "clip": dict(_OFF),
              "no_clip": dict(_OFF, **{"rl.eps_low": 1000.0, "rl.eps_high": 1000.0})},
        checks=[Check("train:train/entropy", "clip", "no_clip", "<", margin=M_ENTROPY,
                      note="clipping lowers the entropy under random rewards",
                      varies=("rl.eps_low", "rl.eps_high")),
                Check("pass@1", "clip", "no_clip", ">", margin=M_PASS,
                      note="clipping turns random rewards into a pass@1 gain",
                      varies=("rl.eps_low", "rl.eps_high")),
                Check("pass@1", "clip", "on_policy", ">", margin=M_PASS,
                      note="off-policy clipped updates beat on-policy ones", varies=_VARIES)],
        gates=[Gate("the clip acts", "train_avg:loss/clip_frac_high", "clip", ">=", 0.005)],
        eval=EVAL,
        quick=QUICK,
        seeds=5,
        schedule=SCHEDULE,
        curves=("rollout/reward_mean", "reward/correct", "train/entropy",
                "loss/clip_frac_high", "loss/clip_frac_low"),
        notes="The papers' gains are on Qwen2.5-Math, whose pretraining already favours "
              "correct code-style reasoning; here the warm-up's likely answers are right "
              "about 45% of the time, so a bias toward them can lift pass@1 only that far.",
    )
