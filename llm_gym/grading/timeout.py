"""Running a grader under a wall-clock limit: `grade_with_timeout` and `agrade_with_timeout`.

Expensive graders (symbolic maths, code execution) can hang on adversarial output. These helpers
run the grader in a *daemon* thread (or in an `Executor` you pass, e.g. a `ProcessPoolExecutor`
for graders that hold the GIL or must be killable) and return a `TimedGrade` with no credit when
the limit passes or the grader raises. They return promptly after `timeout_s`; a hung thread is
abandoned (daemon threads never block interpreter exit), a hung process-pool worker stays busy
until it finishes, so give CPU-bound graders a process pool sized for it.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Callable


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


def _run_in_daemon_thread(fn: Callable[..., Any], args, kwargs, on_done: Callable) -> None:
    def target() -> None:
        try:
            result: tuple[Any, BaseException | None] = (fn(*args, **kwargs), None)
        except BaseException as exc:  # noqa: BLE001 - reported, never re-raised in the thread
            result = (None, exc)
        on_done(*result)

    threading.Thread(target=target, name="llm-gym-grader", daemon=True).start()


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
    **kwargs: Any,
) -> TimedGrade:
    """Call `fn(*args, **kwargs)`; return its score, or `default` with `timed_out=True` once
    `timeout_s` seconds pass. Never raises because of `fn`."""
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
    done = threading.Event()
    box: list[tuple[Any, BaseException | None]] = []

    def on_done(value: Any, error: BaseException | None) -> None:
        box.append((value, error))
        done.set()

    _run_in_daemon_thread(fn, args, kwargs, on_done)
    if not done.wait(timeout_s):
        return TimedGrade(default, True, f"grader exceeded {timeout_s}s")
    return _to_grade(*box[0], default)


async def agrade_with_timeout(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    default: float = 0.0,
    executor: Executor | None = None,
    **kwargs: Any,
) -> TimedGrade:
    """`grade_with_timeout` for coroutines: the event loop keeps running while `fn` works."""
    _check_timeout(timeout_s)
    loop = asyncio.get_running_loop()
    if executor is not None:
        future = loop.run_in_executor(executor, lambda: fn(*args, **kwargs))
    else:
        future = loop.create_future()

        def on_done(value: Any, error: BaseException | None) -> None:
            def settle() -> None:
                if not future.done():
                    future.set_result((value, error))

            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop closed while the grader ran: nobody is waiting
                pass

        _run_in_daemon_thread(fn, args, kwargs, on_done)
    try:
        outcome = await asyncio.wait_for(asyncio.shield(future), timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        return TimedGrade(default, True, f"grader exceeded {timeout_s}s")
    except Exception as exc:  # noqa: BLE001
        return _to_grade(None, exc, default)
    if executor is not None:
        return _to_grade(outcome, None, default)
    return _to_grade(*outcome, default)

