"""Linear equations: `LinearEquationSource` (`llm/LinearEquation-v0`).

One unknown (default): "Solve for x: 3x + 4 = 19." with an integer solution (or, with
`solution="fraction"`, a fractional one such as 7/3); `both_sides=True` puts an x-term on each
side ("5x - 2 = 2x + 7"). Two unknowns (`unknowns=2`): a 2x2 system with a unique solution, and
the question asks for one of the variables ("... What is y?"), so the answer stays one number.
Graded by `llm_gym.grading.grade_numeric` (exact; a leading "x =" naming the asked variable is
allowed). Split key: the equation text.
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

_DOCS = {
    "unknowns": "1 (one equation in x) or 2 (a 2x2 system in x and y; the question asks for one)",
    "max_coef": "largest absolute coefficient, 2-50",
    "max_solution": "largest absolute value of an integer solution (of the numerator of a "
    "fractional one), 1-100",
    "solution": "'integer' or 'fraction' (non-integer rational solutions)",
    "both_sides": "one unknown only: whether the unknown appears on both sides",
    "format_coef": FORMAT_COEF_DOC,
}


def term(coef: int, var: str, first: bool) -> str:
    """`coef*var` as written in an equation: "3x", "-x", " + 2y", " - y"; "" for 0."""
    if coef == 0:
        return ""
    body = (str(abs(coef)) if abs(coef) != 1 or not var else "") + var
    if first:
        return ("-" if coef < 0 else "") + body
    return (" - " if coef < 0 else " + ") + body


def side(coefs: list[tuple[int, str]]) -> str:
    """A sum of terms ("3x - 2y + 4"); "0" if every coefficient is 0."""
    out = ""
    for coef, var in coefs:
        out += term(coef, var, first=not out)
    return out or "0"


class LinearEquationSource(NumericSource):
    """Linear equations in one or two unknowns; knobs in `DEFAULTS` (see the card)."""

    DEFAULTS: dict[str, Any] = {
        "unknowns": 1, "max_coef": 9, "max_solution": 10, "solution": "integer",
        "both_sides": False, "format_coef": 0.1,
    }
    SPLIT_PREFIX = "linear"
    card = EnvCard(
        id="llm/LinearEquation-v0",
        family="math",
        description=(
            "Solve a linear equation, generated offline: by default one unknown with an integer "
            "solution, e.g. 'Solve for x: 3x + 4 = 19.' -> '5'. Knobs put the unknown on both "
            "sides, make the solution a fraction, or ask for one variable of a 2x2 system. The "
            "answer is one exact number ('5', 'x = 5'; a fraction a/b for fractional solutions), "
            "graded exactly, read under the one answer policy (llm_gym.grading.POLICY)."
        ),
        answer_contract="an exact number (NumberAnswer, variable x or y): '5', 'x = 5', a/b",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the solution, 0 for a wrong number, "
            "-format_coef (0.1) when no single number can be read (empty, malformed, conflicting, "
            "over 4096 characters, invalid UTF-8); a reply not ended by the renderer's end of "
            "turn loses format_coef but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Solve for x: 3x + 4 = 19. Reply with just the value of x."},
            {"role": "assistant", "content": "5"},
        ],
    )

    def configure(self, knobs: dict[str, Any]) -> None:
        self.unknowns = check_int("unknowns", knobs["unknowns"], 1, 2)
        self.max_coef = check_int("max_coef", knobs["max_coef"], 2, 50)
        self.max_solution = check_int("max_solution", knobs["max_solution"], 1, 100)
        self.solution = check_choice("solution", knobs["solution"], ("integer", "fraction"))
        self.both_sides = check_choice("both_sides", knobs["both_sides"], (True, False))

    def _coef(self, rng: np.random.Generator, nonzero: bool = True) -> int:
        while True:
            c = int(rng.integers(-self.max_coef, self.max_coef + 1))
            if c or not nonzero:
                return c

    def _value(self, rng: np.random.Generator) -> Fraction:
        m = self.max_solution
        if self.solution == "integer":
            return Fraction(int(rng.integers(-m, m + 1)))
        while True:
            den = int(rng.integers(2, 10))
            value = Fraction(int(rng.integers(-m, m + 1)), den)
            if value.denominator != 1:
                return value

    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        return self._one(rng) if self.unknowns == 1 else self._system(rng)

    def _one(self, rng: np.random.Generator) -> NumericTask:
        # a*x + b = c*x + d. Integer solutions: draw x, then b, d from it. Fractional ones: draw
        # the integer coefficients and keep a draw whose solution (d - b)/(a - c) is not whole,
        # so the coefficients stay as small as for integer tasks.
        m = self.max_coef
        while True:
            a = self._coef(rng)
            c = self._coef(rng) if self.both_sides else 0
            if a == c:
                continue
            b = int(rng.integers(-3 * m, 3 * m + 1))
            if self.solution == "integer":
                x = self._value(rng)
                d = b + int((a - c) * x)
                break
            d = int(rng.integers(-3 * m, 3 * m + 1))
            x = Fraction(d - b, a - c)
            if x.denominator != 1 and abs(x.numerator) <= self.max_solution:
                break
        left = side([(a, "x"), (b, "")])
        right = side([(c, "x"), (d, "")]) if self.both_sides else str(d)
        equation = f"{left} = {right}"
        question = f"Solve for x: {equation}. {instruction('the value of x')}"
        return NumericTask(question, x, equation, format_fraction(x, decimals=False), "x")

    def _system(self, rng: np.random.Generator) -> NumericTask:
        m = self.max_coef
        ask = "x" if rng.random() < 0.5 else "y"
        while True:
            a, b, c, d = (self._coef(rng, nonzero=False) for _ in range(4))
            det = a * d - b * c
            if det == 0 or not (a or b) or not (c or d):
                continue
            if self.solution == "integer":
                x, y = self._value(rng), self._value(rng)
                e, f = int(a * x + b * y), int(c * x + d * y)
                break
            e, f = (int(v) for v in rng.integers(-3 * m, 3 * m + 1, size=2))
            x, y = Fraction(e * d - b * f, det), Fraction(a * f - e * c, det)
            value = x if ask == "x" else y
            if value.denominator != 1 and abs(value.numerator) <= self.max_solution:
                break
        system = f"{side([(a, 'x'), (b, 'y')])} = {e}, {side([(c, 'x'), (d, 'y')])} = {f}"
        question = f"Solve the system {system}. What is {ask}? {instruction()}"
        value = x if ask == "x" else y
        return NumericTask(question, value, f"{system}?{ask}", format_fraction(value, decimals=False),
                           ask)

    def scripted_cases(self) -> list[ScriptedCase]:
        """The shared numeric cases, plus: 'x = 5' (the asked variable) scores 1; giving both
        candidate values as 'x = 5 or x = 6' and substituting nothing (echoing the equation)
        score no credit."""
        return super().scripted_cases() + [
            ScriptedCase("variable = value", "gold",
                         lambda env, ob: f"{env.task.variable} = {env.reference}", 1.0, 1.0),
            ScriptedCase("hedge with the variable", "adversarial",
                         lambda env, ob: f"{env.task.variable} = {env.reference} or "
                         f"{env.task.variable} = {env.wrong_answer()}", -1.0, 0.0),
            ScriptedCase("equation echoed", "adversarial",
                         lambda env, ob: env.task.key.split("?")[0], -1.0, 0.0),
        ]
