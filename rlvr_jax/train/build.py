"""Builders: everything a run needs, made from its config (used by `loop.run`).

Each function reads the config and returns one object: the model config, the task and its
data sources, the mesh and a `Placer`, the sampler, the optimizers, the RL state and the
held-out evaluator (the loop composes the sampler and the scorer into the RL step with
`step.make_step`). None of them trains.
"""
from typing import Tuple

import jax
import numpy as np

from rlvr_jax import (cache_phases, distributed, evaluation, models, multiturn, sampling, scoring,
                      sharding)
from rlvr_jax.data import datasets, files, rubrics
from rlvr_jax.models import lora
from rlvr_jax import tree_rollouts
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import adaptive, adapters, offpolicy, reference
from rlvr_jax.train import state as state_lib
from rlvr_jax.train.placer import Placer
from rlvr_jax.train.rl_config import RLConfig
from rlvr_jax.train.errors import ConfigError, user_input


def build_model_config(config, tokenizer) -> models.ModelConfig:
    """The ModelConfig from `config.model` (preset + non-zero overrides, or an HF dir)."""
    m = config.model
    if m.hf_checkpoint:
        from rlvr_jax.models import hf
        base = hf.config_from_hf(m.hf_checkpoint)
    else:
        base = models.presets.get(m.preset)
    overrides = {k: m[k] for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                                   "d_ff") if m[k]}
    overrides["vocab_size"] = m.vocab_size or (base.vocab_size if m.hf_checkpoint or
                                               m.preset != "tiny" else tokenizer.vocab_size)
    return base.replace(dtype=m.dtype, param_dtype=m.param_dtype, remat=m.remat,
                        scan_unroll=m.get("scan_unroll", 0),
                        attention=m.get("attention", "auto"), **overrides,
                        **adapters.lora_fields(config))


def build_task_and_sources(config):
    """(task or None, train source, test source) from `config.data`; a missing file or a
    malformed line raises `ConfigError` naming `data.path` and the line."""
    return build_sources(config)[:3]


def build_sources(config):
    """(task or None, train source, test source, warm-up source) from `config.data`: the
    warm-up's differs from training's only under a curriculum (`train/adaptive.py`)."""
    d = config.data
    if d.source == "task":
        return adaptive.task_and_sources(config)
    sources = _file_or_tfds_sources(config)
    return sources + (sources[1],)


def _file_or_tfds_sources(config):
    d = config.data
    readers = {"jsonl": files.read_jsonl, "parquet": files.read_parquet}
    if d.source in readers:
        return (None,) + file_sources(d, readers[d.source])
    with user_input("data.path"):
        if d.source == "tfds":
            return None, files.read_tfds(d.path, split="train"), files.read_tfds(
                d.path, split="test")
    raise ConfigError(f"data.source: must be task, jsonl, parquet or tfds; got {d.source!r}")


def check_fit(config, model_config, tokenizer, source, sample: int = 64) -> None:
    """Raises `ConfigError` before anything is compiled where the data cannot fit the model:

    - the first `sample` prompts are all longer than `data.max_prompt_len` (overflow
      "drop" would drop every one) or one is (overflow "error");
    - `data.max_prompt_len + sampling.max_new_tokens` exceeds the model's positions;
    - the tokenizer clearly is not the model's: its special ids, or the ids of those
      prompts (chat template and BOS included) and their worked solutions or answers,
      reach past the model's vocabulary. (A model vocabulary larger than the
      tokenizer's is normal — padded embeddings; those ids are never sampled.)
    - with a warm-up (`sft.steps` > 0), a worked solution of those prompts (EOS included)
      is longer than `sampling.max_new_tokens`.
    """
    total = config.data.max_prompt_len + config.sampling.max_new_tokens
    if total > model_config.max_position_embeddings:
        raise ConfigError(f"sampling.max_new_tokens: data.max_prompt_len + "
                          f"sampling.max_new_tokens = {total} exceeds the model's "
                          f"{model_config.max_position_embeddings} positions")
    loader = prompt_loader(config, source, tokenizer, 1, shuffle=False)
    n = min(sample, len(source)) if getattr(source, "finite", True) else sample
    ids, kept = set(tokenizer.special_ids), 0
    for i in range(n):
        example = source[i]
        with user_input("data.max_prompt_len"):
            _, prompt_ids, _ = loader.encode_prompt(example)
        kept += prompt_ids is not None
        ids.update(prompt_ids or ())
        target = tokenizer.encode(example.solution or example.answer)
        ids.update(target)
        if config.sft.steps > 0 and example.solution and \
                len(target) + 1 > config.sampling.max_new_tokens:
            raise ConfigError(f"sampling.max_new_tokens: the warm-up's worked solution "
                              f"{example.solution!r} needs {len(target) + 1} tokens (EOS "
                              f"included), more than {config.sampling.max_new_tokens}")
    if config.sft.steps > 0 and not isinstance(source, datasets.TaskSource) and \
            not any(source[i].solution for i in range(n)):
        raise ConfigError(f"sft.steps: the warm-up trains on worked solutions and the first {n} "
                          f"rows of the data have none (field {config.data.solution_field!r}): "
                          "add them or set sft.steps=0")
    if not kept:
        raise ConfigError(f"data.max_prompt_len: all of the first {n} prompts are longer than "
                          f"{config.data.max_prompt_len} tokens (data.overflow=drop drops them)")
    if getattr(source, "finite", True) and not isinstance(source, datasets.TaskSource):
        check_prompt_lengths(config, loader, getattr(source, "name", "the data"))
    top, v = max(ids), model_config.vocab_size
    if top >= v:
        field = "model.vocab_size" if config.model.vocab_size else "tokenizer"
        raise ConfigError(f"{field}: the tokenizer ({tokenizer.vocab_size} ids) gives the data "
                          f"and special tokens ids up to {top}, past the model's vocab_size {v}: "
                          "it is not this model's tokenizer")


def check_prompt_lengths(config, loader, name: str) -> None:
    """Counts the prompts of a file longer than `data.max_prompt_len` and prints the count
    with the longest prompt's length (once, at start); raises `ConfigError` when one is and
    `data.overflow=error`, or when `data.overflow=drop` would drop more than
    `data.max_drop_fraction` of them."""
    d = config.data
    if not 0 <= d.max_drop_fraction <= 1:
        raise ConfigError(f"data.max_drop_fraction: must be in [0, 1], got {d.max_drop_fraction}")
    n_long, n, longest = loader.overflow_count()
    if not n_long:
        return
    if d.overflow == "error":
        raise ConfigError(f"data.max_prompt_len: {n_long} of {n} prompts of {name} are longer "
                          f"than {d.max_prompt_len} tokens (data.overflow=error); the longest "
                          f"has {longest} tokens: set data.max_prompt_len={longest} (or "
                          "data.overflow=drop or truncate)")
    fraction, action = n_long / n, {"drop": "dropped", "truncate": "truncated"}[d.overflow]
    if d.overflow == "drop" and fraction > d.max_drop_fraction:
        raise ConfigError(f"data.max_prompt_len: {n_long} of {n} prompts of {name} "
                          f"({fraction:.1%}) are longer than {d.max_prompt_len} tokens, more "
                          f"than data.max_drop_fraction={d.max_drop_fraction:g} may drop; the "
                          f"longest has {longest} tokens: set data.max_prompt_len={longest} "
                          "(or data.overflow=truncate)")
    print(f"data: {n_long} of {n} prompts of {name} are longer than data.max_prompt_len="
          f"{d.max_prompt_len} tokens and are {action} (the longest has {longest})", flush=True)


def file_sources(d, read):
    """(train, held-out) ExampleLists of a file: `d.eval_path` when given (a warning names
    the prompts it shares with the training file), else a hash split of `d.path`
    (`datasets.split_by_prompt`, `d.eval_fraction`). The held-out list's name says which."""
    fields = dict(prompt_field=d.prompt_field, answer_field=d.answer_field,
                  solution_field=d.solution_field, on_error="skip" if d.skip_bad_rows else "raise",
                  metadata_fields=(d.rubric_field,) if d.rubric_field else ())
    with user_input("data.path"):
        data = _read_reporting_skips(read, d.path, fields)
    if not d.eval_path:
        with user_input("data.eval_fraction"):
            data, test = datasets.split_by_prompt(data, test_fraction=d.eval_fraction, name=d.path)
        return data, _warn_if_small(test)
    with user_input("data.eval_path"):
        test = _read_reporting_skips(read, d.eval_path, fields)
    shared = {ex.prompt for ex in data.examples} & {ex.prompt for ex in test.examples}
    test.name = f"data.eval_path {d.eval_path} ({len(test)} prompts)"
    if shared:
        print(f"warning: {len(shared)} prompts of data.eval_path {d.eval_path} are also in "
              f"data.path {d.path}", flush=True)
        test.name += f", {len(shared)} also in data.path"
    return data, _warn_if_small(test)


MIN_HELD_OUT = 100  # Below it a pass@1 95% interval is wider than about +-0.1 (1.96 * 0.5 / 10).


def _read_reporting_skips(read, path, fields):
    data = read(path, **fields)
    skipped = {k: v for k, v in data.stats.items() if v}
    if skipped:
        print(f"data: skipped {sum(skipped.values())} bad rows of {path} (data.skip_bad_rows): "
              + ", ".join(f"{k} {v}" for k, v in skipped.items()), flush=True)
    return data


def _warn_if_small(test):
    if len(test) < MIN_HELD_OUT:
        print(f"warning: the held-out set has {len(test)} prompts; below {MIN_HELD_OUT} its "
              "pass@1 interval is wider than about +-0.1 (give data.eval_path or raise "
              "data.eval_fraction)", flush=True)
    return test


def eval_data_name(config, test_source) -> str:
    """What the held-out evaluation runs on, in words (summary.json's "eval_data")."""
    d = config.data
    if d.source == "task":
        what = d.task
        if d.mixture:
            what = f"mixture {d.mixture} (fixed weights)"
        elif d.curriculum.knob:
            what = f"{d.task} at {d.curriculum.knob}={d.curriculum.levels[-1]} (the last level)"
        return f"{what} test split (hash-disjoint from train; stream seed {config.seed + 1})"
    if d.source == "tfds":
        return f"tfds {d.path} split test"
    return test_source.name


def build_mesh(config):
    mesh_cfg = sharding.default_mesh_config()
    for key in mesh_cfg:
        if key in config.mesh:
            mesh_cfg[key] = config.mesh[key]
    devices = jax.devices()
    if config.mesh.num_devices > len(devices):
        raise ConfigError(f"mesh.num_devices: {config.mesh.num_devices} but this process sees "
                          f"{len(devices)} device(s)")
    if config.mesh.num_devices and config.mesh.num_devices != len(devices) and \
            jax.process_count() > 1:
        raise ConfigError(f"mesh.num_devices: {config.mesh.num_devices} of {len(devices)} "
                          f"devices, but a run over {jax.process_count()} processes uses every "
                          "process's devices: set it to 0")
    if config.mesh.num_devices:
        devices = devices[:config.mesh.num_devices]
    devices = split_devices(config, devices)[0]
    return sharding.make_mesh(mesh_cfg, devices=devices), sharding.get_rules(config.mesh.rules)


def split_devices(config, devices):
    """(the trainer's devices, the sampler's) of `devices`: `mesh.sampler_devices` = s > 0
    gives the last s to the sampler (`train/async_step.py`); 0: all of them do both."""
    s = config.mesh.get("sampler_devices", 0)
    if not s:
        return devices, devices
    if not 0 < s < len(devices) or jax.process_count() > 1:
        raise ConfigError(f"mesh.sampler_devices: {s} of {len(devices)} devices leaves none "
                          "to train (0: share them)" if jax.process_count() == 1 else
                          "mesh.sampler_devices: one process only (a split mesh is not "
                          "multi-host yet); set it to 0")
    return devices[:-s], devices[-s:]


def build_sampler_mesh(config):
    """The sampler's mesh of `split_devices` (every one of its devices on the fsdp axis)."""
    devices = jax.devices()[:config.mesh.num_devices or None]
    return sharding.make_mesh({"data": 1, "fsdp": -1, "tensor": 1},
                              devices=split_devices(config, devices)[1])


def prompt_mask(lengths: np.ndarray, width: int) -> np.ndarray:
    """[P, width] int32, 1 on the real tokens of left-padded prompts of `lengths`."""
    return (np.arange(width)[None, :] >= width - lengths[:, None]).astype(np.int32)


def initial_params(config, model_config, placer: Placer, rng):
    """The policy's first parameters (an HF checkpoint or a fresh init), placed."""
    if config.model.hf_checkpoint:  # Each process reads only its devices' slices.
        from rlvr_jax.models import hf_slices
        return hf_slices.load_hf_params_sharded(
            config.model.hf_checkpoint, model_config,
            placer.shardings(hf_slices.shapes(model_config)))
    return placer.init(lambda key: models.init_params(model_config, key), rng)


def prompt_loader(config, source, tokenizer, batch_size: int, **kwargs):
    """A `PromptLoader` of `source` with the config's prompt width, overflow policy and the
    tokenizer's chat template (from `data.chat_template` or the tokenizer's directory)."""
    return datasets.PromptLoader(source, tokenizer, batch_size=batch_size,
                                 max_prompt_len=config.data.max_prompt_len,
                                 overflow=config.data.overflow,
                                 chat_template=tokenizer.chat_template, **kwargs)


def build_env(config, tokenizer):
    """The multi-turn environment of `config.env` (`multiturn.build_env`), or None."""
    e = config.env
    if not e.name:
        return None
    with user_input("env.name"):
        return multiturn.build_env(e.name, tokenizer, max_turns=e.max_turns,
                                   max_turn_tokens=e.max_turn_tokens,
                                   max_obs_tokens=e.max_obs_tokens, timeout_s=e.timeout_s,
                                   corpus_path=e.corpus_path, turn_reward=e.turn_reward)


def build_sampler(config, model_config, tokenizer, placer: Placer, env=None) -> Sampler:
    """The run's `Sampler`: `config.sampling` (laid out for decoding by
    `sampling.decode_rules`), with `env` and its tools (`env.num_workers` calls at a time)."""
    decode_shardings = None
    if config.sampling.decode_rules:  # Re-lay the parameters out for decoding.
        rules = sharding.get_rules(config.sampling.decode_rules)
        # Of the tree sampled (the warm-up's model, or LoRA's base + adapters in RL).
        decode_shardings = lambda params: sharding.logical_to_mesh_sharding(  # noqa: E731
            placer.specs_of(params), placer.mesh, rules, params)
    return Sampler(model_config, sampling_config(config, tokenizer), env=env,
                   tokenizer=tokenizer, tool_workers=config.env.num_workers,
                   decode_shardings=decode_shardings,
                   decode_rules=sharding.get_rules(config.sampling.decode_rules)
                   if config.sampling.decode_rules else None)


def build_evaluator(config, tokenizer, test_source, verifier: scoring.Verifier,
                    sampler: Sampler) -> evaluation.Evaluator:
    """The periodic evaluator on the first `config.eval.num_prompts` held-out prompts (a
    finite held-out set with fewer prompts is used once each, not cycled: all of it up to
    `eval.batch_size`, else the largest multiple of `eval.batch_size` it holds), decoding
    with the run's `sampler` (its environment)."""
    num, batch_size = eval_sizes(config, test_source)
    loader = prompt_loader(config, test_source, tokenizer, num, shuffle=False)
    pb = next(loader)
    data = evaluation.EvalData.scored_by(eval_data_name(config, test_source), pb.examples,
                                         verifier)
    return evaluation.Evaluator(sampler, tokenizer, pb.tokens,
                                prompt_mask(pb.lengths, config.data.max_prompt_len), data,
                                batch_size=batch_size, k=config.eval.k,
                                temperature=config.eval.temperature)


def eval_sizes(config, test_source) -> Tuple[int, int]:
    """(held-out prompts, evaluation batch size): `config.eval`'s, shrunk to a finite
    held-out set smaller than `eval.num_prompts`."""
    num, batch_size = config.eval.num_prompts, config.eval.batch_size
    if getattr(test_source, "finite", False) and len(test_source) < num:
        num = len(test_source)
        if num > batch_size:
            num -= num % batch_size
        batch_size = min(batch_size, num)
    return num, batch_size


def sampling_config(config, tokenizer) -> sampling.SamplingConfig:
    s = config.sampling
    return sampling.SamplingConfig(
        temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
        max_new_tokens=s.max_new_tokens, stop_token_ids=(tokenizer.eos_id,),
        num_samples=config.rl.num_samples, pad_id=tokenizer.pad_id,
        cache_window=cache_phases.cache_window_setting(s.cache_window),
        compact_ratio=None if s.get("compact_ratio", -1.0) == -1 else s.compact_ratio,
        attention_impl=s.get("decode_attention", "") or None,
        share_prompt_kv=bool(s.get("share_prompt_kv", False)),
        vocab_limit=tokenizer.vocab_size,  # Ids the tokenizer cannot decode: never drawn.
        tree=tree_rollouts.from_config(s.get("tree")))


def prompts_per_step(config) -> int:
    """P': the prompts sampled per RL step (more than P with dynamic sampling)."""
    if not config.rl.dynamic_sampling:
        return config.rl.num_prompts
    return int(round(config.rl.num_prompts * max(config.rl.oversample, 1.0)))


def sft_state(config, params, placer: Placer, rng) -> Tuple[state_lib.TrainState, object]:
    """(the warm-up's TrainState, its optimizer)."""
    tx = state_lib.make_optimizer(learning_rate=config.sft.learning_rate,
                                  warmup_steps=config.sft.warmup_steps, max_grad_norm=1.0)
    state = placer.scalars(state_lib.create_train_state(params, tx, rng))
    return state.replace(opt_state=placer.opt_state(state.opt_state, tx, params)), tx


def rl_optimizers(config, rl: RLConfig):
    """(policy optimizer, value optimizer or None)."""
    max_norm = config.rl.max_grad_norm or None
    tx = state_lib.make_optimizer(learning_rate=config.rl.learning_rate,
                                  warmup_steps=config.rl.warmup_steps,
                                  total_steps=config.rl.steps * rl.epochs * rl.minibatches,
                                  schedule=config.rl.schedule,
                                  weight_decay=config.rl.weight_decay, max_grad_norm=max_norm)
    value_tx = None
    if rl.needs_value:
        value_tx = state_lib.make_optimizer(learning_rate=config.rl.value_learning_rate,
                                            max_grad_norm=max_norm)
    return tx, value_tx


def build_reward_model(config, tokenizer):
    """The `scoring.RewardModel` of the `reward_model` component of
    `config.reward.components` (its weight from `reward.weights`, its checkpoint from
    `reward.reward_model_path`), or None without it; no weight is read
    (`reward_model_params`). A checkpoint that cannot score this tokenizer's sequences
    raises `ConfigError` naming `reward.reward_model_path`."""
    r = config.reward
    weights = dict(scoring.parse_components(r))
    if "reward_model" not in weights:
        return None
    with user_input("reward.reward_model_path"):
        return scoring.open_reward_model(
            r.reward_model_path, weight=weights["reward_model"],
            microbatches=r.reward_model_microbatches, dtype=config.model.dtype,
            param_dtype=config.model.param_dtype, vocab_size=tokenizer.vocab_size,
            max_length=config.data.max_prompt_len + config.sampling.max_new_tokens)


def reward_model_params(config, reward_model, placer: Placer):
    """The frozen parameters of `reward_model` (None: None) born sharded by `placer`: each
    process reads only its devices' slices of `reward.reward_model_path`."""
    if reward_model is None:
        return None
    return scoring.load_reward_params(config.reward.reward_model_path, reward_model,
                                      placer.shardings)


def rl_state(rl: RLConfig, params, placer: Placer, tx, value_tx, *, model_config, init_rng,
             rl_rng, reward_params=None, reference_memory="device",
             teacher=None) -> state_lib.TrainState:
    """The RL TrainState: policy (+ reference model, `reference.reference_params`: the compute
    dtype, in `reference_memory`; + value model from the policy, + a frozen reward model's
    parameters, and a `distill.Teacher`, already placed), placed."""
    value_params = None
    if rl.needs_value:  # PPO: a value model initialised from the (warmed-up) policy.
        value_params = placer.value_params(models.init_value_params(
            model_config, init_rng, adapters.full_weights(params, model_config)))
    state = state_lib.create_train_state(
        params, tx, rl_rng,
        ref_params=reference.reference_params(params, model_config, reference_memory)
        if rl.needs_reference and not lora.has_adapters(params) else None,  # LoRA: the base.
        value_params=value_params, value_tx=value_tx,
        kl_coef=rl.kl_coef if rl.adaptive_kl else None, reward_params=reward_params)
    if teacher is not None:  # On-policy distillation: the frozen teacher, already placed.
        state = state.replace(teacher_params=teacher)
    state = placer.scalars(state.replace(opt_state=placer.opt_state(state.opt_state, tx, params)))
    if rl.needs_value:
        state = state.replace(value_opt_state=placer.value_opt_state(
            state.value_opt_state, value_tx, value_params))
    return state


def place_rl_batch(placer: Placer, pb, config, tokenizer) -> dict:
    """The RL batch of `pb` placed (+ the worked solutions with rl.offpolicy_per_group)."""
    batch = {"prompt_tokens": pb.tokens, "answers": pb.answers,
             "prompt_mask": prompt_mask(pb.lengths, config.data.max_prompt_len)}
    if config.rl.offpolicy_per_group or config.rl.hint_mode != "off":
        with user_input("rl.offpolicy_per_group" if config.rl.offpolicy_per_group else
                        "rl.hint_mode"):
            batch.update(offpolicy.solution_arrays(pb.examples, tokenizer,
                                                   config.sampling.max_new_tokens))
    if config.rl.verify_groups:
        with user_input("rl"):
            batch.update(verify_arrays(config.rl, tokenizer, len(pb.examples)))
    if config.data.rubric_field:
        d = config.data
        with user_input("data.rubric_field"):
            batch.update(rubrics.rubric_arrays(pb.examples, tokenizer, field=d.rubric_field,
                                               size=d.rubric_size, max_tokens=d.rubric_tokens))
    return placer.batch(batch, data_name(config))


def verify_arrays(rl, tokenizer, p: int) -> dict:
    """{"verify_template" [P', Lt], "verify_verdicts" [P', 2] (yes, no)} int32: what
    self-verification (`train/verify.py`) reads, the same in every row."""
    from rlvr_jax.data.tokenizers import single_token
    ids = tokenizer.encode(rl.verify_template)
    verdicts = [single_token(tokenizer, rl.verify_yes, "rl.verify_yes"),
                single_token(tokenizer, rl.verify_no, "rl.verify_no")]
    return {"verify_template": np.tile(np.asarray(ids, np.int32), (p, 1)),
            "verify_verdicts": np.tile(np.asarray(verdicts, np.int32), (p, 1))}


def data_name(config) -> str:
    """The training data in words, for errors: `data.task=...` or `data.path=...`."""
    d = config.data
    return f"data.task={d.task}" if d.source == "task" else f"data.path={d.path}"


def decode_first_samples(tokenizer, samples, g: int, k: int) -> Tuple[list, np.ndarray]:
    """(texts, rewards) of the first sample of each of the first k prompts."""
    rows = slice(0, g * k, g)
    tokens, mask, rewards = distributed.to_host(
        (samples["tokens"], samples["mask"], samples["rewards"]))
    return scoring.decode_completions(tokenizer, tokens[rows], mask[rows]), rewards[rows]
