"""Number contracts: `NumberAnswer` (a rational number, optionally in a unit, within a tolerance)
and `IntegerAnswer` (an integer).

`parse` reads the whole text as one quantity (`llm_gym.grading.quantity.read_quantity`: digits,
fractions, decimals, scientific notation, number words, exact scale words such as "5 billion",
one unit or noun) or as a calculation that ends in one ("26 + 49 = 75", "75 (26 + 49)", "x = 5"
when the contract names `x`). A unit is converted exactly into the asked one when both measure
the same dimension ("85 m" is 0.085 km); a unit of another dimension, or any unit when none is
asked, makes the text not this contract's number. Values are exact `Fraction`s; `matches`
applies the relative `tolerance` (0: exact); within a tolerance, an approximation mark ("about
8.05", "~8.05", "8.047 (rounded)") is read as the value, and for an exact answer it is a range,
not the value.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, ClassVar, Iterable

from llm_gym.grading.arithmetic import arithmetic_runs
from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.numeric import _NUMBER_TOKEN
from llm_gym.grading.quantity import read_quantity, strip_decoration
from llm_gym.grading.units import Unit, lookup

__all__ = ["IntegerAnswer", "NumberAnswer", "counted", "format_number"]

_RESTATED = re.compile(r"(?P<value>[^()]+?)[ \t]*\((?P<again>[^()]+)\)")
_VARIABLE = re.compile(r"(?P<name>[A-Za-z](?:_[0-9]+)?)[ \t]*(?:=|:)[ \t]*(?P<rest>.+)", re.DOTALL)
# Within a tolerance an approximation is the value: "about 8.05", "8.047 (rounded)".
_APPROX = re.compile(
    r"(?:(?:about|around|roughly|approximately|approx\.?|close[ \t]+to|~|≈)[ \t]*)?(?P<value>.+?)"
    r"(?:[ \t]*(?:-?ish|or[ \t]+so|give[ \t]+or[ \t]+take|\((?:approximately|approx\.?|rounded)\)))?",
    re.IGNORECASE | re.DOTALL)
_DIGIT = re.compile(r"[0-9]")
_ARITH_ONLY = re.compile(r"[0-9 \t.,+\-*/×÷·^()\[\]xX]+")


_HOW_MANY = re.compile(r"How many (?:more |different )?([a-z]+)")


def counted(question: str) -> tuple[str | None, tuple[str, ...]]:
    """What a "How many X ...?" question counts, for its number contract's `unit=` and `nouns=`:
    a unit when X is one ("How many kilometres" -> "km": "1234 km" and "1234000 m" answer it,
    "How many dollars" -> "USD": "$36"), else the nouns the number may carry ("How many
    stickers" -> ("stickers", "sticker")); (None, ()) for any other question."""
    m = _HOW_MANY.search(question)
    if m is None:
        return None, ()
    word = m.group(1)
    found = lookup(word)
    if found is not None:
        return found.symbol, ()
    return None, (word, word[:-1]) if word.endswith("s") else (word,)


def format_number(value: Fraction) -> str:
    """`value` as an integer, a short terminating decimal, or `a/b`."""
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        text = f"{float(value):.12f}".rstrip("0").rstrip(".")
        if Fraction(text) == value:
            return text
    return f"{value.numerator}/{value.denominator}"


def _expression_value(text: str) -> Fraction | None:
    """The value of an arithmetic expression that is the whole of `text`, else None."""
    s = text.strip()
    if not s or not _ARITH_ONLY.fullmatch(s):
        return None
    runs = arithmetic_runs(s)
    if len(runs) != 1 or runs[0].start != 0 or runs[0].end < len(s.rstrip()) or runs[0].is_equation:
        return None
    return runs[0].value


class NumberAnswer(AnswerContract):
    """A rational number. `unit`: the asked unit's symbol (`llm_gym.grading.units`), or None for
    a plain number; `convert_units`: accept other units of its dimension, converted exactly;
    `tolerance`: relative error accepted by `matches`; `variable`: a name the answer may be
    given to ("x = 5"); `nouns`: words that may follow the number ("apples")."""

    kind: ClassVar[str] = "number"
    placeholder: ClassVar[str] = "number"
    default_name: ClassVar[str] = "the number"

    def __init__(self, *, unit: str | None = None, convert_units: bool = True,
                 tolerance: float | Fraction = 0, variable: str | None = None,
                 context: str = "", nouns: Iterable[str] = (), labels: Iterable[str] = ("answer",),
                 **kwargs: Any) -> None:
        super().__init__(context=context, nouns=nouns, labels=labels, **kwargs)
        self.unit: Unit | None = None
        if unit is not None:
            self.unit = lookup(unit)
            if self.unit is None:
                raise ValueError(f"NumberAnswer: unknown unit {unit!r} (see llm_gym.grading.units)")
        self.convert_units = convert_units
        self.tolerance = Fraction(repr(tolerance)) if isinstance(tolerance, float) else Fraction(tolerance)
        if self.tolerance < 0:
            raise ValueError(f"NumberAnswer: tolerance must be >= 0, got {tolerance!r}")
        self.variable = variable

    def _quantity(self, text: str) -> Fraction | None:
        q = read_quantity(text, nouns=self.nouns)
        if q is None:
            return None
        if q.unit is None:
            return q.value
        if self.unit is None:
            return None
        if q.unit.symbol == self.unit.symbol:
            return q.value
        if self.convert_units and q.unit.dimension == self.unit.dimension:
            return q.value * q.unit.size / self.unit.size
        return None

    def parse(self, text: str) -> Fraction | None:
        s = strip_decoration(text)
        if not s:
            return None
        if self.tolerance:
            m = _APPROX.fullmatch(s)
            if m and m.group("value") != s:
                inner = self._quantity(strip_decoration(m.group("value")))
                if inner is not None:
                    return inner
        value = self._quantity(s)
        if value is not None:
            return self._admit(value)
        m = _RESTATED.fullmatch(s)  # "75 (seventy-five)", "75 (= 26 + 49)"
        if m:
            value = self._quantity(strip_decoration(m.group("value")))
            again_text = m.group("again").strip().lstrip("=").strip()
            again = self._quantity(again_text)
            if again is None:
                again = _expression_value(again_text)
            return self._admit(value) if value is not None and again == value else None
        if self.variable is not None:
            m = _VARIABLE.fullmatch(s)
            if m and m.group("name") == self.variable:
                return self.parse(m.group("rest"))
        if "=" in s:  # "26 + 49 = 75": every side one value, the last one written as a number
            sides = [strip_decoration(side) for side in s.split("=")]
            last = self._quantity(sides[-1]) if sides[-1] else None
            if last is None or any(not side for side in sides[:-1]):
                return None
            for side in sides[:-1]:
                v = _expression_value(side)
                if v is None:
                    v = self._quantity(side)
                if v != last:
                    return None
            return self._admit(last)
        return None

    def _admit(self, value: Fraction) -> Fraction | None:
        return value

    def mentions(self, text: str) -> bool:
        return _DIGIT.search(text) is not None or _NUMBER_TOKEN.search(text) is not None

    def matches(self, value: Any, gold: Any) -> bool:
        if not isinstance(value, Fraction):
            return False
        gold = Fraction(gold)
        if self.tolerance:
            return abs(value - gold) <= self.tolerance * abs(gold)
        return value == gold

    def format(self, value: Any) -> str:
        return format_number(Fraction(value))

    def instruction(self, *, brief: bool = False) -> str:
        if brief and self.tolerance:
            return f"Reply with just {self.name} (within {format_number(self.tolerance * 100)}%)."
        return super().instruction(brief=brief)

    def describe(self) -> str:
        what = "a number (an integer, a decimal or a fraction a/b)"
        if self.unit is not None:
            what += f" in {self.unit.plural}"
        if self.tolerance:
            what += f", within {format_number(self.tolerance * 100)}%"
        return what


class IntegerAnswer(NumberAnswer):
    """An integer (a number that is not one, "7.5", is a wrong answer, not a malformed one)."""

    kind: ClassVar[str] = "integer"
    placeholder: ClassVar[str] = "integer"

    def describe(self) -> str:
        what = "an integer"
        if self.unit is not None:
            what += f" number of {self.unit.plural}"
        return what
