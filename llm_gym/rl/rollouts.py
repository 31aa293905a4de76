"""Running episodes: `do_single_rollout` (one env, one policy) and `do_group_rollout` (a group
under a `RolloutStrategy`, then group rewards).

Per-rollout `RolloutLimits` (turns, trajectory tokens, wall-clock seconds) end a runaway episode
with a `Trajectory.stop_reason` instead of letting it hang; `cleanup()` of the group builder is
always awaited, also when rollouts fail.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from llm_gym.completers import TokenCompleter
from llm_gym.rl.rollout_strategy import FailFast, RolloutStrategy
from llm_gym.rl.types import Env, EnvGroupBuilder, Trajectory, TrajectoryGroup, Transition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutLimits:
    """Caps on one episode. `None` means no cap.

    - `max_turns`: policy calls per episode; stop reason "max_turns".
    - `max_trajectory_tokens`: observation + sampled tokens of the latest turn (the context the
      policy sees); stop reason "max_tokens".
    - `timeout_s`: wall-clock seconds for the whole episode; stop reason "timeout".
    """

    max_turns: int | None = None
    max_trajectory_tokens: int | None = None
    timeout_s: float | None = None
    max_tokens_per_turn: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_trajectory_tokens", "timeout_s", "max_tokens_per_turn"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"RolloutLimits.{name} must be positive or None, got {value!r}")


async def do_single_rollout(
    policy: TokenCompleter, env: Env, *, limits: RolloutLimits | None = None
) -> Trajectory:
    """Run one episode to its end (or to a limit) and return its `Trajectory`.

    Exceptions from the policy or the env propagate (strategies decide what to do with them).
    """
    limits = limits or RolloutLimits()
    deadline = None if limits.timeout_s is None else time.monotonic() + limits.timeout_s

    async def bounded(awaitable):
        if deadline is None:
            return await awaitable
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise asyncio.TimeoutError
        return await asyncio.wait_for(awaitable, remaining)

    transitions: list[Transition] = []
    try:
        ob, stop = await bounded(env.initial_observation())
    except asyncio.TimeoutError:
        from llm_gym.model_input import ModelInput

        return Trajectory([], ModelInput.empty(), stop_reason="timeout")
    while True:
        if limits.max_turns is not None and len(transitions) >= limits.max_turns:
            return Trajectory(transitions, ob, stop_reason="max_turns")
        max_tokens = limits.max_tokens_per_turn
        if limits.max_trajectory_tokens is not None:
            room = limits.max_trajectory_tokens - ob.length
            if room <= 0:
                return Trajectory(transitions, ob, stop_reason="max_tokens")
            max_tokens = room if max_tokens is None else min(max_tokens, room)
        try:
            ac = await bounded(policy(ob, stop, max_tokens=max_tokens))
            result = await bounded(env.step(ac.tokens))
        except asyncio.TimeoutError:
            return Trajectory(transitions, ob, stop_reason="timeout")
        transitions.append(
            Transition(
                ob=ob,
                ac=ac,
                reward=float(result.reward),
                episode_done=result.episode_done,
                metrics=dict(result.metrics),
                logs=dict(result.logs),
            )
        )
        if result.episode_done:
            return Trajectory(transitions, result.next_observation, stop_reason=None)
        ob, stop = result.next_observation, result.next_stop_condition


async def do_group_rollout(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    strategy: RolloutStrategy | None = None,
    *,
    limits: RolloutLimits | None = None,
) -> TrajectoryGroup | None:
    """Roll out a whole group and compute its group rewards.

    Returns the `TrajectoryGroup`, or `None` when a strategy that catches group errors
    (`RetryOnFailure`, `MinViableGroup`) gave up on it. With `FailFast` errors propagate.
    """
    strategy = strategy or FailFast()
    try:
        try:
            result = await strategy.execute(env_group_builder, policy, limits)
            rewards_and_metrics = await env_group_builder.compute_group_rewards(
                result.trajectories, result.envs
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not strategy.catches_group_errors:
                raise
            logger.warning("skipping group (%s): %s: %s", env_group_builder.logging_tags(),
                           type(exc).__name__, exc)
            return None
        if len(rewards_and_metrics) != len(result.trajectories):
            raise ValueError(
                f"{type(env_group_builder).__name__}.compute_group_rewards returned "
                f"{len(rewards_and_metrics)} rewards for {len(result.trajectories)} trajectories"
            )
        final_rewards = [float(r) for r, _ in rewards_and_metrics]
        metrics = [dict(m) for _, m in rewards_and_metrics]
        return TrajectoryGroup(result.trajectories, final_rewards, metrics, list(result.errors))
    finally:
        await env_group_builder.cleanup()
