"""Outcome-only vs oracle vs learned vs implicit process rewards where answers survive wrong
steps: list sorting, whose warm-up writes a right sorted answer after a wrong comparison
chain often (a probe of seed 0's warm-up before this spec: pass@1 0.267, CoT-pass@1 0.159
on 128 held-out prompts x 16 samples, a trace error of 0.107; arithmetic's was 0.027 in
`process_rewards`, 1-3 digit arithmetic's 0.013, countdown's 0.040).

Papers: Uesato et al. 2022 (process vs outcome feedback), Wang et al. 2024 (Math-Shepherd:
a PRM on Monte-Carlo step labels), Cui et al. 2025 (PRIME: implicit process rewards).

Arms (paired by seed; GRPO as configs/sorting_grpo.py, no KL, 100 RL steps of 16 prompts x
8 samples, from each seed's 400-step supervised warm-up):
  warm-up    the warm-up itself (the trace-error gate)
  outcome    the verifier's final-answer reward only
  oracle     + 0.5 x the group-normalised verdicts of the task's step checker on each
             comparison, summed over the steps ahead (DeepSeekMath process supervision;
             rl.process_weight 0.5, process_form "sum"; scored on the host)
  prm        the same process path with a learned PRM's step probabilities instead of the
             checker's verdicts (rl.process_source "learned", reward.components
             "task,prm", prm_form "sum"): the PRM of `scripts/train_prm.py` trained on
             Monte-Carlo step labels (4 continuations per step of seed 0's warm-up,
             a step good when >= 1/2 of them reach the answer), read at PRM_PATH; one
             PRM for every seed, as a PRM is trained once and then used
  implicit   the same process path with PRIME's per-token implicit rewards
             β·log(π_φ/π_ref), β = 0.05, φ learned online on the verdicts (Adam 1e-5),
             centred over the group's tokens but not divided by their std
             (rl.process_scale False: PRIME's baseline)

Amendment (22:15 UTC, disclosed in `prereg`): the implicit arm was first registered with the
std division of the other arms; at seed 0 it collapsed (reward/correct 0 by RL step 35:
dividing the group's near-zero implicit rewards, ~1e-3 per token, by their std blows noise
up to advantages of ±9). It was stopped unevaluated and re-registered with
rl.process_scale False before any implicit or prm result was evaluated; the outcome and
oracle arms of seed 0 had been evaluated by then (outcome CoT-pass@1 0.246, oracle 0.267).

Checks (chosen before any RL arm ran): CoT-pass@1 (answer and every comparison right) of
oracle, prm and implicit each above outcome (m 0.01). Gate: the warm-up's trace error
pass@1 − CoT-pass@1 >= 0.05. Metric: pass@k / CoT-pass@k, k = 1..16, from 16 samples per
prompt on 128 held-out prompts. Three seeds, one look.

    python scripts/train_prm.py --finding learned_process_rewards --labels mc \
        --work runs/findings/learned_process_rewards/work --out runs/prm/sorting_mc
    python scripts/reproduce.py run learned_process_rewards
"""
from rlvr_jax.lab import Check, EvalSpec, Finding, Gate, Prereg, WARMUP
from rlvr_jax.lab.common import M_PASS, QUICK
from rlvr_jax.train.config import default_config

PRM_PATH = "runs/prm/sorting_mc"
_PROCESS = ("rl.process_weight", "rl.process_form", "rl.process_source", "reward.components",
            "reward.prm_path", "reward.prm_boundary", "rl.process_oracle_metrics",
            "rl.process_scale")
_LEARNED = {"rl.process_weight": 0.5, "rl.process_form": "sum", "rl.process_source": "learned",
            "rl.process_oracle_metrics": True}


def base():
    """configs/sorting_grpo.py's set-up with 100 RL steps, host scoring in-process."""
    config = default_config(algorithm="grpo")
    config.data.task = "sorting"
    config.data.task_kwargs = dict(min_len=3, max_len=5, max_value=9, style="steps",
                                   answer_format="marker")
    config.data.max_prompt_len = 16
    config.sampling.max_new_tokens = 24
    config.sft.steps = 400
    config.sft.batch_size = 64
    config.rl.steps = 100
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 50
    config.mesh.num_devices = 1
    config.reward.num_workers = 0
    config.reward.prm_boundary = " |<|<="
    return config


def finding():
    return Finding(
        name="learned_process_rewards",
        paper="Solving math word problems with process- and outcome-based feedback; "
              "Math-Shepherd; Process Reinforcement through Implicit Rewards (PRIME)",
        claim="On a task where right answers survive wrong steps, process rewards from the "
              "oracle step checker, a Monte-Carlo-trained PRM and PRIME's implicit PRM each "
              "raise CoT-pass@1 over outcome-only rewards.",
        base=base,
        arms={WARMUP: {"rl.steps": 0},
              "outcome": {},
              "oracle": {"rl.process_weight": 0.5, "rl.process_form": "sum"},
              "prm": dict(_LEARNED, **{"reward.components": "task,prm",
                                       "reward.prm_path": PRM_PATH}),
              "implicit": dict(_LEARNED, **{"reward.components": "task,implicit_prm",
                                            "rl.process_scale": False})},
        checks=[Check("cot_pass@1", "oracle", "outcome", ">", margin=M_PASS,
                      note="oracle step verdicts: fewer right answers with wrong steps",
                      varies=_PROCESS),
                Check("cot_pass@1", "prm", "outcome", ">", margin=M_PASS,
                      note="a Monte-Carlo-trained PRM does the same", varies=_PROCESS),
                Check("cot_pass@1", "implicit", "outcome", ">", margin=M_PASS,
                      note="PRIME's implicit PRM does the same", varies=_PROCESS)],
        gates=[Gate("answers survive wrong steps: the warm-up's trace error pass@1 - "
                    "cot_pass@1 >= 0.05", "pass@1", WARMUP, ">=", 0.05, minus="cot_pass@1")],
        eval=EvalSpec(num_prompts=128, num_samples=16, ks=(1, 2, 4, 8, 16), batch_size=32),
        quick=QUICK,
        seeds=3,
        prereg=Prereg(rule="v2", note="registered under lab v2 before any RL arm ran (only "
                                      "seed 0's warm-up was probed, to choose the task); the "
                                      "implicit arm amended once (rl.process_scale False) "
                                      "after its first registration collapsed unevaluated at "
                                      "seed 0 (module docstring)"),
        curves=("rollout/reward_mean", "reward/correct", "process/step_accuracy",
                "train/entropy"),
        notes="Tiny model, synthetic sorting; the oracle's step labels are exact. The PRM is "
              "trained once on seed 0's warm-up traces; PRIME's φ starts at each seed's "
              "warm-up.",
    )
