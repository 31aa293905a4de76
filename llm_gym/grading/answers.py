"""Extracting one candidate answer from a model response, refusing gaming attempts.

Rules, applied in order (see `extract_answer`):

1. Responses longer than `max_chars` (default 4096 characters) are refused *before* any regex
   runs (`TOO_LONG`), so a huge output costs O(1).
2. Text containing U+FFFD (what invalid UTF-8 decodes to) is refused (`INVALID_TEXT`).
3. Empty or whitespace-only text is refused (`EMPTY`).
4. Every `\\boxed{...}` (balanced braces) and every `Answer: X` line (case-insensitive; also
   "Final answer = X", "The answer is X", "**Answer:** X") is collected. If there is any, they
   must all agree after light normalisation (whitespace, `$`, `*` and a trailing period
   removed); disagreeing answers are `CONFLICTING` (no credit: "\\boxed{5} ... \\boxed{6}" is a
   hedge). An unclosed `\\boxed{` is `MALFORMED`.
5. Otherwise the whole stripped response is the candidate (a bare "68").

The candidate is only a string; whether it is a *single* number is the numeric grader's job
(`llm_gym.grading.numeric`), which is what refuses "5 or 6" and "5, 6, 7".
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MAX_RESPONSE_CHARS = 4096

_BOXED_OPENERS = ("\\boxed{", "\\fbox{")
_ANSWER_LINE = re.compile(
    r"^[ \t>#*_-]*(?:the[ \t]+)?(?:final[ \t]+)?answer[ \t]*\**[ \t]*(?:[:=]|is\b[ \t]*:?)[ \t]*\**[ \t]*"
    r"(.*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_INTEGER_LITERAL = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?![\w])")


class AnswerStatus(str, enum.Enum):
    """Why an extraction did (OK) or did not produce a candidate."""

    OK = "ok"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    INVALID_TEXT = "invalid_text"
    CONFLICTING = "conflicting"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class Extraction:
    """`candidate` is set only when `status` is OK; `source` is "boxed", "answer_line" or "bare"."""

    status: AnswerStatus
    candidate: str | None = None
    source: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is AnswerStatus.OK


def _light_normalise(value: str) -> str:
    value = "".join(value.split()).strip("$*")
    return value[:-1] if value.endswith(".") else value


def _boxed_contents(text: str) -> list[str] | None:
    """Contents of every boxed expression, or None if one is unclosed."""
    found: list[str] = []
    for opener in _BOXED_OPENERS:
        start = text.find(opener)
        while start >= 0:
            i = start + len(opener)
            depth = 1
            while i < len(text) and depth:
                c = text[i]
                depth += (c == "{") - (c == "}")
                i += 1
            if depth:
                return None
            found.append(text[start + len(opener): i - 1])
            start = text.find(opener, i)
    return found


def extract_answer(text: str, *, max_chars: int = MAX_RESPONSE_CHARS) -> Extraction:
    """Return the response's single candidate answer, or the reason there is none.

    Never raises on any `str` input; cost is bounded by `max_chars`.
    """
    if len(text) > max_chars:
        return Extraction(AnswerStatus.TOO_LONG)
    if "\ufffd" in text:
        return Extraction(AnswerStatus.INVALID_TEXT)
    stripped = text.strip()
    if not stripped:
        return Extraction(AnswerStatus.EMPTY)
    has_boxed = "box" in stripped
    has_answer = "nswer" in stripped or "NSWER" in stripped
    if not (has_boxed or has_answer):  # fast path: the common bare answer
        return Extraction(AnswerStatus.OK, stripped, "bare")
    candidates: list[tuple[str, str]] = []
    if has_boxed:
        boxed = _boxed_contents(stripped)
        if boxed is None:
            return Extraction(AnswerStatus.MALFORMED)
        candidates += [(b, "boxed") for b in boxed]
    if has_answer:
        candidates += [
            (m.group(1), "answer_line")
            for m in _ANSWER_LINE.finditer(stripped)
            if not any(op in m.group(1) for op in _BOXED_OPENERS)
        ]
    if not candidates:
        return Extraction(AnswerStatus.OK, stripped, "bare")
    distinct = {_light_normalise(c) for c, _ in candidates}
    if len(distinct) > 1:
        return Extraction(AnswerStatus.CONFLICTING)
    value = candidates[0][0].strip()
    if not _light_normalise(value):
        return Extraction(AnswerStatus.EMPTY)
    return Extraction(AnswerStatus.OK, value, candidates[0][1])


def extract_single_integer(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS
) -> tuple[int | None, AnswerStatus]:
    """An integer the response commits to, for games ("7", "Answer: 7", "My guess is 7.").

    The strict extraction is tried first; if its candidate is not a number, a response that
    contains exactly one number literal, an integer, is accepted too. Two or more numbers ("5 or 6")
    give `(None, CONFLICTING)`; no number gives `(None, MALFORMED)`.
    """
    from llm_gym.grading.numeric import _PLAIN_INT, parse_number

    if len(text) <= max_chars:  # fast path: a bare integer, as the rules below would read it
        stripped = text.strip()
        if _PLAIN_INT.fullmatch(stripped):
            return int(stripped), AnswerStatus.OK
    extraction = extract_answer(text, max_chars=max_chars)
    if not extraction.ok:
        return None, extraction.status
    value = parse_number(extraction.candidate or "")
    if value is None:
        literals = _INTEGER_LITERAL.findall(extraction.candidate or "")
        if len(literals) != 1:
            return None, AnswerStatus.CONFLICTING if literals else AnswerStatus.MALFORMED
        value = parse_number(literals[0])
    if value is None or value.denominator != 1:
        return None, AnswerStatus.MALFORMED
    return int(value), AnswerStatus.OK
