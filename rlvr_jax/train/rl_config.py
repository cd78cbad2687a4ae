"""`RLConfig`: the static hyperparameters of one RL update, their defaults and their checks.

This dataclass is the one place where the update's defaults live: `config.rl` in
`train/config.py` takes every field (and its default) from it, and the presets in
`train/algorithms.py` only change fields. `from_config(config)` builds it back from a config.
"""
import dataclasses

from rlvr_jax import losses
from rlvr_jax.advantages import GPG_ALPHAS, TREE_MODES

SEQUENCE_ADVANTAGES = ("grpo", "rloo", "grpo_passk", "ngrpo", "w_reinforce", "gpg")
# Estimators that give per-token advantages [B, N] (the others give one per sequence).
TOKEN_ADVANTAGES = ("reinforce_pp", "reinforce_pp_baseline", "gae")
ADVANTAGES = SEQUENCE_ADVANTAGES + TOKEN_ADVANTAGES
POLICY_LOSSES = ("ppo_clip", "gspo", "cispo", "reinforce", "sapo", "dppo", "dcpo", "nft",
                 "luspo")
# Losses with one advantage per sequence (they cannot take process / token advantages).
SEQUENCE_LOSSES = ("gspo", "luspo", "nft")
PROCESS_FORMS = ("sum", "min")
TURN_ADVANTAGES = ("none", "group", "gae")
TREE_ADVANTAGES = ("none",) + TREE_MODES
# Fields where 0 means "off".
_ZERO_IS_OFF = ("value_clip", "dual_clip", "kl_target", "tis_cap")


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """Static hyperparameters of the RL update (hashable: a static jit argument).

    The defaults are GRPO's estimator and loss without a KL term (the "grpo" preset adds
    β = 0.04). Formulas and the verl / TRL names are in docs/algorithms.md.

    Attributes:
      num_prompts: P, the groups that enter the update. Without dynamic sampling
        it must equal the batch's prompts; with it, the batch holds more.
      advantage: "grpo" | "rloo" | "grpo_passk" | "ngrpo" | "w_reinforce" | "gpg"
        (sequence level) or "reinforce_pp" | "reinforce_pp_baseline" | "gae" (token level).
      advantage_scale: for grpo: "group" (GRPO), "batch" (Lite-PPO), "none" (Dr.GRPO).
      advantage_eps: the std's epsilon.
      gpg_alpha: GPG's scale α = B / n with n = "paper": samples in groups with
        non-zero advantage; "verl": samples with non-zero reward.
      gamma, lam: discount and GAE λ (reinforce_pp uses gamma; gae both).
      whiten_advantages: gae: whiten the advantages over the valid tokens of the batch.
      value_clip: gae: value clipping range around the old values (0: no clipping).
      positive_weight, negative_weight: scale positive / negative advantages
        (negative-sample reinforcement: positive_weight=0); with advantage="w_reinforce"
        they are the +λ of right and −μ of wrong samples (NSR: 0 / 1, PSR: 1 / 0).
      policy_loss: "ppo_clip" | "gspo" | "cispo" | "reinforce" | "sapo" | "dppo" | "dcpo" |
        "nft" | "luspo" (`losses.<name>`; nft through `losses.nft_from_advantages`).
      eps_low, eps_high: clip range (CISPO: eps_high is the weight cap; DPPO: the divergence
        thresholds, verl's clip_ratio_low/high; DCPO: the ε of its probability-dependent
        bounds).
      dual_clip: dual-clip constant c > 1 (ppo_clip; 0: off).
      sapo_tau_pos, sapo_tau_neg: SAPO's gate temperatures for A > 0 / A ≤ 0 (verl tau_pos /
        tau_neg, TRL sapo_temperature_pos / _neg).
      dppo_divergence: "tv" | "binary_kl" (verl loss_mode dppo_tv / dppo_kl).
      dppo_ratio_cap: DPPO's truncation of the stop-gradient ratio (verl clip_ratio_c).
      dcpo_ratio_cap: the largest upper bound of DCPO's dynamic clip.
      nft_negative_weight, nft_eps, nft_prompt_weight: NFT's weight of the wrong answers, the
        floor of its negative ratio and its prompt weight ("none" | "negative_rate" |
        "grpo"); NFT reads the group accuracy from Dr.GRPO advantages of binary rewards.
      aggregation: how per-token losses become one number (`losses.aggregate`):
        "token-mean" (DAPO), "seq-mean-token-mean" (GRPO), "seq-mean-token-sum",
        "seq-mean-token-sum-norm" (Dr.GRPO: a constant length).
      kl_coef, kl_kind: KL(π‖π_ref) term β and its estimator ("k1", "k2", "k3", "k1+",
        "k3+"); β = 0 disables the reference model.
      kl_in_reward: put the (stop-gradient) KL in the reward instead of the loss: summed
        over the sequence for sequence-level estimators, −β·KL_t per token for reinforce_pp
        and gae.
      kl_target, kl_horizon: with kl_in_reward, adapt β towards a target per-token KL
        (`losses.adaptive_kl_coef`; 0: fixed β); β then lives in `TrainState.kl_coef`.
      entropy_coef: entropy bonus coefficient (loss −= coef · H).
      entropy_keep_fraction: < 1 keeps only that fraction of highest-entropy
        tokens in the policy loss ("Beyond the 80/20 rule").
      entropy_mask_invert: train on the complement instead: the valid tokens outside
        the top entropy_keep_fraction (0.2: the bottom 80%; the paper's ablation).
      entropy_mask_random: keep a uniformly random entropy_keep_fraction of each
        minibatch's valid tokens instead of the highest-entropy ones (the control arm of
        "Beyond the 80/20 rule": is it the entropy or the sparsity?).
      epochs, minibatches, microbatches: μ passes over the batch, each split
        into optimizer steps, each accumulated over micro-batches.
      dynamic_sampling: keep groups with non-zero reward variance first (DAPO).
      overlong_buffer, overlong_penalty: DAPO soft overlong shaping (0 disables).
      tis_cap: truncated importance sampling cap on trainer/sampler ratios (0: off).
      logprob_chunk: sequence chunk of the log-prob computation.
      pack_length: > 0 packs the update's sequences (prompt + completion at their real
        lengths) first-fit-decreasing into rows of this many tokens (at least Tp + N), with
        segment ids and restarting positions (`train/packing.py`); 0: left-padded rows.
      pack_rows: packed rows per micro-batch (with pack_length > 0): the update runs as
        many micro-batches of pack_rows × pack_length tokens as the packing needs (at most
        ⌈b / pack_rows⌉ for b sequences), so no batch overflows; the no-gradient
        scoring passes are packed the same way. 0 (default): an eighth of the rows that
        hold one unpacked micro-batch's tokens, ⌈(B / minibatches / microbatches) ·
        (Tp + N) / pack_length / 8⌉ (less memory than an unpacked micro-batch; full rows
        take 8 trips per micro-batch, short ones fewer).
      process_weight: α of the process (step) rewards from the task's step checkers, each
        on the token that ends its step (0: outcome only; > 0 scores on the host). Token
        estimators (reinforce_pp, gae) add them to the per-token rewards; the others add
        α × the group-normalised process advantage to the outcome advantage.
      process_form: "sum" (returns sum the future step rewards) or "min" (PURE min-form
        credit assignment: the return of a token is the minimum future step reward).
      process_temperature: min-form with T > 0: PURE's softmin weights
        softmax(−r/T)·r instead of the exact minimum (T = 0).
      process_source: "oracle" (the task's step checkers, on the host) or "learned" (the
        per-step device terms of reward.components — `prm`, `implicit_prm` — on device;
        docs/process_rewards.md).
      process_oracle_metrics: with "learned", the checkers still run on the host, only to
        log process/step_accuracy (the drift audit).
      process_scale: group estimators' process advantage divides the centred step rewards
        by their std (DeepSeekMath); False: centred only (PRIME's baseline, for dense
        implicit rewards whose spread starts near 0).
      process_gate: outcome-gated process rewards: step rewards count only in completions
        whose final answer the verifier accepts.
      tree_advantage: prefix-tree credit of tree rollouts (`advantages.tree`;
        docs/tree_rollouts.md): "none" (the estimator `advantage` names), or "treerl" |
        "tempo" | "lambda_grpo", per-token advantages from the node values of the rollout's
        lineage (`sampling.tree`), replacing GRPO's (advantage="grpo"; its advantage_scale
        "group" | "none" and advantage_eps apply).
      tree_exponent: λ-GRPO's α: each token's advantage is divided by |node|^α (1: the paper).
      turn_advantage: multi-turn credit (`advantages.turn`; docs/multiturn.md): "none" (one
        advantage per episode; turn rewards summed into its reward), "group" (per-turn
        group normalisation of the discounted returns over turns, turn k vs turn k of the
        G episodes) or "gae" (GAE over turns with the value model; advantage="gae").
      turn_discount: γ over turns (the return of turn k discounts turn j's reward by
        γ^{j−k}).
      turn_lambda: λ of the GAE over turns (turn_advantage="gae").
      teacher: on-policy distillation (`train/distill.py`): a scripts/train.py workdir or a
        Hugging Face directory whose model scores the sampled tokens inside the step ("":
        off); each token's advantage gains −teacher_coef·d_t.
      teacher_coef: w of the per-token divergence term.
      teacher_divergence, teacher_jsd_beta: "reverse_kl" (d_t = log π − log π_teacher) or
        "jsd" (GKD's generalised JSD(β), β = teacher_jsd_beta in (0, 1)).
      offpolicy_per_group: expert traces in the group (LUFFY; `train/offpolicy.py`): the
        last k of the G rows of every group are the prompt's worked solution (0: off).
      offpolicy_gamma: LUFFY's policy shaping f(x) = x / (x + γ) of the expert rows' ratio.
      offpolicy_sft_weight, offpolicy_sft_weight_end, offpolicy_sft_decay_steps: CHORD's μ
        of (1 − μ)·L_RL + μ·NLL(expert tokens), decaying linearly from the first to the
        second over that many optimizer steps (0: constant); 0: LUFFY alone.
      hint_mode: "off" | "on_fail" (groups whose samples are all wrong are sampled again
        with a prefix of the worked solution after the prompt) | "schedule" (every group;
        `train/hints.py`); one-program step only.
      hint_fraction, hint_decay_steps: the prefix's share of the solution's tokens, decaying
        linearly to 0 over that many optimizer steps (0: constant).
      hint_groups: K > 0: the hint pass samples K groups, the first K that need a hint, so
        a step decodes at most (P' + K)·G rows; 0: all P' prompts.
      verify_groups: K > 0: self-verification (RISE; `train/verify.py`): K of each step's
        completions are verified G times each by the policy, in place of K groups (the
        all-equal ones first), every row rewarded by the true verifier; one-program step
        only; 0: off.
      verify_template, verify_yes, verify_no: the text after the verified solution, and
        the verdict texts (one token each) a verification row's first token is read as.
      max_staleness: asynchronous rollouts (`train/async_step.py`, docs/async.md): the batch
        trained at RL step i was sampled with the weights of step i - k, k <= max_staleness,
        while the sampler (on `mesh.sampler_devices`) samples the next; 0: synchronous (the
        one program).
      tis_level, tis_mode: the importance weight of tis_cap: "token" (ρ_t) or "sequence"
        (Π_t ρ_t); "truncate" (min(w, tis_cap)) or "mask" (0 where w > tis_cap).
      proximal: decoupled PPO (AReaL): the clip is around the proximal policy's log-probs,
        the behaviour weight π_prox / π_sampler is the tis_cap weight. "none": off (the old
        log-probs as above); "sampler": the weights the sampler used (kept by the trainer,
        recomputed in its forward); "trainer": the trainer's weights before the update.
    """
    num_prompts: int
    advantage: str = "grpo"
    advantage_eps: float = 1e-6
    gpg_alpha: str = "paper"
    advantage_scale: str = "group"
    whiten_advantages: bool = True
    value_clip: float = 0.0
    gamma: float = 1.0
    lam: float = 1.0
    positive_weight: float = 1.0
    negative_weight: float = 1.0
    policy_loss: str = "ppo_clip"
    eps_low: float = 0.2
    eps_high: float = 0.2
    aggregation: str = "seq-mean-token-mean"
    dual_clip: float = 0.0
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    dppo_divergence: str = "tv"
    dppo_ratio_cap: float = 20.0
    dcpo_ratio_cap: float = 10.0
    nft_negative_weight: float = 1.0
    nft_eps: float = 0.05
    nft_prompt_weight: str = "negative_rate"
    kl_coef: float = 0.0
    kl_in_reward: bool = False
    kl_horizon: int = 10000
    kl_kind: str = "k3"
    kl_target: float = 0.0
    entropy_keep_fraction: float = 1.0
    entropy_mask_invert: bool = False
    entropy_mask_random: bool = False
    entropy_coef: float = 0.0
    epochs: int = 1
    microbatches: int = 1
    logprob_chunk: int = 128
    pack_length: int = 0
    pack_rows: int = 0
    dynamic_sampling: bool = False
    minibatches: int = 1
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0
    tis_cap: float = 0.0
    process_weight: float = 0.0
    process_form: str = "sum"
    process_temperature: float = 0.0
    process_gate: bool = False
    turn_advantage: str = "none"
    turn_discount: float = 1.0
    turn_lambda: float = 1.0
    teacher: str = ""
    teacher_coef: float = 1.0
    teacher_divergence: str = "reverse_kl"
    teacher_jsd_beta: float = 0.5
    offpolicy_per_group: int = 0
    offpolicy_gamma: float = 0.1
    offpolicy_sft_weight: float = 0.0
    offpolicy_sft_weight_end: float = 0.0
    offpolicy_sft_decay_steps: int = 0
    hint_mode: str = "off"
    hint_fraction: float = 0.5
    hint_decay_steps: int = 0
    hint_groups: int = 0
    verify_groups: int = 0
    verify_template: str = "\nCorrect? "
    verify_yes: str = "Y"
    verify_no: str = "N"
    max_staleness: int = 0
    tis_level: str = "token"
    tis_mode: str = "truncate"
    proximal: str = "none"
    process_source: str = "oracle"
    process_oracle_metrics: bool = False
    process_scale: bool = True
    tree_advantage: str = "none"
    tree_exponent: float = 1.0

    def __post_init__(self):
        for name in _ZERO_IS_OFF:
            if isinstance(getattr(self, name), bool) or \
                    not isinstance(getattr(self, name), (int, float)):
                raise ValueError(f"{name} must be a number (0: off), got "
                                 f"{getattr(self, name)!r}")
        _check_choices(self)
        _check_ranges(self)
        _check_policy_loss(self)
        _check_teacher(self)
        _check_offpolicy(self)
        _check_hints(self)
        _check_async(self)
        _check_tree(self)

    @property
    def needs_old_logprobs(self) -> bool:
        """One epoch of one minibatch is on-policy: the old log-prob is sg(logp) (unless a
        proximal policy is asked for: decoupled PPO)."""
        return self.epochs > 1 or self.minibatches > 1 or self.proximal != "none"

    @property
    def needs_reference(self) -> bool:
        return self.kl_coef > 0.0

    @property
    def needs_value(self) -> bool:
        """PPO with GAE trains a value model (`TrainState.value_params`)."""
        return self.advantage == "gae"

    @property
    def token_level(self) -> bool:
        return self.advantage in TOKEN_ADVANTAGES

    @property
    def process(self) -> bool:
        """Process (step) rewards from the host step checkers enter the update."""
        return self.process_weight > 0

    @property
    def device_steps(self) -> bool:
        """The update takes the per-step device terms' rewards per step (turn credit, or
        learned process rewards), not summed into each row's reward."""
        return self.turn_advantage != "none" or (self.process and
                                                  self.process_source == "learned")

    @property
    def adaptive_kl(self) -> bool:
        """β adapts (`TrainState.kl_coef` holds it)."""
        return self.kl_target > 0


def _check_choices(rl: RLConfig) -> None:
    for name, known in (("advantage", ADVANTAGES), ("policy_loss", POLICY_LOSSES),
                        ("aggregation", losses.MODES), ("kl_kind", losses.KINDS),
                        ("gpg_alpha", GPG_ALPHAS), ("process_form", PROCESS_FORMS),
                        ("process_source", ("oracle", "learned")),
                        ("turn_advantage", TURN_ADVANTAGES),
                        ("tree_advantage", TREE_ADVANTAGES),
                        ("dppo_divergence", losses.DPPO_DIVERGENCES),
                        ("nft_prompt_weight", losses.PROMPT_WEIGHTS)):
        if getattr(rl, name) not in known:
            raise ValueError(f"{name} must be one of {known}, got {getattr(rl, name)!r}")


def _check_ranges(rl: RLConfig) -> None:
    for name in ("num_prompts", "epochs", "minibatches", "microbatches"):
        if getattr(rl, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(rl, name)}")
    if rl.pack_length < 0 or rl.pack_rows < 0:
        raise ValueError(f"pack_length and pack_rows must be >= 0 (0: off / automatic), got "
                         f"{rl.pack_length} and {rl.pack_rows}")
    if not 0.0 < rl.entropy_keep_fraction <= 1.0:
        raise ValueError("entropy_keep_fraction must be in (0, 1]")
    if rl.entropy_mask_invert and rl.entropy_keep_fraction >= 1.0:
        raise ValueError("entropy_mask_invert needs entropy_keep_fraction < 1 (its complement "
                         "is empty at 1)")
    if rl.entropy_mask_random and rl.entropy_keep_fraction >= 1.0:
        raise ValueError("entropy_mask_random needs entropy_keep_fraction < 1 (at 1 every "
                         "token is kept)")
    for name in ("gamma", "lam", "turn_discount", "turn_lambda"):
        if not 0.0 <= getattr(rl, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(rl, name)}")
    for name in ("process_weight", "process_temperature"):
        if getattr(rl, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(rl, name)}")
    if rl.process_source == "learned" and rl.process_weight <= 0:
        raise ValueError("process_source='learned' needs process_weight > 0 (α of the learned "
                         "step rewards)")
    if rl.turn_advantage == "gae" and rl.advantage != "gae":
        raise ValueError("turn_advantage='gae' needs the value model: set advantage='gae'")
    if rl.turn_advantage != "none" and rl.process_weight > 0:
        raise ValueError(f"turn_advantage={rl.turn_advantage!r} and process_weight > 0 both "
                         "read the per-step rewards; use one")
    if (rl.turn_advantage != "none" and rl.kl_in_reward and rl.kl_coef > 0
            and rl.advantage in TOKEN_ADVANTAGES):
        raise ValueError(f"turn_advantage={rl.turn_advantage!r} does not carry the per-token "
                         f"KL reward of kl_in_reward with advantage={rl.advantage!r}; set "
                         "kl_in_reward=False (a KL loss term still works)")
    if rl.turn_advantage != "none" and rl.policy_loss in SEQUENCE_LOSSES:
        raise ValueError(f"turn_advantage={rl.turn_advantage!r} gives per-token advantages, "
                         f"which policy_loss={rl.policy_loss!r} cannot take")
    if rl.process_weight > 0 and rl.policy_loss in SEQUENCE_LOSSES:
        raise ValueError(f"process_weight > 0 gives per-token advantages, which policy_loss="
                         f"{rl.policy_loss!r} (one advantage per sequence) cannot take")
    if rl.value_clip < 0:
        raise ValueError(f"value_clip must be > 0 (or 0: off), got {rl.value_clip}")
    if rl.kl_target < 0:
        raise ValueError(f"kl_target must be > 0 (or 0: off), got {rl.kl_target}")
    if rl.kl_target > 0:
        if not (rl.kl_in_reward and rl.kl_coef > 0):
            raise ValueError("kl_target (adaptive KL) needs kl_in_reward=True and kl_coef > 0")
        if rl.kl_horizon < 1:
            raise ValueError("kl_target needs kl_horizon >= 1")


def _check_policy_loss(rl: RLConfig) -> None:
    """The loss-specific fields (one-line errors naming the field)."""
    if rl.policy_loss in SEQUENCE_LOSSES and rl.token_level:
        raise ValueError(f"policy_loss={rl.policy_loss!r} takes one advantage per sequence; "
                         f"advantage={rl.advantage!r} gives one per token")
    for name in ("eps_low", "eps_high"):
        if getattr(rl, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(rl, name)}")
    for name in ("sapo_tau_pos", "sapo_tau_neg", "dppo_ratio_cap"):
        if getattr(rl, name) <= 0:
            raise ValueError(f"{name} must be > 0, got {getattr(rl, name)}")
    if rl.dcpo_ratio_cap <= 1:
        raise ValueError(f"dcpo_ratio_cap must be > 1, got {rl.dcpo_ratio_cap}")
    if not 0.0 < rl.nft_eps < 1.0:
        raise ValueError(f"nft_eps must be in (0, 1), got {rl.nft_eps}")
    if rl.policy_loss == "nft" and (rl.advantage, rl.advantage_scale) != ("grpo", "none"):
        raise ValueError("policy_loss='nft' reads r and the group accuracy from A = r - mean(r): "
                         "it needs advantage='grpo' with advantage_scale='none'")
    if rl.policy_loss == "nft" and (rl.positive_weight, rl.negative_weight) != (1.0, 1.0):
        raise ValueError("policy_loss='nft' needs positive_weight = negative_weight = 1 (weigh "
                         "wrong answers with nft_negative_weight)")


def _check_teacher(rl: RLConfig) -> None:
    if not rl.teacher:
        return
    if rl.teacher_divergence not in ("reverse_kl", "jsd"):
        raise ValueError(f"teacher_divergence must be one of ('reverse_kl', 'jsd'), got "
                         f"{rl.teacher_divergence!r}")
    if not 0.0 < rl.teacher_jsd_beta < 1.0:
        raise ValueError(f"teacher_jsd_beta must be in (0, 1), got {rl.teacher_jsd_beta}")
    if rl.teacher_coef < 0:
        raise ValueError(f"teacher_coef must be >= 0, got {rl.teacher_coef}")
    if rl.policy_loss in SEQUENCE_LOSSES:
        raise ValueError(f"rl.teacher gives per-token advantages, which policy_loss="
                         f"{rl.policy_loss!r} (one advantage per sequence) cannot take")


def _check_offpolicy(rl: RLConfig) -> None:
    if rl.offpolicy_per_group < 0 or rl.offpolicy_sft_decay_steps < 0:
        raise ValueError("offpolicy_per_group and offpolicy_sft_decay_steps must be >= 0")
    if rl.offpolicy_gamma <= 0:
        raise ValueError(f"offpolicy_gamma must be > 0, got {rl.offpolicy_gamma}")
    for name in ("offpolicy_sft_weight", "offpolicy_sft_weight_end"):
        if not 0.0 <= getattr(rl, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(rl, name)}")
    if rl.offpolicy_per_group and (rl.policy_loss in SEQUENCE_LOSSES or rl.pack_length or
                                   rl.tis_cap):
        raise ValueError("offpolicy_per_group needs a per-token policy loss, unpacked rows "
                         "(pack_length=0) and no tis_cap (expert rows have no sampler "
                         "log-probs)")


def _check_hints(rl: RLConfig) -> None:
    if rl.hint_mode not in ("off", "on_fail", "schedule"):
        raise ValueError(f"hint_mode must be one of ('off', 'on_fail', 'schedule'), got "
                         f"{rl.hint_mode!r}")
    if not 0.0 < rl.hint_fraction <= 1.0 or rl.hint_decay_steps < 0:
        raise ValueError(f"hint_fraction must be in (0, 1] and hint_decay_steps >= 0, got "
                         f"{rl.hint_fraction} and {rl.hint_decay_steps}")
    if isinstance(rl.hint_groups, bool) or not isinstance(rl.hint_groups, int) or \
            rl.hint_groups < 0:
        raise ValueError(f"hint_groups must be an int >= 0 (0: every prompt), got "
                         f"{rl.hint_groups!r}")
    if isinstance(rl.verify_groups, bool) or not isinstance(rl.verify_groups, int) or \
            rl.verify_groups < 0:
        raise ValueError(f"verify_groups must be an int >= 0 (0: off), got "
                         f"{rl.verify_groups!r}")
    if rl.verify_groups and (rl.hint_mode != "off" or rl.offpolicy_per_group):
        raise ValueError("verify_groups > 0 (self-verification) takes neither hint_mode nor "
                         "offpolicy_per_group (both rewrite rows of the same groups)")
    if rl.verify_groups and (rl.process or rl.turn_advantage != "none"):
        raise ValueError("verify_groups > 0 (self-verification) rewards whole rows: it takes "
                         "no process rewards or turn advantages")
    if rl.verify_groups and not rl.verify_template:
        raise ValueError("verify_template must not be empty (the verdict follows it)")


def _check_async(rl: RLConfig) -> None:
    if isinstance(rl.max_staleness, bool) or not isinstance(rl.max_staleness, int) or \
            rl.max_staleness < 0:
        raise ValueError(f"max_staleness must be an integer >= 0 (0: synchronous), got "
                         f"{rl.max_staleness!r}")
    for name, known in (("tis_level", ("token", "sequence")), ("tis_mode", ("truncate", "mask")),
                        ("proximal", ("none", "sampler", "trainer"))):
        if getattr(rl, name) not in known:
            raise ValueError(f"{name} must be one of {known}, got {getattr(rl, name)!r}")
    if rl.proximal != "none" and not rl.tis_cap:
        raise ValueError(f"proximal={rl.proximal!r} (decoupled PPO) weighs each token by "
                         "π_prox / π_sampler truncated at tis_cap: set tis_cap > 0 (e.g. 2)")
    if rl.max_staleness and (rl.hint_mode != "off" or rl.offpolicy_per_group
                             or rl.verify_groups):
        raise ValueError("max_staleness > 0 (asynchronous rollouts) takes neither hint_mode, "
                         "offpolicy_per_group nor verify_groups (rows the sampler did not "
                         "write)")


def _check_tree(rl: RLConfig) -> None:
    """Prefix-tree credit replaces GRPO's advantage with per-token ones from the lineage."""
    if rl.tree_advantage == "none":
        return
    name = f"tree_advantage={rl.tree_advantage!r}"
    if rl.advantage != "grpo" or rl.advantage_scale == "batch":
        raise ValueError(f"{name} replaces GRPO's estimator: set advantage='grpo' with "
                         f"advantage_scale 'group' or 'none' (got {rl.advantage!r}, "
                         f"{rl.advantage_scale!r})")
    if rl.policy_loss in SEQUENCE_LOSSES:
        raise ValueError(f"{name} gives per-token advantages, which policy_loss="
                         f"{rl.policy_loss!r} (one advantage per sequence) cannot take")
    for field, off in (("process_weight", 0.0), ("turn_advantage", "none"),
                       ("offpolicy_per_group", 0), ("hint_mode", "off")):
        if getattr(rl, field) != off:
            raise ValueError(f"{name} does not combine with {field}={getattr(rl, field)!r} "
                             f"(set it to {off!r})")
    if rl.tree_exponent < 0:
        raise ValueError(f"tree_exponent must be >= 0, got {rl.tree_exponent}")


def defaults() -> dict:
    """Every field but `num_prompts` with its default (what `config.rl` starts from)."""
    return {f.name: f.default for f in dataclasses.fields(RLConfig) if f.name != "num_prompts"}


def from_config(config) -> RLConfig:
    """The `RLConfig` from `config.rl` (same field names; validated by `RLConfig`)."""
    return RLConfig(**{f.name: config.rl[f.name] for f in dataclasses.fields(RLConfig)})
