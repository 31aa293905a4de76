"""Calling a grader with a hard time bound that leaves nothing running: `call_bounded`.

A grader is model-facing code: a policy will find the reply that makes it loop forever or make
sympy explode. `call_bounded(fn, *args, timeout_s=...)` runs `fn` in two phases:

1. **In the calling thread**, for a short budget (`inline_s`, by default a quarter of the timeout
   and at most 1 s). A process-wide watchdog thread raises `GraderInterrupted` inside the calling
   thread when the budget runs out (CPython's `PyThreadState_SetAsyncExc`), so pure-Python work
   (`while True: pass`, a runaway sympy simplification) stops at its next bytecode. The common case
   -- a grader that answers in microseconds -- costs about a microsecond of bookkeeping and never
   leaves the thread, so a coroutine that grades inline still finishes without suspending.
2. **In a forked worker process**, for the rest of `timeout_s`, when phase 1 ran out: the child
   inherits `fn` and its arguments (nothing is pickled but the result), is SIGKILLed when the time is
   up (and if the parent dies: `PR_SET_PDEATHSIG`), and is always reaped. `isolation="process"`
   skips phase 1, for graders that block inside one C call (`time.sleep`, a lock, a subprocess, a
   huge integer power): those cannot be interrupted in-thread, and phase 1 would last as long as that
   call does.

What is left afterwards: no thread (the watchdog is one daemon thread for the whole process, idle
when nothing is being graded), no process. The result is a `BoundedCall`; `fn`'s exception is
returned in `error`, never raised. The async form `acall_bounded` waits for phase 2 without blocking
the event loop. Where `os.fork` does not exist, phase 2 is skipped (the call counts as timed out).
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import os
import pickle
import select
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["BoundedCall", "GraderInterrupted", "acall_bounded", "acall_bounded_value", "call_bounded"]

_MAX_INLINE_S = 1.0
_MAX_RESULT_BYTES = 1 << 20  # a grade is a few numbers; a bigger answer is a grader bug


class GraderInterrupted(BaseException):
    """Raised inside a grader whose in-thread budget ran out. A `BaseException`, so a grader's
    `except Exception:` does not swallow it (one that swallows it anyway is interrupted again)."""


@dataclass(frozen=True)
class BoundedCall:
    """The outcome of `call_bounded`: `value` when `ok`; else `timed_out` or `error` says why.
    `where` is `"inline"` or `"process"` (the phase that produced the outcome)."""

    ok: bool
    value: Any = None
    timed_out: bool = False
    error: str | None = None
    where: str = "inline"
    exception: BaseException | None = None
    """The grader's own exception when it raised in phase 1 (phase 2 reports only `error`)."""


# --- phase 1: the watchdog ------------------------------------------------------------------------
_PyThreadState_SetAsyncExc = ctypes.pythonapi.PyThreadState_SetAsyncExc


def _set_async_exc(tid: int, exc: type[BaseException] | None) -> None:
    """Make `exc` pending in thread `tid` (None clears a pending one: ctypes passes NULL)."""
    _PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None if exc is None else ctypes.py_object(exc))
_REFIRE_S = 0.05  # a grader that swallowed the interrupt gets another one this often
_IDLE_LOOK_S = 0.25  # with nothing armed, the watchdog looks this often ...
_IDLE_AFTER_LOOKS = 8  # ... this many times, then sleeps until a call wakes it


# A slot is a 3-item list `[thread id, deadline, fired]` rather than an object: one is made per
# grader call, and a list costs a fraction of a Python __init__. It is armed while `id(slot)` is
# in the watchdog's `_slots` (the list itself is the entry, so that id is not reused meanwhile).
_TID, _DEADLINE, _FIRED = 0, 1, 2
_monotonic = time.monotonic
_get_ident = threading.get_ident


class _Watchdog:
    """One daemon thread that interrupts calling threads whose inline budget ran out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[int, list] = {}  # id(slot) -> slot, for every armed slot
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_wake = math.inf  # when the watchdog looks next (inf: idle until woken)

    def arm(self, budget_s: float) -> list:
        """Arm a slot for the calling thread: interrupted `budget_s` seconds from now unless
        disarmed first. Returns the slot to pass to `disarm`."""
        deadline = _monotonic() + budget_s
        slot = [_get_ident(), deadline, False]
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llm-gym-grader-watchdog",
                                                daemon=True)
                self._thread.start()
            self._slots[id(slot)] = slot
            wake = deadline < self._next_wake
            if wake:
                self._next_wake = deadline
        if wake:  # only when the watchdog would look too late (usually once, from idle)
            self._wake.set()
        return slot

    def disarm(self, slot: list) -> None:
        """Idempotent; may itself be interrupted by a just-fired interrupt (callers catch it)."""
        with self._lock:
            if self._slots.pop(id(slot), None) is not None and slot[_FIRED]:
                _set_async_exc(slot[_TID], None)  # cancel an interrupt not yet delivered

    def _run(self) -> None:
        empty_looks = 0
        while True:
            with self._lock:
                now = time.monotonic()
                nearest = math.inf
                for slot in self._slots.values():
                    if now >= slot[_DEADLINE]:
                        slot[_FIRED] = True
                        _set_async_exc(slot[_TID], GraderInterrupted)
                        slot[_DEADLINE] = now + _REFIRE_S
                    nearest = min(nearest, slot[_DEADLINE])
                if nearest < math.inf:
                    empty_looks = 0
                elif empty_looks < _IDLE_AFTER_LOOKS:
                    # Nothing armed right now, but graders come in streams (one per env step):
                    # look again in a while instead of asking every new call to wake us, which
                    # costs a thread switch per grade (it halved Math-v0's throughput).
                    empty_looks += 1
                    nearest = now + _IDLE_LOOK_S
                self._next_wake = nearest
                self._wake.clear()
            if nearest == math.inf:
                self._wake.wait()  # idle: nothing has been graded for a while
            else:
                self._wake.wait(max(nearest - time.monotonic(), 0.001))


_watchdog = _Watchdog()


def _new_watchdog_in_child() -> None:
    # Only the forking thread survives a fork: the child starts a watchdog of its own when needed.
    global _watchdog
    _watchdog = _Watchdog()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_watchdog_in_child)


def _call_inline(fn: Callable[..., Any], args: tuple, kwargs: dict, budget_s: float
                 ) -> tuple[Any, BoundedCall | None]:
    """Phase 1: `(fn's value, None)` when it returned within `budget_s`, else `(None, outcome)`
    (timed out, or `fn` raised). No `BoundedCall` is built for the common outcome: this runs once
    per graded env step."""
    watchdog = _watchdog
    slot = None
    try:
        slot = watchdog.arm(budget_s)
        try:
            value = fn(*args, **kwargs)
        finally:
            watchdog.disarm(slot)
    except GraderInterrupted:
        while slot is not None:  # a re-fired interrupt may land here too: retry until disarmed
            try:
                watchdog.disarm(slot)
                break
            except GraderInterrupted:
                continue
        return None, BoundedCall(False, timed_out=True, error=f"grader exceeded its {budget_s:g}s "
                                 "in-thread budget", where="inline")
    except Exception as exc:  # noqa: BLE001 - a grader failure is an outcome, not a crash
        return None, BoundedCall(False, error=f"{type(exc).__name__}: {exc}", where="inline",
                                 exception=exc)
    return value, None


# --- phase 2: a forked, killable worker -------------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _child(fn: Callable[..., Any], args: tuple, kwargs: dict, write_fd: int, cpu_s: float) -> None:
    """Runs in the forked child; never returns."""
    try:
        try:
            libc = ctypes.CDLL(None)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        try:
            import resource

            limit = max(1, math.ceil(cpu_s) + 1)  # a backstop should the parent vanish
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
        try:
            outcome: tuple = (True, fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            outcome = (False, f"{type(exc).__name__}: {exc}")
        try:
            payload = pickle.dumps(outcome)
        except Exception as exc:  # noqa: BLE001
            payload = pickle.dumps((False, f"grader result is not picklable: {exc}"))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(0)


def _fork(fn: Callable[..., Any], args: tuple, kwargs: dict, cpu_s: float) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns about fork() in threaded processes; the child
        warnings.simplefilter("ignore", DeprecationWarning)  # only grades and is killable anyway
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        _child(fn, args, kwargs, write_fd, cpu_s)
    os.close(write_fd)
    return pid, read_fd


def _reap(pid: int, read_fd: int, kill: bool) -> None:
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(read_fd)


def _decode(payload: bytes, timeout_s: float) -> BoundedCall:
    if not payload:
        return BoundedCall(False, error="grader process died without an answer", where="process")
    try:
        ok, value = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001
        return BoundedCall(False, error=f"unreadable grader result: {exc}", where="process")
    if ok:
        return BoundedCall(True, value, where="process")
    return BoundedCall(False, error=str(value), where="process")


def _timed_out(timeout_s: float) -> BoundedCall:
    return BoundedCall(False, timed_out=True, error=f"grader exceeded {timeout_s:g}s",
                       where="process")


def _call_in_process(fn, args, kwargs, remaining_s: float, timeout_s: float) -> BoundedCall:
    pid, read_fd = _fork(fn, args, kwargs, remaining_s)
    deadline = time.monotonic() + remaining_s
    chunks: list[bytes] = []
    size = 0
    finished = False
    try:
        while size <= _MAX_RESULT_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            readable, _, _ = select.select([read_fd], [], [], left)
            if not readable:
                break
            chunk = os.read(read_fd, 65536)
            chunks.append(chunk)
            size += len(chunk)
            if not chunk or size > _MAX_RESULT_BYTES:
                finished = True
                break
    finally:
        _reap(pid, read_fd, kill=not finished)
    return _decode(b"".join(chunks), timeout_s) if finished else _timed_out(timeout_s)


async def _acall_in_process(fn, args, kwargs, remaining_s: float, timeout_s: float) -> BoundedCall:
    loop = asyncio.get_running_loop()
    pid, read_fd = _fork(fn, args, kwargs, remaining_s)
    done: asyncio.Future = loop.create_future()
    chunks: list[bytes] = []

    def on_readable() -> None:
        try:
            chunk = os.read(read_fd, 65536)
        except OSError:
            chunk = b""
        if chunk:
            chunks.append(chunk)
        if (not chunk or sum(map(len, chunks)) > _MAX_RESULT_BYTES) and not done.done():
            done.set_result(True)  # EOF (or an oversized answer, which fails to unpickle whole)

    loop.add_reader(read_fd, on_readable)
    finished = False
    try:
        finished = await asyncio.wait_for(asyncio.shield(done), remaining_s)
    except TimeoutError:
        pass
    finally:
        loop.remove_reader(read_fd)
        _reap(pid, read_fd, kill=not finished)
    return _decode(b"".join(chunks), timeout_s) if finished else _timed_out(timeout_s)


# --- the public calls ---------------------------------------------------------------------------------
def _plan(timeout_s: float, inline_s: float | None, isolation: str) -> float:
    if not (isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
            and 0 < timeout_s < math.inf):
        raise ValueError(f"timeout_s must be a positive finite number of seconds, got {timeout_s!r}")
    if isolation not in ("inline", "process"):
        raise ValueError(f"isolation must be 'inline' or 'process', got {isolation!r}")
    if isolation == "process":
        return 0.0
    if inline_s is None:
        return _MAX_INLINE_S if timeout_s >= 4 * _MAX_INLINE_S else timeout_s / 4
    if not 0 < inline_s <= timeout_s:
        raise ValueError(f"inline_s must be in (0, timeout_s={timeout_s}], got {inline_s!r}")
    return float(inline_s)


def _phase_one(fn, args, kwargs, timeout_s, inline_s, isolation
               ) -> tuple[Any, BoundedCall | None, float]:
    """Phase 1 (unless `isolation="process"`): `(value, None, 0.0)` when `fn` returned in it;
    `(None, outcome, 0.0)` when its outcome is final otherwise (`fn` raised; a timeout when no
    time is left or there is no fork); else `(None, None, seconds left for phase 2)`."""
    budget = _plan(timeout_s, inline_s, isolation)
    start = _monotonic()
    if budget > 0:
        value, failed = _call_inline(fn, args, kwargs, budget)
        if failed is None or not failed.timed_out:
            return value, failed, 0.0
    remaining = timeout_s - (_monotonic() - start)
    if remaining <= 0 or not hasattr(os, "fork"):
        return None, _timed_out(timeout_s), 0.0
    return None, None, remaining


def call_bounded(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    inline_s: float | None = None,
    isolation: str = "inline",
    **kwargs: Any,
) -> BoundedCall:
    """`fn(*args, **kwargs)` within `timeout_s` seconds in all, leaving nothing running.

    `inline_s` is phase 1's budget (default: `min(1, timeout_s / 4)`); `isolation="process"` runs
    the whole call in the worker process. Never raises because of `fn`."""
    value, outcome, remaining = _phase_one(fn, args, kwargs, timeout_s, inline_s, isolation)
    if outcome is not None:
        return outcome
    if not remaining:
        return BoundedCall(True, value, where="inline")
    return _call_in_process(fn, args, kwargs, remaining, timeout_s)


async def acall_bounded(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    inline_s: float | None = None,
    isolation: str = "inline",
    **kwargs: Any,
) -> BoundedCall:
    """`call_bounded` for coroutines. Phase 1 runs in the loop's thread (so a fast grader never
    suspends the coroutine); phase 2 is awaited without blocking the event loop."""
    value, outcome = await acall_bounded_value(fn, *args, timeout_s=timeout_s, inline_s=inline_s,
                                               isolation=isolation, **kwargs)
    return BoundedCall(True, value, where="inline") if outcome is None else outcome


async def acall_bounded_value(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    inline_s: float | None = None,
    isolation: str = "inline",
    **kwargs: Any,
) -> tuple[Any, BoundedCall | None]:
    """`acall_bounded` for callers on a hot path (`ProblemEnv` grades every step): `(value, None)`
    when `fn` returned in phase 1, the common case, with no `BoundedCall` built; else
    `(None, outcome)`, the `BoundedCall` that `acall_bounded` returns."""
    value, outcome, remaining = _phase_one(fn, args, kwargs, timeout_s, inline_s, isolation)
    if outcome is not None or not remaining:
        return value, outcome
    return None, await _acall_in_process(fn, args, kwargs, remaining, timeout_s)
