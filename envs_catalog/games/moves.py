"""Answer contracts of the games' integer moves, and the one way a move is read through them.

`BoardMove` is the contract of a move that names one numbered place of a board (a tic-tac-toe
cell, a Connect Four column): an integer (`llm_gym.grading.IntegerAnswer`: digits or words,
"Move: 5", "\\boxed{5}", "I'll play 5", a bare last line "5"), optionally after the place's noun
("cell 5", "column 4"), read under the one answer policy (`llm_gym.grading.POLICY`). Its prompt
instruction ("Reply with the number of the cell you take.") comes from its noun and verb.
`read_integer_move(contract, text)` reads a reply through an integer contract and returns the
integer or the reason there is none; whether the integer is a legal move is the game's business.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Iterable

from llm_gym.grading import AnswerContract, IntegerAnswer
from llm_gym.grading.quantity import strip_decoration

__all__ = ["BoardMove", "GAME_VERBS", "read_integer_move"]

# Verbs that may introduce a move in a one-line statement ("I'll play 5", "Let's go with 5").
GAME_VERBS = ("play", "take", "choose", "pick", "go", "select", "mark", "drop")


class BoardMove(IntegerAnswer):
    """The number of one place of a board: `noun` names the place ("cell", "column"), `verb`
    what the player does with it ("take", "play"); `low`..`high` is the board's numbering (shown
    in the instruction when `show_range`). The place's noun may stand before the number ("cell
    5"), and is a label too ("Column: 4"). The prompt's instruction is part of the task text, so
    its words may name the move in a lead-in ("The cell I take is 5")."""

    def __init__(self, *, noun: str, verb: str, low: int, high: int, show_range: bool = False,
                 verbs: Iterable[str] = GAME_VERBS, context: str = "", **kwargs: Any) -> None:
        self.noun, self.verb, self.low, self.high, self.show_range = noun, verb, low, high, show_range
        super().__init__(labels=("answer", "move", noun), verbs=verbs, name=f"the {noun} number",
                         **kwargs)
        self.context = f"{context} {self.instruction()}".strip()
        self._noun_first = re.compile(rf"{re.escape(noun)}[ \t]*(?:number[ \t]*)?(?P<rest>.+)",
                                      re.IGNORECASE | re.DOTALL)

    def parse(self, text: str) -> Fraction | None:
        value = super().parse(text)
        if value is None:
            m = self._noun_first.fullmatch(strip_decoration(text))
            if m is not None:
                value = super().parse(m.group("rest"))
        return value

    def instruction(self, *, brief: bool = False) -> str:
        shown = f" ({self.low}-{self.high})" if self.show_range else ""
        return f"Reply with the number of the {self.noun}{shown} you {self.verb}."

    def describe(self) -> str:
        return f"the number of a {self.noun}, {self.low}-{self.high} (an integer, digits or words)"


def read_integer_move(contract: AnswerContract, text: str) -> tuple[int | None, str]:
    """`(n, "ok")` when `contract` reads one whole number from `text`, else `(None, status)`:
    the reading's status ("empty", "no_answer", "malformed", "conflicting", ...) or
    "not_an_integer" for a number such as 7.5."""
    reading = contract.read(text)
    if not reading.ok:
        return None, reading.status
    value = Fraction(reading.value)
    if value.denominator != 1:
        return None, "not_an_integer"
    return int(value), "ok"
