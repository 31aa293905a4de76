"""The number readers every env has used since the first catalog, on the one answer policy.

`grade_numeric(response, target)` grades a reply against a numeric target, `extract_answer`
returns the reply's declared number (`Extraction`), `extract_single_integer` a game's integer
move, and `answer_candidates` every declaration with its role. All four read replies through a
number contract (`llm_gym.grading.contracts.NumberAnswer` / `IntegerAnswer`) under the policy of
`llm_gym.grading.policy`: the last declaration (an `Answer:` line, a `\\boxed{}`, "the answer
is ...") -- else the last line that states a number -- parsed completely, another declared value
voiding the credit, nothing else in the reply read. `grade_numeric_quick` is the bare-integer
path alone, which needs no time bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llm_gym.grading.normalize import AnswerStatus
from llm_gym.grading.numeric import _PLAIN_INT, parse_number

MAX_RESPONSE_CHARS = 4096

__all__ = [
    "MAX_RESPONSE_CHARS", "AnswerCandidate", "AnswerStatus", "Extraction", "Grade", "answer_candidates",
    "extract_answer", "extract_single_integer", "grade_numeric", "grade_numeric_quick",
]

# Words a game reply may declare its move with, and verbs that may introduce it.
GAME_LABELS = ("answer", "guess", "move", "choice", "pick", "column", "cell")
GAME_VERBS = ("guess", "play", "choose", "pick", "take", "try", "select", "go", "drop", "mark", "say")


@dataclass(frozen=True)
class Extraction:
    """`candidate` (the declared slot's text) is set only when `status` is OK; `value` is its
    number. `source` is "boxed", "label", "last_line" or "last_block"."""

    status: AnswerStatus
    candidate: str | None = None
    source: str | None = None
    value: Fraction | None = None

    @property
    def ok(self) -> bool:
        return self.status is AnswerStatus.OK


@dataclass(frozen=True)
class AnswerCandidate:
    """One declaration of an answer in a reply: its slot `text`, `value` (None when the slot is
    not one number), `source`, `role` ("final": the one graded; "alternative": another
    declaration with a value; "working": another declaration whose slot is not a number) and
    position `start` in the reply's visible text (`end` is where its slot ends)."""

    text: str
    value: Fraction | None
    source: str
    role: str
    start: int
    end: int


@dataclass(frozen=True)
class Grade:
    """Result of grading one response. `format_ok`: one answer was read; `correct`: it earns
    credit; `status` says why not (a `Reading` status); `value` is what was read."""

    correct: bool
    format_ok: bool
    status: str
    value: Any = None


_OK = AnswerStatus.OK.value


def _status(status: str) -> AnswerStatus:
    try:
        return AnswerStatus(status)
    except ValueError:  # pragma: no cover - every Reading status is an AnswerStatus
        return AnswerStatus.MALFORMED


def _number(context: str | None, max_chars: int) -> Any:
    from llm_gym.grading.contracts.numbers import NumberAnswer

    return NumberAnswer(context=context or "", max_chars=max_chars)


def extract_answer(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, prose: bool = False,
    context: str | None = None,
) -> Extraction:
    """The reply's declared number (see the module docstring), or the reason there is none.
    `context` is the task's text (its words and numbers may name the value: "26 + 49 = 75").
    `prose=True` also reads a move declared with a game's words ("My guess is 7.", "I'll play
    7"). Never raises on any `str`; cost is bounded by `max_chars`."""
    if prose:
        from llm_gym.grading.contracts.numbers import NumberAnswer

        contract = NumberAnswer(context=context or "", max_chars=max_chars, labels=GAME_LABELS, verbs=GAME_VERBS)
    else:
        contract = _number(context, max_chars)
    reading = contract.read(text)
    if not reading.ok:
        return Extraction(_status(reading.status))
    return Extraction(AnswerStatus.OK, reading.text, reading.source, reading.value)


def answer_candidates(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, prose: bool = False,
    context: str | None = None,
) -> list[AnswerCandidate]:
    """Every declaration of a number in `text`, the graded one first (role "final"); `[]` when
    the reply cannot be read or declares nothing and has no line stating a number."""
    from llm_gym.grading.normalize import visible_text

    contract = _number(context, max_chars)
    if len(text) > max_chars or "\ufffd" in text:
        return []
    visible = visible_text(text)
    if isinstance(visible, AnswerStatus):
        return []
    found = [d for d in (contract.find_declarations(visible) or []) if contract.mentions(d.slot)]
    if not found:
        last = contract.last_answer(visible)
        found = [last] if last is not None else []
    out = []
    for k, d in enumerate(reversed(found)):
        value = contract.read_slot(d.slot)
        role = "final" if k == 0 else ("alternative" if value is not None else "working")
        out.append(AnswerCandidate(d.slot.strip(), value, d.source, role, d.start, d.start + len(d.slot)))
    return out


def extract_single_integer(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, context: str | None = None
) -> tuple[int | None, AnswerStatus]:
    """The integer a game reply commits to ("7", "seven", "Move: 7", "My guess is 7.", "I'll
    play 7"): `extract_answer(text, prose=True)` must read a number and it must be an integer
    ("7.0" is 7); `(None, status)` otherwise (MALFORMED for a non-integer)."""
    if len(text) <= max_chars:  # fast path: a bare ASCII integer
        stripped = text.strip()
        if _PLAIN_INT.fullmatch(stripped):
            return int(stripped), AnswerStatus.OK
    extraction = extract_answer(text, max_chars=max_chars, prose=True, context=context)
    if not extraction.ok or extraction.value is None:
        return None, extraction.status
    if extraction.value.denominator != 1:
        return None, AnswerStatus.MALFORMED
    return int(extraction.value), AnswerStatus.OK


def grade_numeric_quick(
    response: str, target: object, *, max_chars: int = MAX_RESPONSE_CHARS
) -> Grade | None:
    """`grade_numeric(response, target, max_chars=max_chars)` when `response` is a bare ASCII
    integer (surrounding whitespace allowed, at most 18 digits) and `target` an `int`, else None.
    Its cost is a few C-level passes over the response whatever it holds (a strip, one anchored
    regex that backtracks at most 18 steps, `int()` of at most 19 characters): no more than
    decoding the response cost, so a caller that bounds grading time
    (`llm_gym.grading.bounded`) needs no bound for it."""
    if len(response) <= max_chars and type(target) is int:
        stripped = response.strip()
        if _PLAIN_INT.fullmatch(stripped):
            value = int(stripped)
            return Grade(value == target, True, _OK, Fraction(value))
    return None


def grade_numeric(
    response: str, target: int | Fraction | str, *, max_chars: int = MAX_RESPONSE_CHARS,
    context: str | None = None,
) -> Grade:
    """Grade `response` against `target` (an int, a Fraction, or a string `parse_number` reads)
    under a `NumberAnswer` contract (exact). `context`: the task's text, as for
    `extract_answer`."""
    quick = grade_numeric_quick(response, target, max_chars=max_chars)  # a bare integer
    if quick is not None:
        return quick
    if isinstance(target, str):
        parsed_target = parse_number(target)
        if parsed_target is None:
            raise ValueError(f"grade_numeric: target {target!r} is not a number parse_number reads")
        target = parsed_target
    return _number(context, max_chars).grade(response, Fraction(target))
