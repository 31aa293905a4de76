"""Finding the one answer a model response commits to, or the reason there is none.

This module implements the policy written down in `llm_gym.grading`'s docstring, in three passes:

1. `_visible_text` (after the length cap and the U+FFFD refusal, which `_extract` applies before
   anything else): Unicode folding (NFKC; format characters dropped; look-alike letters mapped
   to Latin; special-token text such as `<|pad|>` and control characters turned into line
   breaks).
2. `_collect`: every candidate answer in the folded text — each `\\boxed{}`, each answer marker,
   each line that is just a number, each number introduced by a correction or hedge after the
   first answer — or, when there is none, the whole response.
3. `_extract`: credit only when exactly one distinct value remains (75 and 75.0 agree).

`grade_numeric` turns the result into a `Grade` for a numeric target; `extract_single_integer`
is the games' reader (it also reads a sentence holding exactly one number, "My guess is 7.").
A special token sampled inside a number ("7<|pad|>5") reaches them as text (renderers decode
special tokens) and reads as a line break. Numbers themselves are read by
`llm_gym.grading.numeric`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from llm_gym.grading.arithmetic import ArithmeticRun, arithmetic_runs
from llm_gym.grading.normalize import GLYPH, AnswerStatus, visible_text
from llm_gym.grading.numeric import (
    _PLAIN_INT,
    _UNREADABLE,
    _WORD_RUN,
    _number_tokens,
    _read_number,
    parse_number,
)

MAX_RESPONSE_CHARS = 4096


@dataclass(frozen=True)
class Extraction:
    """`candidate` (the answer's text) is set only when `status` is OK; `value` is its number,
    or None when the single candidate is not a number. `source` is "boxed", "answer_line",
    "bare" (a line that is just a number, or the whole response), or "retraction"."""

    status: AnswerStatus
    candidate: str | None = None
    source: str | None = None
    value: Fraction | None = None

    @property
    def ok(self) -> bool:
        return self.status is AnswerStatus.OK


# --- 1. visible text: llm_gym.grading.normalize ---------------------------------------------
_BOX = "\x00"  # stands in for a \boxed{...} in the text the other forms are read from
_GLYPH = GLYPH
_visible_text = visible_text


# --- 2. candidates -----------------------------------------------------------------------------
_BOX_OPEN = re.compile(r"\\*(?:boxed|fbox)[ \t]*\{")
_LATEX_WRAP = re.compile(
    r"\\+(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|bm|displaystyle)[ \t]*\{(.*)\}", re.DOTALL
)
_MARKER = re.compile(
    r"(?<![^\W_])(?:answers?|guess(?:es)?|moves?|backup|fallback|alternatives?)(?![^\W_])"
    r"(?:[ \t]+(?:to|for|of)(?![^\W_])[^\n:=]{0,40}?)?"
    r"[ \t*_]*"
    r"(?::=|:|=>|->|→|=|is(?![^\W_])(?:[ \t*_]*:)?|(?:would|will|should|must)[ \t]+be(?![^\W_]))",
    re.IGNORECASE,
)
_OFFERED = re.compile(r"backup|fallback|alternative", re.IGNORECASE)  # markers never final
# Words that offer another value. The strong ones do so wherever they stand; the others only
# once an answer has been given (before it, "or" and "maybe" are reasoning).
_STRONG_HEDGES = (
    r"alternatively|if not|if (?:that|this|it)(?:'s|[ \t]+is)?[ \t]+(?:wrong|incorrect|not[ \t]+"
    r"(?:right|it|correct))|second guess|plan b"
)
_HEDGE = re.compile(
    r"(?<![^\W_])(?:" + _STRONG_HEDGES + r"|actually|correction|corrected|no[ \t,]*wait|wait|"
    r"hold on|i mean|i meant|rather|sorry|oops|scratch that|make (?:that|it)|on second thought|"
    r"instead|or|maybe|perhaps|possibly|probably|otherwise|either|else|also|could be|might be|"
    r"nope|i was wrong|should be|let me (?:correct|reconsider)|"
    r"change (?:it|that|my (?:answer|guess|move))(?: to)?)(?![^\W_])",
    re.IGNORECASE,
)
_STRONG_HEDGE = re.compile(r"(?<![^\W_])(?:" + _STRONG_HEDGES + r")(?![^\W_])", re.IGNORECASE)
# A check introduces working: a calculation after it that holds is not an answer.
_CHECK = re.compile(
    r"(?<![^\W_])(?:(?:let me|let's|to|i'll|we can|i can|now)[ \t]+)?(?:re-?check|check|verify|"
    r"double[- ]check|confirm|sanity[- ]check|verification|proof)(?:ing|ed|s)?(?![^\W_])",
    re.IGNORECASE,
)
# Where a marker's answer text ends: a sentence end, a bracket, a reason, a hedge or a check.
_ANSWER_END = re.compile(
    r"[.!?;](?=\s|$)|[ \t][(\[]|(?<![^\W_])(?:because|since|as|so|which|given|from|via)(?![^\W_])"
    r"|" + _HEDGE.pattern + "|" + _CHECK.pattern,
    re.IGNORECASE,
)
_ANSWER_START = re.compile(r"[ \t*_]*")
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
# A line that is just a number, after a quote, heading or bullet mark; "= 2210" (a step of a
# calculation) is told apart by its `step` group.
_LINE_PREFIX = re.compile(r"[ \t>#]*(?:[-*+•][ \t]+)?(?P<step>(?:=>|->|→|=)[ \t]*)?")
_LINE_NUMBER = re.compile(
    r"[+-]?\.?[0-9][0-9.,/]*(?:[ \t]*/[ \t]*[0-9]+)?|" + _WORD_RUN, re.IGNORECASE
)
_NEGATION = re.compile(r"(?<![^\W_])(?:not|no|never|isn't|isnt|wasn't|aren't)(?![^\W_])|n't", re.I)
_HAS_NUMBERISH = re.compile(r"[0-9]|(?<![^\W_])" + _WORD_RUN, re.IGNORECASE)
_STARTS_NUMBERISH = re.compile(r"[+-]?\.?[0-9]|" + _WORD_RUN, re.IGNORECASE)
# Unit words after a number ("3000 metres", "12 km/h", "5 m^2"): read as the number. Words that
# change the number's meaning are not units.
_UNIT_TAIL = re.compile(
    r"(?P<number>.*?[0-9])[ \t]+(?P<units>[a-z°µ][a-z°µ'./-]*(?:\^[23])?"
    r"(?:[ \t]+(?:per[ \t]+)?[a-z°µ][a-z°µ'./-]*(?:\^[23])?){0,2})",
    re.IGNORECASE,
)
_NOT_UNITS = re.compile(
    r"(?<![^\W_])(?:percent|per[ \t]+cent|percentage|dozens?|squared|cubed|times|scores?|hundreds?"
    r"|thousands?|millions?|billions?|and|or|to|by|of|plus|minus|over|off|less|more|than)(?![^\W_])",
    re.IGNORECASE,
)


class _Candidate(NamedTuple):
    key: object  # the value, or ("?", text) for a candidate that is not one number
    value: Fraction | None
    text: str
    source: str
    start: int
    end: int
    role: str = "alternative"  # "final", "alternative" or "working"


@dataclass(frozen=True)
class AnswerCandidate:
    """One place a reply states (or seems to state) an answer. `start`/`end` index the reply's
    visible text (after the folding of pass 1; the same as the reply's own positions when it is
    plain ASCII without special-token text). `source`: "boxed", "answer_line" (an answer
    marker), "bare" (a line that is just a number, or the whole reply), "retraction" (a value
    after a correction, hedge or check), "after_final" (a number after the final answer).
    `role`: "final" (the one graded), "alternative" (another answer: no credit unless it has the
    final's value) or "working" (a worked step, a check that holds, a marker followed by prose)."""

    text: str
    value: Fraction | None
    source: str
    role: str
    start: int
    end: int


def _clean(text: str) -> str:
    """Strip markup around an answer: whitespace, `*`, `_`, backticks, `$`, `\\(...\\)`,
    `\\[...\\]`, `\\text{...}`-style wrappers, a trailing period, comma or "!", and `{,}`."""
    s = text.replace(_BOX, " ")
    for _ in range(6):
        before = s
        s = s.strip().strip("*_`$").strip()
        if s[-1:] in (".", ",", "!", ":") and not s.endswith(".."):
            s = s[:-1]
        for a, b in (("\\(", "\\)"), ("\\[", "\\]"), ("(", ")")):
            if s.startswith(a) and s.endswith(b):
                s = s[len(a):-len(b)]
        m = _LATEX_WRAP.fullmatch(s)
        if m:
            s = m.group(1)
        if s == before:
            break
    return s.replace("{,}", ",")


def _read(text: str, prose: bool) -> object:
    """The candidate's value: a Fraction, `_UNREADABLE` (it holds something number-like that is
    not exactly one number), or None (no number in it at all)."""
    s = _clean(text)
    value = _read_number(s) if _GLYPH not in s else None
    if value is not None:
        return value
    if not _HAS_NUMBERISH.search(s):
        return None
    if _GLYPH in s or _NEGATION.search(s):
        return _UNREADABLE
    m = _UNIT_TAIL.fullmatch(s)
    units = re.sub(r"\^[23]", "", m.group("units")) if m else ""
    if m and not _HAS_NUMBERISH.search(units) and not _NOT_UNITS.search(units):
        value = _read_number(_clean(m.group("number")))
        if value is not None:
            return value
    if not prose:
        return _UNREADABLE
    values = {v for _, _, v in _number_tokens(s)}
    return values.pop() if len(values) == 1 else _UNREADABLE


def _candidate(value: object, text: str, source: str, start: int, end: int) -> _Candidate:
    text = _clean(text)
    if value is _UNREADABLE:
        return _Candidate(("?", text), None, text, source, start, end)
    return _Candidate(value, value, text, source, start, end)  # type: ignore[arg-type]


def _boxes(text: str) -> tuple[str, list[tuple[int, str]]] | None:
    """(text with each boxed expression replaced by `_BOX`, [(position there, contents)]), or
    None if a box is unclosed. Nested boxes belong to the outermost one."""
    pieces, found, i, length = [], [], 0, 0
    while (m := _BOX_OPEN.search(text, i)) is not None:
        j, depth = m.end(), 1
        while j < len(text) and depth:
            depth += (text[j] == "{") - (text[j] == "}")
            j += 1
        if depth:
            return None
        pieces.append(text[i:m.start()])
        length += m.start() - i
        found.append((length + len(found), text[m.end(): j - 1]))
        i = j
    if not found:
        return text, []
    return _BOX.join(pieces + [text[i:]]), found


class _Numbers:
    """The text's numbers, calculations and sentence ends, found once (and only when a hedge, a
    check or a number after the final answer asks), so that a reply full of hedges costs linear
    time, not quadratic, and a plain "Answer: 75" pays for none of it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _number_tokens(text)
        self.starts = [start for start, _, _ in self.tokens]
        self.ends = [m.start() for m in _SENTENCE_END.finditer(text)]
        self._runs: list[ArithmeticRun] | None = None
        self._run_starts: list[int] = []

    def run_at(self, pos: int) -> ArithmeticRun | None:
        """The calculation (with an operator or an `=`) holding the character at `pos`."""
        if self._runs is None:
            self._runs = [r for r in arithmetic_runs(self.text) if r.operators or r.is_equation]
            self._run_starts = [r.start for r in self._runs]
        k = bisect.bisect_right(self._run_starts, pos) - 1
        return self._runs[k] if k >= 0 and pos < self._runs[k].end else None

    def value_after(self, start: int, check: bool) -> tuple[object, int, int] | None:
        """(value, start, end) of what a hedge or check at `start` introduces: the first number
        of the rest of its sentence, or the result of the calculation it starts ("or maybe
        70+6 = 76" is 76). After a check, a calculation that holds is working: None."""
        k = bisect.bisect_left(self.starts, start)
        if k == len(self.tokens):
            return None
        end = bisect.bisect_left(self.ends, start)
        token_start, token_end, value = self.tokens[k]
        if end < len(self.ends) and self.ends[end] < token_start:
            return None  # the sentence ended before any number
        run = self.run_at(token_start)
        if run is not None:
            if check and run.holds:
                return None
            return (_UNREADABLE if run.value is None else run.value), token_start, run.end
        return value, token_start, token_end


def _labeled(text: str, boxes: list[tuple[int, str]], prose: bool) -> list[_Candidate]:
    """Each `\\boxed{}` and each answer marker with a value in its answer text."""
    found: list[_Candidate] = []
    for pos, contents in boxes:
        if _clean(contents):
            value = _read(contents, prose)
            value = _UNREADABLE if value is None else value  # "\\boxed{x}" boxes a non-number
            found.append(_candidate(value, contents, "boxed", pos, pos + 1))
    markers = list(_MARKER.finditer(text))
    for k, m in enumerate(markers):
        line_end = text.find("\n", m.end())
        stop = len(text) if line_end < 0 else line_end
        if k + 1 < len(markers):
            stop = min(stop, markers[k + 1].start())
        start_m = _ANSWER_START.match(text, m.end())
        assert start_m is not None  # it matches the empty string
        start = start_m.end()
        cut = _ANSWER_END.search(text, start, stop)
        end = cut.start() if cut else stop
        value = _read(text[start:end], prose)
        if value is not None:
            source = "alternative" if _OFFERED.match(m.group()) else "answer_line"
            found.append(_candidate(value, text[start:end], source, m.start(), end))
    return sorted(found, key=lambda c: c.start)


def _bare_lines(text: str) -> list[tuple[_Candidate, bool]]:
    """(candidate, is a step) for each line that is just a number; a step is "= 2210"."""
    found, pos = [], 0
    for line in text.split("\n"):
        prefix = _LINE_PREFIX.match(line)
        assert prefix is not None  # it matches the empty string
        body = _clean(line[prefix.end():])
        if _BOX not in line and body and _LINE_NUMBER.fullmatch(body):
            value = _read(body, False)
            value = _UNREADABLE if value is None else value
            found.append((_candidate(value, body, "bare", pos, pos + len(line)),
                          prefix.group("step") is not None))
        pos += len(line) + 1
    return found


def _collect(text: str, prose: bool, context: str | None) -> list[_Candidate] | AnswerStatus:
    """Every candidate with its role; exactly one is "final"."""
    boxed = _boxes(text)
    if boxed is None:
        return AnswerStatus.MALFORMED
    text, boxes = boxed
    labeled = _labeled(text, boxes, prose)
    bare = _bare_lines(text)
    # A marker followed by prose ("The answer is found by subtracting 49 ...") is working; one
    # that states a value, or starts to, is an answer.
    stated = [c for c in labeled
              if c.value is not None or c.source == "boxed" or _STARTS_NUMBERISH.match(c.text)]
    finals = [c for c in stated if c.source != "alternative"]
    if finals:
        final = finals[-1]
    elif bare:
        final = bare[-1][0]
    elif stated:
        final = stated[-1]
    else:
        whole = _clean(text)
        if not whole:
            return AnswerStatus.EMPTY
        value = _read(whole, prose)
        return [_candidate(_UNREADABLE if value is None else value, whole, "bare", 0, len(text))
                ._replace(role="final")]
    out = [final._replace(role="final")]
    for c in labeled:
        if c is not final:
            out.append(c._replace(role="alternative" if c in stated else "working"))
    for c, step in bare:
        if c.start != final.start:
            out.append(c._replace(role="working" if step and c.start < final.start else "alternative"))
    numbers = _Numbers(text)
    first_anchor = min(c.start for c in out)
    for m in _HEDGE.finditer(text):
        if m.start() < first_anchor and not _STRONG_HEDGE.fullmatch(m.group()):
            continue
        after = numbers.value_after(m.end(), check=False)
        if after is not None:
            value, start, end = after
            out.append(_candidate(value, text[start:end], "retraction", start, end))
    for m in _CHECK.finditer(text, first_anchor):
        after = numbers.value_after(m.end(), check=True)
        if after is not None:
            value, start, end = after
            out.append(_candidate(value, text[start:end], "retraction", start, end))
    if final.value is not None:
        out += _after_final(text, final, out, numbers, context)
    return out


def _after_final(text: str, final: _Candidate, listed: list[_Candidate], numbers: _Numbers,
                 context: str | None) -> list[_Candidate]:
    """The numbers written in digits after the final answer that are not the final value said
    again, part of a candidate already listed, a unit's power ("m^2"), in a calculation that
    holds (or one worth the final value), or a given of the task (`context`'s numbers, read only
    when such a number is left)."""
    spans = sorted((c.start, c.end) for c in listed)
    span_starts = [s for s, _ in spans]
    reach = list(itertools.accumulate((e for _, e in spans), max))  # furthest end so far
    givens: frozenset[Fraction] | None = None
    found = []
    k = bisect.bisect_left(numbers.starts, final.end)
    for start, end, value in numbers.tokens[k:]:
        if not text[start].isdigit() and not text[start + 1: start + 2].isdigit():
            continue  # a number word after the answer ("the first one") is prose
        if value == final.value:
            continue
        j = bisect.bisect_right(span_starts, start) - 1
        if j >= 0 and reach[j] > start:
            continue  # inside a listed candidate
        if start >= 2 and text[start - 1] == "^" and text[start - 2].isalpha():
            continue
        run = numbers.run_at(start)
        if run is not None and (run.holds or (not run.is_equation and run.value == final.value)):
            continue
        if givens is None:
            givens = _givens(context)
        if value in givens:
            continue
        found.append(_candidate(value, text[start:end], "after_final", start, end))
    return found


# --- 3. decision -------------------------------------------------------------------------------
def _givens(context: str | None) -> frozenset[Fraction]:
    if not context:
        return frozenset()
    visible = _visible_text(context[: 4 * MAX_RESPONSE_CHARS])
    if isinstance(visible, AnswerStatus):
        return frozenset()
    return frozenset(v for _, _, v in _number_tokens(visible) if isinstance(v, Fraction))


def _candidates(text: str, max_chars: int, prose: bool, context: str | None
                ) -> list[_Candidate] | AnswerStatus:
    if len(text) > max_chars:
        return AnswerStatus.TOO_LONG
    if "\ufffd" in text:
        return AnswerStatus.INVALID_TEXT
    visible = _visible_text(text)
    if isinstance(visible, AnswerStatus):
        return visible
    if not visible.strip():
        return AnswerStatus.EMPTY
    return _collect(visible, prose, context)


def _extract(text: str, max_chars: int, prose: bool, context: str | None = None) -> Extraction:
    candidates = _candidates(text, max_chars, prose, context)
    if isinstance(candidates, AnswerStatus):
        return Extraction(candidates)
    final = candidates[0]
    if any(c.role != "working" and c.key != final.key for c in candidates):
        return Extraction(AnswerStatus.CONFLICTING)
    return Extraction(AnswerStatus.OK, final.text, final.source, final.value)


def answer_candidates(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, prose: bool = False,
    context: str | None = None,
) -> list[AnswerCandidate]:
    """Every place `text` states an answer, with its role (see `AnswerCandidate`), the final
    one first; `[]` when the reply cannot be read at all (`extract_answer` says why)."""
    candidates = _candidates(text, max_chars, prose, context)
    if isinstance(candidates, AnswerStatus):
        return []
    return [AnswerCandidate(c.text, c.value, c.source, c.role, c.start, c.end) for c in candidates]


def extract_answer(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, prose: bool = False,
    context: str | None = None,
) -> Extraction:
    """The response's final answer (`candidate`, and its `value` when it is a number), or the
    reason there is none: credit needs every other answer the reply states to agree with it.
    `prose=True` also reads a candidate that is a sentence holding exactly one number ("My guess
    is 7."), as the games do. `context` is the task's text: numbers from it, quoted after the
    answer ("Answer: 75, as 3 boxes hold 25 each"), are explanation, not other answers.

    Never raises on any `str` input; cost is bounded by `max_chars`.
    """
    return _extract(text, max_chars, prose, context)


def extract_single_integer(
    text: str, *, max_chars: int = MAX_RESPONSE_CHARS, context: str | None = None
) -> tuple[int | None, AnswerStatus]:
    """The integer a game reply commits to ("7", "seven", "Answer: 7", "My guess is 7.").

    `extract_answer(text, prose=True)` must find exactly one value and it must be an integer
    ("7.0" is 7). Several different numbers ("5 or 6", "3 then 4") give `(None, CONFLICTING)`;
    no number, or one that is not an integer, gives `(None, MALFORMED)`.
    """
    if len(text) <= max_chars:  # fast path: a bare ASCII integer, as the rules below read it
        stripped = text.strip()
        if _PLAIN_INT.fullmatch(stripped):
            return int(stripped), AnswerStatus.OK
    extraction = _extract(text, max_chars, True, context)
    if not extraction.ok:
        return None, extraction.status
    value = extraction.value
    if value is None:
        several = len(_number_tokens(extraction.candidate or "")) > 1
        return None, AnswerStatus.CONFLICTING if several else AnswerStatus.MALFORMED
    if value.denominator != 1:
        return None, AnswerStatus.MALFORMED
    return int(value), AnswerStatus.OK


# --- grading a numeric target ------------------------------------------------------------------
@dataclass(frozen=True)
class Grade:
    """Result of grading one response. `format_ok`: a single number was found; `correct`: it
    equals the target; `status` says why not (an `AnswerStatus` value or "not_a_number")."""

    correct: bool
    format_ok: bool
    status: str
    value: Fraction | None = None


_OK = AnswerStatus.OK.value


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
    """Grade `response` against `target` (an int, a Fraction, or a string `parse_number` reads).
    `context`: the task's text, as for `extract_answer`."""
    quick = grade_numeric_quick(response, target, max_chars=max_chars)  # a bare integer
    if quick is not None:
        return quick
    if isinstance(target, str):
        parsed_target = parse_number(target)
        if parsed_target is None:
            raise ValueError(f"grade_numeric: target {target!r} is not a number parse_number reads")
        target = parsed_target
    extraction = _extract(response, max_chars, False, context)
    if not extraction.ok:
        return Grade(False, False, extraction.status.value)
    if extraction.value is None:
        return Grade(False, False, "not_a_number")
    return Grade(extraction.value == target, True, _OK, extraction.value)
