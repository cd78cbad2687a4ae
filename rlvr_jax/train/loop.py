"""`run(config, workdir)`: build everything from a config, warm up, train with RL, evaluate.

This is optional glue over the free functions in `step.py`, `evaluate.py`,
`rlvr_jax.data`, `rlvr_jax.tasks` and `rlvr_jax.sharding`.
"""
import json
import os
import time
from typing import Any, Dict, Optional

import jax
import jax.numpy as jnp
import numpy as np

from rlvr_jax import distributed, models, sampling, sharding, tasks
from rlvr_jax.data import datasets
from rlvr_jax.data.tokenizers import load_tokenizer
from rlvr_jax.train import state as state_lib
from rlvr_jax.train import step as step_lib
from rlvr_jax.train.rl_config import from_config as rl_config_from  # noqa: F401 (public)
from rlvr_jax.train.checkpoint import Checkpointer
from rlvr_jax.train.evaluate import Evaluator, decode_completions
from rlvr_jax.train.logging import MetricsWriter, SampleWriter, progress_bar


# ----------------------------------------------------------------------------- builders

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
    if overrides["vocab_size"] < tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {overrides['vocab_size']} is smaller than the "
                         f"tokenizer's {tokenizer.vocab_size}")
    return base.replace(dtype=m.dtype, param_dtype=m.param_dtype, remat=m.remat, **overrides)


def build_task_and_sources(config):
    """(task or None, train source, test source) from `config.data`."""
    d = config.data
    if d.source == "task":
        task = tasks.get(d.task, **d.task_kwargs.to_dict())
        return (task, datasets.TaskSource(task, seed=config.seed, split="train"),
                datasets.TaskSource(task, seed=config.seed + 1, split="test"))
    readers = {"jsonl": datasets.read_jsonl, "parquet": datasets.read_parquet}
    if d.source in readers:
        data = readers[d.source](d.path, prompt_field=d.prompt_field, answer_field=d.answer_field)
        return None, data, data
    if d.source == "tfds":
        return None, datasets.read_tfds(d.path, split="train"), datasets.read_tfds(d.path,
                                                                                   split="test")
    raise ValueError(f"data.source must be task, jsonl, parquet or tfds; got {d.source!r}")


def build_mesh(config):
    mesh_cfg = sharding.default_mesh_config()
    for key in mesh_cfg:
        if key in config.mesh:
            mesh_cfg[key] = config.mesh[key]
    devices = jax.devices()
    if config.mesh.num_devices:
        devices = devices[:config.mesh.num_devices]
    return sharding.make_mesh(mesh_cfg, devices=devices), sharding.get_rules(config.mesh.rules)


def _prompt_mask(lengths: np.ndarray, width: int) -> np.ndarray:
    return (np.arange(width)[None, :] >= width - lengths[:, None]).astype(np.int32)


def _host_verifier(config, task):
    """fn(text, example) -> float for host scoring, plus (check_steps, answer_key)."""
    if task is not None:
        return task.verify, task.check_steps, tasks.extract_int_answer
    from rlvr_jax import rewards
    return (lambda text, ex: float(rewards.math_reward(text, ex.answer))), None, \
        rewards.extract_answer


class _Placer:
    """Puts params, states and batches on the mesh."""

    def __init__(self, mesh, rules, model_config):
        self.mesh, self.rules = mesh, rules
        self.specs = models.param_logical_axes(model_config)
        self.value_specs = models.value_logical_axes(model_config)

    def params(self, params):
        return sharding.shard_params(params, self.specs, self.mesh, self.rules)

    def opt_state(self, opt_state, tx, params):
        return sharding.shard_optimizer_state(opt_state, tx, params, self.specs, self.mesh,
                                              self.rules)

    def value_params(self, value_params):
        return sharding.shard_params(value_params, self.value_specs, self.mesh, self.rules)

    def value_opt_state(self, opt_state, tx, value_params):
        return sharding.shard_optimizer_state(opt_state, tx, value_params, self.value_specs,
                                              self.mesh, self.rules)

    def batch(self, batch):
        # Every process's loader yields the whole global batch (same seed, same order).
        return sharding.make_global_batch(batch, self.mesh, rules=self.rules,
                                          same_on_all_processes=True)


# ----------------------------------------------------------------------------- phases

def supervised_warmup(config, state, sft_step, loader, writer, bar_desc="warm-up"):
    """`config.sft.steps` supervised steps on worked solutions."""
    n_new = config.sampling.max_new_tokens
    tokenizer = loader.tokenizer
    bar = progress_bar(config.sft.steps, bar_desc)
    for i in range(config.sft.steps):
        pb = next(loader)
        comp, comp_mask = datasets.completion_arrays(
            [ex.solution for ex in pb.examples], tokenizer, max_len=n_new)
        pmask = _prompt_mask(pb.lengths, pb.tokens.shape[1])
        batch = {"tokens": np.concatenate([pb.tokens, comp], 1),
                 "attention": np.concatenate([pmask, comp_mask.astype(np.int32)], 1),
                 "loss_mask": np.concatenate([np.zeros_like(pmask), comp_mask.astype(np.int32)],
                                             1)}
        state, metrics = sft_step(state, jax.tree.map(jnp.asarray, batch))
        if (i + 1) % config.log_every == 0 or i + 1 == config.sft.steps:
            metrics = {k: float(v) for k, v in metrics.items()}
            writer.write(i + 1, metrics, phase="sft")
            bar.set_postfix(loss=f"{metrics['sft/loss']:.3f}")
        bar.update(1)
    bar.close()
    return state


def run(config, workdir: str, *, progress: bool = True) -> Dict[str, Any]:
    """Runs a whole experiment; returns the final metrics (also in workdir/summary.json).

    Phases: supervised warm-up (config.sft.steps), evaluation, RL (config.rl.steps) with
    periodic evaluation, final evaluation. Metrics go to workdir/metrics.jsonl.
    """
    distributed.initialize(config.distributed)  # Before anything touches a device.
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write(config.to_json_best_effort(indent=2))
    rl = rl_config_from(config)  # Validates config.rl before any work is done.
    tokenizer = load_tokenizer(config.tokenizer, chat_template=config.data.chat_template or None)
    model_config = build_model_config(config, tokenizer)
    task, train_source, test_source = build_task_and_sources(config)
    mesh, rules = build_mesh(config)
    placer = _Placer(mesh, rules, model_config)
    rng = jax.random.PRNGKey(config.seed)
    init_rng, sft_rng, rl_rng, eval_rng = jax.random.split(rng, 4)
    if config.model.hf_checkpoint:
        from rlvr_jax.models import hf
        _, params = hf.load_hf_checkpoint(config.model.hf_checkpoint,
                                          dtype=config.model.dtype,
                                          param_dtype=config.model.param_dtype)
    else:
        params = models.init_params(model_config, init_rng)
    params = placer.params(params)

    ckpt, resume_step, resumed = _open_checkpoints(config, workdir)
    writer = MetricsWriter(workdir, enabled=jax.process_index() == 0)
    summary: Dict[str, Any] = {"model_params": model_config.num_params()}
    n_new = config.sampling.max_new_tokens
    tp = config.data.max_prompt_len

    # Held-out prompts, encoded once.
    eval_loader = datasets.PromptLoader(test_source, tokenizer, batch_size=config.eval.num_prompts,
                                        max_prompt_len=tp, overflow=config.data.overflow,
                                        shuffle=False)
    eval_batch = next(eval_loader)
    verify, check_steps, answer_key = _host_verifier(config, task)
    evaluator = Evaluator(model_config, tokenizer, eval_batch.tokens,
                          _prompt_mask(eval_batch.lengths, tp), eval_batch.examples, verify,
                          check_steps=check_steps, answer_key=answer_key, max_new_tokens=n_new,
                          batch_size=config.eval.batch_size, k=config.eval.k,
                          temperature=config.eval.temperature)

    def evaluate(step, phase):
        with sharding.activate(mesh, rules):
            metrics = evaluator(state.params, eval_rng)
        writer.write(step, metrics, phase=phase)
        return metrics

    # 1. Supervised warm-up.
    if config.sft.steps > 0 and resumed is None:  # A checkpoint is always after the warm-up.
        sft_tx = state_lib.make_optimizer(learning_rate=config.sft.learning_rate,
                                          warmup_steps=config.sft.warmup_steps,
                                          max_grad_norm=1.0)
        state = state_lib.create_train_state(params, sft_tx, sft_rng)
        state = state.replace(opt_state=placer.opt_state(state.opt_state, sft_tx, params))
        loader = datasets.PromptLoader(train_source, tokenizer, batch_size=config.sft.batch_size,
                                       max_prompt_len=tp, overflow=config.data.overflow,
                                       seed=config.seed)
        with sharding.activate(mesh, rules):
            state = supervised_warmup(config, state, step_lib.make_sft_step(model_config, sft_tx),
                                      loader, writer)
        params = state.params
    else:
        state = state_lib.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                                     opt_state=None, rng=sft_rng)
    if resumed is None:
        summary["after_warmup"] = evaluate(0, "eval")
        _print(progress, "after warm-up", summary["after_warmup"])
    else:
        summary["after_warmup"] = resumed["after_warmup"]

    # 2. RL.
    g = config.rl.num_samples
    prompts_per_step = int(round(config.rl.num_prompts * max(config.rl.oversample, 1.0)))
    if not config.rl.dynamic_sampling:
        prompts_per_step = config.rl.num_prompts
    sampling_config = sampling.SamplingConfig(
        temperature=config.sampling.temperature, top_k=config.sampling.top_k,
        top_p=config.sampling.top_p, max_new_tokens=n_new, stop_token_ids=(tokenizer.eos_id,),
        num_samples=g, pad_id=tokenizer.pad_id)
    tx = state_lib.make_optimizer(learning_rate=config.rl.learning_rate,
                                  warmup_steps=config.rl.warmup_steps,
                                  total_steps=config.rl.steps * rl.epochs * rl.minibatches,
                                  schedule=config.rl.schedule,
                                  weight_decay=config.rl.weight_decay,
                                  max_grad_norm=config.rl.max_grad_norm or None)
    value_tx = value_params = None
    if rl.needs_value:  # PPO: a value model initialised from the (warmed-up) policy.
        value_tx = state_lib.make_optimizer(learning_rate=config.rl.value_learning_rate,
                                            max_grad_norm=config.rl.max_grad_norm or None)
        value_params = placer.value_params(models.init_value_params(
            model_config, init_rng, params))
    state = state_lib.create_train_state(
        params, tx, rl_rng,
        ref_params=jax.tree.map(jnp.copy, params) if rl.needs_reference else None,
        value_params=value_params, value_tx=value_tx,
        kl_coef=rl.kl_coef if rl.adaptive_kl else None)
    state = state.replace(opt_state=placer.opt_state(state.opt_state, tx, params))
    if rl.needs_value:
        state = state.replace(value_opt_state=placer.value_opt_state(
            state.value_opt_state, value_tx, value_params))
    decode_shardings = None
    if config.sampling.decode_rules:  # Re-lay the parameters out for decoding.
        decode_shardings = sharding.logical_to_mesh_sharding(
            placer.specs, mesh, sharding.get_rules(config.sampling.decode_rules), params)
    use_token_verifier = _use_token_verifier(config, task)
    if use_token_verifier:
        rl_step = step_lib.make_rl_step(model_config, sampling_config, rl, tx,
                                        tasks.make_token_verifier(tokenizer),
                                        return_rollout=True,
                                        decode_shardings=decode_shardings,
                                        value_tx=value_tx)
    else:
        sample_fn = step_lib.make_sample_fn(model_config, sampling_config,
                                            decode_shardings=decode_shardings)
        update_fn = step_lib.make_update_fn(model_config, sampling_config, rl, tx,
                                            value_tx=value_tx)
    loader = datasets.PromptLoader(train_source, tokenizer, batch_size=prompts_per_step,
                                   max_prompt_len=tp, overflow=config.data.overflow,
                                   seed=config.seed + 7)
    last_eval, start = summary["after_warmup"], 0
    saving = ckpt is not None and config.checkpoint.every > 0
    if resumed is not None:  # Exact resume: state (params, optimizer, rng), data, evals.
        state, resumed = ckpt.restore(resume_step, state)
        loader.restore(resumed["loader"])
        last_eval, start = resumed["last_eval"], resume_step
    elif saving:  # Step 0: the warm-up is never redone once RL has started.
        ckpt.save(0, state, _checkpoint_extra(loader, writer, summary, last_eval), force=True)
    sample_writer = SampleWriter(workdir, enabled=jax.process_index() == 0)
    bar = progress_bar(config.rl.steps, "RL")
    bar.update(start)
    for i in range(start, config.rl.steps):
        t0 = time.perf_counter()
        pb = next(loader)
        batch = placer.batch({"prompt_tokens": pb.tokens,
                              "prompt_mask": _prompt_mask(pb.lengths, tp),
                              "answers": pb.answers})
        with sharding.activate(mesh, rules):
            log_samples = (config.log_samples_every > 0 and
                           (i + 1) % config.log_samples_every == 0)
            if use_token_verifier:
                state, metrics, samples = rl_step(state, batch)
                if log_samples:  # The first completion of each of the first prompts.
                    rows = slice(0, g * config.log_num_samples, g)
                    texts = decode_completions(tokenizer, samples["tokens"][rows],
                                               samples["mask"][rows])
                    rewards = np.asarray(samples["rewards"][rows])
            else:
                sample_rng = jax.random.fold_in(state.rng, 2**20 + i)
                rollout = sample_fn(state.params, batch, sample_rng)
                texts = decode_completions(tokenizer, rollout.tokens, rollout.mask)
                examples = [ex for ex in pb.examples for _ in range(g)]
                rewards = np.array([verify(t, ex) for t, ex in zip(texts, examples)], np.float32)
                state, metrics = update_fn(state, rollout, jnp.asarray(rewards))
                metrics["reward/correct"] = float(np.mean(rewards >= 1.0))
                texts, rewards = texts[::g], rewards[::g]
            if log_samples:
                k = config.log_num_samples
                sample_writer.write(i + 1, pb.examples[:k], texts[:k], rewards[:k], 1)
        metrics = {k: float(v) for k, v in metrics.items()}
        _check_finite(metrics, i + 1, ckpt)  # Before anything of this step is saved.
        dt = time.perf_counter() - t0
        metrics["perf/step_time_s"] = dt
        metrics["perf/tokens_per_s"] = metrics.get("rollout/valid_tokens", 0.0) / dt
        metrics["perf/sampled_tokens_per_s"] = prompts_per_step * g * metrics[
            "rollout/response_length"] / dt
        metrics["train/pass@1"] = metrics.get("reward/correct", 0.0)
        state = state.replace(data_position=jnp.asarray(loader.state()["index"], jnp.int32))
        if (i + 1) % config.log_every == 0 or i + 1 == config.rl.steps:
            writer.write(i + 1, metrics, phase="rl")
        if config.eval.every and (i + 1) % config.eval.every == 0 and i + 1 < config.rl.steps:
            last_eval = evaluate(i + 1, "eval")
        if saving:  # Every checkpoint.every steps and the last; async, atomic.
            ckpt.save(i + 1, state, _checkpoint_extra(loader, writer, summary, last_eval),
                      force=i + 1 == config.rl.steps)
        bar.set_postfix(reward=f"{metrics.get('rollout/reward_mean', 0.0):.3f}",
                        pass1=f"{last_eval['eval/pass@1']:.3f}")
        bar.update(1)
    bar.close()
    summary["after_rl"] = evaluate(config.rl.steps, "eval")
    _print(progress, "after RL", summary["after_rl"])
    writer.close()
    sample_writer.close()
    if ckpt is not None:
        ckpt.close()  # Waits for the last save.
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    summary["state"] = state
    return summary


def _use_token_verifier(config, task) -> bool:
    v = config.reward.verifier
    if v not in ("auto", "token", "task", "math"):
        raise ValueError(f"reward.verifier must be auto, token, task or math; got {v!r}")
    has_token = task is not None and task.name == "arithmetic"
    if v == "token" and not has_token:
        raise ValueError("reward.verifier='token' needs the arithmetic task (the only one "
                         "with an on-device verifier)")
    return has_token and v in ("auto", "token")


def _check_finite(metrics: Dict[str, float], step: int,
                  ckpt: Optional[Checkpointer] = None) -> None:
    """Raises FloatingPointError on a non-finite loss, gradient norm or update norm.

    The step's state is not saved; the save in flight (an earlier, finite step) is
    completed first, so the latest checkpoint on disk is the last good one.
    """
    bad = [k for k in ("train/loss", "train/grad_norm", "train/update_norm") if k in metrics
           and not np.isfinite(metrics[k])]
    if bad:
        where = "no checkpoint was saved"
        if ckpt is not None:
            ckpt.wait()
            last = ckpt.latest_step()
            ckpt.close()
            if last is not None:
                where = f"the last good checkpoint is step {last} in {ckpt.directory}"
        raise FloatingPointError(f"non-finite {bad} at RL step {step}: "
                                 f"{ {k: metrics[k] for k in bad} }; stopping ({where})")


def _open_checkpoints(config, workdir: str):
    """(Checkpointer or None, RL step to resume from or None, that checkpoint's extra or None).

    On resume, workdir/metrics.jsonl is cut back to its length when the checkpoint was
    taken: the lines the interrupted run wrote after it are written again, once, by the
    resumed run, so the file reads as one uninterrupted run.
    """
    c = config.checkpoint
    directory = os.path.join(workdir, "checkpoints")
    if c.every <= 0 and not (c.resume and os.path.isdir(directory)):
        return None, None, None
    ckpt = Checkpointer(directory, max_to_keep=c.keep, save_interval_steps=max(c.every, 1),
                        async_save=c.async_save)
    step = ckpt.latest_step()
    if step is None:
        return ckpt, None, None
    if not c.resume:
        ckpt.close()
        raise ValueError(f"{directory} holds checkpoints (latest step {step}) and "
                         "checkpoint.resume is False: use a new workdir or resume")
    extra = ckpt.read_extra(step)
    path, offset = os.path.join(workdir, "metrics.jsonl"), extra.get("metrics_offset")
    if jax.process_index() == 0 and offset is not None and os.path.exists(path) \
            and os.path.getsize(path) > offset:
        with open(path, "r+b") as f:
            f.truncate(offset)
    return ckpt, step, extra


def _checkpoint_extra(loader, writer, summary, last_eval) -> Dict[str, Any]:
    """The JSON saved beside the state: what the loop needs to continue exactly."""
    return {"phase": "rl", "loader": loader.state(),
            "metrics_offset": os.path.getsize(writer.path) if writer.enabled else None,
            "after_warmup": {k: float(v) for k, v in summary["after_warmup"].items()},
            "last_eval": {k: float(v) for k, v in last_eval.items()}}


def _print(enabled: bool, label: str, metrics: Dict[str, float]) -> None:
    if enabled and jax.process_index() == 0:
        p, lo, hi = metrics["eval/pass@1"], metrics["eval/pass@1_ci_low"], \
            metrics["eval/pass@1_ci_high"]
        print(f"[{label}] held-out greedy pass@1 = {p:.3f} (95% CI {lo:.3f}-{hi:.3f}, "
              f"{int(metrics['eval/num_prompts'])} prompts)", flush=True)
