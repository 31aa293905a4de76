"""Arithmetic written in running text: which calculations a reply states, and whether they hold.

The answer reader (`llm_gym.grading.answers`) uses this to tell worked steps from answers: a
calculation that holds ("let me check: 75 - 49 = 26") is working wherever it stands, and a
calculation after a correction ("or maybe 70+6 = 76") states its result. `arithmetic_runs`
finds every maximal run of numbers joined by `+ - * / × ÷ · ^`, parentheses and `=` (a
lone `x` between two numbers is `×`) and evaluates each side exactly (`Fraction`): a run with
an `=` is an *equation*, `holds` when every side has one value; a run without one is an
*expression* with its value. Thousands separators follow `parse_number`'s strict form.
Exponents are small integers (|e| <= 64, results under 10**300) so that a reply cannot make
the reader do unbounded work; anything else that does not parse (a comma list "1, 2", a
division by zero) leaves its numbers plain. Cost is linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["ArithmeticRun", "arithmetic_runs"]

# A run starts at a digit, an opening bracket, or a sign that cannot be a binary minus.
_RUN = re.compile(r"(?:(?<![\w)\]])[-+])?[0-9(\[][0-9 \t.,+\-*/×÷·^=()\[\]]*")
_TIMES_X = re.compile(r"(?<=[0-9)])([ \t]*)[xX]([ \t]*)(?=[0-9(])")
_TOKEN = re.compile(
    r"(?P<num>[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?|[0-9]+)|(?P<op>[-+*/×÷·^])|(?P<eq>=)"
    r"|(?P<lp>[(\[])|(?P<rp>[)\]])|(?P<ws>[ \t]+)|(?P<other>.)"
)
_MAX_EXPONENT = 64
_MAX_MAGNITUDE = 10**300


@dataclass(frozen=True)
class ArithmeticRun:
    """One calculation: `text[start:end]`, its `sides` (values; None where a side did not
    evaluate), and the `(start, end)` of each number in it."""

    start: int
    end: int
    sides: tuple[Fraction | None, ...]
    numbers: tuple[tuple[int, int], ...]
    operators: int  # binary operators in it (0 for "75 = 75")

    @property
    def is_equation(self) -> bool:
        return len(self.sides) > 1

    @property
    def holds(self) -> bool:
        """An equation whose sides all evaluate to one value."""
        values = set(self.sides)
        return self.is_equation and None not in values and len(values) == 1

    @property
    def value(self) -> Fraction | None:
        """The stated result: the last side (an expression's only side)."""
        return self.sides[-1]


class _Parser:
    """Recursive descent over one side's tokens: sum := product (('+'|'-') product)*;
    product := power (('*'|'/') power)*; power := unary ('^' unary)?; unary := '-' unary | atom."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.i = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Fraction | None:
        try:
            value = self.sum()
        except (ZeroDivisionError, _Bad, OverflowError):
            return None
        return value if self.i == len(self.tokens) else None

    def sum(self) -> Fraction:
        value = self.product()
        while (tok := self.peek()) is not None and tok[1] in "+-":
            self.take()
            value = value + self.product() if tok[1] == "+" else value - self.product()
        return value

    def product(self) -> Fraction:
        value = self.power()
        while (tok := self.peek()) is not None and tok[1] in "*/×÷·":
            self.take()
            right = self.power()
            value = value / right if tok[1] in "/÷" else value * right
        return _bounded(value)

    def power(self) -> Fraction:
        base = self.unary()
        if (tok := self.peek()) is not None and tok[1] == "^":
            self.take()
            exponent = self.unary()
            if exponent.denominator != 1 or abs(exponent) > _MAX_EXPONENT:
                raise _Bad
            if base == 0 and exponent < 0:
                raise _Bad
            return _bounded(base ** int(exponent))
        return base

    def unary(self) -> Fraction:
        tok = self.peek()
        if tok is not None and tok[1] in "-+":
            self.take()
            value = self.unary()
            return -value if tok[1] == "-" else value
        return self.atom()

    def atom(self) -> Fraction:
        if self.peek() is None:
            raise _Bad
        kind, text = self.take()
        if kind == "num":
            return Fraction(text.replace(",", ""))
        if kind == "lp":
            value = self.sum()
            if self.peek() is None or self.take()[0] != "rp":
                raise _Bad
            return value
        raise _Bad


class _Bad(Exception):
    pass


def _bounded(value: Fraction) -> Fraction:
    if abs(value.numerator) > _MAX_MAGNITUDE or value.denominator > _MAX_MAGNITUDE:
        raise _Bad
    return value


def _split_runs(text: str, start: int, end: int) -> list[ArithmeticRun]:
    """The calculations in `text[start:end]` (a run of arithmetic characters), split where a
    character that is not arithmetic (a comma or period outside a number) breaks it, and so does
    a number or bracket right after a number or closing bracket."""
    runs: list[ArithmeticRun] = []
    segment: list[tuple[str, str, int, int]] = []

    def close() -> None:
        while segment and segment[-1][0] in ("ws", "op", "eq", "lp"):
            segment.pop()
        while segment and segment[0][0] in ("ws", "eq", "rp"):
            segment.pop(0)
        if segment:
            runs.append(_evaluate(segment))
        segment.clear()

    previous = ""
    for m in _TOKEN.finditer(text, start, end):
        kind = m.lastgroup or "other"
        if kind == "other" or (previous in ("num", "rp") and kind in ("num", "lp")):
            close()  # "75 (3*25)" and "75 76" are two runs: no implicit multiplication
        if kind != "other":
            segment.append((kind, m.group(), m.start(), m.end()))
        if kind != "ws":
            previous = kind
    close()
    return runs


def _evaluate(tokens: list[tuple[str, str, int, int]]) -> ArithmeticRun:
    sides: list[list[tuple[str, str]]] = [[]]
    numbers: list[tuple[int, int]] = []
    operators = 0
    previous = ""
    for kind, text, s, e in tokens:
        if kind == "ws":
            continue
        if kind == "eq":
            sides.append([])
        else:
            sides[-1].append((kind, text))
        if kind == "num":
            numbers.append((s, e))
        elif kind == "op" and previous in ("num", "rp"):
            operators += 1
        previous = kind
    values = tuple(_Parser(side).parse() if side else None for side in sides)
    return ArithmeticRun(tokens[0][2], tokens[-1][3], values, tuple(numbers), operators)


def arithmetic_runs(text: str) -> list[ArithmeticRun]:
    """Every calculation in `text`, in order (see the module docstring); a lone number is a run
    too (an expression with no operator)."""
    text = _TIMES_X.sub(lambda m: m.group(1) + "*" + m.group(2), text)  # same length
    runs: list[ArithmeticRun] = []
    for m in _RUN.finditer(text):
        runs.extend(_split_runs(text, m.start(), m.end()))
    return runs
