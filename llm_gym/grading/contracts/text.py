"""Text contracts: `TokenAnswer` (one word or move from a grammar), `ExactTextAnswer` (a text
that must match verbatim, such as a program's output) and `FreeTextAnswer` (the reply is the
product, judged by a rubric).

A token answer is read like a number: the declared slot, after markup and a lead-in ("My guess
is", "I'll play"), must be one token the pattern matches in full. An exact text is the block after
a label ("Answer:", "Output:"), else the reply's last fenced block, else the whole reply; it is
compared line by line with trailing spaces ignored. A free text is the whole visible reply:
there is no answer to declare, and its env's rubric reads all of it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, ClassVar, Iterable

from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.policy import _FENCE, Declaration, Reading
from llm_gym.grading.quantity import strip_decoration
from llm_gym.grading.normalize import AnswerStatus, visible_text

__all__ = ["ExactTextAnswer", "FreeTextAnswer", "TokenAnswer"]

# What may stand before a label on its line for an exact text's declaration: markup, a few words.
_LINE_LEAD = re.compile(r"[ \t*_#>]*(?:[A-Za-z]+[ \t]+){0,3}")


def _same(text: str) -> str:
    return text


class TokenAnswer(AnswerContract):
    """One token the regular expression `pattern` matches in full (case-insensitively unless
    `case`), returned through `normalize` (default: lower case). `name` says what it is in the
    prompt and on the card ("the reversed string"); `verbs` may introduce it ("I guess", "I'll
    play")."""

    kind: ClassVar[str] = "token"

    def __init__(self, *, pattern: str, name: str = "the word", case: bool = False,
                 normalize: Callable[[str], Any] | None = None, verbs: Iterable[str] = (),
                 **kwargs: Any) -> None:
        super().__init__(verbs=verbs, name=name, **kwargs)
        flags = 0 if case else re.IGNORECASE
        self.pattern = re.compile(pattern, flags)
        self._search = re.compile(rf"(?<![^\W_])(?:{pattern})(?![^\W_])", flags)
        # str.lower / _same rather than a lambda: an env source holding its contract must pickle
        self.normalize = normalize or (_same if case else str.lower)

    def parse(self, text: str) -> Any:
        s = strip_decoration(text)
        return self.normalize(s) if self.pattern.fullmatch(s) else None

    def mentions(self, text: str) -> bool:
        return self._search.search(text) is not None

    def format(self, value: Any) -> str:
        return str(value)

    def describe(self) -> str:
        return self.name

    @property
    def placeholder(self) -> str:  # type: ignore[override]
        return self.name.split()[-1] if self.name else "answer"


def _lines(text: str) -> tuple[str, ...]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return tuple(lines)


class ExactTextAnswer(AnswerContract):
    """A text matched verbatim, line by line (trailing spaces and surrounding blank lines
    ignored; `case=False` ignores case). Declared by a label ("Answer:", "Output:") or a
    fenced block; else the whole reply is the answer."""

    kind: ClassVar[str] = "exact text"
    multiline: ClassVar[bool] = True
    whole_reply: ClassVar[bool] = True
    placeholder: ClassVar[str] = "text"

    def __init__(self, *, case: bool = True, name: str = "the exact text", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.case = case

    def parse(self, text: str) -> tuple[str, ...] | None:
        lines = _lines(text)
        if lines and _FENCE.fullmatch(lines[0]) and _FENCE.fullmatch(lines[-1]) and len(lines) >= 2:
            lines = _lines("\n".join(lines[1:-1]))
        if len(lines) == 1:
            lines = (strip_decoration(lines[0]) if lines[0].strip()[:1] in "`\"'*$" else lines[0],)
        if not lines:
            return None
        return lines if self.case else tuple(line.lower() for line in lines)

    def read_slot(self, slot: str) -> Any:
        return self.parse(slot)

    def last_answer(self, visible: str) -> Declaration | None:
        fences = list(_FENCE.finditer(visible))
        if len(fences) >= 2 and not visible[fences[-1].end():].strip():
            return Declaration("last_block", visible[fences[-2].end() + 1: fences[-1].start()], fences[-2].start())
        return Declaration("whole", visible, 0) if visible.strip() else None

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        # Only a label line that starts its line declares: the text itself may hold any words.
        found = super().find_declarations(visible)
        if found is None:
            return None
        return [d for d in found if d.source == "tag" or (
            d.source == "label" and _LINE_LEAD.fullmatch(visible[visible.rfind("\n", 0, d.start) + 1: d.start]))]

    def mentions(self, text: str) -> bool:
        return bool(text.strip())

    def format(self, value: Any) -> str:
        return "\n".join(value)

    def describe(self) -> str:
        return self.name


class FreeTextAnswer(AnswerContract):
    """The reply is the product (instructions followed, a description written): `read` returns
    the whole visible text for the env's `rubric` to judge; there is no answer to declare."""

    kind: ClassVar[str] = "free text"
    multiline: ClassVar[bool] = True
    placeholder: ClassVar[str] = "text"

    def __init__(self, *, rubric: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rubric = rubric

    def parse(self, text: str) -> str | None:
        return text if text.strip() else None

    def read(self, reply: str) -> Reading:
        if len(reply) > self.max_chars:
            return Reading(AnswerStatus.TOO_LONG.value)
        if "\ufffd" in reply:
            return Reading(AnswerStatus.INVALID_TEXT.value)
        visible = visible_text(reply)
        if isinstance(visible, AnswerStatus):
            return Reading(visible.value)
        if not visible.strip():
            return Reading(AnswerStatus.EMPTY.value)
        return Reading("ok", visible, visible, "whole")

    def format(self, value: Any) -> str:
        return str(value)

    def describe(self) -> str:
        return f"free text, judged by its rubric: {self.rubric}"

    def instruction(self) -> str:
        return ""
