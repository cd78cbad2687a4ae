"""Device meshes, logical-axis rules and placement helpers.

Model code names the axes of its parameters and activations with *logical*
names (`embed`, `mlp`, `heads`, `kv_heads`, `kv`, `vocab`, `layers`, `batch`,
`length`); a rule preset maps those names onto the three *mesh* axes

    data    pure data parallelism (parameters replicated along it)
    fsdp    data parallelism with parameters and optimizer state sharded (ZeRO-3)
    tensor  Megatron-style tensor parallelism (heads / mlp / vocab split)

so that changing the parallelism is a config change, never a model change.

Typical use:

    mesh = make_mesh(config.mesh)                      # ConfigDict, see `default_mesh_config`
    rules = get_rules(config.mesh.rules)               # "dp", "fsdp", "fsdp_tp" ("tp")
    specs = models.param_logical_axes(model_config)
    params = shard_params(params, specs, mesh, rules)
    opt_shardings = optimizer_state_sharding(optimizer, params, specs, mesh, rules)
    with activate(mesh, rules):                        # activations' logical constraints
        logits = jax.jit(forward_fn)(params, batch)

All meshes are built with `AxisType.Auto` axes: shardings are propagated by the
compiler (GSPMD/Shardy) from the placed inputs and the logical constraints,
not type-checked as with JAX's newer `Explicit` default.
"""
import contextlib
import math
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import flax.linen as nn
import jax
import ml_collections
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

Rules = Tuple[Tuple[str, Union[None, str, Tuple[str, ...]]], ...]

# Rules are tried in order; a mesh axis is used at most once per array, so a
# later rule for the same array silently falls back to "replicated" on that dim
# (e.g. activations [batch, length, embed]: batch takes fsdp, embed stays whole).
_COMMON = (
    ("layers", None),
    ("length", None),
    ("kv", None),
    ("norm", None),
)

RULE_PRESETS = {
    # Data parallelism: the batch is split over every mesh axis, every parameter
    # is replicated. Use with mesh data=-1 (or fsdp=-1; both only split the batch).
    "dp": (
        ("batch", ("data", "fsdp", "tensor")),
        ("embed", None), ("vocab", None), ("heads", None), ("kv_heads", None), ("mlp", None),
    ) + _COMMON,
    # Fully sharded data parallelism: the batch is split over data×fsdp; every
    # matrix is split along its `embed` dim over fsdp (gathered per layer inside
    # the scan); `vocab` takes fsdp where `embed` is absent.
    "fsdp": (
        ("batch", ("data", "fsdp")),
        ("embed", "fsdp"),
        ("vocab", "fsdp"), ("mlp", "fsdp"),
        ("heads", None), ("kv_heads", None),
    ) + _COMMON,
    # FSDP over fsdp plus tensor parallelism over tensor: heads, kv heads, the
    # MLP hidden dim and the vocabulary are split over tensor; the residual
    # stream [batch, length, embed] is replicated over tensor.
    "fsdp_tp": (
        ("batch", ("data", "fsdp")),
        ("heads", "tensor"),
        ("kv_heads", "tensor"),
        ("mlp", "tensor"),
        ("vocab", "tensor"),
        ("embed", "fsdp"),
    ) + _COMMON,
    # Decoding a model too large to replicate (`sampling.decode_rules="tp"`): the MLP and
    # the vocabulary (embedding, LM head) split over every mesh axis, attention heads over
    # tensor (else replicated); activations and the KV cache split by batch over data×fsdp
    # (and heads over tensor), except the MLP's hidden and the logits (split by mlp / vocab).
    # So a decode step moves activations (gather [B, D] into the MLP, reduce-scatter out).
    "tp": (
        ("mlp", MESH_AXES), ("vocab", MESH_AXES), ("batch", ("data", "fsdp")),
        ("heads", "tensor"), ("kv_heads", "tensor"), ("embed", None),
    ) + _COMMON,
}


# ----------------------------------------------------------------------------- config

def default_mesh_config() -> ml_collections.ConfigDict:
    """The `config.mesh` block read by `make_mesh` and `get_rules`.

    Fields: `data`, `fsdp`, `tensor` (sizes within one slice; one of them may be
    -1 = all remaining devices), `dcn_data`, `dcn_fsdp`, `dcn_tensor` (how many
    slices / hosts along each axis over the slower data-centre network; their
    product must be the number of slices), `rules` (a `RULE_PRESETS` name).
    """
    return ml_collections.ConfigDict({
        "data": 1, "fsdp": -1, "tensor": 1,
        "dcn_data": 1, "dcn_fsdp": 1, "dcn_tensor": 1,
        "rules": "fsdp",
    })


def _get(config: Any, name: str, default: Any) -> Any:
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def resolve_axis_sizes(sizes: Sequence[int], num_devices: int) -> Tuple[int, ...]:
    """Replaces a single -1 in `sizes` by `num_devices // prod(others)`.

    Raises ValueError when there is more than one -1 or the sizes do not
    multiply to `num_devices`.
    """
    sizes = tuple(int(s) for s in sizes)
    if any(s == 0 or s < -1 for s in sizes):
        raise ValueError(f"mesh axis sizes must be positive or -1, got {sizes}")
    if sizes.count(-1) > 1:
        raise ValueError(f"at most one mesh axis may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if num_devices % known:
            raise ValueError(
                f"{num_devices} devices are not divisible by the fixed mesh axes {sizes}")
        sizes = tuple(num_devices // known if s == -1 else s for s in sizes)
    if math.prod(sizes) != num_devices:
        raise ValueError(
            f"mesh axis sizes {sizes} multiply to {math.prod(sizes)}, but there are "
            f"{num_devices} devices")
    return sizes


def make_mesh(config: Any = None, *, devices: Optional[Sequence[Any]] = None) -> Mesh:
    """A `Mesh` with axes ("data", "fsdp", "tensor"), all `AxisType.Auto`.

    Args:
      config: `config.mesh` (ConfigDict or dict) with the fields of
        `default_mesh_config`; missing fields take its defaults. None = defaults.
      devices: defaults to `jax.devices()` (all processes' devices).

    With every `dcn_*` equal to 1 the mesh is laid out by `jax.make_mesh`
    (topology-aware on TPU/GPU). Otherwise the hybrid layout of
    `mesh_utils.create_hybrid_device_mesh` is used: each mesh axis has size
    `ici * dcn`, the `dcn_*` factor crossing slices (TPU multi-slice) or, when
    devices carry no `slice_index`, processes (e.g. GPU hosts).
    """
    defaults = default_mesh_config()
    config = defaults if config is None else config
    devices = list(jax.devices() if devices is None else devices)
    ici = [_get(config, a, defaults[a]) for a in MESH_AXES]
    dcn = [int(_get(config, f"dcn_{a}", 1)) for a in MESH_AXES]
    if any(d < 1 for d in dcn):
        raise ValueError(f"dcn_* sizes must be >= 1, got {dict(zip(MESH_AXES, dcn))}")
    axis_types = (AxisType.Auto,) * len(MESH_AXES)
    num_granules = math.prod(dcn)
    if num_granules == 1:
        shape = resolve_axis_sizes(ici, len(devices))
        return jax.make_mesh(shape, MESH_AXES, axis_types=axis_types, devices=devices)
    if len(devices) % num_granules:
        raise ValueError(
            f"{len(devices)} devices cannot be split into {num_granules} slices (dcn {dcn})")
    ici = resolve_axis_sizes(ici, len(devices) // num_granules)
    # Granules are TPU slices when devices report several; otherwise processes
    # (CPU and GPU devices report slice 0 or nothing).
    slices = {getattr(d, "slice_index", None) for d in devices}
    use_slices = len(slices) > 1 and None not in slices
    device_array = mesh_utils.create_hybrid_device_mesh(
        ici, dcn, devices, process_is_granule=not use_slices)
    return Mesh(device_array, MESH_AXES, axis_types=axis_types)


def get_rules(preset: Union[str, Sequence]) -> Rules:
    """Logical-axis rules: a `RULE_PRESETS` name, or explicit (name, mesh axes) pairs."""
    if isinstance(preset, str):
        if preset not in RULE_PRESETS:
            raise ValueError(f"unknown rules preset {preset!r}; known: {sorted(RULE_PRESETS)}")
        return RULE_PRESETS[preset]
    rules = tuple((str(name), None if axes is None else
                   (axes if isinstance(axes, str) else tuple(axes))) for name, axes in preset)
    for _, axes in rules:
        for axis in (axes,) if isinstance(axes, str) else (axes or ()):
            if axis not in MESH_AXES:
                raise ValueError(f"rule mesh axis {axis!r} is not one of {MESH_AXES}")
    return rules


def check_mesh_uses_rules(mesh: Mesh, rules: Rules) -> None:
    """Raises ValueError if a mesh axis of size > 1 is named by no rule.

    Such an axis would only replicate work (e.g. tensor=2 with the "fsdp" preset).
    """
    used = set()
    for _, axes in rules:
        used.update((axes,) if isinstance(axes, str) else (axes or ()))
    idle = [a for a in mesh.axis_names if mesh.shape[a] > 1 and a not in used]
    if idle:
        raise ValueError(
            f"mesh axes {idle} (sizes {[mesh.shape[a] for a in idle]}) are not used by the "
            "logical-axis rules; set them to 1 or choose a preset that uses them")


# ----------------------------------------------------------------------------- translation

def _fit_to_shape(spec: PartitionSpec, shape: Sequence[int], mesh: Mesh) -> PartitionSpec:
    """Drops trailing mesh axes from each dim until their product divides the dim size."""
    if len(spec) > len(shape):
        return PartitionSpec()
    fitted = []
    for axes, size in zip(tuple(spec) + (None,) * (len(shape) - len(spec)), shape):
        names = () if axes is None else ((axes,) if isinstance(axes, str) else tuple(axes))
        while names and size % math.prod(mesh.shape[a] for a in names):
            names = names[:-1]
        fitted.append(None if not names else names[0] if len(names) == 1 else names)
    return PartitionSpec(*fitted)


def logical_to_mesh_spec(logical: Optional[PartitionSpec], rules: Rules,
                         shape: Optional[Sequence[int]] = None,
                         mesh: Optional[Mesh] = None) -> PartitionSpec:
    """One logical `PartitionSpec` → a mesh-axis `PartitionSpec` under `rules`.

    Names without a rule are replicated. With `shape` and `mesh`, mesh axes
    that do not divide a dimension are dropped (so e.g. 2 KV heads on tensor=4
    are replicated instead of failing).
    """
    if logical is None:
        spec = PartitionSpec()
    else:
        spec = nn.logical_to_mesh_axes(tuple(logical), rules)
    if shape is not None:
        if mesh is None:
            raise ValueError("shape fitting needs the mesh")
        spec = _fit_to_shape(spec, shape, mesh)
    spec = list(spec)
    while spec and spec[-1] is None:  # P("x", None) == P("x") in meaning, not in ==.
        spec.pop()
    return PartitionSpec(*spec)


def _is_spec(x) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def logical_to_mesh_sharding(logical_specs: Any, mesh: Mesh, rules: Rules,
                             shapes: Any = None) -> Any:
    """A pytree of logical `PartitionSpec`s → a pytree of `NamedSharding`s.

    Args:
      logical_specs: e.g. `models.param_logical_axes(config)`.
      mesh: from `make_mesh`.
      rules: from `get_rules`.
      shapes: optional pytree (same structure) of arrays or `ShapeDtypeStruct`s;
        when given, mesh axes that do not divide a dimension are dropped.
    """
    if shapes is None:
        return jax.tree.map(
            lambda s: NamedSharding(mesh, logical_to_mesh_spec(s, rules)),
            logical_specs, is_leaf=_is_spec)
    return jax.tree.map(
        lambda s, x: NamedSharding(mesh, logical_to_mesh_spec(s, rules, np.shape(x), mesh)),
        logical_specs, shapes, is_leaf=_is_spec)


def cache_logical_axes(n_layers: Union[int, Any]) -> dict:
    """Logical specs of a `models.init_cache` KV cache (`n_layers`: an int or a ModelConfig).

    k, v: L × [B, Hkv, S, Dh] → (batch, kv_heads, length, kv) each;
    mask: [B, S] → (batch, length); index: scalar, replicated.
    """
    n = n_layers if isinstance(n_layers, int) else n_layers.n_layers
    kv = PartitionSpec("batch", "kv_heads", "length", "kv")
    return {"k": (kv,) * n, "v": (kv,) * n, "mask": PartitionSpec("batch", "length"),
            "index": PartitionSpec()}


def shard_params(params: Any, logical_specs: Any, mesh: Mesh, rules: Rules) -> Any:
    """Places a parameter pytree on `mesh` (`jax.device_put` with `NamedSharding`s).

    Every process must hold the same full values (e.g. the same seed or the
    same checkpoint file); each keeps only its addressable shards.
    """
    shardings = logical_to_mesh_sharding(logical_specs, mesh, rules, params)
    return jax.device_put(params, shardings)


def sharded_init(init_fn: Any, logical_specs: Any, mesh: Mesh, rules: Rules, *args) -> Any:
    """Runs `init_fn(*args)` under jit with its outputs born sharded.

    Unlike `shard_params(init_fn(...))`, no device ever holds the full pytree;
    use for models that do not fit one device.
    """
    abstract = jax.eval_shape(init_fn, *args)
    shardings = logical_to_mesh_sharding(logical_specs, mesh, rules, abstract)
    return jax.jit(init_fn, out_shardings=shardings)(*args)


def optimizer_state_sharding(optimizer: Any, params: Any, logical_specs: Any, mesh: Mesh,
                             rules: Rules) -> Any:
    """`NamedSharding`s for `optimizer.init(params)` that follow the parameters'.

    Every copy of the parameter tree inside the state (Adam's mu and nu,
    momentum, ...) gets the sharding of the matching parameter; everything else
    (step counts, scalars) is replicated. A leaf whose shape differs from its
    parameter's (e.g. factored second moments) keeps only the mesh axes that
    still fit its shape.

    Args:
      optimizer: an `optax.GradientTransformation` (anything with `.init`).
      params: the parameter pytree (arrays or `ShapeDtypeStruct`s).
      logical_specs: the parameters' logical specs.
    """
    import optax  # Imported here so that mesh helpers do not need optax.

    abstract_state = jax.eval_shape(optimizer.init, params)
    replicated = NamedSharding(mesh, PartitionSpec())
    return optax.tree_utils.tree_map_params(
        optimizer,
        lambda leaf, spec: NamedSharding(
            mesh, logical_to_mesh_spec(spec, rules, np.shape(leaf), mesh)),
        abstract_state, logical_specs,
        transform_non_params=lambda _: replicated,
        is_leaf=_is_spec,
    )


def shard_optimizer_state(opt_state: Any, optimizer: Any, params: Any, logical_specs: Any,
                          mesh: Mesh, rules: Rules) -> Any:
    """Places an existing optimizer state with `optimizer_state_sharding`."""
    shardings = optimizer_state_sharding(optimizer, params, logical_specs, mesh, rules)
    return jax.device_put(opt_state, shardings)


# ----------------------------------------------------------------------------- activations

@contextlib.contextmanager
def activate(mesh: Mesh, rules: Rules):
    """Context in which the models' `nn.with_logical_constraint`s take effect.

    Sets `mesh` as JAX's current mesh (`jax.set_mesh`) and `rules` as Flax's
    logical-axis rules. Trace (call `jax.jit`-ed functions for the first time)
    inside it; outside it the constraints are no-ops.
    """
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        yield mesh


def constrain(x: Any, logical_names: Any, *, mesh: Optional[Mesh] = None,
              rules: Optional[Rules] = None) -> Any:
    """`with_sharding_constraint` by logical names (e.g. `("batch", "length")`).

    Uses the rules and mesh of the enclosing `activate(...)` unless given; a
    no-op when there is neither a mesh nor rules. `logical_names` may be a
    pytree prefix of `x`.
    """
    if mesh is not None and rules is None:
        raise ValueError("constrain(mesh=...) also needs rules=...")
    if isinstance(logical_names, tuple) and all(
            n is None or isinstance(n, str) for n in logical_names):
        logical_names = PartitionSpec(*logical_names)
    return nn.with_logical_constraint(x, logical_names, rules=rules, mesh=mesh)


def constrain_tree(tree: Any, logical_specs: Any) -> Any:
    """Every leaf of `tree` constrained to its logical spec (a pytree like `tree`, e.g.
    `models.param_logical_axes(config)`) under the active `activate(mesh, rules)`, with the
    mesh axes that do not divide a dimension dropped (as `logical_to_mesh_sharding`); a no-op
    outside it. Gradients constrained so reach their FSDP shards by a reduce-scatter."""
    mesh = jax.sharding.get_abstract_mesh()
    rules = nn.get_logical_axis_rules()
    if mesh.empty or not rules:
        return tree
    return jax.tree.map(
        lambda spec, x: jax.lax.with_sharding_constraint(
            x, logical_to_mesh_spec(spec, rules, x.shape, mesh)),
        logical_specs, tree, is_leaf=_is_spec)


def cast_param(w: jax.Array, logical_names: Tuple[Optional[str], ...], dtype: Any) -> jax.Array:
    """`w` in `dtype`, cast on its shards: the result is constrained to `w`'s own layout, so
    a later all-gather moves `dtype` (bf16) bytes, and in the backward pass the gradient
    reaches the shards by a reduce-scatter in `dtype` before the cast back. A plain no-op when
    `w` already has `dtype` or outside `activate(...)`."""
    if w.dtype == jax.numpy.dtype(dtype):
        return w
    return constrain_tree(w.astype(dtype), PartitionSpec(*logical_names))


# ----------------------------------------------------------------------------- batches

def batch_spec(rules: Rules, ndim: int = 1) -> PartitionSpec:
    """Mesh `PartitionSpec` of an array whose leading dim is `batch`, the rest replicated."""
    return logical_to_mesh_spec(PartitionSpec("batch", *([None] * (ndim - 1))), rules)


def process_batch_rows(global_batch_size: int, mesh: Mesh,
                       spec: Optional[PartitionSpec] = None, *,
                       rules: Optional[Rules] = None) -> slice:
    """The rows of a global batch this process must load for `make_global_batch`.

    Derived from the devices this process addresses under `spec` (default:
    the `batch` rule of `rules`, default preset "fsdp"), so it is right for any
    mesh layout. Raises ValueError if those rows are not one contiguous block.
    """
    if spec is None:
        spec = batch_spec(RULE_PRESETS["fsdp"] if rules is None else rules)
    sharding = NamedSharding(mesh, spec)
    starts, stops = set(), set()
    for index in sharding.addressable_devices_indices_map((global_batch_size,)).values():
        rows = index[0]
        starts.add(rows.start or 0)
        stops.add(global_batch_size if rows.stop is None else rows.stop)
    start, stop = min(starts), max(stops)
    covered = sorted(zip(sorted(starts), sorted(stops)))
    pos = start
    for a, b in covered:
        if a > pos:
            raise ValueError(f"this process's batch rows are not contiguous: {covered}")
        pos = max(pos, b)
    return slice(start, stop)


def make_global_batch(local_batch: Any, mesh: Mesh, spec: Any = None, *,
                      rules: Optional[Rules] = None,
                      same_on_all_processes: bool = False) -> Any:
    """Builds global `jax.Array`s from per-process host data.

    Two ways to feed a multi-process mesh:
      * each process loads only its rows (`process_batch_rows` says which; all
        processes the same number): the global leading dim is the sum over
        processes. This is the default.
      * `same_on_all_processes=True`: every process holds the whole global
        batch (e.g. a synthetic task generated from a shared seed); each device
        takes its rows from it.
    With one process both are a sharded `device_put`.

    Args:
      local_batch: pytree of host arrays with a leading batch dim.
      mesh: the global mesh.
      spec: a mesh-axis `PartitionSpec` for every leaf (or a pytree of them);
        default: the leading dim sharded by the `batch` rule of `rules`.
      rules: used when `spec` is None (default: the "fsdp" preset).
      same_on_all_processes: see above.

    Returns:
      The same pytree of global arrays, sharded by `spec`.
    """
    if spec is None:
        rules = RULE_PRESETS["fsdp"] if rules is None else rules
        spec = jax.tree.map(lambda x: batch_spec(rules, np.ndim(x)), local_batch)
    elif isinstance(spec, PartitionSpec):
        spec = jax.tree.map(lambda _: spec, local_batch)

    def build(x, s):
        x = np.asarray(x)
        if x.ndim == 0:
            raise ValueError("batch leaves must have a leading batch dimension")
        if same_on_all_processes or jax.process_count() == 1:
            entry = s[0] if len(s) else None
            names = () if entry is None else (entry,) if isinstance(entry, str) else entry
            shards = math.prod(mesh.shape[a] for a in names)
            if x.shape[0] % shards:
                raise ValueError(
                    f"batch dim {x.shape[0]} is not divisible by {shards}, the number of "
                    f"shards of mesh axes {names}; pick batch sizes divisible by it")
        return jax.make_array_from_process_local_data(
            NamedSharding(mesh, s), x, x.shape if same_on_all_processes else None)

    return jax.tree.map(build, local_batch, spec)


# ----------------------------------------------------------------------------- checks

def per_device_bytes(x: jax.Array) -> int:
    """Bytes of one addressable shard of `x`."""
    return x.addressable_shards[0].data.nbytes


def assert_sufficiently_sharded(tree: Any, num_shards: int, *, min_bytes: int = 1 << 12,
                                slack: float = 0.05) -> None:
    """Raises AssertionError if any leaf of at least `min_bytes` keeps more than
    `(1 + slack) · total / num_shards` bytes on a device.

    The leaves must be `jax.Array`s (e.g. from `shard_params`).
    """
    bad = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if leaf.nbytes < min_bytes:
            continue
        limit = leaf.nbytes / num_shards * (1 + slack)
        if per_device_bytes(leaf) > limit:
            bad.append(f"{jax.tree_util.keystr(path)}: {per_device_bytes(leaf)} bytes per device"
                       f" > {limit:.0f} (total {leaf.nbytes}, sharding {leaf.sharding})")
    if bad:
        raise AssertionError("insufficiently sharded leaves:\n" + "\n".join(bad))
