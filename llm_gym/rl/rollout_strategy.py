"""How the G rollouts of a group are run and what happens when some fail.

| strategy | on a failed rollout | group errors (`make_envs`, group rewards) |
|---|---|---|
| `FailFast()` (default) | the exception propagates; the group is lost | propagate |
| `RetryOnFailure(max_retries, per_rollout_timeout)` | a fresh env is made and the rollout re-run, up to `max_retries` in the whole group; past that the group is skipped | caught: group skipped |
| `MinViableGroup(min_successful, max_retries, per_rollout_timeout)` | failures are dropped; the group is kept when at least `min_successful` rollouts finished | caught: group skipped |

A skipped group makes `do_group_rollout` return `None` (and log a warning); every error seen is
recorded as a `RolloutError` on the group that survives. Strategies are frozen dataclasses, so they
pickle.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

from llm_gym.completers import TokenCompleter
from llm_gym.rl.types import Env, EnvGroupBuilder, RolloutError, Trajectory

logger = logging.getLogger(__name__)


class RolloutBudgetExhausted(RuntimeError):
    """Raised by a strategy that gave up on a group."""


@dataclass(frozen=True)
class RolloutResult:
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
        self, env_group_builder: EnvGroupBuilder, policy: TokenCompleter, limits=None
    ) -> RolloutResult: ...


@dataclass(frozen=True)
class FailFast(RolloutStrategy):
    """Run every rollout concurrently; the first exception propagates."""

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        from llm_gym.rl.rollouts import do_single_rollout

        envs = list(await env_group_builder.make_envs())
        trajectories = await asyncio.gather(
            *[do_single_rollout(policy, env, limits=limits) for env in envs]
        )
        return RolloutResult(list(trajectories), envs, [])


def _error(exc: BaseException) -> RolloutError:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return RolloutError("TimeoutError", str(exc) or "rollout timed out")
    return RolloutError(type(exc).__name__, str(exc))


async def _run_with_retries(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    limits,
    max_retries: int,
    per_rollout_timeout: float,
) -> tuple[list[Trajectory | None], list[Env], list[RolloutError], bool]:
    """Run the group; retry failed slots on fresh envs while budget lasts. Returns results per
    slot (None where the slot finally failed), the envs, the errors, and whether budget ran out."""
    from llm_gym.rl.rollouts import do_single_rollout

    envs = list(await env_group_builder.make_envs())
    timeout = per_rollout_timeout if per_rollout_timeout > 0 else None

    def launch(env: Env) -> asyncio.Task:
        coro = do_single_rollout(policy, env, limits=limits)
        if timeout is not None:
            coro = asyncio.wait_for(coro, timeout)
        return asyncio.ensure_future(coro)

    slot_of: dict[asyncio.Task, int] = {launch(env): i for i, env in enumerate(envs)}
    results: list[Trajectory | None] = [None] * len(envs)
    errors: list[RolloutError] = []
    retries_left = max_retries
    exhausted = False
    pending = set(slot_of)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                slot = slot_of[task]
                exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
                if exc is None:
                    results[slot] = task.result()
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    raise exc
                errors.append(_error(exc))
                logger.warning("rollout %d failed (%s: %s)", slot, type(exc).__name__, exc)
                if retries_left > 0:
                    retries_left -= 1
                    fresh = list(await env_group_builder.make_envs())[slot % len(envs)]
                    envs[slot] = fresh
                    new_task = launch(fresh)
                    slot_of[new_task] = slot
                    pending.add(new_task)
                else:
                    exhausted = True
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    return results, envs, errors, exhausted


@dataclass(frozen=True)
class RetryOnFailure(RolloutStrategy):
    """Retry failed or timed-out rollouts on fresh envs (from `make_envs()`, same slot). The budget
    `max_retries` is shared by the whole group; `per_rollout_timeout` seconds (0 = none) counts a
    hung rollout as failed. If the budget runs out the group is skipped rather than trained on a
    partial, biased group."""

    max_retries: int = 3
    per_rollout_timeout: float = 0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.per_rollout_timeout < 0:
            raise ValueError("RetryOnFailure: max_retries and per_rollout_timeout must be >= 0")

    @property
    def catches_group_errors(self) -> bool:
        return True

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        results, envs, errors, exhausted = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout
        )
        if exhausted or any(r is None for r in results):
            raise RolloutBudgetExhausted(
                f"{sum(r is None for r in results)} rollout(s) still failing after "
                f"{self.max_retries} retries; last error: {errors[-1].error_type}: {errors[-1].error_message}"
            )
        return RolloutResult([r for r in results if r is not None], envs, errors)


@dataclass(frozen=True)
class MinViableGroup(RolloutStrategy):
    """Keep whatever rollouts succeed (after up to `max_retries` retries) as long as at least
    `min_successful` of them did; otherwise skip the group."""

    min_successful: int = 2
    max_retries: int = 0
    per_rollout_timeout: float = 0

    def __post_init__(self) -> None:
        if self.min_successful < 1:
            raise ValueError("MinViableGroup: min_successful must be >= 1")

    @property
    def catches_group_errors(self) -> bool:
        return True

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        results, envs, errors, _ = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout
        )
        kept = [(r, e) for r, e in zip(results, envs) if r is not None]
        if len(kept) < self.min_successful:
            raise RolloutBudgetExhausted(
                f"only {len(kept)} of {len(results)} rollouts succeeded (min_successful="
                f"{self.min_successful})"
            )
        return RolloutResult([r for r, _ in kept], [e for _, e in kept], errors)
