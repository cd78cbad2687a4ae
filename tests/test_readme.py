"""The README's code runs as printed: its self-contained Python block (the functional
components on toy arrays) executes, and every `scripts/*.py` and `configs/*.py` it names
exists."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_components_block_runs():
    blocks = re.findall(r"```python\n(.*?)```", _readme(), flags=re.S)
    block = next(b for b in blocks if "losses.ppo_clip" in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["per_token"].shape == namespace["mask"].shape == (8, 5)
    assert float(namespace["adv"][1].sum()) == 0.0          # the all-wrong group
    assert 0.0 < float(namespace["pass_at_8"]) < 1.0
    assert namespace["kl"].shape == (8, 5)


def test_named_scripts_and_configs_exist():
    text = _readme()
    names = set(re.findall(r"(scripts/\w+\.py|configs/\w+\.py|notebooks/\w+\.ipynb)", text))
    names |= {f"configs/{n}" for n in re.findall(r"^\| `(\w+\.py)` \|", text, flags=re.M)}
    assert len(names) > 15
    missing = sorted(n for n in names if not os.path.isfile(os.path.join(ROOT, n)))
    assert missing == []
