"""A number-guessing game played on the host between compiled decode segments, tiny model.

    python scripts/train.py --config configs/guess_number.py --workdir runs/guess_number

The prompt is a range ("17-30?", 8 to 16 numbers); the model guesses "[28]", the game
(`multiturn.GuessNumber`, a host environment) answers " down 17-27", " up 29-40" or " yes",
and the model guesses again. Success: the hidden number guessed within ⌈log₂ width⌉ + 1
guesses, read from the model's own tokens (`GuessNumberTask.verify`). The warm-up's worked
traces guess uniformly inside the interval still possible; RL finds a better search. The KV
cache stays on the device; a segment runs until some row calls the game (docs/multiturn.md).
"""
from rlvr_jax.train.config import default_config


def get_config():
    config = default_config(algorithm="grpo")
    config.data.task = "guess_number"
    config.data.task_kwargs = dict(min_width=8, max_width=16, max_start=60)
    config.data.max_prompt_len = 8    # "60-75?" plus BOS.
    config.reward.verifier = "task"   # Scored on the host, on the model's guesses.
    config.env.name = "guess_number"
    config.env.max_turns = 6          # Up to 5 guesses (⌈log2 16⌉ + 1), then the closing EOS.
    config.env.max_turn_tokens = 6    # "[75]" (+ EOS).
    config.env.max_obs_tokens = 12    # " down 60-74".
    config.sampling.max_new_tokens = 80  # The longest worked trace + EOS: 76 tokens.
    config.sft.steps = 400
    config.sft.batch_size = 32
    config.rl.steps = 100
    config.rl.learning_rate = 1e-4
    config.rl.kl_coef = 0.0           # No reference model: faster on CPU.
    config.rl.num_prompts = 16
    config.rl.num_samples = 8
    config.eval.every = 25
    config.eval.num_prompts = 200
    config.eval.batch_size = 200
    config.eval.k = 4
    config.checkpoint.every = 100
    config.checkpoint.keep = 1
    config.mesh.num_devices = 1
    return config
