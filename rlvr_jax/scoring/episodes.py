"""The env term: a multi-turn rollout's per-turn environment rewards (`multiturn`)."""
from rlvr_jax import multiturn


def env_term(setup, weight):
    """The device term adding each episode's environment reward (`x.episodes.env_reward`
    [B]) and logging the episode statistics (`multiturn.episode_metrics`, with the rewards
    after it); None without an environment. Registered last of the built-in terms: the
    statistics see every built-in term's reward (a device term registered later runs after
    it)."""
    del weight
    if setup.env is None:
        return None
    summed = "turn_env" not in setup.components  # Else the turn_env term places them.

    def fn(rewards, x):
        if summed:
            rewards = rewards + x.episodes.env_reward
        return rewards, multiturn.episode_metrics(x.rollout, x.episodes, rewards)
    return fn
