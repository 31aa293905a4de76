"""Running a grader under a wall-clock limit: `grade_with_timeout` and `agrade_with_timeout`.

Expensive graders (symbolic maths, code execution) can hang on adversarial output. These helpers
return a `TimedGrade` with no credit when the limit passes or the grader raises. By default the
grader runs through `llm_gym.grading.bounded` (the calling thread for a short budget, then a
killable forked worker), so a hung grader leaves no thread or process running afterwards. An
`Executor` you pass (e.g. a `ProcessPoolExecutor` of your own) is used instead: the call returns
after `timeout_s`, but a hung worker of that executor stays busy until it finishes.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Callable

from llm_gym.grading.bounded import BoundedCall, acall_bounded, call_bounded


@dataclass(frozen=True)
class TimedGrade:
    """`score` is the grader's return value as a float (bool → 0/1), or `default` (0.0) when it
    timed out or raised; `error` holds the exception text in the latter case."""

    score: float
    timed_out: bool = False
    error: str | None = None


def _check_timeout(timeout_s: float) -> None:
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")


def _to_grade(value: Any, error: BaseException | None, default: float) -> TimedGrade:
    if error is not None:
        return TimedGrade(default, False, f"{type(error).__name__}: {error}")
    try:
        return TimedGrade(float(value))
    except (TypeError, ValueError):
        return TimedGrade(default, False, f"grader returned a non-number: {value!r}")


def grade_with_timeout(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    default: float = 0.0,
    executor: Executor | None = None,
    isolation: str = "inline",
    **kwargs: Any,
) -> TimedGrade:
    """Call `fn(*args, **kwargs)`; return its score, or `default` with `timed_out=True` once
    `timeout_s` seconds pass. Never raises because of `fn`. `isolation` is
    `llm_gym.grading.bounded`'s: `"inline"` (the calling thread, then a worker process) bounds
    pure-Python hangs at ~4 us a call; `"process"` (a forked worker every call, ~5-20 ms) also
    bounds graders that block inside one C call (sleep, I/O, locks)."""
    _check_timeout(timeout_s)
    if executor is not None:
        future = executor.submit(fn, *args, **kwargs)
        try:
            return _to_grade(future.result(timeout=timeout_s), None, default)
        except FutureTimeoutError:
            future.cancel()
            return TimedGrade(default, True, f"grader exceeded {timeout_s}s")
        except Exception as exc:  # noqa: BLE001 - any grader failure is no credit
            return _to_grade(None, exc, default)
    bounded = call_bounded(fn, *args, timeout_s=timeout_s, isolation=isolation, **kwargs)
    return _from_bounded(bounded, timeout_s, default)


def _from_bounded(outcome: BoundedCall, timeout_s: float, default: float) -> TimedGrade:
    if outcome.ok:
        return _to_grade(outcome.value, None, default)
    if outcome.timed_out:
        return TimedGrade(default, True, f"grader exceeded {timeout_s}s")
    return TimedGrade(default, False, outcome.error)


async def agrade_with_timeout(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    default: float = 0.0,
    executor: Executor | None = None,
    isolation: str = "inline",
    **kwargs: Any,
) -> TimedGrade:
    """`grade_with_timeout` for coroutines: the event loop keeps running while `fn` works."""
    _check_timeout(timeout_s)
    loop = asyncio.get_running_loop()
    if executor is None:
        outcome = await acall_bounded(fn, *args, timeout_s=timeout_s, isolation=isolation, **kwargs)
        return _from_bounded(outcome, timeout_s, default)
    future = loop.run_in_executor(executor, lambda: fn(*args, **kwargs))
    try:
        value = await asyncio.wait_for(future, timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        return TimedGrade(default, True, f"grader exceeded {timeout_s}s")
    except Exception as exc:  # noqa: BLE001
        return _to_grade(None, exc, default)
    return _to_grade(value, None, default)
