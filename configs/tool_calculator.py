"""A calculator tool inside the one compiled RL step: 3-digit products, tiny model, 2 CPU cores.

    python scripts/train.py --config configs/tool_calculator.py --workdir runs/tool_calculator

The model cannot multiply 123*456 in its head; it can write the call "[123*456]", after
which the on-device calculator writes the observation "=56088" into its sequence (and KV
cache), and then copy the result: "[123*456]=56088 #### 56088". Half of the warm-up's worked
solutions call the tool, half answer directly ("#### 56088", almost always wrong for the
model), so RL learns when to call: watch `tool/call_rate` and `reward/calls_0` vs
`reward/calls_1` in metrics.jsonl. Observations are attended to but get no gradient and no
KL; the answer is scored on the model's own tokens (docs/multiturn.md).
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.data.task = "tool_arithmetic"
    config.data.task_kwargs = dict(ops=("mul",), min_digits=3, max_digits=3,
                                   tool_fraction=0.5)
    config.data.max_prompt_len = 12   # "123*456=" plus BOS.
    config.env.name = "calculator"
    config.env.max_turns = 2          # One call, then the answer.
    config.env.max_turn_tokens = 16
    config.sampling.max_new_tokens = 32  # "[123*456]" + "=56088" + " #### 56088" + EOS: 26.
    config.sft.steps = 400
    config.sft.batch_size = 64
    config.rl.steps = 100
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0           # No reference model: faster on CPU.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 25
    config.eval.k = 4
    config.checkpoint.every = 100
    config.checkpoint.keep = 1
    config.mesh.num_devices = 1
    return config
