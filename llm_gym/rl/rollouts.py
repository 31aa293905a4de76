"""Running episodes: `do_single_rollout` (one env, one policy) and `do_group_rollout` (a group
under a `RolloutStrategy`, then group rewards).

Per-rollout `RolloutLimits` (defined in `llm_gym.rl.rollout_limits`, re-exported here because
earlier llm-gym code imports it from this module; `timeout_s` / `max_tokens_per_turn` still work
as aliases) end a runaway episode with a `Trajectory.stop_reason` instead of letting it hang; the
loop itself is `llm_gym.rl.rollout_runner.run_rollout`. `do_group_rollout(..., termination=...)`
applies a `TerminationRewardPolicy` around group grading. `cleanup()` of the group builder is
always awaited, also when rollouts fail or the group is skipped, and runs to its end when the
rollout is cancelled meanwhile (it is shielded; the cancellation is re-raised once it is done).
`do_group_rollout_and_filter_constant_reward` is the cookbook's caller-side wrapper: it turns a
dropped group (or, under an error-tolerant strategy, any group error) into `None`.

Deliberate differences from the cookbook: `do_single_rollout` and the group functions also take
`limits=` (the cookbook reads budgets from the env or a `RolloutConfig` only); grading is bounded
with `asyncio.timeout` like the cookbook's, but with no logtree output.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import types
from collections import Counter
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import Sequence

from llm_gym.completers import TinkerTokenCompleter, TokenCompleter
from llm_gym.exceptions import AllTrajectoriesFailedError
from llm_gym.rl.rollout_keys import trajectory_key
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

__all__ = [
    "RolloutErrorCounter", "RolloutLimits", "TRUNCATION_METRIC_KEY", "do_group_rollout",
    "do_group_rollout_and_filter_constant_reward", "do_single_rollout", "get_rollout_executor",
    "set_rollout_executor",
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
    with trajectory_key():  # under a marked group, this trajectory's sampling key (rollout_keys)
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
        await _cleanup_shielded(env_group_builder)


async def _cleanup_shielded(env_group_builder: EnvGroupBuilder) -> None:
    """`await env_group_builder.cleanup()`, shielded from cancellation as in the cookbook (0.6):
    a rollout cancelled while its group cleans up (e.g. when training stops), even more than once,
    still lets cleanup finish releasing its resources (sandboxes, servers); the cancellation is
    re-raised after. cleanup's own exception, if any, propagates.

    A cleanup that finishes without suspending (most do nothing) runs inline, costing no event-loop
    turn (a batching sampler that waits for the loop to go quiet still sees the group finish before
    its next batch); only one that suspends continues in a shielded task."""
    awaitable = env_group_builder.cleanup()
    if inspect.iscoroutine(awaitable):
        try:
            suspended_on = awaitable.send(None)
        except StopIteration:
            return
        task = asyncio.ensure_future(_finish_started(awaitable, suspended_on))
    else:
        task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # cleanup itself was cancelled (not just us): nothing to wait for
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


async def _finish_started(coro, suspended_on):
    """The rest of a coroutine that was stepped once and suspended on `suspended_on`."""
    return await _resume(coro, suspended_on)


@types.coroutine
def _resume(coro, suspended_on):
    """`yield from coro` for a coroutine already started: hands what it waits on to the running
    task and passes the task's answers (values or exceptions) back in."""
    waiting_on = suspended_on
    while True:
        try:
            answer = yield waiting_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown in by the task: passed on
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waiting_on = coro.send(answer)
            except StopIteration as done:
                return done.value


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
    executor = get_rollout_executor()
    if executor is not None:  # the whole group in a worker (inputs must pickle), as the cookbook
        task = _RolloutTask(sampling_client, env_group_builder, do_remove_constant_reward_groups,
                            strategy, termination, limits)
        return await asyncio.get_running_loop().run_in_executor(executor, _run_rollout_task, task)
    return await _filtered_group(sampling_client, env_group_builder,
                                 do_remove_constant_reward_groups, strategy, termination, limits)


async def _do_group_rollout_and_filter_constant_reward_impl(
    sampling_client: object,
    env_group_builder: EnvGroupBuilder,
    max_tokens: int,
    temperature: float,
    do_remove_constant_reward_groups: bool,
    enable_logging: bool = True,
    strategy: RolloutStrategy | None = None,
    termination: TerminationRewardPolicy | None = None,
) -> TrajectoryGroup | None:
    """One group in this process, with the cookbook's private signature (its tests and executor
    workers call it): a Tinker sampling client is wrapped in `TinkerTokenCompleter(max_tokens,
    temperature)`, a `TokenCompleter` is used as it is with `max_tokens` capping each turn; then
    the group is dropped (None) as `do_group_rollout_and_filter_constant_reward` documents."""
    if isinstance(sampling_client, TokenCompleter):
        policy: TokenCompleter = sampling_client
        limits: RolloutLimits | None = RolloutLimits(max_turn_tokens=max_tokens)
    else:
        policy = TinkerTokenCompleter(sampling_client, max_tokens=max_tokens, temperature=temperature)
        limits = None
    return await _filtered_group(policy, env_group_builder, do_remove_constant_reward_groups,
                                 strategy or FailFast(), termination, limits)


async def _filtered_group(sampling_client, env_group_builder, do_remove_constant_reward_groups,
                          strategy, termination, limits) -> TrajectoryGroup | None:
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


# --- executor dispatch and error counting (the cookbook's rl/rollouts.py names) ---------------------
@dataclasses.dataclass(frozen=True)
class _RolloutTask:
    """What a worker needs to run one group (it must pickle for a process pool)."""

    policy: TokenCompleter
    env_group_builder: EnvGroupBuilder
    remove_constant_reward_groups: bool
    strategy: RolloutStrategy
    termination: TerminationRewardPolicy | None
    limits: RolloutLimits | None


def _run_rollout_task(task: _RolloutTask) -> TrajectoryGroup | None:
    """A worker's entry point: the group's coroutine on a fresh event loop."""
    return asyncio.run(_filtered_group(task.policy, task.env_group_builder,
                                       task.remove_constant_reward_groups, task.strategy,
                                       task.termination, task.limits))


_rollout_executor: ContextVar[Executor | None] = ContextVar("llm_gym_rollout_executor", default=None)


def set_rollout_executor(executor: Executor | None) -> None:
    """Run each `do_group_rollout_and_filter_constant_reward` group in `executor` (any
    `concurrent.futures.Executor`; `None` = in-process coroutines, the default). The policy and the
    builder must pickle for a process pool. A process pool whose workers start by `fork` is refused:
    a policy or grader that holds threads (a sampler, a torch runtime) can deadlock in a forked
    child; use `mp_context=multiprocessing.get_context("spawn")` (or "forkserver")."""
    context = getattr(executor, "_mp_context", None)
    start_method = getattr(context, "get_start_method", None)
    if start_method is not None and start_method() == "fork":
        raise ValueError(
            "set_rollout_executor: this ProcessPoolExecutor starts its workers with fork; create it "
            "with mp_context=multiprocessing.get_context('spawn') (or 'forkserver')"
        )
    _rollout_executor.set(executor)


def get_rollout_executor() -> Executor | None:
    """The executor `set_rollout_executor` set in this context, or None."""
    return _rollout_executor.get()


@dataclasses.dataclass
class RolloutErrorCounter:
    """Cumulative rollout-error counts over `TrajectoryGroup | None` results: `ingest` each
    result (None counts a skipped group), `get_metrics()` for logging."""

    _counts: Counter = dataclasses.field(default_factory=Counter)
    _groups_skipped: int = 0

    def ingest(self, result: TrajectoryGroup | None) -> None:
        if result is None:
            self._groups_skipped += 1
            return
        for error in result.rollout_errors:
            self._counts[error.error_type] += 1

    def get_metrics(self, prefix: str = "rollout_errors") -> dict[str, float]:
        """`{prefix}/{error_type}` counts plus `{prefix}/total` and `{prefix}/groups_skipped`;
        empty while nothing went wrong."""
        if not self._counts and not self._groups_skipped:
            return {}
        out = {f"{prefix}/{kind}": float(n) for kind, n in self._counts.items()}
        out[f"{prefix}/total"] = float(sum(self._counts.values()))
        out[f"{prefix}/groups_skipped"] = float(self._groups_skipped)
        return out
