"""GRPO on program synthesis (write `f` from f(0), f(1)), rewarded by the code sandbox.

The task (`rlvr_jax/tasks/synthesis.py`): the prompt shows `f(0)=3 f(1)=8:`, the policy
writes `b=3 a=8-3=5 #### x*5+3`, and the expression after `####` is wrapped as
`def f(x): return x*5+3` and run in the sandbox against 4 hidden inputs. The reward is
the `code` component (pass fraction of the hidden tests, judged outside the sandbox);
correctness (pass@1) is all hidden tests passing. Nothing is evaluated in-process.
Held-out evaluation on 200 test-split prompts, greedy.

    python scripts/train.py --config configs/code_grpo.py --workdir runs/code_grpo
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.data.task = "synthesis"
    config.data.task_kwargs = dict(max_slope=9, max_intercept=99, shown=2, num_tests=4,
                                   max_test_input=99, style="steps", test_fraction=0.2,
                                   answer_format="marker")
    config.data.max_prompt_len = 20   # "f(0)=99 f(1)=108:" plus BOS: at most 18 tokens.
    config.sampling.max_new_tokens = 28  # "b=99 a=108-99=9 #### x*9+99" + EOS: <= 25.
    config.reward.components = "code"  # The sandboxed code reward (rewards.code).
    config.reward.num_workers = 2
    config.sft.steps = 600
    config.sft.batch_size = 64
    config.rl.steps = 400
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0           # No reference model: faster on CPU.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 50
    config.eval.num_prompts = 200     # Evaluation stays cheap: 200 sandboxed programs.
    config.eval.batch_size = 200
    config.mesh.num_devices = 1
    return config
