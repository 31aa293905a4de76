"""The math family's shared base for single-turn tasks with one numeric answer.

`NumericSource` is an `EnvSource` whose subclasses only draw a `NumericTask` (question, exact
`Fraction` answer, canonical key) from the numpy generator; it validates the common knob
(`format_coef`), keeps the train/test split (the task's key, prefixed by the family's name, hashed
by `llm_gym.authoring.split_of`; tasks are rejection-sampled until one of the source's split
comes up) and declares the scripted cases every numeric env shares. Episodes are
`NumericEnv`s: `envs_catalog.math.arithmetic.MathEnv`s whose answer contract is a
`llm_gym.grading.NumberAnswer` built from the task -- its relative tolerance, the variable the
answer may be given to ("x = 5" is 5), the unit asked (other units of its dimension converted
exactly) or the nouns the answer may carry ("12 stickers") -- read under the one answer policy
(`llm_gym.grading.POLICY`). `instruction(...)` is the brief answer instruction the sources append
to their questions, generated from the same contract class.
"""

from __future__ import annotations

from abc import abstractmethod
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from envs_catalog.math.arithmetic import MathEnv
from llm_gym.authoring import check_float, split_of
from llm_gym.env_source import EnvSource
from llm_gym.grading import NumberAnswer
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

MAX_DRAWS = 10_000

FORMAT_COEF_DOC = "penalty for a response that is not a single number, 0-1"


class NumericTask(NamedTuple):
    question: str
    answer: Fraction
    key: str  # canonical identity of the task, hashed for the split
    reference: str  # the reference answer as written (parse_number reads it back to `answer`)
    variable: str | None = None  # "x": a leading "x =" belongs to the answer
    unit: str | None = None  # the unit asked (a `llm_gym.grading.units` symbol), if any
    nouns: tuple[str, ...] = ()  # words the answer may carry ("stickers")


def instruction(name: str = "the number", tolerance: float = 0.0) -> str:
    """The brief answer instruction of a numeric task ("Reply with just the number."), from the
    contract its env grades with."""
    return NumberAnswer(name=name, tolerance=tolerance).instruction(brief=True)


def format_fraction(value: Fraction, decimals: bool = True) -> str:
    """`value` written exactly: an integer, a terminating decimal (if `decimals`), else `a/b`."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    if decimals:
        d = value.denominator
        twos = fives = 0
        while d % 2 == 0:
            d //= 2
            twos += 1
        while d % 5 == 0:
            d //= 5
            fives += 1
        if d == 1:
            places = max(twos, fives)
            scaled = abs(value) * 10**places
            whole, frac = divmod(int(scaled), 10**places)
            return f"{'-' if value < 0 else ''}{whole}.{frac:0{places}d}"
    return f"{value.numerator}/{value.denominator}"


class NumericEnv(MathEnv):
    """One question with a numeric answer. Metrics as `MathEnv`'s (`format`, `correct`,
    `parse_error`, `too_long`). With `tolerance` > 0 a number within `tolerance * |answer|` of
    the answer is correct (an exact answer is always correct)."""

    def __init__(self, renderer: Renderer, task: NumericTask, *, format_coef: float = 0.1,
                 tolerance: float = 0.0) -> None:
        super().__init__(renderer, task.question, task.answer, format_coef=format_coef)
        self.task = task
        self.reference = task.reference
        self.tolerance = Fraction(repr(float(tolerance)))

    @property
    def answer_contract(self) -> NumberAnswer:
        """A `NumberAnswer` with the task's tolerance, variable, unit and nouns."""
        if self._contract is None:
            self._contract = NumberAnswer(
                context=self.question, variable=self.task.variable, tolerance=self.tolerance,
                unit=self.task.unit, nouns=self.task.nouns, max_chars=self.max_chars)
        return self._contract

    def get_reference_answer(self) -> str:
        return self.reference

    def wrong_answer(self) -> str:
        """A number that is certainly not correct (outside any tolerance), for scripted cases."""
        shift = 1 + (abs(self.answer) * 10 * self.tolerance if self.tolerance else 0)
        return format_fraction(self.answer + Fraction(shift).limit_denominator(1000) + 1)


class NumericSource(EnvSource):
    """Base of the math family's numeric sources. Subclasses set `card`, `DEFAULTS` (which must
    include `format_coef`), `SPLIT_PREFIX`, implement `configure(knobs)` (validate their own
    knobs) and `draw_task(rng)`."""

    DEFAULTS: dict[str, Any] = {"format_coef": 0.1}
    SPLIT_PREFIX = "numeric"
    tolerance: float = 0.0

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.format_coef = check_float("format_coef", own.pop("format_coef"), 0.0, 1.0)
        self.configure(own)

    @abstractmethod
    def configure(self, knobs: dict[str, Any]) -> None:
        """Validate and store the subclass's knobs (a one-line ValueError/TypeError naming one)."""

    @abstractmethod
    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        """One task drawn from `rng`, from either split (`make_env` keeps the source's)."""

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def split_key(self, task: NumericTask) -> str:
        return f"{self.SPLIT_PREFIX}:{task.key}"

    def draw_split_task(self, rng: np.random.Generator) -> NumericTask:
        for _ in range(MAX_DRAWS):
            task = self.draw_task(rng)
            if split_of(self.split_key(task)) == self.split:
                return task
        raise RuntimeError(
            f"{type(self).__name__}: no {self.split!r} task found in {MAX_DRAWS} draws; widen "
            "the knobs"
        )

    def make_env(self, rng: np.random.Generator) -> NumericEnv:
        task = self.draw_split_task(rng)
        return NumericEnv(self.renderer, task, format_coef=self.format_coef,
                          tolerance=self.tolerance)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference bare, boxed and on an 'Answer:' line score 1. Adversarial (none
        scores above 0): a hedge, a second answer line, a wrong number, prose without a number,
        a correction, the answer buried in a list of wrong ones, two boxes, the question echoed
        back, an empty reply."""
        lo = -1.0
        return [
            ScriptedCase("bare answer", "gold", lambda env, ob: env.reference, 1.0, 1.0),
            ScriptedCase("boxed answer", "gold",
                         lambda env, ob: f"\\boxed{{{env.reference}}}", 1.0, 1.0),
            ScriptedCase("answer line", "gold",
                         lambda env, ob: f"Let me work it out.\nAnswer: {env.reference}", 1.0, 1.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{env.reference} or {env.wrong_answer()}", lo, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer: {env.reference}\nAnswer: {env.wrong_answer()}",
                         lo, 0.0),
            ScriptedCase("wrong number", "adversarial", lambda env, ob: env.wrong_answer(), lo, 0.0),
            ScriptedCase("no number", "adversarial", lambda env, ob: "I am not sure.", lo, 0.0),
            ScriptedCase("correction", "adversarial",
                         lambda env, ob: f"{env.reference}, actually {env.wrong_answer()}", lo, 0.0),
            ScriptedCase("buried in a list", "adversarial",
                         lambda env, ob: f"{env.wrong_answer()}, {env.reference}, 0", lo, 0.0),
            ScriptedCase("two boxes", "adversarial",
                         lambda env, ob: f"\\boxed{{{env.wrong_answer()}}} \\boxed{{{env.reference}}}",
                         lo, 0.0),
            ScriptedCase("question echoed", "adversarial", lambda env, ob: env.get_question(),
                         lo, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", lo, 0.0),
        ]


def knob_docs(docs: dict[str, str], defaults: dict[str, Any]) -> dict[str, str]:
    """The card's `difficulty_knobs`: each doc with its default appended."""
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in docs.items()}


def check_kinds(name: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A non-empty list/tuple of distinct names from `allowed` (a comma-separated string also
    works: "gcd,lcm"), else a one-line error naming the knob."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be a non-empty list of names from {list(allowed)}, got {value!r}")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise ValueError(f"{name} must be names from {list(allowed)}, got unknown {bad!r}")
    return tuple(dict.fromkeys(value))
