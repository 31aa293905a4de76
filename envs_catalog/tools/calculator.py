"""`llm/Calculator-v0`: arithmetic word problems with a `calculator` tool.

The calculator parses its expression with `ast` and evaluates it exactly with `Fraction`s; nothing
is ever `eval`-ed. It accepts numbers, + - * / // % ** (also × ÷ ^), unary signs and parentheses,
and refuses anything else, and oversized work (expressions over 500 characters, exponents beyond
±64, results over 1000 digits) -- a refusal is an `Error: ...` tool message, never an exception.
Knobs, episode, answer contract and reward: `envs_catalog.tools.base`.
"""

from __future__ import annotations

import ast
import operator
from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.tools.base import (
    COMMON_KNOBS, REWARD_MEANING, FinalNumberAnswer, GoldCall, ToolTaskSource, scripted_tool_cases,
)
from llm_gym.authoring import check_int, split_of
from llm_gym.env_source import EnvCard
from llm_gym.scripted import ScriptedCase
from llm_gym.tools import tool

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 64
MAX_RESULT_DIGITS = 1000

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def _check_size(value: Fraction) -> Fraction:
    if max(abs(value.numerator), value.denominator).bit_length() > MAX_RESULT_DIGITS * 3.33:
        raise ValueError(f"result has more than {MAX_RESULT_DIGITS} digits")
    return value


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(node.value) if isinstance(node.value, int) else Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponents must be whole numbers within ±{MAX_EXPONENT}")
            if left == 0 and right < 0:
                raise ZeroDivisionError("0 cannot be raised to a negative power")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ZeroDivisionError("division by zero")
        return _check_size(Fraction(_BINARY[type(node.op)](left, right)))
    raise ValueError(f"unsupported syntax {type(node).__name__}: use numbers, + - * / // % ** and parentheses")


def format_number(value: Fraction) -> str:
    """An integer as digits; another fraction as `p/q (≈ decimal)`."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} (≈ {float(value):.12g})"


def calculate(expression: str) -> Fraction:
    """The exact value of an arithmetic `expression` (ValueError / ZeroDivisionError otherwise)."""
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError("expression must be a non-empty string")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.replace("×", "*").replace("÷", "/").replace("^", "**").replace("−", "-")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {expression!r}: {exc.msg}") from None
    return _evaluate(tree)


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return its value.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 4 / 5".
    """
    return format_number(calculate(expression))


SYSTEM_PROMPT = (
    "Solve the problem. You may use the calculator tool. When you are done, "
    + FinalNumberAnswer(name=ToolTaskSource.ANSWER_NAME).instruction()
)

DEFAULTS: dict[str, Any] = {"digits": 3}


def _problem(rng: np.random.Generator, digits: int) -> tuple[str, str, int, str]:
    """(template key, question, answer, the calculator expression that solves it) for one word
    problem with `digits`-digit numbers."""
    lo, hi = 10 ** (digits - 1), 10 ** digits
    n = lambda: int(rng.integers(max(lo, 2), hi))  # noqa: E731
    kind = int(rng.integers(5))
    if kind == 0:
        a, b = n(), n()
        c = int(rng.integers(1, a * b))
        q = (f"A warehouse holds {a} crates with {b} bottles in each crate. {c} bottles are shipped "
             "out. How many bottles are left in the warehouse?")
        return f"crates:{a}:{b}:{c}", q, a * b - c, f"{a} * {b} - {c}"
    if kind == 1:
        k = n()
        total = k * n() + int(rng.integers(0, k))
        q = (f"A farmer packs {total} eggs into cartons that hold {k} eggs each. How many cartons "
             "can be filled completely?")
        return f"eggs:{total}:{k}", q, total // k, f"{total} // {k}"
    if kind == 2:
        s1, h1, s2, h2 = n(), int(rng.integers(2, 13)), n(), int(rng.integers(2, 13))
        q = (f"A train runs at {s1} km per hour for {h1} hours, then at {s2} km per hour for {h2} "
             "hours. How many kilometres does it travel in total?")
        return f"train:{s1}:{h1}:{s2}:{h2}", q, s1 * h1 + s2 * h2, f"{s1} * {h1} + {s2} * {h2}"
    if kind == 3:
        a, b, c, d = n(), n(), n(), n()
        return (f"expr3:{a}:{b}:{c}:{d}", f"What is {a} × {b} + {c} × {d}?", a * b + c * d,
                f"{a} * {b} + {c} * {d}")
    a, b, c, d = n(), n(), n(), n()
    return (f"expr4:{a}:{b}:{c}:{d}", f"What is ({a} + {b}) × {c} − {d}?", (a + b) * c - d,
            f"({a} + {b}) * {c} - {d}")


class CalculatorSource(ToolTaskSource):
    """Word problems for `llm/Calculator-v0`; knobs: `digits` + the family's (see the card)."""

    OWN_DEFAULTS = DEFAULTS
    system_prompt = SYSTEM_PROMPT
    card = EnvCard(
        id="llm/Calculator-v0",
        family="tools",
        description=(
            "Multi-turn arithmetic word problems (bottles in crates, eggs in cartons, distance "
            "travelled, mixed expressions) with numbers of `digits` digits. The model may call a "
            "`calculator` tool -- an exact, ast-based evaluator of + - * / // % ** and parentheses, "
            "never eval -- in Hermes/Qwen <tool_call> blocks; each result comes back as a tool turn. "
            "A turn without tool calls is the final answer: an integer (in kilometres, or with the "
            "noun, when the question asks 'How many ...'), read under the one answer policy "
            "(llm_gym.grading.POLICY: the last 'Answer:' line, \\boxed{} or 'the answer is' "
            "sentence, else the last line stating a number, parsed completely; a second declared "
            "value voids the credit; the tool results are never read as the answer). Each tool "
            "call costs tool_call_cost, so an agent learns to call when it helps."
        ),
        answer_contract="integer (FinalNumberAnswer, an IntegerAnswer) in the last turn without a tool call; "
        "the system prompt asks for 'the final number only, with no tool call'",
        multi_turn=True,
        reward_range=(-0.15, 1.0),
        reward_meaning=REWARD_MEANING,
        difficulty_knobs={
            "digits": "digits of the numbers in a problem, 1-6 (default 3)", **COMMON_KNOBS,
        },
        data_source="generated on the fly from the seed (5 templates, no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "What is 123 × 456 + 789 × 12?"},
            {"role": "assistant", "content": '<tool_call>\n{"name": "calculator", "arguments": '
             '{"expression": "123 * 456 + 789 * 12"}}\n</tool_call>'},
            {"role": "tool", "content": "65556"},
            {"role": "assistant", "content": "65556"},
        ],
    )

    def configure(self, *, digits: int) -> None:
        self.digits = check_int("digits", digits, 1, 6)

    def tools(self) -> list:
        return [calculator]

    def draw_solved(self, rng: np.random.Generator) -> tuple[str, int, GoldCall]:
        """(question, answer, the calculator call that solves it)."""
        for _ in range(1000):
            key, question, answer, expression = _problem(rng, self.digits)
            if split_of(f"calc:{key}") == self.split:
                break
        return question, answer, ("calculator", {"expression": expression})

    def draw_task(self, rng: np.random.Generator) -> tuple[str, int]:
        question, answer, _ = self.draw_solved(rng)
        return question, answer

    def scripted_cases(self) -> list[ScriptedCase]:
        """The family's table (`base.scripted_tool_cases`): gold calls the calculator with the
        problem's expression and answers what it printed (1 - tool_call_cost), or answers
        directly (1); adversarial: no tool under require_tool, a refused expression then the
        answer, a hedge, two answers, the answer among wrong ones, a wrong number, an injection,
        prose, an empty answer, a malformed call, tool spam past max_tool_calls."""
        return scripted_tool_cases(self, ("calculator", {"expression": "1 +"}))
