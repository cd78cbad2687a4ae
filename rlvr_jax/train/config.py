"""The default experiment configuration (ml_collections) that every config file starts from.

Usage in `configs/x.py`:

    from rlvr_jax.train.config import default_config
    def get_config():
        config = default_config(algorithm="dapo")
        config.rl.steps = 200
        return config

The returned config is locked: setting a key that does not exist (in the file
or with `--config.rl.lr=...` on the command line) raises an error naming it.
"""
import ml_collections

from rlvr_jax import distributed
from rlvr_jax.train import algorithms, rl_config


def default_config(algorithm: str = "grpo") -> ml_collections.ConfigDict:
    """All settings with their defaults, the `algorithm` preset applied, locked."""
    c = ml_collections.ConfigDict()
    c.seed = 0                       # Seeds parameters, data order and sampling.
    _model_and_data(c)
    _reward(c)
    _lora(c)
    _sampling(c)
    _training(c, algorithm)
    _evaluation_and_placement(c)
    algorithms.apply(c.rl, algorithm)
    c.lock()
    return c


def _model_and_data(c: ml_collections.ConfigDict) -> None:
    c.model = ml_collections.ConfigDict()
    c.model.preset = "tiny"          # A name from rlvr_jax.models.presets.
    c.model.hf_checkpoint = ""       # A local Hugging Face directory; overrides preset shapes.
    c.model.vocab_size = 0           # 0: the tokenizer's vocabulary size (for `tiny`).
    c.model.d_model = 0              # Width D; 0 keeps the preset's value (as for the next five).
    c.model.n_layers = 0             # Transformer blocks L (0: the preset's).
    c.model.n_heads = 0              # Query heads H (0: the preset's).
    c.model.n_kv_heads = 0           # Key/value heads (grouped-query attention; 0: the preset's).
    c.model.head_dim = 0             # Per-head width Dh (0: the preset's).
    c.model.d_ff = 0                 # MLP hidden width F (0: the preset's).
    c.model.dtype = "float32"        # Compute dtype ("bfloat16" on accelerators).
    c.model.param_dtype = "float32"  # Storage dtype of the parameters and optimizer state.
    c.model.remat = "none"           # none | full | dots | dots_no_batch.
    c.model.scan_unroll = 0          # Training forward: 0 auto (unrolled up to 32 layers),
    #                                  1 layer scan, L fully unrolled.
    c.model.attention = "auto"       # Training forward's attention: auto (a fused kernel on one
    #                                  GPU/TPU, plain XLA else) | xla | pallas_gpu | splash.

    c.tokenizer = "builtin"          # "builtin", a .model file, tokenizer.json or an HF dir.

    c.data = ml_collections.ConfigDict()
    c.data.source = "task"           # task | jsonl | parquet | tfds.
    c.data.task = "arithmetic"       # source=task: arithmetic | countdown | sorting | synthesis
    #                                  | tool_arithmetic (with env.name="calculator").
    c.data.task_kwargs = ml_collections.ConfigDict(  # The task's knobs (docs/tasks.md).
        dict(ops=("add",), min_digits=1, max_digits=2, style="steps", answer_format="marker"))
    c.data.path = ""                 # File path (jsonl/parquet) or TFDS builder name.
    c.data.prompt_field = "prompt"   # jsonl/parquet/tfds: the field holding the prompt text...
    c.data.answer_field = "answer"   # ...and the reference answer.
    c.data.solution_field = "solution"  # ...and, optional, a worked solution ending in the
    #                                  answer: the warm-up's target (sft.steps > 0 needs it).
    c.data.rubric_field = ""         # ...and a rubric for a judge whose template reads
    #                                  {criterion}: [{"criterion": str, "weight": w}, ...]
    c.data.rubric_size = 4           # K: criteria per prompt (fewer are padded with weight 0)...
    c.data.rubric_tokens = 32        # ...of at most C tokens each (data/rubrics.py).
    c.data.max_prompt_len = 16       # Tp: prompts are left-padded to it; longer ones...
    c.data.overflow = "drop"         # ...are dropped, truncated or an error.
    c.data.max_drop_fraction = 0.01  # overflow=drop: an error when a file has more too-long
    #                                  prompts than this share (each run prints the count).
    c.data.skip_bad_rows = False     # jsonl/parquet/tfds: skip and count bad rows (a null
    #                                  answer, bad JSON, ...) instead of an error naming them.
    c.data.chat_template = ""        # Optional template applied to every prompt.

    c.data.eval_path = ""            # jsonl/parquet: held-out file; "" = a hash split of path
    c.data.eval_fraction = 0.1       # ...holding out this share of the prompts (by hash).
    c.data.size = 0                  # source=task: 0 an endless stream; N: RL draws from a
    #                                  fixed set of N prompts, reshuffled every epoch (the
    #                                  warm-up keeps the stream).
    _adaptive_data(c)


def _reward(c: ml_collections.ConfigDict) -> None:
    c.reward = ml_collections.ConfigDict()  # docs/verifiers.md, "Rewards from the config".
    c.reward.verifier = "auto"       # auto | token (on device) | task | math | math_verify (host).
    c.reward.components = ""         # "" = the verifier alone; or e.g. "task,format": names
    #                                  from token task math math_verify code format overlong
    #                                  cosine_length length_penalty reward_model judge prm
    #                                  implicit_prm.
    c.reward.weights = ""            # One float per component, e.g. "1.0,0.2" ("" = all 1).
    c.reward.num_workers = 2         # Host scoring processes (0: in the trainer's process).
    c.reward.timeout_s = 5.0         # Per sample in those processes; past it the sample scores 0.
    c.reward.reward_model_path = ""  # The `reward_model` component: a local HF directory of a
    #                                  *ForSequenceClassification model, scored on device.
    c.reward.reward_model_microbatches = 1  # Score the sampled sequences in this many slices.
    # The `judge` component (scoring/judge.py): a frozen LM's P(yes), scored on device.
    c.reward.judge_path = ""         # A scripts/train.py run directory or a local HF *ForCausalLM
    #                                  directory (the policy's tokenizer).
    c.reward.judge_template = "Question: {question}\nAnswer: {answer}\nCorrect? "  # Also
    #                                  {reference}: the task's integer answer.
    c.reward.judge_yes = "Y"         # The verdict tokens (one token each); judge_no "": P(yes)
    c.reward.judge_no = "N"          # over the vocabulary, else P(yes) / (P(yes) + P(no)).
    c.reward.judge_microbatches = 1  # Score the judge's rows in this many slices.
    c.reward.judge_unique_fraction = 1.0  # u < 1: a group's identical completions are judged
    #                                  once (at most ⌈u·B⌉ rows read, else all B); 1: every row.
    c.reward.judge_samples = 0       # k > 0: reward = the share of k verdicts sampled from the
    #                                  judge that say yes (0: P(yes) itself).
    # Learned process rewards (docs/process_rewards.md): the `prm` component, a PRM directory
    # of scripts/train_prm.py read at each step's last token; the `implicit_prm` component,
    # PRIME's β·log(π_φ/π_ref) per token with φ learned online on the verdicts.
    c.reward.prm_path = ""           # The `prm` component's local HF directory.
    c.reward.prm_form = "sum"        # sum | min | progress (PAV: p_k − p_{k−1}).
    c.reward.prm_boundary = " "      # Tokens after a step's last token, "|"-separated...
    c.reward.prm_marker = "####"     # ...and the answer marker: no step at or after it.
    c.reward.prm_microbatches = 1    # Score the sampled sequences in this many slices.
    c.reward.implicit_prm_beta = 0.05  # β of the implicit PRM's per-token reward.
    c.reward.implicit_prm_lr = 1e-5  # Adam's step size of φ (one step per RL step).
    c.reward.noise_fn_rate = 0.0     # Noisy verifier: P(a correct completion scores 0) (p1).
    c.reward.noise_fp_rate = 0.0     # ...P(a wrong completion scores 1) (p0); p1 = 1 - p0 = 1 - g
    #                                  gives Bernoulli(g) random rewards (scoring/noise.py).
    c.reward.noise_seed = 0          # Seeds the flips (with a hash of each rollout's tokens).
    c.reward.correction_fn_rate = 0.0  # Backward-corrected reward (r - fp) / (1 - fn - fp) for a
    c.reward.correction_fp_rate = 0.0  # verifier with these FN / FP rates (0, 0: off).
    c.reward.correction_kind = "backward"  # ...or "forward": each verdict replaced by its
    #                                  posterior mean given its group (scoring/noise.py).
    # The `cosine_length` component (Yeo et al. 2025; scoring/shaping.py), the paper's values:
    c.reward.cosine_max_len = 0      # L_max (0: sampling.max_new_tokens).
    c.reward.cosine_min_value_correct = 1.0   # A correct completion's reward at L_max...
    c.reward.cosine_max_value_correct = 2.0   # ...and at length 0 (cosine in between).
    c.reward.cosine_min_value_wrong = -10.0   # A wrong completion's reward at length 0...
    c.reward.cosine_max_value_wrong = 0.0     # ...and at L_max (cosine in between).
    c.reward.cosine_exceed_length = -10.0     # Any completion of length >= L_max.
    # The `length_penalty` component (Kimi k1.5): correct answers get
    # λ = 0.5 - (L - min) / (max - min) over their group.
    c.reward.length_penalty_incorrect = False  # True: wrong ones too get min(0, λ) (Kimi's rule).


def _lora(c: ml_collections.ConfigDict) -> None:
    """RL through LoRA adapters (`train/adapters.py`); off by default."""
    c.model.lora = ml_collections.ConfigDict()  # LoRA / QLoRA adapters (docs/lora.md).
    c.model.lora.rank = 0            # Adapter rank r (0: off, full fine-tuning). With sft.steps > 0
    #                                  the warm-up trains the full weights, then RL trains only
    #                                  the adapters on that frozen base.
    c.model.lora.alpha = 0.0         # PEFT's lora_alpha: outputs scaled by alpha / r (0: 2 × r).
    c.model.lora.targets = "q,k,v,o,gate,up,down"  # Adapted projections (comma list).
    c.model.lora.quantize_base = "none"  # none | int8 | nf4: the frozen base stored quantized
    #                                  (QLoRA), dequantized on the fly in model.dtype.
    c.model.lora.init_from = ""      # A PEFT adapter directory (adapter_config.json +
    #                                  adapter_model.safetensors) to start from.


def _adaptive_data(c: ml_collections.ConfigDict) -> None:
    """Data that adapts to the policy (docs/data.md); all off by default."""
    c.data.filter = ml_collections.ConfigDict()
    c.data.filter.enabled = False    # Skip prompts always / never solved (needs a finite set:
    #                                  a file or data.size > 0), by their tracked pass rate:
    c.data.filter.low = 0.0          # skipped while it is <= low (never solved; < 0: off)...
    c.data.filter.high = 1.0         # ...or >= high (always solved; > 1: off).
    c.data.filter.ema = 1.0          # Tracked rate: weight of the newest visit (1: it alone).
    c.data.filter.readmit_epochs = 1  # A skipped prompt sits out this many epochs after its
    #                                  last visit, then is tried again (0: never again).
    c.data.curriculum = ml_collections.ConfigDict()
    c.data.curriculum.knob = ""      # "" off; a knob of data.task_kwargs, e.g. "max_digits"...
    c.data.curriculum.levels = ()    # ...its values, easiest first, e.g. (1, 2, 3) (for ops:
    #                                  "add", "add+mul"); RL starts at the first; warm-up
    #                                  and evaluation use the last.
    c.data.curriculum.promote_at = 0.8  # Next level once the mean train pass rate of the...
    c.data.curriculum.window = 8     # ...last this many RL steps at this level reaches it.
    c.data.mixture = ""              # "" off; "name:weight,...", e.g. "add:2,mul:1": task
    #                                  names, or names given in data.mixture_tasks.
    c.data.mixture_tasks = ml_collections.ConfigDict()  # name -> {"task": ..., knobs...},
    #                                  e.g. {"mul": {"task": "arithmetic", "ops": ("mul",)}}
    #                                  (set in a config file).
    c.data.mixture_adaptive = False  # Reweight by each task's expected informative-group
    #                                  fraction 1 - p^G - (1-p)^G (p: its running pass rate).


def _sampling(c: ml_collections.ConfigDict) -> None:
    c.sampling = ml_collections.ConfigDict()
    c.sampling.temperature = 1.0     # Rollout temperature (> 0); log-probs use it too.
    c.sampling.top_k = 0             # Sample among the k most likely tokens (0: off).
    c.sampling.top_p = 1.0           # Nucleus sampling mass (1.0: off).
    c.sampling.max_new_tokens = 16   # N.
    c.sampling.decode_rules = ""     # "": decode with the training layout; or a mesh.rules
    #                                  preset (e.g. "dp": replicated) to re-lay the params out.
    c.sampling.cache_window = -1     # Decode in phases over a cache growing by this many slots
    #                                  (reads less of the unfilled cache; one compiled loop per
    #                                  phase). -1: automatic (CPU: 4 phases from 128 new tokens,
    #                                  8 from 512; GPU/TPU: 1; cache_phases.auto_cache_window); 0: one.
    c.sampling.compact_ratio = -1.0  # Once the live rows fit in this fraction of the batch,
    #                                  decode them only (what each row samples is unchanged).
    #                                  -1: automatic (from 128 new tokens, CPU: 0.7; GPU/TPU:
    #                                  0.5 down to 32 rows; live_rows.sizes_of); 0: off.
    c.sampling.decode_attention = ""  # Decode steps' attention: "" by backend (plain on CPU,
    #                                  pallas on GPUs, grouped else) | grouped | plain |
    #                                  pallas (a Triton kernel over the valid slots).
    c.sampling.share_prompt_kv = False  # Keep a prompt's KV once for its G samples (each decode
    #                                  step reads it once per group); off: copied G times.
    #                                  Does not pay on CPU; unmeasured on GPUs (issue 52).
    c.sampling.tree = ml_collections.ConfigDict()  # Tree rollouts (docs/tree_rollouts.md):
    #                                  rows fork inside the sampler; G leaves per prompt.
    c.sampling.tree.mode = ""        # "": off (G independent samples) | depth (fork at the
    #                                  completion positions `depths`) | every (at every, 2·every,
    #                                  …) | entropy (the live row of a prompt with the highest
    #                                  next-token entropy above entropy_threshold, per step).
    c.sampling.tree.branches = 2     # Rows after a fork (the parent + branches - 1 copies).
    c.sampling.tree.max_forks = 1    # Forks per prompt; the first rl.num_samples - max_forks ·
    #                                  (branches - 1) rows (>= 1) are the roots.
    c.sampling.tree.depths = ()      # mode depth: positions >= 1 and < max_new_tokens, e.g. (4, 8).
    c.sampling.tree.every = 8        # mode every: fork every this many tokens.
    c.sampling.tree.entropy_threshold = 1.0  # mode entropy: nats (softmax(logits / temperature)).


def _training(c: ml_collections.ConfigDict, algorithm: str) -> None:
    c.env = ml_collections.ConfigDict()  # Multi-turn episodes with a tool (docs/multiturn.md).
    c.env.name = ""                  # "": single-turn; "calculator" (on device): "[12*34]" ->
    #                                  "=408", run inside the one compiled RL step.
    c.env.max_turns = 2              # Model turns per episode (a call in the last one ends it).
    c.env.max_turn_tokens = 16       # Tokens per model turn (a turn reaching it ends the episode).
    #                                  The whole episode fits sampling.max_new_tokens.
    #                                  On the host (the split path):
    #                                  calculator_host | python | lookup | guess_number.
    c.env.max_obs_tokens = 0         # Observation tokens per call (0: the environment's default).
    c.env.timeout_s = 5.0            # Host tools: seconds per call (then an error observation).
    c.env.num_workers = 4            # Host tools: calls run at once.
    c.env.corpus_path = ""           # env.name=lookup: a JSONL file of {"key", "text"} lines.
    c.env.turn_reward = 0.0          # env.name=guess_number: each guess earns this × the fraction
    #                                  of the possible interval it ruled out (turn_env term).

    c.sft = ml_collections.ConfigDict()  # Supervised warm-up on worked solutions.
    c.sft.steps = 0                  # Supervised steps before RL (0: none).
    c.sft.batch_size = 64            # Worked solutions per step.
    c.sft.learning_rate = 3e-3       # AdamW peak learning rate (linear warm-up, then constant).
    c.sft.warmup_steps = 20          # Steps of linear learning-rate warm-up.
    c.sft.verify_fraction = 0.0      # With rl.verify_groups: this share of the rows verify
    #                                  the worked solution or a wrong copy (train/verify.py).

    c.rl = ml_collections.ConfigDict()
    c.rl.algorithm = algorithm       # The preset applied (rlvr_jax/train/algorithms.py).
    c.rl.steps = 100                 # RL steps (one batch of P' prompts x G samples each).
    c.rl.num_prompts = 16            # P: groups per update.
    c.rl.num_samples = 8             # G: completions per prompt.
    c.rl.oversample = 1.0            # P' = oversample · P prompts are sampled (dynamic sampling).
    c.rl.learning_rate = 1e-3        # AdamW peak learning rate of the policy.
    c.rl.warmup_steps = 0            # Optimizer updates of linear learning-rate warm-up.
    c.rl.schedule = "constant"       # constant | cosine.
    c.rl.weight_decay = 0.0          # AdamW decoupled weight decay.
    c.rl.max_grad_norm = 1.0         # Global gradient-norm clip (0: off).
    c.rl.value_learning_rate = 1e-5  # gae: the value model's own AdamW learning rate.
    # Every field of the update's RLConfig with its default (documented in
    # rlvr_jax/train/rl_config.py); the algorithm preset changes some of them.
    c.rl.update(rl_config.defaults())


def _evaluation_and_placement(c: ml_collections.ConfigDict) -> None:
    c.eval = ml_collections.ConfigDict()
    c.eval.every = 25                # RL steps between held-out evaluations (0: only at the end).
    c.eval.num_prompts = 500         # Held-out prompts (test split).
    c.eval.batch_size = 250          # Prompts per compiled call (must divide num_prompts).
    c.eval.k = 1                     # > 1 adds sampled pass@k and maj@k.
    c.eval.temperature = 1.0         # For pass@k sampling (pass@1 is greedy).

    c.mesh = ml_collections.ConfigDict()
    c.mesh.data = 1                  # Sizes of the mesh axes; one may be -1 (the rest).
    c.mesh.fsdp = -1                 # (data: batch; fsdp: batch + parameter shards;
    #                                  tensor: heads / MLP columns.)
    c.mesh.tensor = 1                # (sizes multiply to the devices used.)
    c.mesh.dcn_data = 1              # Multi-slice / multi-host factors (see docs/architecture.md).
    c.mesh.dcn_fsdp = 1              # (the same factors across slices / hosts)
    c.mesh.dcn_tensor = 1            # (1 on a single slice or host.)
    c.mesh.rules = "fsdp"            # dp | fsdp | fsdp_tp.
    c.mesh.num_devices = 0           # 0: all devices; n: the first n (e.g. 1 for a CPU test).
    c.mesh.sampler_devices = 0       # Asynchronous rollouts (docs/async.md): the last n of them
    #                                  sample (FSDP), the rest train; 0: all do both.
    c.mesh.reference_memory = "device"  # The KL reference model (compute dtype): device |
    #                                  pinned_host (host memory, copied in for its pass; 7B+).

    c.checkpoint = ml_collections.ConfigDict()  # Orbax checkpoints in workdir/checkpoints.
    c.checkpoint.every = 0           # RL steps between checkpoints (0: off); the last step too.
    c.checkpoint.keep = 3            # Newest complete checkpoints kept.
    c.checkpoint.async_save = True   # Write in a background thread while training goes on.
    c.checkpoint.resume = True       # Continue from the latest checkpoint if there is one.

    c.distributed = distributed.default_config()  # jax.distributed (TPU pods, GPU clusters).

    c.log_every = 1                  # RL steps between metrics.jsonl lines.
    c.log_samples_every = 10         # RL steps between completions logged to samples.jsonl (0: off).
    c.log_num_samples = 4            # Completions logged each time (one per prompt).
    c.log_wandb = ""                 # A W&B project to log metrics to too ("" off; the wandb
    #                                  extra; WANDB_MODE=offline logs to <workdir>/wandb/).


def arithmetic_config(algorithm: str = "grpo") -> ml_collections.ConfigDict:
    """The synthetic-arithmetic set-up shared by configs/*_arithmetic.py and the quickstart.

    A tiny model, 1-2 digit addition with worked column sums, a supervised warm-up on the
    worked solutions (to ~45% greedy pass@1), then RL with `algorithm`; held-out evaluation
    on 500 test prompts.
    """
    config = default_config(algorithm=algorithm)
    config.model.preset = "tiny"
    config.data.task = "arithmetic"
    config.data.task_kwargs.ops = ("add",)
    config.data.task_kwargs.min_digits = 1
    config.data.task_kwargs.max_digits = 2
    config.data.max_prompt_len = 8    # "12+34=" plus BOS fits.
    config.sampling.max_new_tokens = 16
    config.sft.steps = 400            # Warm-up on worked solutions before RL.
    config.sft.batch_size = 64
    config.rl.steps = 300
    config.rl.learning_rate = 1e-4    # 1e-3 collapses the warmed-up policy within 80 steps.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.k = 8                 # Also sampled pass@8, maj@8, CoT-pass@8, mean@8.
    config.mesh.num_devices = 1       # The tiny model runs on one device.
    return config


def countdown_config(algorithm: str = "grpo") -> ml_collections.ConfigDict:
    """The Countdown set-up shared by configs/countdown_grpo.py and configs/tree_countdown.py.

    Reach a target from 3 numbers <= 9 with + - * (targets <= 30), worked steps such as
    "9-2=7 7-6=1 #### (9-2)-6", scored on the host by `Countdown.verify`; knobs chosen so the
    warm-up lands at a held-out greedy pass@1 of ~0.4 (numbers <= 20, targets <= 100 with all
    four operations stay near 0.02-0.04).
    """
    config = default_config(algorithm=algorithm)
    config.data.task = "countdown"
    config.data.task_kwargs = dict(num_numbers=3, max_number=9, max_target=30,
                                   ops=("+", "-", "*"), style="steps", answer_format="marker")
    config.data.max_prompt_len = 16   # "3 5 7 -> 22:" plus BOS: at most 14 tokens.
    config.sampling.max_new_tokens = 32  # Worked steps + "#### (5*3)+7" + EOS: <= 29.
    config.sft.steps = 500
    config.sft.batch_size = 64
    config.rl.steps = 300
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0           # No reference model: faster on CPU.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 50
    config.mesh.num_devices = 1
    return config


def check_key(config: ml_collections.ConfigDict, dotted: str) -> None:
    """Raises ValueError naming the first unknown part of a dotted key (e.g. "rl.not_a_key"),
    the nearest known names and the fields that do exist there."""
    import difflib
    node, seen = config, []
    for part in dotted.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            where = ".".join(["config"] + seen)
            fields = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
            close = difflib.get_close_matches(part, fields, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"--config.{dotted}: unknown key: {where} has no field {part!r}"
                             f"{hint}; its fields: {', '.join(fields)}")
        node = node[part]
        seen.append(part)
