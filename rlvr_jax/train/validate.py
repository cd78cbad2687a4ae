"""`validate(config)`: every section of an experiment config checked before any compilation.

A problem the user can fix (a bad value, a missing file, malformed data, a workdir that
does not fit the run) raises `ConfigError`, whose message starts with the full dotted name
of the field at fault (`sft.batch_size: must be >= 1, got -8`), the file's path, or the
data's `line N`. `scripts/train.py` prints it as one line and exits with status 2.

Nothing here touches a device or compiles: the checks are plain Python on the config, the
file system and the cheap constructors (task, `RLConfig`, `SamplingConfig`) that validate
their own arguments. Checks that need the built tokenizer and data (vocabulary fit) live
with the builders and raise `ConfigError` too (`user_input`).
"""
import os

from rlvr_jax import cache_phases, multiturn, sampling, sharding, tasks, tree_rollouts
from rlvr_jax.models import config as model_config_lib
from rlvr_jax.models import decode_attention
from rlvr_jax.models import presets
from rlvr_jax.train import adaptive, algorithms
from rlvr_jax.train import rl_config as rl_config_lib
from rlvr_jax.train.errors import ConfigError, user_input

SOURCES = ("task", "jsonl", "parquet", "tfds")
OVERFLOW = ("drop", "truncate", "error")
SCHEDULES = ("constant", "cosine")
DTYPES = ("float32", "bfloat16", "float16")


def validate(config) -> None:
    """Raises `ConfigError` naming every problem found in `config`, one per line, root causes
    first (the order of `_CHECKS`: a section stops at its first problem, the others still
    run; a later problem that names a field already reported, or an exception it causes,
    is a follow-on and not reported)."""
    problems, fields = [], []
    for check in _CHECKS:
        try:
            check(config)
        except ConfigError as e:
            text = str(e)
            if not any(f in text for f in fields):  # Else a follow-on of a reported field.
                problems.append(text)
                fields.append(text.split(":", 1)[0])
        except (TypeError, ValueError, KeyError, AttributeError):
            if not problems:
                raise
    if problems:
        raise ConfigError("\n".join(problems))


def _field_error(e: ValueError, section: str, **renames: str) -> ConfigError:
    """A constructor's "name must be ..." error (`RLConfig`, `SamplingConfig` name their
    field first) as "section.name: must be ..." (`renames`: name -> another dotted field)."""
    name, _, rest = str(e).partition(" ")
    return ConfigError(f"{renames.get(name, f'{section}.{name}')}: {rest}")


def _fail(field: str, message: str) -> None:
    raise ConfigError(f"{field}: {message}")


# Sizes and counts: (field, lowest allowed value).
_MINIMUMS = (
    ("seed", 0), ("model.vocab_size", 0), ("model.d_model", 0), ("model.n_layers", 0),
    ("model.n_heads", 0), ("model.n_kv_heads", 0), ("model.head_dim", 0), ("model.d_ff", 0),
    ("model.scan_unroll", 0), ("data.max_prompt_len", 1), ("sampling.max_new_tokens", 1),
    ("sampling.top_k", 0), ("sft.steps", 0), ("sft.batch_size", 1), ("sft.warmup_steps", 0),
    ("rl.steps", 0), ("rl.num_prompts", 1), ("rl.num_samples", 1), ("rl.warmup_steps", 0),
    ("rl.epochs", 1), ("rl.minibatches", 1), ("rl.microbatches", 1), ("rl.logprob_chunk", 1),
    ("rl.overlong_buffer", 0), ("eval.every", 0), ("eval.num_prompts", 1),
    ("eval.batch_size", 1), ("eval.k", 1), ("checkpoint.every", 0), ("checkpoint.keep", 1),
    ("mesh.num_devices", 0), ("log_every", 1), ("log_samples_every", 0),
    ("log_num_samples", 0), ("env.max_turns", 1), ("env.max_turn_tokens", 1),
    ("env.max_obs_tokens", 0), ("env.num_workers", 1), ("data.rubric_size", 1),
    ("data.rubric_tokens", 1),
)


def _get(config, dotted: str):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def _check_ints(config) -> None:
    for field, low in _MINIMUMS:
        value = _get(config, field)
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(field, f"must be an integer, got {value!r}")
        if value < low:
            _fail(field, f"must be >= {low}, got {value}")
    for field in ("sft.learning_rate", "rl.learning_rate", "rl.value_learning_rate"):
        value = _get(config, field)
        if not value > 0:
            _fail(field, f"must be > 0, got {value}")
    for field in ("rl.weight_decay", "rl.max_grad_norm"):
        if _get(config, field) < 0:
            _fail(field, f"must be >= 0 (0: off), got {_get(config, field)}")
    if config.rl.oversample < 1.0:
        _fail("rl.oversample", f"must be >= 1, got {config.rl.oversample}")


def _check_model(config) -> None:
    m = config.model
    if m.hf_checkpoint:
        if not os.path.isdir(m.hf_checkpoint):
            _fail("model.hf_checkpoint", f"no such directory: {m.hf_checkpoint}")
        if not os.path.isfile(os.path.join(m.hf_checkpoint, "config.json")):
            _fail("model.hf_checkpoint", f"{m.hf_checkpoint} has no config.json (expected a "
                  "Hugging Face model directory)")
    elif m.preset not in presets.PRESETS:
        _fail("model.preset", f"unknown preset {m.preset!r}; known: "
              f"{', '.join(sorted(presets.PRESETS))}")
    for field in ("dtype", "param_dtype"):
        if m[field] not in DTYPES:
            _fail(f"model.{field}", f"must be one of {', '.join(DTYPES)}; got {m[field]!r}")
    if m.remat not in model_config_lib.REMAT_POLICIES:
        _fail("model.remat", f"must be one of {', '.join(model_config_lib.REMAT_POLICIES)}; "
              f"got {m.remat!r}")
    if m.get("attention", "auto") not in model_config_lib.ATTENTIONS:
        _fail("model.attention", f"must be one of {', '.join(model_config_lib.ATTENTIONS)}; "
              f"got {m.attention!r}")
    if m.n_heads and m.n_kv_heads and m.n_heads % m.n_kv_heads:
        _fail("model.n_kv_heads", f"must divide model.n_heads={m.n_heads}, got {m.n_kv_heads}")
    tokenizer = config.tokenizer
    if tokenizer != "builtin" and not os.path.exists(tokenizer):
        _fail("tokenizer", f"no such file or directory: {tokenizer} (use \"builtin\", a "
              ".model file, a tokenizer.json or a Hugging Face directory)")


def _check_source(config) -> None:
    d = config.data
    if d.source not in SOURCES:
        _fail("data.source", f"must be one of {', '.join(SOURCES)}; got {d.source!r}")
    if d.overflow not in OVERFLOW:
        _fail("data.overflow", f"must be one of {', '.join(OVERFLOW)}; got {d.overflow!r}")
    if d.source == "task":
        if d.task not in tasks.TASKS:
            _fail("data.task", f"unknown task {d.task!r}; known: {', '.join(sorted(tasks.TASKS))}")
        with user_input("data.task_kwargs"):
            tasks.get(d.task, **d.task_kwargs.to_dict())
        return
    if not d.path:
        what = "a TFDS builder name" if d.source == "tfds" else f"the {d.source} file's path"
        _fail("data.path", f"is empty; data.source={d.source} needs {what}")
    if d.source != "tfds":
        if os.path.isdir(d.path):
            _fail("data.path", f"{d.path} is a directory, not a {d.source} file")
        if not os.path.isfile(d.path):
            _fail("data.path", f"no such file: {d.path}")
    for field in ("prompt_field", "answer_field"):
        if not d[field]:
            _fail(f"data.{field}", "must name a field of the data (it is empty)")
    if d.source in ("jsonl", "parquet"):
        if d.eval_path and not os.path.isfile(d.eval_path):
            _fail("data.eval_path", f"no such file: {d.eval_path}")
        if not d.eval_path and not 0.0 < d.eval_fraction < 1.0:
            _fail("data.eval_fraction", f"must be in (0, 1), got {d.eval_fraction}")


def _check_rubric(config) -> None:
    """A judge template reading {criterion} and data.rubric_field come together, on file data."""
    from rlvr_jax.scoring import parse_components
    d, r = config.data, config.reward
    reads = ("judge" in dict(parse_components(r))
             and "{criterion}" in r.judge_template)
    if reads and not d.rubric_field:
        _fail("reward.judge_template", "reads {criterion}: set data.rubric_field to the data's "
              "field holding each prompt's rubric (data/rubrics.py)")
    if d.rubric_field and not reads:
        _fail("data.rubric_field", "is set but no judge template reads {criterion} (the "
              "`judge` component with {criterion} in reward.judge_template)")
    if d.rubric_field and d.source == "task":
        _fail("data.rubric_field", "needs file data (jsonl / parquet / tfds rows with a rubric); "
              "data.source=task has none")


def _check_reward(config) -> None:
    from rlvr_jax.scoring import check_reward_config
    try:
        check_reward_config(config.reward)  # Its messages name the field.
    except ValueError as e:
        raise ConfigError(str(e)) from e
    _check_rubric(config)
    verifier = config.reward.verifier
    if verifier in ("token", "task") and config.data.source != "task":
        _fail("reward.verifier", f"{verifier!r} needs data.source=task (file data has no task "
              "to verify against); use \"math\", \"math_verify\" or \"auto\"")
    if config.rl.process_weight > 0 and config.data.source != "task":
        _fail("rl.process_weight", "process rewards need a task's step checkers "
              "(data.source=task); file data has none")


def _check_sampling(config) -> None:
    s = config.sampling
    try:
        sampling.SamplingConfig(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                                max_new_tokens=s.max_new_tokens,
                                num_samples=config.rl.num_samples)
    except ValueError as e:
        raise _field_error(e, "sampling", num_samples="rl.num_samples") from e
    try:
        cache_phases.cache_window_setting(s.cache_window)
    except ValueError as e:
        _fail("sampling.cache_window", str(e))
    ratio = s.get("compact_ratio", -1.0)
    if ratio != -1 and not 0 <= ratio < 1:
        _fail("sampling.compact_ratio", f"must be -1 (automatic), 0 (off) or in (0, 1); "
              f"got {ratio}")
    if s.get("decode_attention", "") not in ("",) + decode_attention.IMPLS:
        _fail("sampling.decode_attention", f"must be \"\" (by backend) or one of "
              f"{', '.join(decode_attention.IMPLS)}; got {s.decode_attention!r}")
    if s.decode_rules and s.decode_rules not in sharding.RULE_PRESETS:
        _fail("sampling.decode_rules", f"unknown rules preset {s.decode_rules!r}; known: "
              f"{', '.join(sorted(sharding.RULE_PRESETS))} (or \"\")")
    if not 0 < config.eval.temperature:
        _fail("eval.temperature", f"must be > 0, got {config.eval.temperature}")
    _check_tree(config)
    _check_env(config)


def _check_tree(config) -> None:
    s = config.sampling
    try:
        tree = tree_rollouts.from_config(s.get("tree"))
        if tree is not None:
            tree.check(config.rl.num_samples, s.max_new_tokens)
    except ValueError as e:
        if str(e).startswith("mode "):
            e = ValueError(f"{e} (or \"\": off)")
        raise _field_error(e, "sampling.tree") from e
    except TypeError as e:  # E.g. depths not a sequence of ints.
        _fail("sampling.tree", str(e))
    if tree is None:
        return
    clashes = (("env.name", config.env.name, "multi-turn episodes do not fork"),
               ("rl.hint_mode", config.rl.hint_mode != "off", "hints re-sample forked rows"),
               ("rl.offpolicy_per_group", config.rl.offpolicy_per_group,
                "expert rows would replace forked rows"),
               ("rl.verify_groups", config.rl.verify_groups,
                "verification rows would replace forked rows"))
    for field, on, why in clashes:
        if on:
            _fail("sampling.tree.mode", f"tree rollouts ({tree.mode!r}) cannot be combined with "
                  f"{field} ({why}); set one of them off")


def _check_env(config) -> None:
    e = config.env
    if not e.name:
        if config.rl.turn_advantage != "none":
            _fail("rl.turn_advantage", "turn-level credit needs a multi-turn environment "
                  "(env.name)")
        return
    if e.name not in multiturn.ENVS:
        _fail("env.name", f"unknown environment {e.name!r}; known: "
              f"{', '.join(sorted(multiturn.ENVS))} (or \"\" for single-turn)")
    if e.max_turn_tokens > config.sampling.max_new_tokens:
        _fail("env.max_turn_tokens", f"{e.max_turn_tokens} exceeds sampling.max_new_tokens "
              f"({config.sampling.max_new_tokens}), the whole episode's budget")
    if config.rl.process_weight > 0:
        _fail("env.name", "multi-turn episodes are trained on the model's tokens; process "
              "rewards (rl.process_weight > 0) are not supported with them")
    if not e.timeout_s > 0:
        _fail("env.timeout_s", f"must be > 0, got {e.timeout_s}")
    if e.name == "lookup" and not os.path.isfile(e.corpus_path):
        _fail("env.corpus_path", f"no such file: {e.corpus_path!r} (env.name=lookup reads "
              "its corpus from a JSONL file of {\"key\", \"text\"} lines)")


def _check_training(config) -> None:
    rl = config.rl
    if rl.algorithm not in algorithms.PRESETS:
        _fail("rl.algorithm", f"unknown algorithm {rl.algorithm!r}; known: "
              f"{', '.join(sorted(algorithms.PRESETS))}")
    if rl.schedule not in SCHEDULES:
        _fail("rl.schedule", f"must be one of {', '.join(SCHEDULES)}; got {rl.schedule!r}")
    try:
        rl_config = rl_config_lib.from_config(config)
    except ValueError as e:
        raise _field_error(e, "rl") from e
    rows = rl.num_prompts * rl.num_samples
    if rows % rl_config.minibatches:
        _fail("rl.minibatches", f"{rl.minibatches} does not divide the {rows} sequences of a "
              f"step (rl.num_prompts x rl.num_samples)")
    if rl_config.advantage == "rloo" and rl.num_samples < 2:
        _fail("rl.num_samples", "the RLOO baseline (leave one out) needs >= 2 samples per prompt")
    if not 0.0 <= config.sft.verify_fraction < 1.0:
        _fail("sft.verify_fraction", f"must be in [0, 1), got {config.sft.verify_fraction}")
    if config.sft.verify_fraction and not rl_config.verify_groups:
        _fail("sft.verify_fraction", "teaches self-verification's verdicts: it needs "
              "rl.verify_groups > 0")
    if rl_config.verify_groups > rl.num_prompts:
        _fail("rl.verify_groups", f"{rl_config.verify_groups} verification groups do not fit "
              f"the rl.num_prompts={rl.num_prompts} groups of a step")
    if rl_config.offpolicy_per_group >= rl.num_samples:
        _fail("rl.offpolicy_per_group", f"must leave at least one on-policy row of the "
              f"rl.num_samples={rl.num_samples}")
    if rl_config.teacher and not os.path.isfile(os.path.join(rl_config.teacher, "config.json")):
        _fail("rl.teacher", f"{rl_config.teacher!r} has no config.json (a scripts/train.py "
              "--workdir or a Hugging Face model directory)")
    if rl_config.tree_advantage != "none" and not _tree_sampling(config):
        _fail("rl.tree_advantage", f"{rl_config.tree_advantage!r} reads the lineage of tree "
              "rollouts, which are off: set sampling.tree.mode (docs/tree_rollouts.md)")


def _tree_sampling(config) -> bool:
    """Tree rollouts are on (`sampling.tree.mode` set): rollouts carry fork_parent / fork_at."""
    tree = config.sampling.get("tree")
    return tree is not None and tree.get("mode", "") not in ("", "none", "off", None)


def _check_eval(config) -> None:
    e = config.eval
    if e.num_prompts % e.batch_size:
        _fail("eval.num_prompts", f"{e.num_prompts} must be a multiple of eval.batch_size="
              f"{e.batch_size}")


def _check_mesh(config) -> None:
    m = config.mesh
    if m.rules not in sharding.RULE_PRESETS:
        _fail("mesh.rules", f"unknown rules preset {m.rules!r}; known: "
              f"{', '.join(sorted(sharding.RULE_PRESETS))}")
    sizes = {k: m[k] for k in ("data", "fsdp", "tensor")}
    for name, value in sizes.items():
        if value == 0 or value < -1:
            _fail(f"mesh.{name}", f"must be >= 1 or -1 (the rest), got {value}")
    if list(sizes.values()).count(-1) > 1:
        _fail("mesh", f"at most one of mesh.data, mesh.fsdp, mesh.tensor may be -1; got {sizes}")
    for name in ("dcn_data", "dcn_fsdp", "dcn_tensor"):
        if m[name] < 1:
            _fail(f"mesh.{name}", f"must be >= 1, got {m[name]}")


_CHECKS = (_check_ints, _check_model, _check_source, adaptive.check,
           _check_reward, _check_sampling, _check_training, _check_eval, _check_mesh)
