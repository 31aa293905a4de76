"""`EnvGroupBuilder.cleanup()` under `do_group_rollout`: awaited in every case, run to its end when
the rollout is cancelled while it cleans up (once or twice), with the cancellation re-raised after;
a cleanup that never waits runs inline in the caller's task. Every wait here is on an event the
test controls, and "the loop moved on" is counted in loop turns (`sleep(0)`), never in seconds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from llm_gym.completers import TokenCompleter, TokensWithLogprobs
from llm_gym.model_input import ModelInput
from llm_gym.rl import do_group_rollout
from llm_gym.rl.rollouts import _cleanup_shielded
from llm_gym.rl.types import Env, EnvGroupBuilder, StepResult

TURNS = 20  # loop turns granted to a cancellation before checking nothing was let go early
HANG_GUARD_S = 60.0  # only a regression that hangs ever waits this long


async def spin(turns: int = TURNS) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def until(event: asyncio.Event, task: asyncio.Future) -> None:
    """Wait for `event`, but fail (instead of hanging) if `task` ends first without setting it."""
    waiter = asyncio.ensure_future(event.wait())
    await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():
        waiter.cancel()
    assert event.is_set(), f"the rollout ended ({task!r}) before the event was set"


async def finish(task: asyncio.Future):
    """`await task`, with a safety net so that a regression that never finishes fails instead of
    hanging the suite (no assertion depends on how long anything takes)."""
    done, _ = await asyncio.wait([task], timeout=HANG_GUARD_S)
    assert done, "the rollout never finished"
    return await task


class OneTurnEnv(Env):
    """One turn, reward 1; `step` waits for `gate` when one is given (a rollout still running)."""

    def __init__(self, gate: asyncio.Event | None = None, log: list | None = None):
        self.gate, self.log = gate, log if log is not None else []

    async def initial_observation(self):
        return ModelInput.from_ints([1, 2]), [0]

    async def step(self, action, *, extra=None):
        if self.gate is not None:
            self.log.append("step waiting")
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.log.append("step cancelled")
                raise
        return StepResult(reward=1.0, episode_done=True, next_observation=ModelInput.empty(),
                          next_stop_condition=[0])


class Policy(TokenCompleter):
    async def __call__(self, model_input, stop, *, max_tokens=None):
        return TokensWithLogprobs(tokens=[3], maybe_logprobs=[-0.1])


@dataclass
class Builder(EnvGroupBuilder):
    """`n` one-turn envs. cleanup logs "cleanup started", then (if `hold`) waits for `release`,
    then logs "cleanup finished"; a CancelledError reaching it is logged as "cleanup cancelled"."""

    n: int = 2
    hold: bool = True
    step_gate: asyncio.Event | None = None
    log: list = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    fail: bool = False

    async def make_envs(self):
        return [OneTurnEnv(self.step_gate, self.log) for _ in range(self.n)]

    async def cleanup(self):
        self.log.append("cleanup started")
        self.started.set()
        if self.hold:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.log.append("cleanup cancelled")
                raise
        if self.fail:
            raise RuntimeError("cleanup failed")
        self.log.append("cleanup finished")


def test_cleanup_is_awaited_after_a_successful_rollout():
    async def main():
        b = Builder()
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        await spin()
        assert not task.done()  # the group waits for its cleanup
        b.release.set()
        return b, await finish(task)

    b, group = asyncio.run(main())
    assert group.get_total_rewards() == [1.0, 1.0]
    assert b.log == ["cleanup started", "cleanup finished"]


def test_cancel_while_cleanup_waits_lets_it_finish_then_reraises():
    async def main():
        b = Builder()
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        task.cancel()
        await spin()
        assert not task.done()  # cancelled, but still waiting for its cleanup
        assert b.log == ["cleanup started"]  # the cancellation did not reach the cleanup
        b.release.set()
        with pytest.raises(asyncio.CancelledError):
            await finish(task)
        assert task.cancelled()
        return b

    b = asyncio.run(main())
    assert b.log == ["cleanup started", "cleanup finished"]


def test_cancel_twice_while_cleanup_waits():
    async def main():
        b = Builder()
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        task.cancel()
        await spin()
        assert not task.done()
        task.cancel()  # a second cancellation (e.g. training shutting down harder)
        await spin()
        assert not task.done()
        assert "cleanup cancelled" not in b.log
        b.release.set()
        with pytest.raises(asyncio.CancelledError):
            await finish(task)
        return b

    b = asyncio.run(main())
    assert b.log == ["cleanup started", "cleanup finished"]


def test_cancel_during_rollout_still_runs_a_waiting_cleanup_to_its_end():
    async def main():
        gate = asyncio.Event()  # never set: the envs' steps hang until cancelled
        b = Builder(step_gate=gate)
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        while b.log.count("step waiting") < b.n and not task.done():
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        await until(b.started, task)  # the rollout's cancellation leads into cleanup
        task.cancel()  # and it is cancelled again while cleaning up
        await spin()
        assert not task.done()
        b.release.set()
        with pytest.raises(asyncio.CancelledError):
            await finish(task)
        return b

    b = asyncio.run(main())
    assert b.log.count("step cancelled") == 2
    assert b.log[-2:] == ["cleanup started", "cleanup finished"]
    assert b.log.count("cleanup started") == 1  # awaited once


def test_cleanup_error_propagates():
    async def main():
        b = Builder(fail=True)
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        b.release.set()
        with pytest.raises(RuntimeError, match="cleanup failed"):
            await finish(task)

    asyncio.run(main())
    b = Builder(hold=False, fail=True)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        asyncio.run(do_group_rollout(b, Policy()))


def test_cleanup_returning_a_future_is_awaited():
    class FutureCleanup(Builder):
        def cleanup(self):  # not a coroutine function: returns an awaitable
            self.fut = asyncio.get_running_loop().create_future()
            self.started.set()
            return self.fut

    async def main():
        b = FutureCleanup()
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        task.cancel()
        await spin()
        assert not task.done() and not b.fut.cancelled()
        b.fut.set_result(None)
        with pytest.raises(asyncio.CancelledError):
            await finish(task)

    asyncio.run(main())


def test_a_cleanup_that_does_not_wait_runs_inline():
    # Driven by hand, without an event loop: a cleanup that never suspends finishes within the
    # first step (no task, no loop turn).
    b = Builder(hold=False)
    coro = _cleanup_shielded(b)
    with pytest.raises(StopIteration):
        coro.send(None)
    assert b.log == ["cleanup started", "cleanup finished"]


def test_a_cleanup_that_does_not_wait_runs_in_the_rollouts_task():
    class Recording(Builder):
        async def cleanup(self):
            self.log.append(asyncio.current_task())

    async def main():
        b = Recording()
        group = await do_group_rollout(b, Policy())
        return b, asyncio.current_task(), group

    b, caller, group = asyncio.run(main())
    assert b.log == [caller]
    assert group.get_total_rewards() == [1.0, 1.0]


@pytest.mark.xfail(strict=True, reason=(
    "_cleanup_shielded steps the cleanup coroutine once in the caller's task and then finishes it in "
    "a new task: an asyncio.timeout() entered before the cleanup's first await is bound to the "
    "rollout's task, so when it fires it cancels the (finished, successful) rollout instead of "
    "the cleanup, which keeps waiting; plain `await cleanup()` and the cookbook's ensure_future "
    "both time the cleanup out and return the group"))
def test_a_timeout_inside_cleanup_times_out_the_cleanup_not_the_rollout():
    class TimedCleanup(Builder):
        async def cleanup(self):
            try:
                async with asyncio.timeout(0):  # already due: fires on the next loop turn
                    self.started.set()
                    await self.release.wait()
                self.log.append("released")
            except TimeoutError:
                self.log.append("cleanup timed out")

    async def main():
        b = TimedCleanup()
        task = asyncio.ensure_future(do_group_rollout(b, Policy()))
        await until(b.started, task)
        await spin()
        b.release.set()  # unblock a cleanup that failed to time out, so the test cannot hang
        try:
            group = await finish(task)
        except asyncio.CancelledError:
            group = "rollout cancelled"
        return b, group

    b, group = asyncio.run(main())
    assert b.log == ["cleanup timed out"]
    assert group != "rollout cancelled" and group.get_total_rewards() == [1.0, 1.0]
