"""Answer extraction, numeric grading and the grader timeout guard (llm_gym.grading)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_gym.grading import (
    MAX_RESPONSE_CHARS,
    AnswerStatus,
    agrade_with_timeout,
    extract_answer,
    extract_single_integer,
    grade_numeric,
    grade_numeric_quick,
    grade_with_timeout,
    parse_number,
)


@pytest.mark.parametrize(
    "response",
    ["68", "  68\n", "\\boxed{68}", "The sum is \\boxed{68}.", "Answer: 68", "answer = 68",
     "**Answer:** 68", "Final answer: 68.", "The answer is 68.", "Work: 60+8\nAnswer: 68",
     "\\boxed{68} so Answer: 68", "Answer: \\boxed{68}", "+68", "68.0", "$68$",
     # number words are read too (policy in llm_gym.grading), and agreeing forms agree
     "sixty-eight", "Answer: sixty eight", "\\boxed{68}\nAnswer: 68.0", "AnSwEr: 68", "My answer: 68"],
)
def test_correct_forms_get_credit(response):
    grade = grade_numeric(response, 68)
    assert grade.correct and grade.format_ok and grade.status == "ok"


@pytest.mark.parametrize(
    "response,status",
    [
        ("5 or 6", "malformed"),
        ("68 or 69", "malformed"),
        ("66 67 68 69 70", "malformed"),
        ("the answer is 66, 67, 68", "malformed"),
        ("\\boxed{67} \\boxed{68}", "conflicting"),
        ("Answer: 67\nAnswer: 68", "conflicting"),
        ("\\boxed{68} is it.\nAnswer: 67", "conflicting"),
        ("\\boxed{68", "malformed"),
        ("\\boxed{}", "no_answer"),
        ("", "empty"),
        ("   \n ", "empty"),
        ("6\ufffd8", "invalid_text"),
        ("68" + " " * MAX_RESPONSE_CHARS, "too_long"),
        ("sixty-eight or sixty-nine", "malformed"),
        ("68 thousand", "ok"),
        ("68%", "ok"),
        ("at least 68", "malformed"),
    ],
)
def test_gaming_and_garbage_get_no_credit(response, status):
    grade = grade_numeric(response, 68)
    assert not grade.correct
    assert grade.format_ok is (status == "ok")  # "68 thousand" is a number: 68000, not 68
    assert grade.status == status


def test_wrong_number_is_well_formed_but_incorrect():
    grade = grade_numeric("67", 68)
    assert grade.format_ok and not grade.correct and grade.value == 67


def test_huge_output_is_refused_before_any_regex():
    # 10 MB of text that would be slow for a backtracking regex if it were scanned.
    # Shown structurally (no wall-clock assert): the text is never even normalised.
    import llm_gym.grading.policy as policy

    huge = "Answer: " + "1 " * 5_000_000

    def never(_text):
        raise AssertionError("a too-long reply must be refused before it is scanned")

    original, policy.visible_text = policy.visible_text, never
    try:
        extraction = extract_answer(huge)
    finally:
        policy.visible_text = original
    assert extraction.status is AnswerStatus.TOO_LONG


@pytest.mark.parametrize(
    "text,value",
    [("1,234", 1234), ("-1,234,567", -1234567), ("+5", 5), ("5.0", 5), ("\u22127", -7),
     ("0.50", Fraction(1, 2)), ("3/4", Fraction(3, 4)), ("42.", 42), ("**12**", 12)],
)
def test_parse_number_normalisations(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["1,23", "12,34,567", "1/0", "5 6", "five", "1e5", "--5", "9" * 65])
def test_parse_number_refuses_non_numbers(text):
    assert parse_number(text) is None


def test_integers_compare_exactly():
    big = 10**17 + 1
    assert grade_numeric(str(big), big).correct
    assert not grade_numeric(str(big - 1), big).correct
    assert not grade_numeric("68.5", 68).correct


@pytest.mark.parametrize(
    "response,target,quick",
    [("68", 68, True), (" 68\n", 68, True), ("-7", 68, True), ("9" * 18, 68, True),
     (" " * 4000 + "68", 68, True), ("9" * 19, 68, False), ("9" * 4096, 68, False),
     ("68.0", 68, False), ("\\boxed{68}", 68, False), ("68", Fraction(68), False),
     ("68", "68", False), (" " * 4095 + "68", 68, False), ("６８", 68, False), ("", 68, False),
     ("6 8", 68, False), ("+68", 68, False), ("68\x00", 68, False)],
)
def test_grade_numeric_quick_is_the_bare_integer_path(response, target, quick):
    grade = grade_numeric_quick(response, target)
    assert (grade is not None) is quick
    if quick:
        assert grade == grade_numeric(response, target)
        assert grade_numeric_quick(response, target, max_chars=len(response) - 1) is None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.from_regex(r"\s{0,4}-?[0-9]{1,20}\s{0,4}", fullmatch=True)),
       st.integers(-10**20, 10**20))
def test_a_quick_grade_is_the_full_readers_grade(response, target):
    """What `grade_numeric_quick` grades, the full answer reader grades the same way (it is
    asked here through a Fraction target, which the quick path declines): skipping the time
    bound for it changes no reward."""
    grade = grade_numeric_quick(response, target)
    if grade is None:
        return
    assert grade == grade_numeric(response, Fraction(target)) == grade_numeric(response, target)
    assert grade.value == int(response.strip())


def test_string_target_and_bad_target():
    assert grade_numeric("1,000", "1000").correct
    with pytest.raises(ValueError, match="not a number"):
        grade_numeric("5", "five")


@pytest.mark.parametrize(
    "text,expected",
    [("7", 7), ("My guess is 7.", 7), ("Answer: 7", 7), ("\\boxed{7}", 7), ("7 or 8", None),
     ("", None), ("seven", 7), ("7.5", None), ("I pick 3 then 4", None)],
)
def test_extract_single_integer(text, expected):
    value, status = extract_single_integer(text)
    assert value == expected
    assert (status is AnswerStatus.OK) == (expected is not None)


# --- timeout guard ------------------------------------------------------------------------------
def _hangs(event: threading.Event) -> bool:
    event.wait(30)  # blocks inside one C call: only isolation="process" bounds it
    return True


def _spins(event: threading.Event) -> bool:
    while not event.is_set():  # a pure-Python hang: interrupted in-thread, then killed
        pass
    return True


@pytest.mark.parametrize("grader,isolation", [(_spins, "inline"), (_hangs, "process")])
def test_grade_with_timeout_returns_promptly_on_a_hanging_grader(grader, isolation):
    release = threading.Event()
    try:
        result = grade_with_timeout(grader, release, timeout_s=0.4, isolation=isolation)
    finally:
        release.set()
    assert result.timed_out and result.score == 0.0 and "exceeded" in (result.error or "")


def test_grade_with_timeout_passes_scores_and_errors_through():
    assert grade_with_timeout(lambda a, b: a == b, 3, 3, timeout_s=5).score == 1.0
    assert grade_with_timeout(lambda: 0.25, timeout_s=5).score == 0.25
    failed = grade_with_timeout(lambda: 1 / 0, timeout_s=5)
    assert failed.score == 0.0 and not failed.timed_out and "ZeroDivisionError" in failed.error
    odd = grade_with_timeout(lambda: "yes", timeout_s=5)
    assert odd.score == 0.0 and "non-number" in odd.error
    with pytest.raises(ValueError, match="timeout_s"):
        grade_with_timeout(lambda: 1, timeout_s=0)


def test_grade_with_timeout_with_an_executor():
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            result = grade_with_timeout(_hangs, release, timeout_s=0.2, executor=pool)
        finally:
            release.set()
        assert result.timed_out and result.score == 0.0
        assert grade_with_timeout(lambda: True, timeout_s=5, executor=pool).score == 1.0


def test_agrade_with_timeout_keeps_the_event_loop_free():
    release = threading.Event()

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        result = await agrade_with_timeout(_hangs, release, timeout_s=0.3, isolation="process")
        ok = await agrade_with_timeout(lambda: True, timeout_s=5)
        task.cancel()
        return result, ok, ticks

    try:
        result, ok, ticks = asyncio.run(main())
    finally:
        release.set()
    assert result.timed_out and result.score == 0.0
    assert ok.score == 1.0 and not ok.timed_out
    assert ticks >= 5  # the loop kept running while the grader hung
