"""Graders that hang are bounded by default and leave nothing running (issue 8.5).

Before: a synchronous `check_answer` that never returned blocked the event loop forever unless
`ProblemEnv(grader_timeout_s=...)` was set, and then every abandoned daemon thread kept spinning
(8 of them made unrelated Python 11.6x slower). Now `llm_gym.grading.bounded` interrupts the
grader in its own thread after a short budget and re-runs it in a forked worker that is killed at
the timeout. What these tests check is what is left afterwards (threads, child processes, armed
watchdog slots) and the outcomes; the only time bounds are generous subprocess timeouts.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from llm_gym.grading.bounded import BoundedCall, acall_bounded, acall_bounded_value, call_bounded
from llm_gym.renderers import ChatMLRenderer
from llm_gym.rl import ProblemEnv
from llm_gym.tokenizers import ByteTokenizer

ROOT = Path(__file__).resolve().parents[3]
TOK = ByteTokenizer()
IM_END = 260


def _spin_forever() -> bool:
    while True:
        pass


def _sympy_explodes() -> bool:
    sympy = pytest.importorskip("sympy")
    x, y = sympy.symbols("x y")
    return bool(sympy.expand((x + y + 1) ** 400 * (x - y - 1) ** 400) == 0)


def _no_threads_or_children_left(baseline: set[str]) -> None:
    names = {t.name for t in threading.enumerate()} - baseline - {"llm-gym-grader-watchdog"}
    assert names == set(), f"threads left running: {names}"
    with pytest.raises(ChildProcessError):  # every worker process was reaped
        os.waitpid(-1, os.WNOHANG)


def _watchdog_is_idle() -> bool:
    """Nothing is armed: the watchdog only sleeps (a structural check, not a timing one)."""
    from llm_gym.grading import bounded

    return not bounded._watchdog._slots


class SlowAddEnv(ProblemEnv):
    def __init__(self, grader, **kwargs):
        super().__init__(ChatMLRenderer(TOK), **kwargs)
        self.grader = grader

    def get_question(self):
        return "2+3?"

    def check_answer(self, sample_str):
        self.grader()
        return sample_str.strip() == "5"

    def check_format(self, sample_str):
        return True

    def get_reference_answer(self):
        return "5"


@pytest.mark.parametrize("grader", [_spin_forever, _sympy_explodes], ids=["while-true", "sympy"])
def test_hung_grader_is_interrupted_then_killed(grader):
    baseline = {t.name for t in threading.enumerate()}
    outcome = call_bounded(grader, timeout_s=1.0)
    assert outcome.timed_out and not outcome.ok and outcome.where == "process"
    _no_threads_or_children_left(baseline)
    assert _watchdog_is_idle()


def test_eight_hung_graders_leave_nothing_running():
    baseline = {t.name for t in threading.enumerate()}

    async def group():
        envs = [SlowAddEnv(_spin_forever, grader_timeout_s=0.4) for _ in range(8)]
        return await asyncio.gather(*(env.step(TOK.encode("5") + [IM_END]) for env in envs))

    results = asyncio.run(group())
    assert [r.metrics["grader_timeout"] for r in results] == [1.0] * 8
    assert all(r.reward == pytest.approx(-0.1) for r in results)  # malformed and wrong
    _no_threads_or_children_left(baseline)  # the old code left 8 daemon threads spinning here
    assert _watchdog_is_idle()


def test_default_problem_env_is_bounded_and_the_fast_path_never_suspends():
    env = SlowAddEnv(lambda: None)
    assert env.grader_timeout_s is not None  # bounded by default
    coro = env.step(TOK.encode("5") + [IM_END])
    with pytest.raises(StopIteration) as stop:  # a fast grader finishes in one send
        coro.send(None)
    assert stop.value.value.reward == 1.0 and stop.value.value.metrics.get("grader_timeout", 0.0) == 0.0


def test_slow_but_finite_grader_gets_its_answer_from_the_worker_process():
    def slow_pure_python() -> int:
        end = time.monotonic() + 0.4
        n = 0
        while time.monotonic() < end:
            n += 1
        return 42

    outcome = call_bounded(slow_pure_python, timeout_s=5.0, inline_s=0.1)
    assert outcome.ok and outcome.value == 42 and outcome.where == "process"


def test_blocking_c_call_needs_process_isolation():
    baseline = {t.name for t in threading.enumerate()}
    outcome = call_bounded(time.sleep, 60, timeout_s=0.5, isolation="process")
    assert outcome.timed_out and outcome.where == "process"
    _no_threads_or_children_left(baseline)


def test_grader_errors_and_values_come_back_from_both_phases():
    def boom():
        raise ZeroDivisionError("grader bug")

    inline = call_bounded(boom, timeout_s=1.0)
    assert not inline.ok and not inline.timed_out and isinstance(inline.exception, ZeroDivisionError)
    in_process = call_bounded(boom, timeout_s=1.0, isolation="process")
    assert not in_process.ok and "ZeroDivisionError: grader bug" in in_process.error
    assert call_bounded(divmod, 7, 2, timeout_s=1.0, isolation="process").value == (3, 1)
    with pytest.raises(RuntimeError, match="worker process: ZeroDivisionError"):
        env = SlowAddEnv(boom, grader_isolation="process", grader_timeout_s=2.0)
        asyncio.run(env.step(TOK.encode("5") + [IM_END]))
    with pytest.raises(ValueError, match="timeout_s"):
        call_bounded(boom, timeout_s=float("inf"))
    with pytest.raises(ValueError, match="grader_isolation"):
        SlowAddEnv(boom, grader_isolation="thread")


def test_acall_bounded_value_is_acall_bounded_without_the_common_outcome():
    def boom():
        raise ZeroDivisionError("grader bug")

    assert asyncio.run(acall_bounded_value(divmod, 7, 2, timeout_s=1.0)) == ((3, 1), None)
    value, outcome = asyncio.run(acall_bounded_value(boom, timeout_s=1.0))
    assert value is None and outcome is not None and isinstance(outcome.exception, ZeroDivisionError)
    value, outcome = asyncio.run(acall_bounded_value(divmod, 7, 2, timeout_s=1.0, isolation="process"))
    assert value is None and outcome is not None and outcome.ok and outcome.value == (3, 1)
    assert asyncio.run(acall_bounded(divmod, 7, 2, timeout_s=1.0)) == BoundedCall(True, (3, 1))


def test_no_interrupt_leaks_after_a_grader_finishes_at_its_deadline():
    # Many graders finishing right around their in-thread budget: a late interrupt must never
    # land in the caller's own code afterwards.
    def about(budget: float) -> int:
        end = time.monotonic() + budget
        while time.monotonic() < end:
            pass
        return 1

    for _ in range(30):
        call_bounded(about, 0.02, timeout_s=0.2, inline_s=0.02)
    total = 0
    for _ in range(200_000):  # plenty of bytecodes for a stray pending interrupt to fire in
        total += 1
    assert total == 200_000


def test_process_exits_cleanly_after_hung_graders():
    script = textwrap.dedent(
        """
        import asyncio
        from llm_gym.grading import grade_with_timeout
        from llm_gym.grading.bounded import BoundedCall, acall_bounded, acall_bounded_value, call_bounded

        def spin():
            while True:
                pass

        print(call_bounded(spin, timeout_s=0.5).timed_out)
        print(grade_with_timeout(spin, timeout_s=0.5).timed_out)
        """
    )
    proc = subprocess.run([sys.executable, "-W", "default", "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]
    assert proc.stderr == ""
