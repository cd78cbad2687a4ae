"""The shape of the code (issue 50), checked statically: no import circle inside `train/` or
`scoring/` (function-level imports count), `tasks/` importing nothing above it, the
host-or-device question asked only in the sampler's and the scorer's modules, and
docs/verifiers.md's "add a term" example run."""
import ast
import os
import re

import jax.numpy as jnp
import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")
PKG = os.path.join(ROOT, "rlvr_jax")


def _modules(package: str):
    """{dotted module name: path} of the .py files directly in rlvr_jax/<package>."""
    folder = os.path.join(PKG, package)
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            mod = name[:-3]
            out[f"rlvr_jax.{package}" + ("" if mod == "__init__" else f".{mod}")] = \
                os.path.join(folder, name)
    return out


def _imports(path: str, known) -> set:
    """The modules of `known` that the file imports anywhere (module, class or function
    level): `import a.b`, `from a import b` (b a module of `known`, else a), `from a.b import c`."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known
                     else node.module for a in node.names]
        out.update(n for n in names if n in known)
    return out


def _cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_inside_train_or_scoring():
    for package in ("train", "scoring"):
        modules = _modules(package)
        graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
        # A package's __init__ gathers its modules; a module importing its own package
        # (rather than a sibling) would close a circle through it.
        pairs = [(a, b) for a in graph for b in graph[a] if a in graph[b]]
        assert not pairs, f"two-module import circles in {package}/: {pairs}"
        assert not _cycles(graph), f"import circles in {package}/: {_cycles(graph)}"


def test_tasks_import_nothing_above_them():
    """A task defines its game and its verdict; the tool runner and the sandbox-backed scorer
    call into tasks, never the reverse (function-level imports count)."""
    upward = []
    for mod, path in _modules("tasks").items():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            upward += [(mod, n) for n in names
                       if n.startswith("rlvr_jax") and not n.startswith("rlvr_jax.tasks")]
    assert not upward, f"tasks/ imports upward: {upward}"


# Reads that ask whether a rollout or a reward term runs on the host or on device.
ASKING_ATTRIBUTES = {"on_host", "on_device", "traceable"}
HOST_OR_DEVICE_CLASSES = {"HostEnv", "DeviceEnv", "HostTools", "HostScorer"}
ALLOWED = {os.path.join("rlvr_jax", "sampler.py"), os.path.join("rlvr_jax", "scoring", "scorer.py")}


def _asks(tree):
    """(line, what) of every host-or-device question in a module's AST."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
                node.attr in ASKING_ATTRIBUTES and not (
                    isinstance(node.value, ast.Name) and node.value.id == "self"):
            yield node.lineno, f".{node.attr}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id in ("getattr", "hasattr") and len(args) >= 2 and \
                    isinstance(args[1], ast.Constant) and args[1].value in ASKING_ATTRIBUTES:
                yield node.lineno, f"{node.func.id}(..., {args[1].value!r})"
            if node.func.id == "isinstance" and len(args) == 2:
                names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                         for n in ast.walk(args[1])}
                if names & HOST_OR_DEVICE_CLASSES:
                    yield node.lineno, f"isinstance(..., {sorted(names & HOST_OR_DEVICE_CLASSES)})"


def test_host_or_device_is_asked_only_by_the_sampler_and_the_scorer():
    """Outside `rlvr_jax/sampler.py` and `rlvr_jax/scoring/scorer.py` nothing reads
    `on_host` / `on_device` / `traceable` of another object, duck-types them with getattr,
    or tests an object against the host / device classes; inside them, `env.on_host` is
    read in `Sampler.__init__` only."""
    found, sampler_reads = [], []
    for folder, _, files in os.walk(PKG):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, ROOT)
            tree = ast.parse(open(path, encoding="utf-8").read())
            asks = list(_asks(tree))
            if rel not in ALLOWED:
                found += [f"{rel}:{line}: {what}" for line, what in asks]
            elif rel.endswith("sampler.py"):
                sampler_reads = [line for line, what in asks if what == ".on_host"]
                init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                            and n.name == "__init__")
                assert all(init.lineno <= line <= init.end_lineno for line in sampler_reads)
    assert not found, "host/device asked outside the sampler and the scorer:\n" + \
        "\n".join(found)
    assert sampler_reads  # The check sees the one read it allows.


def test_the_docs_add_a_term_example_runs():
    """docs/verifiers.md's ≤ 20-line term, executed as written, then configured by name:
    the scorer runs it after the token verdicts, in the one program."""
    from rlvr_jax import sampling, scoring, tasks
    from rlvr_jax.data.tokenizers import load_tokenizer
    from rlvr_jax.train.config import arithmetic_config
    from rlvr_jax.train.rl_config import from_config
    with open(os.path.join(ROOT, "docs", "verifiers.md"), encoding="utf-8") as f:
        doc = f.read()
    code = re.search(r"```python\n(.*?)```", doc[doc.index("## Adding a reward term"):],
                     re.S).group(1)
    assert len(code.strip().splitlines()) <= 20
    try:
        exec(compile(code, "docs/verifiers.md", "exec"), {})
        config = arithmetic_config()
        config.reward.components, config.reward.weights = "token,brevity", "1,0.5"
        tok = load_tokenizer(config.tokenizer)
        scorer = scoring.scorer_from_config(config, tasks.get("arithmetic"), tok,
                                            rl=from_config(config))
    finally:
        scoring.TERMS.pop("brevity", None)  # Registered for this test only.
    assert scorer.traceable and [t.name for t in scorer.terms] == ["token", "brevity"]
    n = config.sampling.max_new_tokens
    lengths = jnp.asarray([1, n // 2, n, 0], jnp.int32)
    z = jnp.zeros((4, n), jnp.int32)
    rollout = sampling.Rollout(tokens=z, mask=z, logprobs=z.astype(jnp.float32),
                               lengths=lengths, finished=lengths < n, prompt_tokens=z,
                               prompt_mask=z)
    verdicts = jnp.asarray([1.0, 0.0, 1.0, 0.0])
    scorer.verifier = scorer.verifier.__class__(verify=None, answer_key=None,
                                                token=lambda t, m, a: verdicts)
    rewards, metrics, _ = scorer.score_device(scoring.Inputs(rollout, answers=z[:, 0]))
    want = np.asarray(verdicts) + 0.5 * (1.0 - np.asarray(lengths) / n)
    # Each side: one division, one product and one sum of terms ≤ 1, rounded once each in
    # float32 (NumPy in float64): ≤ 3 units of float32 roundoff of values ≤ 1.5.
    np.testing.assert_allclose(np.asarray(rewards), want, rtol=0, atol=3 * 1.5 * 2.0 ** -24)
    assert set(metrics) == {"reward/correct", "reward/token", "reward/brevity"}
