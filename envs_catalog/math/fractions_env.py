"""Exact fraction and decimal arithmetic: `FractionsSource` (`llm/Fractions-v0`).

A task is an expression over proper or improper fractions (and, with `decimals=True`, short
decimals such as 0.25) joined by +, -, × and ÷ with the usual precedence, e.g. "1/2 + 2/3 = ?".
The answer is exact: a fraction a/b (reduced or not: 4/6 is 2/3), an integer, or a terminating
decimal, read by `llm_gym.grading.grade_numeric` into a `Fraction` and compared exactly (so 0.67
is not 2/3). Split key: the expression (operands sorted when every operator is + or ×).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.math._numeric import (
    instruction,
    FORMAT_COEF_DOC,
    NumericSource,
    NumericTask,
    format_fraction,
    knob_docs,
)
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.scripted import ScriptedCase

OPERATORS = "+-*/"
_SHOWN = {"+": "+", "-": "-", "*": "×", "/": "÷"}

_DOCS = {
    "max_denominator": "largest denominator of an operand, 2-100",
    "num_operands": "operands per expression, 2-5",
    "operators": "non-empty subset of '+-*/' (shown as + - × ÷), drawn per position; × and ÷ "
    "bind tighter",
    "decimals": "whether an operand may be a short decimal (0.25, 1.5) instead of a fraction",
    "allow_negative": "whether the answer may be negative (if false such tasks are redrawn)",
    "format_coef": FORMAT_COEF_DOC,
}


def evaluate(values: list[Fraction], ops: str) -> Fraction:
    """`values[0] ops[0] values[1] ...` with × and ÷ binding tighter than + and -."""
    total, sign, term = Fraction(0), 1, values[0]
    for op, v in zip(ops, values[1:]):
        if op == "*":
            term *= v
        elif op == "/":
            term /= v
        else:
            total += sign * term
            sign, term = (1 if op == "+" else -1), v
    return total + sign * term


class FractionsSource(NumericSource):
    """Fraction/decimal arithmetic; knobs in `DEFAULTS` (see the card)."""

    DEFAULTS: dict[str, Any] = {
        "max_denominator": 9, "num_operands": 2, "operators": "+-", "decimals": False,
        "allow_negative": False, "format_coef": 0.1,
    }
    SPLIT_PREFIX = "fractions"
    card = EnvCard(
        id="llm/Fractions-v0",
        family="math",
        description=(
            "Exact arithmetic on fractions (and, with decimals=True, short decimals), fully "
            "offline: by default two fractions with denominators up to 9 to add or subtract, "
            "e.g. 'Compute 1/2 + 2/3.' -> '7/6'. Knobs add ×/÷ (usual precedence), more operands, "
            "larger denominators and negative answers. The answer is graded exactly: a fraction "
            "a/b or \\frac{a}{b} (it need not be in lowest terms), a mixed number, an integer or a "
            "terminating decimal, read under the one answer policy (llm_gym.grading.POLICY); a "
            "rounded decimal is another number."
        ),
        answer_contract="an exact number (NumberAnswer): a/b, \\frac{a}{b}, an integer or a terminating decimal",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the exact value, 0 for a wrong number, "
            "-format_coef (0.1) when no single number can be read (empty, malformed, conflicting, "
            "over 4096 characters, invalid UTF-8); a reply not ended by the renderer's end of "
            "turn loses format_coef but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Compute 1/2 + 2/3. Reply with just the exact answer "
             "as a fraction a/b, an integer or a decimal."},
            {"role": "assistant", "content": "7/6"},
        ],
    )

    def configure(self, knobs: dict[str, Any]) -> None:
        self.max_denominator = check_int("max_denominator", knobs["max_denominator"], 2, 100)
        self.num_operands = check_int("num_operands", knobs["num_operands"], 2, 5)
        ops = knobs["operators"]
        if not isinstance(ops, str) or not ops or any(o not in OPERATORS for o in ops):
            raise ValueError(
                f"operators must be a non-empty string of characters from {OPERATORS!r}, got {ops!r}"
            )
        self.operators = "".join(dict.fromkeys(ops))
        self.decimals = check_choice("decimals", knobs["decimals"], (True, False))
        self.allow_negative = check_choice("allow_negative", knobs["allow_negative"], (True, False))

    def _operand(self, rng: np.random.Generator) -> tuple[Fraction, str]:
        if self.decimals and rng.random() < 0.5:
            hundredths = int(rng.choice([5, 10, 20, 25, 50, 75, 125, 150, 175, 250]))
            value = Fraction(hundredths, 100)
            return value, format_fraction(value)
        den = int(rng.integers(2, self.max_denominator + 1))
        num = int(rng.integers(1, 2 * den))  # proper or improper, never zero
        return Fraction(num, den), f"{num}/{den}"

    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        for _ in range(1000):
            operands = [self._operand(rng) for _ in range(self.num_operands)]
            ops = "".join(
                self.operators[int(i)]
                for i in rng.integers(0, len(self.operators), size=self.num_operands - 1)
            )
            answer = evaluate([v for v, _ in operands], ops)
            if answer < 0 and not self.allow_negative:
                continue
            texts = [t for _, t in operands]
            key_texts = sorted(texts) if len(set(ops)) == 1 and ops[0] in "+*" else texts
            key = key_texts[0] + "".join(op + t for op, t in zip(ops, key_texts[1:]))
            shown = texts[0] + "".join(f" {_SHOWN[op]} {t}" for op, t in zip(ops, texts[1:]))
            question = (
                f"Compute {shown}. "
                + instruction("the exact answer as a fraction a/b, an integer or a decimal")
            )
            return NumericTask(question, answer, key, format_fraction(answer, decimals=False))
        raise RuntimeError("FractionsSource: no non-negative task in 1000 draws")  # pragma: no cover

    def scripted_cases(self) -> list[ScriptedCase]:
        """The shared numeric cases, plus: an unreduced fraction (4/6 for 2/3) and the exact
        decimal score 1; a decimal rounded to two places gets no credit."""

        def unreduced(env, ob):
            a = env.answer
            return f"{2 * a.numerator}/{2 * a.denominator}"

        def rounded(env, ob):  # a decimal close to, but not equal to, a non-terminating answer
            a = env.answer
            text = f"{float(a):.2f}"
            return env.wrong_answer() if Fraction(text) == a else text

        return super().scripted_cases() + [
            ScriptedCase("unreduced fraction", "gold", unreduced, 1.0, 1.0),
            ScriptedCase("exact decimal where it terminates", "gold",
                         lambda env, ob: format_fraction(env.answer), 1.0, 1.0),
            ScriptedCase("rounded decimal", "adversarial", rounded, -1.0, 0.0),
        ]
