"""How the G rollouts of a group are run and what happens when some fail.

| strategy | on a failed rollout | group errors (`make_envs`, group rewards) |
|---|---|---|
| `FailFast()` (default) | the other rollouts are cancelled and the exception propagates; the group is lost | propagate |
| `RetryOnFailure(max_retries, per_rollout_timeout)` | a fresh env is made for that slot and the rollout re-run, up to `max_retries` in the whole group; one failure past that cancels the rest and skips the group | caught: group skipped |
| `MinViableGroup(min_successful, max_retries, per_rollout_timeout)` | failures (after retries) are dropped; the group is kept when at least `min_successful` rollouts finished | caught: group skipped |

A strategy that gives up raises `RolloutBudgetExhausted` (chained to the last rollout error) from
`execute`; `do_group_rollout` turns that into a skipped group (it returns `None` and logs a
warning) for strategies whose `catches_group_errors` is True. Every error seen is recorded as a
`RolloutError` on the group that survives. `per_rollout_timeout` counts a hung rollout as failed
(error type "TimeoutError"), so it is retried like any other failure. Strategies are frozen
dataclasses of plain numbers, so they pickle.

Custom strategies written for the cookbook (`execute(self, env_group_builder, policy)`) keep
working: `do_group_rollout` passes `limits=` only when rollout limits are set.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from llm_gym.completers import TokenCompleter
from llm_gym.rl.types import Env, EnvGroupBuilder, RolloutError, Trajectory

if TYPE_CHECKING:
    from llm_gym.rl.rollouts import RolloutLimits

logger = logging.getLogger(__name__)


class RolloutBudgetExhausted(RuntimeError):
    """Raised by a strategy that gave up on a group."""


@dataclass(frozen=True)
class RolloutResult:
    """What a strategy returns: the surviving trajectories, the envs that produced them (same
    order) and every error seen on the way."""

    trajectories: list[Trajectory]
    envs: Sequence[Env]
    errors: list[RolloutError] = field(default_factory=list)


class RolloutStrategy(ABC):
    @property
    def catches_group_errors(self) -> bool:
        """True: a group-level failure skips the group (returns None) instead of raising."""
        return False

    @abstractmethod
    async def execute(
        self,
        env_group_builder: EnvGroupBuilder,
        policy: TokenCompleter,
        limits: "RolloutLimits | None" = None,
    ) -> RolloutResult: ...


def _error(exc: BaseException) -> RolloutError:
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError on 3.11+
        return RolloutError("TimeoutError", str(exc) or "rollout timed out")
    return RolloutError(type(exc).__name__, str(exc))


async def _cancel_all(tasks) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True)
class FailFast(RolloutStrategy):
    """Run every rollout concurrently; on the first exception cancel the others and re-raise it."""

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        from llm_gym.rl.rollouts import do_single_rollout

        envs = list(await env_group_builder.make_envs())
        if not envs:
            return RolloutResult([], envs, [])
        tasks = [
            asyncio.ensure_future(do_single_rollout(policy, env, limits=limits)) for env in envs
        ]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        except BaseException:
            await _cancel_all(tasks)
            raise
        await _cancel_all(pending)
        for task in tasks:  # in slot order, so the first failing slot's error is raised
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return RolloutResult([t.result() for t in tasks], envs, [])


async def _run_with_retries(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    limits,
    max_retries: int,
    per_rollout_timeout: float,
    stop_when_exhausted: bool,
) -> tuple[list[Trajectory | None], list[Env], list[RolloutError], BaseException | None]:
    """Run the group; retry failed slots on fresh envs while the budget lasts.

    Returns, per slot, the trajectory (None where the slot finally failed), the envs, the errors,
    and the exception that found the budget empty (None if it never ran out). With
    `stop_when_exhausted` the remaining rollouts are cancelled at that point."""
    from llm_gym.rl.rollouts import do_single_rollout

    envs = list(await env_group_builder.make_envs())
    timeout = per_rollout_timeout if per_rollout_timeout > 0 else None

    def launch(env: Env) -> asyncio.Future:
        coro = do_single_rollout(policy, env, limits=limits)
        if timeout is not None:
            coro = asyncio.wait_for(coro, timeout)
        return asyncio.ensure_future(coro)

    slot_of: dict[asyncio.Future, int] = {launch(env): i for i, env in enumerate(envs)}
    results: list[Trajectory | None] = [None] * len(envs)
    errors: list[RolloutError] = []
    retries_left = max_retries
    exhausted_by: BaseException | None = None
    pending = set(slot_of)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                slot = slot_of[task]
                if task.cancelled():  # cancelled from outside: never swallow cancellation
                    raise asyncio.CancelledError()
                exc = task.exception()
                if exc is None:
                    results[slot] = task.result()
                    continue
                errors.append(_error(exc))
                logger.warning(
                    "rollout %d %s (%s: %s); retries left: %d", slot,
                    "timed out" if isinstance(exc, TimeoutError) else "failed",
                    type(exc).__name__, exc, retries_left,
                )
                if retries_left > 0:
                    retries_left -= 1
                    fresh_group = list(await env_group_builder.make_envs())
                    # The same slot of a fresh group, so asymmetric groups keep their roles.
                    fresh = fresh_group[slot % len(fresh_group)]
                    envs[slot] = fresh
                    new_task = launch(fresh)
                    slot_of[new_task] = slot
                    pending.add(new_task)
                elif exhausted_by is None:
                    exhausted_by = exc
            if exhausted_by is not None and stop_when_exhausted:
                break
    finally:
        await _cancel_all(pending)
    return results, envs, errors, exhausted_by


@dataclass(frozen=True)
class RetryOnFailure(RolloutStrategy):
    """Retry failed or timed-out rollouts on fresh envs (from `make_envs()`, same slot).

    `max_retries` is the budget for the whole group; `per_rollout_timeout` seconds (0 = none) counts
    a hung rollout as failed. When a rollout fails with the budget spent, the other rollouts are
    cancelled and `RolloutBudgetExhausted` is raised, so the group is skipped rather than trained
    on a partial, biased group."""

    max_retries: int = 3
    per_rollout_timeout: float = 0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.per_rollout_timeout < 0:
            raise ValueError(
                f"RetryOnFailure: max_retries ({self.max_retries}) and per_rollout_timeout "
                f"({self.per_rollout_timeout}) must be >= 0"
            )

    @property
    def catches_group_errors(self) -> bool:
        return True

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        results, envs, errors, exhausted_by = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout,
            stop_when_exhausted=True,
        )
        if exhausted_by is not None:
            raise RolloutBudgetExhausted(
                f"a rollout failed with the retry budget spent ({self.max_retries} retries, "
                f"{len(errors)} errors); last error: {errors[-1].error_type}: "
                f"{errors[-1].error_message}"
            ) from exhausted_by
        return RolloutResult([r for r in results if r is not None], envs, errors)


@dataclass(frozen=True)
class MinViableGroup(RolloutStrategy):
    """Keep whatever rollouts succeed (after up to `max_retries` retries in the group) as long as
    at least `min_successful` of them did; otherwise raise `RolloutBudgetExhausted` (group
    skipped). Note that a group with dropped rollouts is a smaller, possibly biased group."""

    min_successful: int = 2
    max_retries: int = 0
    per_rollout_timeout: float = 0

    def __post_init__(self) -> None:
        if self.min_successful < 1:
            raise ValueError(f"MinViableGroup: min_successful must be >= 1, got {self.min_successful}")
        if self.max_retries < 0 or self.per_rollout_timeout < 0:
            raise ValueError(
                f"MinViableGroup: max_retries ({self.max_retries}) and per_rollout_timeout "
                f"({self.per_rollout_timeout}) must be >= 0"
            )

    @property
    def catches_group_errors(self) -> bool:
        return True

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        results, envs, errors, exhausted_by = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout,
            stop_when_exhausted=False,
        )
        kept = [(r, e) for r, e in zip(results, envs) if r is not None]
        if len(kept) < self.min_successful:
            raise RolloutBudgetExhausted(
                f"only {len(kept)} of {len(results)} rollouts succeeded (min_successful="
                f"{self.min_successful})"
                + (f"; last error: {errors[-1].error_type}: {errors[-1].error_message}" if errors else "")
            ) from exhausted_by
        return RolloutResult([r for r, _ in kept], [e for _, e in kept], errors)
