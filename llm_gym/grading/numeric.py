"""Exact numeric comparison of a model's answer with a target.

`parse_number` accepts one number and nothing else, normalising:

- surrounding whitespace, `$...$`, markdown `*`, and one trailing period ("68." is 68);
- a leading `+` or `-` (also the Unicode minus U+2212);
- thousands separators in the strict form `1,234,567` (groups of exactly three digits);
- decimals (`5.0` equals 5, `0.50` equals 1/2) and simple fractions (`3/4`);

and returns an exact `fractions.Fraction`, so integers compare exactly and there is no float
tolerance. Anything else — two numbers ("5 or 6", "5, 6, 7"), words, scientific notation, more
than 64 characters — is not a number (`None`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from llm_gym.grading.answers import MAX_RESPONSE_CHARS, AnswerStatus, extract_answer

_MAX_NUMBER_CHARS = 64
_DECIMAL = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_FRACTION = re.compile(r"([+-]?\d+)/(\d+)")
_PLAIN_INT = re.compile(r"-?\d{1,18}")
_OK = AnswerStatus.OK.value


def parse_number(text: str) -> Fraction | None:
    """The single number `text` denotes (exactly), or None if it is not exactly one number."""
    s = text.strip()
    if len(s) > _MAX_NUMBER_CHARS or not s:
        return None
    if _PLAIN_INT.fullmatch(s):  # fast path: the common case
        return Fraction(int(s))
    s = s.strip("*").strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s.strip("$").strip()
    if s.endswith("."):
        s = s[:-1]
    s = s.replace("\u2212", "-")
    if _DECIMAL.fullmatch(s):
        return Fraction(s.replace(",", ""))
    m = _FRACTION.fullmatch(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


@dataclass(frozen=True)
class Grade:
    """Result of grading one response. `format_ok`: a single number was found; `correct`: it
    equals the target; `status` says why not (an `AnswerStatus` value or "not_a_number")."""

    correct: bool
    format_ok: bool
    status: str
    value: Fraction | None = None


def grade_numeric(
    response: str, target: int | Fraction | str, *, max_chars: int = MAX_RESPONSE_CHARS
) -> Grade:
    """Grade `response` against `target` (an int, a Fraction, or a string `parse_number` reads)."""
    if len(response) <= max_chars:  # fast path: a bare integer (what extract_answer would return)
        stripped = response.strip()
        if _PLAIN_INT.fullmatch(stripped) and type(target) is int:
            value = int(stripped)
            return Grade(value == target, True, _OK, Fraction(value))
    if isinstance(target, str):
        parsed_target = parse_number(target)
        if parsed_target is None:
            raise ValueError(f"grade_numeric: target {target!r} is not a number parse_number reads")
        target = parsed_target
    extraction = extract_answer(response, max_chars=max_chars)
    if not extraction.ok:
        return Grade(False, False, extraction.status.value)
    value = parse_number(extraction.candidate or "")
    if value is None:
        return Grade(False, False, "not_a_number")
    return Grade(value == target, True, _OK, value)
