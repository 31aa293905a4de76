"""Running episodes: `do_single_rollout` (one env, one policy) and `do_group_rollout` (a group
under a `RolloutStrategy`, then group rewards).

Per-rollout `RolloutLimits` (defined in `llm_gym.rl.rollout_limits`, re-exported here because
earlier llm-gym code imports it from this module; `timeout_s` / `max_tokens_per_turn` still work
as aliases) end a runaway episode with a `Trajectory.stop_reason` instead of letting it hang; the
loop itself is `llm_gym.rl.rollout_runner.run_rollout`. `do_group_rollout(..., termination=...)`
applies a `TerminationRewardPolicy` around group grading. `cleanup()` of the group builder is
always awaited, also when rollouts fail or the group is skipped.
`do_group_rollout_and_filter_constant_reward` is the cookbook's caller-side wrapper: it turns a
dropped group (or, under an error-tolerant strategy, any group error) into `None`.

Deliberate differences from the cookbook: `do_single_rollout` and the group functions also take
`limits=` (the cookbook reads budgets from the env or a `RolloutConfig` only); grading is bounded
with `asyncio.timeout` like the cookbook's, but with no logtree output.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Sequence

from llm_gym.completers import TokenCompleter
from llm_gym.exceptions import AllTrajectoriesFailedError
from llm_gym.rl.rollout_limits import RolloutLimits, TerminationRewardPolicy
from llm_gym.rl.rollout_runner import TRUNCATION_METRIC_KEY, run_rollout
from llm_gym.rl.rollout_strategy import FailFast, RolloutStrategy
from llm_gym.rl.types import (
    Env,
    EnvGroupBuilder,
    Metrics,
    StopReason,
    Trajectory,
    TrajectoryGroup,
)

logger = logging.getLogger(__name__)

STOP_MAX_TURNS = StopReason.MAX_TURNS
STOP_MAX_TOKENS = StopReason.MAX_TOKENS
STOP_TIMEOUT = StopReason.ROLLOUT_TIMEOUT
__all__ = [
    "RolloutLimits", "TRUNCATION_METRIC_KEY", "do_group_rollout",
    "do_group_rollout_and_filter_constant_reward", "do_single_rollout",
]


async def do_single_rollout(
    policy: TokenCompleter, env: Env, *, limits: RolloutLimits | None = None
) -> Trajectory:
    """Run one episode to its end (or to a limit) and return its `Trajectory`: the rollout loop
    `llm_gym.rl.rollout_runner.run_rollout` with only `limits=` (the cookbook's
    `do_single_rollout` takes no limits; ours keeps the keyword).

    The policy is called as `policy(ob, stop)` — with `max_tokens=` added only when a limit sets
    one, so cookbook-style completers without that keyword work. Exceptions from the policy or the
    env propagate (strategies decide what to do with them); so does a wrong return type, as a
    TypeError that names the culprit.
    """
    return await run_rollout(policy, env, limits=limits)


def _should_skip_group_grading(
    termination: TerminationRewardPolicy | None, trajectories: Sequence[Trajectory]
) -> bool:
    """Skip `compute_group_rewards` only when every member timed out and would be clamped to
    <= 0 anyway (group graders keep seeing whole groups otherwise)."""
    return (
        termination is not None
        and termination.skip_grading_on_timeout
        and termination.zero_reward_on_limit
        and StopReason.ROLLOUT_TIMEOUT in termination.limit_stop_reasons
        and len(trajectories) > 0
        and all(traj.stop_reason == StopReason.ROLLOUT_TIMEOUT for traj in trajectories)
    )


def _apply_zero_reward_on_limit(
    termination: TerminationRewardPolicy,
    trajectories: Sequence[Trajectory],
    rewards_G: list[float],
    metrics_G: list[Metrics],
) -> None:
    """Grade, then clamp: a limit-stopped member's total reward becomes min(total, 0.0), by
    setting its group reward to minus its step rewards' sum (exactly 0.0, no float residue)."""
    if not termination.zero_reward_on_limit:
        return
    for i, traj in enumerate(trajectories):
        if traj.stop_reason is None or traj.stop_reason not in termination.limit_stop_reasons:
            continue
        step_sum = sum(t.reward for t in traj.transitions)
        if step_sum + rewards_G[i] > 0.0:
            rewards_G[i] = -step_sum
            metrics_G[i] = {**metrics_G[i], "zero_reward_on_limit": 1.0}


async def do_group_rollout(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    strategy: RolloutStrategy | None = None,
    termination: TerminationRewardPolicy | None = None,
    *,
    limits: RolloutLimits | None = None,
) -> TrajectoryGroup:
    """Roll out a whole group and compute its group rewards.

    Returns the `TrajectoryGroup` (with any retried errors in `rollout_errors`). Errors propagate,
    as in the cookbook, under every strategy: a strategy that gave up (`RetryOnFailure`'s last
    failure, `MinViableGroup`'s `AllTrajectoriesFailedError`) or a failing `make_envs` /
    `compute_group_rewards`. `do_group_rollout_and_filter_constant_reward` turns those into a
    skipped group for strategies whose `catches_group_errors` is True.
    `env_group_builder.cleanup()` is awaited in every case.

    `termination` (a `TerminationRewardPolicy`; None leaves rewards untouched) bounds the grading
    call by `grader_timeout_seconds` (TimeoutError), skips it when every member timed out under
    `skip_grading_on_timeout`, and clamps limit-stopped members to `min(total, 0.0)` afterwards.
    """
    strategy = strategy or FailFast()
    try:
        if limits is None:
            result = await strategy.execute(env_group_builder, policy)
        else:
            result = await strategy.execute(env_group_builder, policy, limits=limits)
        if _should_skip_group_grading(termination, result.trajectories):
            rewards_and_metrics = [(0.0, {}) for _ in result.trajectories]
        else:
            grader_timeout = termination.grader_timeout_seconds if termination else None
            async with asyncio.timeout(grader_timeout):
                rewards_and_metrics = list(
                    await env_group_builder.compute_group_rewards(result.trajectories, result.envs)
                )
        if len(rewards_and_metrics) != len(result.trajectories):
            raise ValueError(
                f"{type(env_group_builder).__name__}.compute_group_rewards returned "
                f"{len(rewards_and_metrics)} rewards for {len(result.trajectories)} trajectories"
            )
        final_rewards = [float(r) for r, _ in rewards_and_metrics]
        metrics = [dict(m) for _, m in rewards_and_metrics]
        if termination is not None:
            _apply_zero_reward_on_limit(termination, result.trajectories, final_rewards, metrics)
        return TrajectoryGroup(list(result.trajectories), final_rewards, metrics, list(result.errors))
    finally:
        await env_group_builder.cleanup()


async def do_group_rollout_and_filter_constant_reward(
    sampling_client: TokenCompleter,
    env_group_builder: EnvGroupBuilder,
    max_tokens: int | None,
    temperature: float | None,
    do_remove_constant_reward_groups: bool,
    enable_logging: bool = True,
    strategy: RolloutStrategy | None = None,
    termination: TerminationRewardPolicy | None = None,
    *,
    limits: RolloutLimits | None = None,
) -> TrajectoryGroup | None:
    """`do_group_rollout`, with a group that cannot be used returned as `None` (the cookbook's
    signature and semantics).

    `None` when the strategy dropped the group (`AllTrajectoriesFailedError`, under any strategy),
    when any other error was raised under a strategy whose `catches_group_errors` is True (it is
    logged as a warning), or, with `do_remove_constant_reward_groups`, when every total reward is
    the same. Under `FailFast` other errors propagate.

    `sampling_client` is the policy: any `TokenCompleter` (ours has no Tinker client to wrap).
    `max_tokens`, when not None, caps every turn (`RolloutLimits.max_turn_tokens`, unless
    `limits` sets one). `temperature` is the completer's own setting (e.g. `HFSampler`'s) and
    `enable_logging` has no logtree to switch here: both are accepted for signature compatibility
    and otherwise unused.
    """
    strategy = strategy or FailFast()
    if max_tokens is not None:
        limits = limits or RolloutLimits()
        if limits.max_turn_tokens is None:
            limits = dataclasses.replace(limits, max_turn_tokens=max_tokens)
    try:
        group = await do_group_rollout(env_group_builder, sampling_client, strategy, termination,
                                       limits=limits)
    except AllTrajectoriesFailedError as exc:
        logger.warning("%s", exc)
        return None
    except Exception as exc:
        if not strategy.catches_group_errors:
            raise
        logger.warning("rollout error (%s), skipping group %s: %s", type(exc).__name__,
                       env_group_builder.logging_tags(), exc)
        return None
    if do_remove_constant_reward_groups and len(set(group.get_total_rewards())) <= 1:
        return None
    return group
