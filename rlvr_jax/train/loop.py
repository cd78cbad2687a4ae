"""`run(config, workdir)`: build everything from a config, warm up, train with RL, evaluate.

The phases, in the order `run` calls them (each a function below):

  setup       the tokenizer, model, data, mesh, verifier, evaluator (`train/build.py`),
              checkpoints opened (resume) and the metrics writer
  warm_up     config.sft.steps supervised steps on worked solutions (not on resume)
  evaluate    held-out metrics (`rlvr_jax.evaluation`) after the warm-up, every
              config.eval.every RL steps and at the end
  reinforce   config.rl.steps RL steps (`rl_step` each), checkpointed, exactly resumable
  finish      summary.json; writers and checkpoints closed

The phases are a small public API (`lab/runner.py` drives `setup`, `open_logs`, `warm_up`,
`reinforce` as they are). Rewards are scored by the run's `scoring.Scorer`, rollouts drawn by
its `rlvr_jax.sampler.Sampler`; the RL step composes the two (`step.make_step`): optional glue.
"""
import dataclasses
import errno
import os
import sys
import time
from typing import Any, Callable, Dict, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

import ml_collections

from rlvr_jax import distributed, evaluation, models, scoring, sharding
from rlvr_jax.data import adaptive as adaptive_data
from rlvr_jax.data import datasets
from rlvr_jax.data.tokenizers import Tokenizer, load_tokenizer
from rlvr_jax.sampler import Sampler
from rlvr_jax.train import adaptive, adapters, async_step, build, distill, judges, preempt
from rlvr_jax.train import resume, verify
from rlvr_jax.train import lock as lock_lib
from rlvr_jax.train import workdir as workdir_lib
from rlvr_jax.train import placer as placer_lib
from rlvr_jax.train.sft import make_sft_step
from rlvr_jax.train.checkpoint import Checkpointer, disk_full_error
from rlvr_jax.train.logging import MetricsWriter, SampleWriter, exclude_compile, progress_bar
from rlvr_jax.train.rl_config import RLConfig
from rlvr_jax.train.rl_config import from_config as rl_config_from
from rlvr_jax.train.errors import ConfigError, user_input
from rlvr_jax.train.validate import validate


# A prompt source (`train/build.py`), and the adaptive data told each RL step's results.
Source = Union[datasets.TaskSource, datasets.ExampleList, adaptive_data.Curriculum,
               adaptive_data.Mixture]
Adaptive = Union[adaptive_data.PromptFilter, adaptive_data.Curriculum, adaptive_data.Mixture]


@dataclasses.dataclass
class Run:
    """What the phases of one run share; made once by `setup` (the logs by `open_logs`,
    the adaptive data and a checkpointer opened later by `reinforce`)."""
    config: ml_collections.ConfigDict
    workdir: str
    rl: RLConfig
    tokenizer: Tokenizer
    model_config: models.ModelConfig
    train_source: Source
    warmup_source: Source
    placer: placer_lib.Placer
    sampler: Sampler  # The rollout kind (plain, device or host episodes), built once.
    scorer: scoring.Scorer  # The verifier and the reward terms.
    evaluator: evaluation.Evaluator
    keys: Dict[str, jax.Array]  # init, sft, rl, eval
    reward_model: Optional[scoring.RewardModel] = None  # Its weights are read by `reinforce`.
    adaptive: Optional[Adaptive] = None  # Told each RL step's results; checkpointed.
    ckpt: Optional[Checkpointer] = None
    writer: Optional[MetricsWriter] = None
    samples: Optional[SampleWriter] = None
    progress: bool = True
    release: Callable[[], None] = lambda: None  # Releases the workdir lock (process 0).


def run(config, workdir: str, *, progress: bool = True) -> Dict[str, Any]:
    """Runs a whole experiment; returns the final metrics (also in workdir/summary.json).

    Phases: supervised warm-up (config.sft.steps), evaluation, RL (config.rl.steps) with
    periodic evaluation, final evaluation. Metrics go to workdir/metrics.jsonl.

    Before anything is compiled or written, the config is validated (`validate`) and the
    workdir read (`workdir.plan`: start, start again, resume or refuse); a problem the user
    can fix raises `ConfigError` naming the field, file or data line; so does a workdir
    another live run holds (`train/lock.py`). A SIGTERM checkpoints the current RL step and
    raises `preempt.Preempted`.
    """
    validate(config)
    distributed.initialize(config.distributed)  # Before anything touches a device.
    lock_lib.check_all_processes(workdir)
    plan = workdir_lib.plan(config, workdir)
    distributed.sync("rlvr_jax:planned")  # Every process read the workdir before it changes.
    with preempt.handle_sigterm():
        r, resumed = setup(config, plan, progress)
        try:
            return _train(r, config, plan, resumed)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            raise disk_full_error(r.ckpt, e) from None
        finally:
            r.release()


def _train(r: Run, config, plan: workdir_lib.Plan, resumed) -> Dict[str, Any]:
    params = build.initial_params(config, r.model_config, r.placer, r.keys["init"])
    summary: Dict[str, Any] = {"model_params": r.model_config.num_params(),
                               "eval_data": r.evaluator.data.name}
    _note(r.progress, f"held-out evaluation data: {summary['eval_data']}")
    if resumed is None:  # A checkpoint is always after the warm-up.
        open_logs(r)
        params = warm_up(r, params)
        summary["after_warmup"] = evaluate(r, params, 0, label="after warm-up")
    else:
        summary["after_warmup"] = resumed["after_warmup"]
    state = reinforce(r, params, summary["after_warmup"], plan.resume_step, resumed)
    summary["after_rl"] = evaluate(r, state.params, config.rl.steps, label="after RL")
    return finish(r, summary, state)


# ----------------------------------------------------------------------------- phases

def setup(config, plan: workdir_lib.Plan, progress: bool = True):
    """(Run, the resumed checkpoint's extra or None). Everything read from the config, the
    files and the data is built (and checked) before the workdir is first written."""
    with user_input("tokenizer"):
        tokenizer = load_tokenizer(config.tokenizer,
                                   chat_template=config.data.chat_template or None)
    with user_input("model.hf_checkpoint" if config.model.hf_checkpoint else "model"):
        model_config = build.build_model_config(config, tokenizer)
    task, train_source, test_source, warmup_source = build.build_sources(config)
    for source in {id(s): s for s in (train_source, warmup_source, test_source)}.values():
        build.check_fit(config, model_config, tokenizer, source)
    with user_input("mesh"):
        mesh, rules = build.build_mesh(config)
    rl = rl_config_from(config)
    placer = placer_lib.Placer(mesh, rules, model_config)
    reward_model = judges.scoring_model(config, tokenizer)  # A reward model or a judge.
    env = build.build_env(config, tokenizer)
    with user_input("reward"):
        scorer = scoring.scorer_from_config(config, task, tokenizer, rl=rl,
                                            reward_model=reward_model, env=env)
    sampler = build.build_sampler(config, model_config, tokenizer, placer, env)
    evaluator = build.build_evaluator(config, tokenizer, test_source, scorer.verifier, sampler)
    release = lambda: None  # noqa: E731
    if jax.process_index() == 0:
        release = workdir_lib.prepare(plan, config)  # The first write; takes the lock.
    distributed.sync("rlvr_jax:prepared")
    if plan.notice and progress and jax.process_index() == 0:
        print(plan.notice, file=sys.stderr, flush=True)
    keys = dict(zip(("init", "sft", "rl", "eval"),
                    jax.random.split(jax.random.PRNGKey(config.seed), 4)))
    r = Run(config, plan.workdir, rl, tokenizer, model_config, train_source, warmup_source,
            placer, sampler, scorer, evaluator, keys, reward_model=reward_model,
            progress=progress, release=release)
    try:
        r.ckpt, resumed = resume.open_checkpoints(config, plan)
    except BaseException:
        release()
        raise
    return r, resumed


def open_logs(r: Run, resumed: Optional[Dict[str, Any]] = None) -> None:
    """Opens metrics.jsonl and samples.jsonl for appending (process 0 writes).

    On resume (`resumed`: the checkpoint's extra) both are first cut back to their lengths
    when the checkpoint was taken (and a finished run's summary.json is removed): the lines
    the interrupted run wrote after it are written again, once, by the resumed run, so the
    files read as one uninterrupted run.
    """
    main = jax.process_index() == 0
    if main and resumed is not None:
        summary = os.path.join(r.workdir, workdir_lib.SUMMARY)
        if os.path.exists(summary):  # A finished run trained on: not finished until it is.
            os.remove(summary)
        for name, key in (("metrics.jsonl", "metrics_offset"), ("samples.jsonl", "samples_offset")):
            path, offset = os.path.join(r.workdir, name), resumed.get(key)
            if offset is not None and os.path.exists(path) and os.path.getsize(path) > offset:
                with open(path, "r+b") as f:
                    f.truncate(offset)
    r.writer = MetricsWriter(r.workdir, enabled=main, wandb_project=r.config.log_wandb)
    r.samples = SampleWriter(r.workdir, enabled=main)


def warm_up(r: Run, params, stop: Optional[Callable[[int, Any], bool]] = None):
    """`config.sft.steps` supervised steps from `params` (`stop`: `supervised_warmup`'s)."""
    config = r.config
    if config.sft.steps <= 0:
        return params
    state, tx = build.sft_state(config, params, r.placer, r.keys["sft"])
    loader = build.prompt_loader(config, r.warmup_source, r.tokenizer, config.sft.batch_size,
                                 seed=config.seed)
    with sharding.activate(r.placer.mesh, r.placer.rules):
        state = supervised_warmup(config, state, make_sft_step(r.model_config, tx), loader,
                                  r.writer, sampler=r.sampler, placer=r.placer, stop=stop)
    return state.params


def supervised_warmup(config, state, sft_step, loader, writer, bar_desc="warm-up",
                      sampler: Optional[Sampler] = None, placer=None, stop=None):
    """`config.sft.steps` supervised steps on worked solutions (with a multi-turn `sampler`,
    the observation tokens in them are attended to but not predicted: `warmup_loss_mask`);
    the batches placed by `placer` (a `placer.Placer`) like the RL batches (None: `jnp.asarray`,
    one process). `stop(step, params) -> bool` ends it after that step (the lab's criterion)."""
    place = (lambda b: jax.tree.map(jnp.asarray, b)) if placer is None else (
        lambda b: placer.batch(b, source=build.data_name(config) + " (warm-up)"))
    n_new = config.sampling.max_new_tokens
    tokenizer = loader.tokenizer
    bar = progress_bar(config.sft.steps, bar_desc)
    for i in range(config.sft.steps):
        if preempt.requested():
            raise preempt.Preempted("terminated (SIGTERM) during the warm-up, before the first "
                                    "checkpoint; rerun the same command to start again")
        pb = next(loader)
        comp, comp_mask = datasets.completion_arrays(
            [ex.solution for ex in pb.examples], tokenizer, max_len=n_new)
        comp_mask &= np.array([bool(ex.solution) for ex in pb.examples])[:, None]  # none: no target
        pmask = build.prompt_mask(pb.lengths, pb.tokens.shape[1])
        targets = warmup_loss_mask(sampler, tokenizer, pb, pmask, comp, comp_mask)
        if config.sft.verify_fraction:  # Self-verification's format (train/verify.py).
            comp, comp_mask, targets = verify.warmup_rows(
                pb.examples, comp, comp_mask, targets, tokenizer, config.rl,
                config.sft.verify_fraction, np.random.default_rng([config.seed, i]))
        batch = {"tokens": np.concatenate([pb.tokens, comp], 1),
                 "attention": np.concatenate([pmask, comp_mask.astype(np.int32)], 1),
                 "loss_mask": np.concatenate([np.zeros_like(pmask), targets], 1)}
        state, metrics = sft_step(state, place(batch))
        last = stop is not None and stop(i + 1, state.params)
        if (i + 1) % config.log_every == 0 or i + 1 == config.sft.steps or last:
            metrics = {k: float(v) for k, v in metrics.items()}
            writer.write(i + 1, metrics, phase="sft")
            bar.set_postfix(loss=f"{metrics['sft/loss']:.3f}")
        bar.update(1)
        if i == 0:
            exclude_compile(bar)
        if last:  # The criterion is met.
            break
    bar.close()
    return state


def warmup_loss_mask(sampler: Optional[Sampler], tokenizer, pb, pmask, comp, comp_mask
                     ) -> np.ndarray:
    """[P, N] int32 tokens the warm-up predicts: the worked solution (and its EOS), less the
    observations the `sampler`'s environment writes, checked against it (`Sampler.replay`)."""
    if sampler is None:
        return comp_mask.astype(np.int32)
    targets, agrees = sampler.replay(tokenizer, comp, comp_mask, pb.tokens, pmask, pb.answers,
                                     pb.examples)
    if not agrees.all():
        ex = pb.examples[int(np.flatnonzero(~agrees)[0])]
        raise ConfigError(f"env.name: the warm-up solution of {ex.key!r} ({ex.solution!r}) "
                          "disagrees with the environment: its observations are not what the "
                          "tool writes, or it goes on after the episode ends (env.max_turns / "
                          "env.max_turn_tokens)")
    return targets


def evaluate(r: Run, params, step: int, *, label: str = "") -> Dict[str, float]:
    """The held-out metrics of `params`, written at `step` (printed under `label`)."""
    with sharding.activate(r.placer.mesh, r.placer.rules):
        metrics = r.evaluator(params, r.keys["eval"])
    r.writer.write(step, metrics, phase="eval")
    if label:
        _print(r.progress, label, metrics)
    return metrics


def reinforce(r: Run, params, after_warmup: Optional[Dict[str, float]] = None,
              resume_step: Optional[int] = None, resumed: Optional[Dict[str, Any]] = None):
    """config.rl.steps RL steps from `params` (evaluated as `after_warmup`, if it was), or
    from the checkpoint at `resume_step` (its extra: `resumed`); returns the final state.

    Logs every config.log_every steps, evaluates every config.eval.every, checkpoints
    every config.checkpoint.every (and step 0, so the warm-up is never redone)."""
    config = r.config
    summary = {"after_warmup": dict(after_warmup or {})}
    tx, value_tx = build.rl_optimizers(config, r.rl)
    rm = r.reward_model
    params = adapters.attach_for_rl(config, r.model_config, params, r.placer,  # LoRA: RL trains
                                    jax.random.fold_in(r.keys["init"], 1))   # the adapters.
    state = build.rl_state(r.rl, params, r.placer, tx, value_tx, model_config=r.model_config,
                           init_rng=r.keys["init"], rl_rng=r.keys["rl"],
                           reward_params=judges.scoring_model_params(config, rm, r.placer, params),
                           reference_memory=config.mesh.reference_memory,
                           teacher=distill.teacher_of(r.rl, r.model_config, r.placer))
    program = async_step.make_program(config, r.tokenizer, r.sampler, r.scorer, r.rl, tx,
                                      r.placer, value_tx=value_tx)  # Sync, or async rollouts.
    loader = build.prompt_loader(config, r.train_source, r.tokenizer,
                                 build.prompts_per_step(config), seed=config.seed + 7)
    r.adaptive = adaptive.attach(config, r.train_source, loader)
    if resumed is not None:  # Exact resume: state (params, optimizer, rng), data, evals.
        state, resumed = resume.restore(r, resume_step, state)
        open_logs(r, resumed)  # Only now, with the state restored, are the logs cut back.
        loader.restore(resumed["loader"])
        resume.restore_adaptive(r, resumed)
        last_eval, start = resumed["last_eval"], resume_step
    else:
        last_eval, start = summary["after_warmup"], 0
        if resume.saving(r):  # Step 0: the warm-up is never redone once RL has started.
            adapters.save_base(r.workdir, config, state.params)  # LoRA: the base, once.
            r.ckpt.save(0, resume.saved_part(r, state),
                        resume.checkpoint_extra(r, loader, summary, last_eval), force=True)
    bar = progress_bar(config.rl.steps, "RL", initial=start)  # Resumed steps: not in the rate.
    for i in range(start, config.rl.steps):
        if preempt.requested():  # (A collective on multi-host runs: every process asks.)
            stop_on_sigterm(r, i, state, loader, summary, last_eval)
        state, metrics = rl_step(r, program, state, loader, i)
        last_eval = after_rl_step(r, i + 1, state, metrics, loader, summary, last_eval)
        bar.set_postfix(reward=f"{metrics.get('rollout/reward_mean', 0.0):.3f}",
                        pass1=f"{last_eval.get('eval/pass@1', float('nan')):.3f}")
        bar.update(1)
        if i == start:
            exclude_compile(bar)
    bar.close()
    r.scorer.close()  # Host scoring workers, if any.
    return state


def rl_step(r: Run, program, state, loader, i: int):
    """RL step i + 1: the step program (`async_step.make_program`: it takes its prompts from
    `loader`) → float metrics (+ samples) of the batch `pb` it trained on."""
    config, g = r.config, r.config.rl.num_samples
    t0 = time.perf_counter()
    with sharding.activate(r.placer.mesh, r.placer.rules):
        state, metrics, samples, pb = program(state, loader)
        if config.log_samples_every > 0 and (i + 1) % config.log_samples_every == 0:
            k = config.log_num_samples
            texts, rewards = build.decode_first_samples(r.tokenizer, samples, g, k)
            r.samples.write(i + 1, pb.examples[:k], texts[:k], rewards[:k], 1)
    metrics = {k: float(v) for k, v in metrics.items()}
    resume.check_finite(metrics, i + 1, r.ckpt)  # Before anything of this step is saved.
    if r.adaptive is not None:  # What this step's prompts scored steers the next batches.
        r.adaptive.observe(pb, distributed.to_host(samples["correct"]).reshape(-1, g))
        metrics.update(r.adaptive.metrics())
        metrics.update(adaptive.loader_metrics(config, loader))
    dt = time.perf_counter() - t0
    metrics["perf/step_time_s"] = dt
    metrics["perf/tokens_per_s"] = metrics.get("rollout/valid_tokens", 0.0) / dt
    metrics["perf/sampled_tokens_per_s"] = build.prompts_per_step(config) * g * metrics[
        "rollout/response_length"] / dt
    metrics["train/pass@1"] = metrics.get("reward/correct", 0.0)
    state = state.replace(data_position=r.placer.replicated(  # Where the step returns it.
        np.asarray(loader.state()["index"], np.int32)))
    return state, metrics


def after_rl_step(r: Run, step: int, state, metrics, loader, summary, last_eval):
    """Log, evaluate and checkpoint as due after RL step `step`; returns the last eval."""
    config = r.config
    if step % config.log_every == 0 or step == config.rl.steps:
        r.writer.write(step, metrics, phase="rl")
    if config.eval.every and step % config.eval.every == 0 and step < config.rl.steps:
        last_eval = evaluate(r, state.params, step)
    last = step == config.rl.steps  # (Also saved by a run resumed from a SIGTERM's save.)
    if r.ckpt is not None and (resume.saving(r) or last):  # Every checkpoint.every; async, atomic.
        if not resume.saving(r):  # (Else saved with step 0.)
            adapters.save_base(r.workdir, r.config, state.params)
        r.ckpt.save(step, resume.saved_part(r, state),
                    resume.checkpoint_extra(r, loader, summary, last_eval), force=last)
    return last_eval


def stop_on_sigterm(r: Run, step: int, state, loader, summary, last_eval) -> None:
    """Checkpoints RL step `step` (every process takes part in the save; with
    checkpoint.every=0 a checkpointer is opened for it) and raises `preempt.Preempted`."""
    if r.ckpt is None:
        c = r.config.checkpoint
        r.ckpt = Checkpointer(os.path.join(r.workdir, workdir_lib.CHECKPOINTS),
                              max_to_keep=c.keep, async_save=False)
    r.ckpt.wait()  # A periodic save of this step may be in flight: then it is the one.
    if not resume.saving(r):  # (Else saved with step 0.)
        adapters.save_base(r.workdir, r.config, state.params)
    r.ckpt.save(step, resume.saved_part(r, state),
                resume.checkpoint_extra(r, loader, summary, last_eval), force=True)
    r.ckpt.close()
    r.writer.close()
    r.samples.close()
    raise preempt.Preempted(f"terminated (SIGTERM): RL step {step} is saved in "
                            f"{r.ckpt.directory}; rerun the same command to resume", step)


def finish(r: Run, summary, state) -> Dict[str, Any]:
    """Closes the writers and checkpoints (waiting for the last save); writes summary.json."""
    r.writer.close()
    r.samples.close()
    if r.ckpt is not None:
        r.ckpt.close()
    if jax.process_index() == 0:  # Last: a summary.json marks a finished run.
        workdir_lib.write_json_atomic(os.path.join(r.workdir, workdir_lib.SUMMARY), summary)
    summary["state"] = state
    return summary


# ----------------------------------------------------------------------------- helpers

def _note(enabled: bool, text: str) -> None:
    if enabled and jax.process_index() == 0:
        print(text, flush=True)


def _print(enabled: bool, label: str, metrics: Dict[str, float]) -> None:
    if enabled and jax.process_index() == 0:
        p, lo, hi = metrics["eval/pass@1"], metrics["eval/pass@1_ci_low"], \
            metrics["eval/pass@1_ci_high"]
        print(f"[{label}] held-out greedy pass@1 = {p:.3f} (95% CI {lo:.3f}-{hi:.3f}, "
              f"{int(metrics['eval/num_prompts'])} prompts)", flush=True)
