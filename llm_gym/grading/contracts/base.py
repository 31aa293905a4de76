"""`AnswerContract`: what an environment's answer is, declared once, read and prompted from it.

A contract is a small typed object an env builds per task (it may carry the task's text, its
units, its variable names). The prompt's answer instruction (`instruction`), the card's
description (`describe`), the canonical gold text (`format`) and the reader (`read`, which
applies `llm_gym.grading.policy` and then the contract's complete `parse`) all come from it, so
what the model is told and what is read cannot drift. Subclasses (`llm_gym.grading.contracts`)
implement `parse` (the whole text is one value of the contract's kind, or None), `format`,
`describe` and, where a value is not plain equality, `same`/`matches`; `mentions` says whether a
text states something of the kind at all (a declaration that does not is prose).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable

from llm_gym.grading.answers import MAX_RESPONSE_CHARS, Grade
from llm_gym.grading.policy import (
    _FUNCTION_WORDS,
    Declaration,
    Reading,
    _fallback,
    _stem_word,
    declarations,
    read_reply,
    read_statement,
)

__all__ = ["AnswerContract"]

_CONTEXT_WORD = re.compile(r"[A-Za-z]+")
_CONTEXT_NUMBER = re.compile(r"(?<![0-9.])[0-9]+(?:\.[0-9]+)?(?![0-9])")


class AnswerContract(ABC):
    """What an answer is (see the module docstring).

    - `context`: the task's text. Its words may name the value in a lead-in ("The number of
      apples left is 12"), its numbers may stand there too ("26 + 49 = 75").
    - `nouns`: words that may follow a value as its noun ("apples").
    - `labels`: the words that declare an answer ("answer"; a game adds "move", "guess").
    - `verbs`: verbs that may introduce the value in a one-line statement ("I'll play 5").
    - `max_chars`: longer replies are `too_long` before anything is parsed.
    - `name`: what the answer is called in the prompt ("the number", "the value of x").
    """

    kind: ClassVar[str] = "answer"
    multiline: ClassVar[bool] = False  # answers that span lines: grids, mappings, programs
    # Read the reply's characters as they are (no Unicode folding): a program, whose text is
    # what runs, must not be altered by the reading ("café" stays "café").
    literal: ClassVar[bool] = False
    # With nothing declared, the whole reply is the answer (a program's output, a game command),
    # not its last line or block: no prose may stand around an undeclared answer.
    whole_reply: ClassVar[bool] = False
    placeholder: ClassVar[str] = "answer"
    # Nouns that name an answer of this kind in a lead-in ("The sorted list is ...").
    kind_nouns: ClassVar[frozenset[str]] = frozenset()

    default_name: ClassVar[str] = "the answer"

    def __init__(self, *, context: str = "", nouns: Iterable[str] = (),
                 labels: Iterable[str] = ("answer",), verbs: Iterable[str] = (),
                 max_chars: int = MAX_RESPONSE_CHARS, name: str | None = None) -> None:
        self.context = context
        self.name = name if name is not None else self.default_name
        self.verbs = tuple(v.lower() for v in verbs)
        self.nouns = frozenset(n.lower() for n in nouns)
        self.labels = tuple(labels)
        if not self.labels:
            raise ValueError("an AnswerContract needs at least one label word (e.g. 'answer')")
        self.max_chars = max_chars
        self._lead_words: frozenset[str] | None = None
        self._givens: frozenset[str] | None = None

    # --- what subclasses define -----------------------------------------------------------------
    @abstractmethod
    def parse(self, text: str) -> Any:
        """The one value `text` (markup already taken off) states in full, or None."""

    @abstractmethod
    def format(self, value: Any) -> str:
        """The canonical text of `value` (what a gold reply declares)."""

    @abstractmethod
    def describe(self) -> str:
        """One line for the card: what an answer is ("an integer", "a 9x9 grid of digits")."""

    def mentions(self, text: str) -> bool:
        """Whether `text` states anything of this kind (a declaration that does not is prose)."""
        return bool(text.strip())

    def same(self, a: Any, b: Any) -> bool:
        """Whether two parsed values are one answer (two declarations that agree)."""
        return a == b

    def matches(self, value: Any, gold: Any) -> bool:
        """Whether a parsed value earns credit against the gold value (a tolerance goes here)."""
        return self.same(value, gold)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        """The reply's declarations (`llm_gym.grading.policy.declarations`); a contract whose
        answers are declared another way (a program's fenced blocks) overrides this."""
        return declarations(visible, self)

    def last_answer(self, visible: str) -> Declaration | None:
        """What is read when nothing is declared (the policy's last line or block)."""
        return _fallback(visible, self)

    def answer_block(self, block: str) -> str:
        """The part of a block after a label (or the last block) that is the answer; a block
        contract trims trailing prose lines here. The default keeps the whole block."""
        return block

    # --- derived --------------------------------------------------------------------------------
    def instruction(self, *, brief: bool = False) -> str:
        """The prompt's answer instruction, generated from the contract: `brief` asks for the
        answer alone ("Reply with just the number."); otherwise for a declared answer ("End
        with one line: Answer: <number>", or a block after "Answer:")."""
        if brief:
            return f"Reply with just {self.name}."
        if self.multiline:
            return f"End with 'Answer:' and then {self.describe()}."
        return f"End with one line: Answer: <{self.placeholder}>"

    @property
    def lead_words(self) -> frozenset[str]:
        """Words a lead-in may use: function words, the task's words, the nouns and labels."""
        if self._lead_words is None:
            words = {w.lower() for w in _CONTEXT_WORD.findall(self.context[:16384])}
            words |= {_stem_word(w) for w in words}
            self._lead_words = (_FUNCTION_WORDS | words | self.nouns | self.kind_nouns
                                | {w.lower() for w in self.labels})
        return self._lead_words

    @property
    def givens(self) -> frozenset[str]:
        """The numbers written in the task's text, as written."""
        if self._givens is None:
            self._givens = frozenset(_CONTEXT_NUMBER.findall(self.context[:16384]))
        return self._givens

    def read_slot(self, slot: str) -> Any:
        """A declared slot's value: a one-line slot through the statement grammar of
        `llm_gym.grading.policy`, a block through `parse` alone."""
        if self.multiline:
            return self.parse(slot)
        return read_statement(slot, self)

    def read(self, reply: str) -> Reading:
        """The reply's declared answer (`llm_gym.grading.policy.read_reply`)."""
        return read_reply(reply, self)

    def grade(self, reply: str, gold: Any) -> Grade:
        """`Grade(correct, format_ok, status, value)` of `reply` against the gold value."""
        reading = self.read(reply)
        if not reading.ok:
            return Grade(False, False, reading.status)
        return Grade(bool(self.matches(reading.value, gold)), True, reading.status, reading.value)
