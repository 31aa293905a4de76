"""The `context` row: the longest observation, in tokens, of the fuzz episodes and of episodes
that cycle through short fixed replies, against the source's declared bound (a
`max_context_tokens` attribute); reported either way, a skip for a multi-turn source that
declares none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from llm_gym.checks.common import _FIXED_REPLIES, CheckRow, _make, _Target

if TYPE_CHECKING:
    from llm_gym.checks.fuzz import _FuzzStats


def _declared_context_bound(env) -> int | None:
    source = env.unwrapped.source
    for name in ("max_context_tokens", "max_context"):
        value = getattr(source, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _long_episode_max_obs(target: _Target, seeds: Sequence[int] = (0, 1, 2),
                          max_steps: int = 64, budget_s: float | None = None) -> int:
    """The longest observation of episodes that cycle through short fixed replies until the
    episode ends (or `max_steps`): random replies often end a game at once, these keep going.
    Past `budget_s` seconds no new episode starts once one has run (a slow env)."""
    import time

    start = time.monotonic()
    from llm_gym.scripted import reply_tokens

    env = _make(target)
    longest = 0
    try:
        replies = [reply_tokens(env.renderer, text) for text in _FIXED_REPLIES]
        for i, seed in enumerate(seeds):
            if budget_s is not None and i >= 1 and time.monotonic() - start > budget_s:
                break
            obs, _ = env.reset(seed=seed)
            longest = max(longest, len(obs))
            for step in range(max_steps):
                obs, _, terminated, truncated, _ = env.step(replies[step % len(replies)])
                longest = max(longest, len(obs))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return longest


def _check_context(stats: _FuzzStats, env, target: _Target, budget_s: float | None = None
                   ) -> CheckRow:
    bound = _declared_context_bound(env)
    longest = max(stats.max_obs_tokens, _long_episode_max_obs(target, budget_s=budget_s))
    data = {"max_observation_tokens": longest, "declared_bound": bound}
    seen = f"longest observation in the fuzz and fixed-reply episodes: {longest} tokens"
    if bound is None:
        if not getattr(getattr(env.unwrapped.source, "card", None), "multi_turn", True):
            return CheckRow("context", "pass", seen + " (single-turn: the prompt is the whole "
                            "context; no bound declared)", data)
        return CheckRow("context", "skip", "warning: " + seen + " and no bound declared (a "
                        "multi-turn source states one in a max_context_tokens attribute)", data)
    if longest > bound:
        return CheckRow("context", "fail", seen + f" > the declared bound {bound}", data)
    return CheckRow("context", "pass", seen + f" <= the declared bound {bound}", data)
