"""`ArithmeticExpressionAnswer`: an arithmetic expression built from given numbers.

The value is the expression itself: its exact value and the numbers it uses. The slot must be
one expression in full -- integers, `+ - * /` (also `x`, `×`, `÷`, `·`, LaTeX `\\times`,
`\\div`, `\\cdot`), parentheses and brackets -- optionally followed by `= <its value>` ("5*2 =
10"). `matches` holds when the expression uses each given number at most as often as it is
given (`numbers`; all of them when `use_all`) and equals the target.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Sequence

from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.quantity import read_quantity, strip_decoration

__all__ = ["ArithmeticExpressionAnswer", "Expression"]

_ALLOWED = re.compile(r"[0-9+\-*/() \t]+")
_TEX = (("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("×", "*"), ("·", "*"), ("÷", "/"),
        ("\\left", ""), ("\\right", ""), ("[", "("), ("]", ")"), ("{", "("), ("}", ")"))
_TIMES_X = re.compile(r"(?<=[0-9)])[ \t]*[xX][ \t]*(?=[0-9(])")
_MAX_CHARS = 200


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its `text` (normalised), exact `value` and the `numbers` it uses."""

    text: str
    value: Fraction
    numbers: tuple[int, ...]


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _evaluate(node.operand)
        return v if isinstance(node.op, ast.UAdd) else -v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if b == 0:
            raise ZeroDivisionError
        return a / b
    raise ValueError("not arithmetic")


def parse_expression(text: str) -> Expression | None:
    """One arithmetic expression, the whole of `text`, or None."""
    s = strip_decoration(text)
    if not s or len(s) > _MAX_CHARS:
        return None
    for a, b in _TEX:
        s = s.replace(a, b)
    s = _TIMES_X.sub("*", s).strip()
    if not _ALLOWED.fullmatch(s) or "**" in s or "//" in s:
        return None
    try:
        tree = ast.parse(s, mode="eval")
        value = _evaluate(tree)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, MemoryError):
        return None
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    numbers = tuple(sorted(int(v) for v in constants if type(v) is int))
    if any(n < 0 for n in numbers):
        return None
    return Expression(s, value, numbers)


class ArithmeticExpressionAnswer(AnswerContract):
    """An expression over `numbers` that must equal `target` (see the module docstring)."""

    kind: ClassVar[str] = "expression"
    placeholder: ClassVar[str] = "expression"

    def __init__(self, *, numbers: Sequence[int], target: int | Fraction, use_all: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.numbers = tuple(numbers)
        self.target = Fraction(target)
        self.use_all = use_all

    def parse(self, text: str) -> Expression | None:
        s = strip_decoration(text)
        if "=" in s:
            left, _, right = s.rpartition("=")
            stated = read_quantity(strip_decoration(right))
            expr = parse_expression(left) if "=" not in left else None
            if expr is None or stated is None or stated.unit is not None or stated.value != expr.value:
                return None
            return expr
        return parse_expression(s)

    def mentions(self, text: str) -> bool:
        return any(c.isdigit() for c in text)

    def same(self, a: Any, b: Any) -> bool:
        return isinstance(a, Expression) and isinstance(b, Expression) and (a.value, a.numbers) == (b.value, b.numbers)

    def matches(self, value: Any, gold: Any) -> bool:
        if not isinstance(value, Expression) or value.value != self.target:
            return False
        used, given = Counter(value.numbers), Counter(self.numbers)
        if any(used[n] > given[n] for n in used):
            return False
        return not self.use_all or used == given

    def format(self, value: Any) -> str:
        return value.text if isinstance(value, Expression) else str(value)

    def describe(self) -> str:
        nums = " ".join(str(n) for n in self.numbers)
        rule = "every number exactly once" if self.use_all else "each number at most once"
        return f"an arithmetic expression (+ - * / and brackets) over {nums}, {rule}, equal to {self.target}"
