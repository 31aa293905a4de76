"""How the G rollouts of a group are run and what happens when some fail.

Each strategy, what it does on a failed rollout, and what it does with group errors (`make_envs`,
group rewards):

- `FailFast()` (default). On a failed rollout: the other rollouts are cancelled and the exception
  propagates; the group is lost. Group errors: propagate.
- `RetryOnFailure(max_retries=3, per_rollout_timeout=0)`. On a failed rollout: retried on
  `make_envs()[0]` of a fresh group, up to `max_retries` in the whole group; a failure past that
  cancels the rest and is re-raised. Group errors: propagate from `do_group_rollout`; the wrapper
  skips the group.
- `MinViableGroup(min_successful=None, max_retries=3, per_rollout_timeout=None)`. On a failed
  rollout: retried (as above) only while fewer than the floor (`min_successful`, None:
  `ceil(0.75 * G)`) succeeded, else recorded; below the floor at the end:
  `AllTrajectoriesFailedError`. Group errors: as `RetryOnFailure`.

As in the cookbook, `do_group_rollout` raises whatever a strategy gave up with (and a failing
`make_envs` / `compute_group_rewards`), under every strategy; the caller-side wrapper
`do_group_rollout_and_filter_constant_reward` returns `None` for `AllTrajectoriesFailedError`
and, when `strategy.catches_group_errors`, for any other error (logged as a warning). Successful
trajectories come in completion order (`FailFast`: slot order). Every error seen is recorded as a
`RolloutError` on the group that survives. `per_rollout_timeout` (0 or None: none) counts a hung
rollout as failed (error type "TimeoutError"). Strategies are frozen dataclasses of plain numbers,
so they pickle. `tests/conformance/test_cookbook_rollouts.py` runs both libraries side by side
with injected faults.

Deliberate differences from the cookbook (each for a reliability guarantee), as ours / cookbook /
why:

- Ours: a failing `make_envs()` (first or a retry's) is retried within `max_retries` (bounded by
  `per_rollout_timeout`); past the budget its last error is raised. Cookbook: the first failure
  propagates at once (a retry's failure escapes with the group's rollouts still running). Why: a
  flaky sandbox start should cost one retry, not a group; with no `make_envs` failure nothing
  changes (no budget spent).
- Ours: `FailFast` cancels the sibling rollouts (grace `CANCEL_GRACE_S`) before `cleanup()`.
  Cookbook: `asyncio.gather` raises and lets the siblings run on, after `cleanup()`, outcomes
  unretrieved. Why: no rollout keeps using an env its group has cleaned up; no "exception never
  retrieved".
- Ours: a timed-out rollout is cancelled and retried at once; one that does not unwind in
  `CANCEL_GRACE_S` is abandoned and recorded as `RolloutError("AbandonedRollout")`. Cookbook:
  `asyncio.wait_for` waits for the cancelled rollout to unwind, however long. Why:
  `per_rollout_timeout` is a hard bound (below).
- Ours: a rollout that returns after its deadline (it blocked the loop) counts as timed out.
  Cookbook: its result is used. Why: a result past the deadline is never trained on.
- Ours: a timeout's `RolloutError` message says what timed out. Cookbook: empty message. Why:
  readable logs.
- Ours: `per_rollout_timeout=0` means no timeout for both strategies; negative values and
  `min_successful < 1` raise `ValueError`. Cookbook: `MinViableGroup(per_rollout_timeout=0)` times
  out at once; no validation. Why: one meaning for 0; errors at construction.
- Ours: `RolloutBudgetExhausted` is an alias of `AllTrajectoriesFailedError`. Cookbook: (not
  present). Why: the name this module used before.
- Ours: the wrapper's `sampling_client` is any `TokenCompleter`; `max_tokens` caps each turn
  through `RolloutLimits.max_turn_tokens`; `temperature` and `enable_logging` are accepted and
  unused; no executor dispatch. Cookbook: a `tinker.SamplingClient` wrapped in
  `TinkerTokenCompleter(max_tokens, temperature)`; logtree; `set_rollout_executor`. Why: no Tinker
  client or logtree here; sampling settings belong to our completers (`HFSampler`).

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
from llm_gym.exceptions import AllTrajectoriesFailedError
from llm_gym.rl.types import Env, EnvGroupBuilder, RolloutError, Trajectory

if TYPE_CHECKING:
    from llm_gym.rl.rollout_limits import RolloutLimits

logger = logging.getLogger(__name__)


RolloutBudgetExhausted = AllTrajectoriesFailedError
"""Former name of the error a strategy raises when it drops a group (kept as an alias)."""


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
                     may_retry=lambda: True) -> list[Env]:
    """`make_envs()`, retried within the retry budget (an extension over the cookbook, which lets
    the first failure propagate); raises the last failure once the budget is spent (or
    `may_retry()` says no)."""
    while True:
        try:
            envs = list(await _bounded(env_group_builder.make_envs(), timeout, "make_envs()"))
            if not envs:
                raise ValueError(f"{type(env_group_builder).__name__}.make_envs() returned no envs")
            return envs
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, then retried or re-raised
            errors.append(_error(exc))
            logger.warning("make_envs() failed (%s: %s); retries left: %d",
                           type(exc).__name__, exc, budget.left)
            if budget.left <= 0 or not may_retry():
                raise
            budget.left -= 1


async def _timed_rollout(policy, env, limits):
    """A rollout and the wall seconds it took (judged against the timeout by the caller, so a
    rollout that blocked the event loop past its deadline is not trusted)."""
    from llm_gym.rl.rollouts import do_single_rollout

    start = time.monotonic()
    trajectory = await do_single_rollout(policy, env, limits=limits)
    return trajectory, time.monotonic() - start


def _timeout_s(per_rollout_timeout: float | None) -> float | None:
    return per_rollout_timeout if per_rollout_timeout is not None and per_rollout_timeout > 0 else None


async def _run_with_retries(
    env_group_builder: EnvGroupBuilder,
    policy: TokenCompleter,
    limits,
    max_retries: int,
    per_rollout_timeout: float | None,
    floor_of=None,
) -> tuple[list[Trajectory], list[Env], list[RolloutError], int]:
    """Run the group; retry a failed rollout on `make_envs()[0]` of a fresh group while the budget
    lasts.

    Without `floor_of` (RetryOnFailure) a failure with the budget spent cancels the remaining
    rollouts and is re-raised. With `floor_of(group_size)` (MinViableGroup) a failure is retried
    only while fewer than the floor have succeeded, and is otherwise just recorded. Returns the
    successful trajectories and their envs in completion order (as the cookbook does), the
    errors, and the group size."""
    timeout = _timeout_s(per_rollout_timeout)
    budget = _Budget(max_retries)
    errors: list[RolloutError] = []
    envs = await _make_envs(env_group_builder, timeout, budget, errors)
    group_size = len(envs)
    floor = None if floor_of is None else floor_of(group_size)

    deadline_of: dict[asyncio.Future, float] = {}
    env_of: dict[asyncio.Future, Env] = {}
    trajectories: list[Trajectory] = []
    done_envs: list[Env] = []

    def launch(env: Env) -> None:
        task = asyncio.ensure_future(_timed_rollout(policy, env, limits))
        env_of[task] = env
        deadline_of[task] = math.inf if timeout is None else time.monotonic() + timeout

    def may_retry() -> bool:
        return floor is None or len(trajectories) < floor

    for env in envs:
        launch(env)
    cancelling: list[asyncio.Future] = []  # timed out, cancelled, not yet unwound

    async def fail(exc: BaseException) -> None:
        errors.append(_error(exc))
        retry = budget.left > 0 and may_retry()
        logger.warning(
            "rollout %s (%s: %s); %s (retries left: %d)",
            "timed out" if isinstance(exc, TimeoutError) else "failed",
            type(exc).__name__, exc, "retrying" if retry else "not retried", budget.left,
        )
        if retry:
            budget.left -= 1
            try:
                fresh_group = await _make_envs(env_group_builder, timeout, budget, errors, may_retry)
            except asyncio.CancelledError:
                raise
            except Exception as make_exc:  # noqa: BLE001
                if floor is None:
                    raise
                logger.warning("retry lost: make_envs() failed (%s)", make_exc)
                return
            launch(fresh_group[0])  # as the cookbook: the first env of a fresh group
            return
        if floor is None:
            logger.error("retry budget exhausted (%d retries); cancelling the rest", max_retries)
            raise exc

    try:
        while env_of:
            wait_s = min(deadline_of.values()) - time.monotonic()
            done, _ = await asyncio.wait(
                set(env_of), timeout=None if wait_s == math.inf else max(wait_s, 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            now = time.monotonic()
            for task in list(env_of):
                if task in done:
                    env = env_of.pop(task)
                    del deadline_of[task]
                    if task.cancelled():  # cancelled from outside: never swallow cancellation
                        raise asyncio.CancelledError()
                    exc = task.exception()
                    if exc is None:
                        trajectory, elapsed = task.result()
                        if timeout is None or elapsed <= timeout:
                            trajectories.append(trajectory)
                            done_envs.append(env)
                            continue
                        exc = TimeoutError(
                            f"rollout took {elapsed:.2f}s, over per_rollout_timeout={timeout:g}s "
                            "(something blocked the event loop; its result is not used)"
                        )
                    await fail(exc)
                elif now >= deadline_of[task]:
                    env_of.pop(task)
                    del deadline_of[task]
                    task.cancel()
                    cancelling.append(task)
                    await fail(TimeoutError(f"rollout timed out after {timeout:g}s"))
    finally:
        abandoned = await _cancel_all(list(env_of) + cancelling)
        for _ in abandoned:
            errors.append(RolloutError(
                "AbandonedRollout",
                f"a cancelled rollout did not unwind within {CANCEL_GRACE_S:g}s and was abandoned",
            ))
    return trajectories, done_envs, errors, group_size


@dataclass(frozen=True)
class RetryOnFailure(RolloutStrategy):
    """Retry failed or timed-out rollouts on fresh envs (`make_envs()[0]` of a fresh group).

    `max_retries` is the budget for the whole group; `per_rollout_timeout` seconds (0 or None =
    none) counts a hung rollout as failed. When a rollout fails with the budget spent, the other
    rollouts are cancelled and that failure is re-raised, so the group is skipped (by
    `do_group_rollout_and_filter_constant_reward`) rather than trained on a partial, biased
    group."""

    max_retries: int = 3
    per_rollout_timeout: float | None = 0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or (self.per_rollout_timeout or 0) < 0:
            raise ValueError(
                f"RetryOnFailure: max_retries ({self.max_retries}) and per_rollout_timeout "
                f"({self.per_rollout_timeout}) must be >= 0"
            )

    @property
    def catches_group_errors(self) -> bool:
        return True

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        trajectories, envs, errors, _ = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout,
        )
        return RolloutResult(trajectories, envs, errors)


@dataclass(frozen=True)
class MinViableGroup(RolloutStrategy):
    """Keep a partial group once at least a floor of rollouts succeeded.

    `min_successful` is the floor (None: `ceil(0.75 * group_size)`). A failure is retried on a
    fresh env (up to `max_retries` in the group) only while fewer than the floor have succeeded;
    after that it is just recorded. Below the floor once everything finished,
    `AllTrajectoriesFailedError` is raised and the group is dropped. A partial group is a smaller,
    noisier baseline for group-centred advantages; the floor bounds how small."""

    min_successful: int | None = None
    max_retries: int = 3
    per_rollout_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.min_successful is not None and self.min_successful < 1:
            raise ValueError(
                f"MinViableGroup: min_successful must be >= 1 or None, got {self.min_successful}"
            )
        if self.max_retries < 0 or (self.per_rollout_timeout or 0) < 0:
            raise ValueError(
                f"MinViableGroup: max_retries ({self.max_retries}) and per_rollout_timeout "
                f"({self.per_rollout_timeout}) must be >= 0"
            )

    @property
    def catches_group_errors(self) -> bool:
        return True

    def floor(self, group_size: int) -> int:
        """The minimum number of successful rollouts for a group of `group_size`."""
        if self.min_successful is not None:
            return self.min_successful
        return math.ceil(0.75 * group_size)

    async def execute(self, env_group_builder, policy, limits=None) -> RolloutResult:
        trajectories, envs, errors, group_size = await _run_with_retries(
            env_group_builder, policy, limits, self.max_retries, self.per_rollout_timeout,
            floor_of=self.floor,
        )
        floor = self.floor(group_size)
        if len(trajectories) < floor:
            raise AllTrajectoriesFailedError(
                f"only {len(trajectories)}/{group_size} rollouts succeeded, below the minimum "
                f"viable group size {floor} ({len(errors)} failures, max_retries="
                f"{self.max_retries}); dropping the group"
            )
        return RolloutResult(trajectories, envs, errors)


def rollout_strategy_from_config(rollout_error_tolerance: bool | RolloutStrategy) -> RolloutStrategy:
    """A training config's `rollout_error_tolerance` as a strategy (the cookbook's helper): False ->
    `FailFast()`, True -> `RetryOnFailure()`, a `RolloutStrategy` as is; anything else raises
    `ConfigurationError`."""
    if isinstance(rollout_error_tolerance, RolloutStrategy):
        return rollout_error_tolerance
    if rollout_error_tolerance is False:
        return FailFast()
    if rollout_error_tolerance is True:
        return RetryOnFailure()
    from llm_gym.exceptions import ConfigurationError

    raise ConfigurationError(
        f"Invalid rollout_error_tolerance value: {rollout_error_tolerance!r} (expected True, "
        "False or a RolloutStrategy)"
    )
