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
(error type "TimeoutError"), so it is retried like any other failure. A failing `make_envs()` (the
group's first call or a retry's) is retried too, within the same `max_retries` budget and bounded
by `per_rollout_timeout`. Strategies are frozen dataclasses of plain numbers, so they pickle.

Hard bounds. `per_rollout_timeout` is a bound on wall time, not a polite request: a timed-out
rollout is cancelled and its slot retried at once, without waiting for the cancellation to finish.
A rollout that has not unwound within `CANCEL_GRACE_S` (it swallowed the cancellation, or its
`finally:` cleanup is slow) is abandoned -- left to finish on its own, its outcome retrieved so
asyncio prints nothing -- and recorded as a `RolloutError("AbandonedRollout", ...)`. So a group
ends within about `(max_retries + 1) * per_rollout_timeout + CANCEL_GRACE_S` seconds.
What cannot be bounded in-process: code that blocks the event loop's thread (a `time.sleep`, a
blocking socket read or a CPU loop inside an `async def step`) stops every coroutine on that loop,
timers included. Such a rollout is still *judged* by its wall time -- when it finally returns
past its deadline it counts as timed out and is retried, never trained on -- but the loop is
frozen meanwhile. Run blocking work in an executor (`loop.run_in_executor`) or, for graders,
through `llm_gym.grading.bounded` (which `ProblemEnv` uses by default).

Custom strategies written for the cookbook (`execute(self, env_group_builder, policy)`) keep
working: `do_group_rollout` passes `limits=` only when rollout limits are set.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
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


CANCEL_GRACE_S = 0.5
"""How long a cancelled rollout (or `make_envs`) may take to unwind before it is abandoned."""

# Abandoned tasks, kept alive until they finish (the loop holds only weak references to tasks).
_abandoned: set[asyncio.Future] = set()


def _error(exc: BaseException) -> RolloutError:
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError is TimeoutError on 3.11+
        return RolloutError("TimeoutError", str(exc) or "rollout timed out")
    return RolloutError(type(exc).__name__, str(exc))


def _retrieve(task: asyncio.Future) -> None:
    """Mark a finished task's outcome as seen (no "Task exception was never retrieved")."""
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()


def _abandon(task: asyncio.Future) -> None:
    _abandoned.add(task)
    task.add_done_callback(_retrieve)


async def _cancel_all(tasks, grace_s: float = CANCEL_GRACE_S) -> list[asyncio.Future]:
    """Cancel `tasks`, wait up to `grace_s` for them to unwind, abandon the rest (returned).
    Every outcome is retrieved, so asyncio reports nothing later."""
    tasks = [t for t in tasks if t is not None]
    for task in tasks:
        task.cancel()
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=grace_s)
    for task in done:
        _retrieve(task)
    for task in pending:
        _abandon(task)
    return list(pending)


async def _bounded(coro, timeout: float | None, what: str):
    """Await `coro` for at most `timeout` seconds (None: no bound); on timeout cancel it, give it
    `CANCEL_GRACE_S` to unwind (abandoning it after that) and raise TimeoutError."""
    if timeout is None:
        return await coro
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:  # cancelled from outside: take the task down with us
        await _cancel_all([task])
        raise
    if not done:
        await _cancel_all([task])
        raise TimeoutError(f"{what} took longer than {timeout:g}s")
    return task.result()


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
        for task in done:  # every outcome retrieved, so no exception goes unreported
            _retrieve(task)
        for task in tasks:  # in slot order, so the first failing slot's error is raised
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return RolloutResult([t.result() for t in tasks], envs, [])


class _Budget:
    def __init__(self, retries: int) -> None:
        self.left = retries


async def _make_envs(env_group_builder, timeout, budget: _Budget, errors: list[RolloutError],
                     exhausted: list[BaseException]) -> list[Env] | None:
    """`make_envs()` under the retry budget; None (with `exhausted` set) when it runs out."""
    while True:
        try:
            envs = list(await _bounded(env_group_builder.make_envs(), timeout, "make_envs()"))
            if not envs:
                raise ValueError(f"{type(env_group_builder).__name__}.make_envs() returned no envs")
            return envs
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, retried or reported
            errors.append(_error(exc))
            logger.warning("make_envs() failed (%s: %s); retries left: %d",
                           type(exc).__name__, exc, budget.left)
            if budget.left <= 0:
                exhausted.append(exc)
                return None
            budget.left -= 1


async def _timed_rollout(policy, env, limits):
    """A rollout and the wall seconds it took (judged against the timeout by the caller, so a
    rollout that blocked the event loop past its deadline is not trusted)."""
    from llm_gym.rl.rollouts import do_single_rollout

    start = time.monotonic()
    trajectory = await do_single_rollout(policy, env, limits=limits)
    return trajectory, time.monotonic() - start


async def _run_with_retries(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    limits,
    max_retries: int,
    per_rollout_timeout: float,
    stop_when_exhausted: bool,
) -> tuple[list[Trajectory | None], list[Env], list[RolloutError], BaseException | None]:
    """Run the group; retry failed slots (and failed `make_envs()` calls) while the budget lasts.

    Returns, per slot, the trajectory (None where the slot finally failed), the envs, the errors,
    and the exception that found the budget empty (None if it never ran out). With
    `stop_when_exhausted` the remaining rollouts are cancelled at that point. A failure of the
    group's first `make_envs()` with the budget spent raises `RolloutBudgetExhausted`."""
    timeout = per_rollout_timeout if per_rollout_timeout > 0 else None
    budget = _Budget(max_retries)
    errors: list[RolloutError] = []
    exhausted: list[BaseException] = []
    made = await _make_envs(env_group_builder, timeout, budget, errors, exhausted)
    if made is None:
        raise RolloutBudgetExhausted(
            f"make_envs() failed with the retry budget spent ({max_retries} retries); last "
            f"error: {errors[-1].error_type}: {errors[-1].error_message}"
        ) from exhausted[0]
    envs: list[Env] = made

    deadline_of: dict[asyncio.Future, float] = {}
    slot_of: dict[asyncio.Future, int] = {}

    def launch(slot: int, env: Env) -> None:
        task = asyncio.ensure_future(_timed_rollout(policy, env, limits))
        slot_of[task] = slot
        deadline_of[task] = math.inf if timeout is None else time.monotonic() + timeout

    for i, env in enumerate(envs):
        launch(i, env)
    results: list[Trajectory | None] = [None] * len(envs)
    exhausted_by: BaseException | None = None
    cancelling: list[asyncio.Future] = []  # timed out, cancelled, not yet unwound

    async def fail(slot: int, exc: BaseException) -> None:
        nonlocal exhausted_by
        errors.append(_error(exc))
        logger.warning(
            "rollout %d %s (%s: %s); retries left: %d", slot,
            "timed out" if isinstance(exc, TimeoutError) else "failed",
            type(exc).__name__, exc, budget.left,
        )
        if budget.left > 0:
            budget.left -= 1
            fresh_group = await _make_envs(env_group_builder, timeout, budget, errors, exhausted)
            if fresh_group is not None:
                # The same slot of a fresh group, so asymmetric groups keep their roles.
                envs[slot] = fresh_group[slot % len(fresh_group)]
                launch(slot, envs[slot])
                return
            exc = exhausted[-1]
        if exhausted_by is None:
            exhausted_by = exc

    try:
        while slot_of:
            wait_s = min(deadline_of.values()) - time.monotonic()
            done, _ = await asyncio.wait(
                set(slot_of), timeout=None if wait_s == math.inf else max(wait_s, 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            now = time.monotonic()
            for task in list(slot_of):
                if task in done:
                    slot = slot_of.pop(task)
                    del deadline_of[task]
                    if task.cancelled():  # cancelled from outside: never swallow cancellation
                        raise asyncio.CancelledError()
                    exc = task.exception()
                    if exc is None:
                        trajectory, elapsed = task.result()
                        if timeout is None or elapsed <= timeout:
                            results[slot] = trajectory
                            continue
                        exc = TimeoutError(
                            f"rollout took {elapsed:.2f}s, over per_rollout_timeout={timeout:g}s "
                            "(something blocked the event loop; its result is not used)"
                        )
                    await fail(slot, exc)
                elif now >= deadline_of[task]:
                    slot = slot_of.pop(task)
                    del deadline_of[task]
                    task.cancel()
                    cancelling.append(task)
                    await fail(slot, TimeoutError(f"rollout timed out after {timeout:g}s"))
            if exhausted_by is not None and stop_when_exhausted:
                break
    finally:
        abandoned = await _cancel_all(list(slot_of) + cancelling)
    for _ in abandoned:
        errors.append(RolloutError(
            "AbandonedRollout",
            f"a cancelled rollout did not unwind within {CANCEL_GRACE_S:g}s and was abandoned",
        ))
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
