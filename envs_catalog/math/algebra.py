"""Symbolic answers, graded with math-verify: `AlgebraSource` (`llm/Algebra-v0`).

Three kinds of question about a quadratic with integer coefficients (knob `kinds`): `expand` a
product of two linear factors ("Expand (x + 2)(x - 3)." -> "x^2 - x - 6"), `factor` a quadratic
into linear factors ("Factor x^2 - x - 6." -> "(x + 2)(x - 3)"), and `roots` of a quadratic
equation ("Solve x^2 - x - 6 = 0." -> "-2, 3"; fractional roots with `leading="any"`, roots
p ± √q with `irrational=True`).

A reply is read by `AlgebraAnswer`, the env's answer contract, under the one answer policy
(`llm_gym.grading.POLICY`: the last `Answer:` line, `\\boxed{}` or "the answer is" sentence, else
the last line stating an expression, parsed completely; a second declared answer that reads
differently is `conflicting`; nothing else in the reply is read), and then judged by math-verify:

1. **Plain form.** `$`, `\\(..\\)`, `\\left`/`\\right`, spacing commands and a trailing period are
   dropped, `\\cdot`/`\\times` (and ·, ×) read as `*`, `\\dfrac`/`\\tfrac` as `\\frac`, √ as
   `\\sqrt`. Any other LaTeX command (`\\phantom`, `\\color`, `\\pm`, ...) makes the slot
   not an answer.
2. **The asked form**, in full: `expand` - a sum of integer multiples of powers of x, each power
   once (so "x^2 - 3x + 2x - 6", an unexpanded product and the question echoed back are
   refused); `factor` - an optional integer times parenthesised linear factors with integer
   coefficients (so the expanded quadratic echoed back is refused); `roots` - exactly as many
   values as there are roots, separated by commas, semicolons or "and" ("x = 2", "x_1 = 2"
   allowed), each an integer, a fraction (a/b or \\frac{a}{b}) or p ± q√r, none containing x.
   No decimals anywhere; a word in the slot ("or", "maybe") makes it no expression.
3. **Equivalence.** math-verify's `verify(parse(gold), parse(candidate))` (gold first), for the
   whole candidate or root by root (any order). Its own timeouts use `signal.alarm`, which only
   works on the main thread, so they are off (`None`): the env's grading runs through
   `llm_gym.grading.bounded` (ProblemEnv's `grader_timeout_s`), and `grade_answer` bounds a
   standalone call the same way.

Reward: `format_coef * (format_ok - 1) + correct`, with format_ok meaning steps 1-5 passed.
Split key: the kind and the polynomial's coefficients.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.math._numeric import check_kinds, knob_docs
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.checks.attacks.writers import Form
from llm_gym.grading import MAX_RESPONSE_CHARS, AnswerContract
from llm_gym.grading.bounded import acall_bounded, call_bounded
from llm_gym.renderers import Renderer, get_text_content
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra
from llm_gym.scripted import ScriptedCase

KINDS = ("expand", "factor", "roots")
MAX_DRAWS = 10_000
GRADER_TIMEOUT_S = 5.0

# --- the strict reader ----------------------------------------------------------------------------
_SYMBOLS = str.maketrans({"−": "-", "–": "-", "·": "*", "×": "*", "⋅": "*", "²": "^2",
                          "³": "^3", "√": "\\sqrt"})
_DROP = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|\\quad|\\qquad")
_COMMAND = re.compile(r"\\[A-Za-z]+|\\.")
_INT = r"[0-9]+"
_POW = r"(?:\^(?:[0-9]|\{[0-9]\}))"
_TERM = rf"(?:(?:{_INT}\*?)?x{_POW}?|{_INT})"
_EXPANDED = re.compile(rf"[+-]?{_TERM}(?:[+-]{_TERM})*")
_LINEAR = rf"(?:[+-]?(?:{_INT}\*?)?x[+-]{_INT}|[+-]?{_INT}[+-](?:{_INT}\*?)?x)"
_FACTORED = re.compile(rf"[+-]?(?:{_INT}\*?)?(?:\({_LINEAR}\){_POW}?\*?)+")
_SQRT = r"\\sqrt(?:[0-9]|\{[0-9]+\})"
_ROOT_VALUE = re.compile(
    rf"[+-]?{_INT}(?:/{_INT})?|[+-]?\\frac\{{{_INT}\}}\{{{_INT}\}}"
    rf"|[+-]?(?:{_INT}[+-])?(?:{_INT}\*?)?{_SQRT}"
)
_ROOT_PREFIX = re.compile(r"x(?:_[0-9]|_\{[0-9]\})?=")
_ROOT_SPLIT = re.compile(r",|;|and")  # spaces are gone by then: "3andx_2=-2"


@dataclass(frozen=True)
class Reading:
    """`status` "ok" with the candidate (one expression, or the root values), or why not."""

    status: str
    parts: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _plain(candidate: str) -> str | None:
    """The candidate with markup dropped and spaces removed, or None if LaTeX beyond \\frac and
    \\sqrt remains."""
    s = candidate.strip()
    for _ in range(4):
        before = s
        s = s.strip().strip("$`").strip()
        if len(s) > 4 and s[:2] in ("**", "__") and s[-2:] == s[:2]:  # markdown bold
            s = s[2:-2]
        if s.endswith("."):
            s = s[:-1]
        for a, b in (("\\(", "\\)"), ("\\[", "\\]")):
            if s.startswith(a) and s.endswith(b):
                s = s[len(a):-len(b)]
        if s == before:
            break
    s = _DROP.sub("", s).replace("\\cdot", "*").replace("\\times", "*")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\s+", "", s)
    if s.startswith("\\{") and s.endswith("\\}"):
        s = s[2:-2]
    if any(c not in ("\\frac", "\\sqrt") for c in _COMMAND.findall(s)):
        return None
    return s


def _form(candidate: str, kind: str, num_roots: int) -> Reading:
    """One candidate read in the form `kind` asks for (steps 1-2 of the module docstring)."""
    plain = _plain(candidate.translate(_SYMBOLS))
    if plain is None:
        return Reading("unsupported_latex")
    if not plain:
        return Reading("empty")
    if re.search(r"[0-9]{10}", plain):  # no such numbers here; keeps sympy's work small
        return Reading("wrong_form")
    if kind == "expand":
        if not _EXPANDED.fullmatch(plain):
            return Reading("wrong_form")
        powers = [_power(t) for t in re.split(r"(?<!\^)[+-]", plain) if t]
        if len(powers) != len(set(powers)):
            return Reading("wrong_form")
        return Reading("ok", (plain,))
    if kind == "factor":
        return Reading("ok", (plain,)) if _FACTORED.fullmatch(plain) else Reading("wrong_form")
    pieces = [_ROOT_PREFIX.sub("", p, count=1) for p in _ROOT_SPLIT.split(plain)]
    if len(pieces) != num_roots or not all(_ROOT_VALUE.fullmatch(p) for p in pieces):
        return Reading("wrong_form")
    return Reading("ok", tuple(sorted(pieces)))


class AlgebraAnswer(AnswerContract):
    """The env's answer contract: one expression (or the roots) in the form `kind` asks for.
    Values are tuples of the candidate's parts as written (one expression, or the sorted root
    values); `matches` is math-verify's equivalence with the gold parts."""

    kind = "algebra"
    placeholder = "expression"

    def __init__(self, *, task_kind: str, num_roots: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if task_kind not in KINDS:
            raise ValueError(f"AlgebraAnswer task_kind must be one of {list(KINDS)}, got {task_kind!r}")
        self.task_kind, self.num_roots = task_kind, num_roots

    def parse(self, text: str) -> tuple[str, ...] | None:
        reading = _form(text, self.task_kind, self.num_roots)
        return reading.parts if reading.ok else None

    def mentions(self, text: str) -> bool:
        return "x" in text or any(c.isdigit() for c in text)

    def matches(self, value: Any, gold: Any) -> bool:
        if self.task_kind != "roots":
            return equivalent(gold[0], value[0])
        left = list(gold)
        for part in value:  # a matching, root by root, in any order
            match = next((g for g in left if equivalent(g, part)), None)
            if match is None:
                return False
            left.remove(match)
        return True

    def format(self, value: Any) -> str:
        return ", ".join(value)

    def describe(self) -> str:
        return {"expand": "the expanded polynomial", "factor": "the factored form",
                "roots": f"the {self.num_roots} roots separated by a comma"}[self.task_kind]

    # -- writers for the generated attack suite (llm_gym.checks.attacks): from the gold's parts --
    def attack_forms(self, gold: tuple[str, ...], rng: Any) -> list[Form]:
        text = ", ".join(gold)
        out = [Form("as written", text, True), Form("spaced", re.sub(r"([+-])", r" \1 ", text).strip(), True),
               Form("latex", f"${text}$", True)]
        if self.task_kind == "roots":
            out.append(Form("reversed", ", ".join(reversed(gold)), True))
            out.append(Form("named", ", ".join(f"x_{i} = {g}" for i, g in enumerate(gold, 1)), True))
            out.append(Form("and", " and ".join(gold), True))
        elif self.task_kind == "factor":
            factors = re.findall(r"\([^()]*\)", gold[0])
            if len(factors) == 2 and gold[0] == "".join(factors):
                out.append(Form("factors swapped", factors[1] + factors[0], True))
                out.append(Form("times sign", f"{factors[0]} \\cdot {factors[1]}", True))
        return out

    def attack_others(self, gold: tuple[str, ...], rng: Any) -> list[tuple[str, ...]]:
        last = gold[-1]
        digits = [i for i, c in enumerate(last) if c.isdigit()]
        if not digits:
            return []
        i = digits[-1]
        bumped = last[:i] + str((int(last[i]) + 1) % 10) + last[i + 1:]
        return [gold[:-1] + (bumped,)]


def _instruction(kind: str, name: str) -> str:
    """A question's answer instruction, from the contract its env grades with."""
    return AlgebraAnswer(task_kind=kind, name=name).instruction(brief=True)


def read_answer(text: str, kind: str, num_roots: int = 2, *,
                max_chars: int = MAX_RESPONSE_CHARS) -> Reading:
    """The reply's declared answer in the form `kind` asks for (`AlgebraAnswer` under the one
    answer policy), or the reason there is none. Never raises on any `str`; cost is bounded by
    `max_chars`."""
    reading = AlgebraAnswer(task_kind=kind, num_roots=num_roots, max_chars=max_chars).read(text)
    return Reading("ok", reading.value) if reading.ok else Reading(reading.status)


def _power(term: str) -> int:
    if "x" not in term:
        return 0
    m = re.search(r"\^\{?([0-9]+)\}?", term)
    return int(m.group(1)) if m else 1


# --- equivalence (math-verify) ---------------------------------------------------------------------
@functools.cache
def _math_verify():
    import math_verify.grader
    import math_verify.parser

    # We bound every call ourselves (llm_gym.grading.bounded), so its "timeout is disabled"
    # warning is noise: mark it shown.
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    from math_verify import parse, verify

    return parse, verify


@functools.cache
def warm_up() -> None:
    """Import math-verify and run one check, once per process, outside any bound: its first
    call imports sympy and the LaTeX grammar (about a second or more). Inside a bounded call that
    import could be interrupted half-done, which would break later checks."""
    equivalent("\\frac{1}{2}+\\sqrt{2}x^{2}", "1/2+\\sqrt{2}*x^2")


def equivalent(gold: str, candidate: str) -> bool:
    """math-verify's judgement that `candidate` equals `gold` (LaTeX, no delimiters), with its
    signal-based timeouts off: call it under a bound (see the module docstring)."""
    parse, verify = _math_verify()
    # math-verify documents parsing_timeout=None (no signal-based timeout) but annotates it int.
    pred = parse(f"${candidate}$", parsing_timeout=None)  # pyright: ignore[reportArgumentType]
    if not pred:
        return False
    gold_parsed = parse(f"${gold}$", parsing_timeout=None)  # pyright: ignore[reportArgumentType]
    return bool(verify(gold_parsed, pred, timeout_seconds=None, float_rounding=12))


@dataclass(frozen=True)
class AlgebraGrade:
    correct: bool
    format_ok: bool
    status: str


def _grade(text: str, kind: str, gold: tuple[str, ...], max_chars: int, context: str = "") -> AlgebraGrade:
    contract = AlgebraAnswer(task_kind=kind, num_roots=len(gold), context=context, max_chars=max_chars)
    reading = contract.read(text)
    if not reading.ok:
        return AlgebraGrade(False, False, reading.status)
    return AlgebraGrade(contract.matches(reading.value, gold), True, "ok")


def grade_answer(text: str, kind: str, gold: tuple[str, ...], *, timeout_s: float = GRADER_TIMEOUT_S,
                 max_chars: int = MAX_RESPONSE_CHARS, context: str = "") -> AlgebraGrade:
    """Grade one reply against the gold expression (or roots), bounded by `timeout_s` through
    `llm_gym.grading.bounded.call_bounded`; a grader that runs out of time is no credit.
    `context`: the question's text (its words may name the answer in a lead-in)."""
    outcome = call_bounded(_grade, text, kind, gold, max_chars, context, timeout_s=timeout_s)
    if outcome.ok:
        return outcome.value
    return AlgebraGrade(False, False, "grader_timeout" if outcome.timed_out else "grader_error")


# --- tasks -----------------------------------------------------------------------------------------
def poly_text(a: int, b: int, c: int) -> str:
    """a x^2 + b x + c as written: "2x^2 - x - 6"."""
    out = ""
    for coef, mono in ((a, "x^2"), (b, "x"), (c, "")):
        if coef == 0:
            continue
        body = (str(abs(coef)) if abs(coef) != 1 or not mono else "") + mono
        sign = ("-" if coef < 0 else "") if not out else (" - " if coef < 0 else " + ")
        out += sign + body
    return out or "0"


def linear_text(a: int, b: int) -> str:
    """(a x + b) as written: "(2x - 3)"."""
    return "(" + (str(a) if a != 1 else "") + "x" + (" - " if b < 0 else " + ") + str(abs(b)) + ")"


@dataclass(frozen=True)
class AlgebraTask:
    kind: str
    question: str
    gold: tuple[str, ...]  # LaTeX: the expression, or each root
    reference: str  # the reference reply
    echo: str  # the question's own expression (the unsimplified thing the model must transform)
    key: str
    wrong: str  # a reply in the asked form that is certainly wrong (for scripted cases)


class AlgebraEnv(ProblemEnv):
    """One algebra question. Metrics: `format`, `correct` (ProblemEnv's), `parse_error`,
    `too_long`, and `grader_timeout` (only when grading ran out of time); `answer_status` in the
    logs.

    `step` grades the reply first, through `acall_bounded` (the event loop keeps running while a
    slow check finishes in a worker process), and caches the grade, so ProblemEnv's own
    `check_format`/`check_answer` (called unbounded: `grader_timeout_s=None`) only read it."""

    def __init__(self, renderer: Renderer, task: AlgebraTask, *, format_coef: float = 0.1,
                 max_chars: int = MAX_RESPONSE_CHARS, timeout_s: float = GRADER_TIMEOUT_S) -> None:
        super().__init__(renderer, format_coef=format_coef, grader_timeout_s=None)
        self.task = task
        self.reference = task.reference
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        self._graded: tuple[str, AlgebraGrade] | None = None

    def _grade_once(self, sample_str: str) -> AlgebraGrade:
        if self._graded is None or self._graded[0] != sample_str:  # not pre-graded by step
            self._graded = (sample_str, grade_answer(sample_str, self.task.kind, self.task.gold,
                                                     timeout_s=self.timeout_s,
                                                     max_chars=self.max_chars, context=self.task.question))
        return self._graded[1]

    @property
    def answer_contract(self) -> AlgebraAnswer:
        """The contract of this question (`AlgebraAnswer`, the task's text as context)."""
        return AlgebraAnswer(task_kind=self.task.kind, num_roots=len(self.task.gold),
                             context=self.task.question, max_chars=self.max_chars)

    @property
    def gold_answer(self) -> tuple[str, ...]:
        return self.task.gold

    def get_question(self) -> str:
        return self.task.question

    def check_format(self, sample_str: str) -> bool:
        return self._grade_once(sample_str).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return self._grade_once(sample_str).correct

    def get_reference_answer(self) -> str:
        return self.reference

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, _ = self.renderer.parse_response(action)
        content = get_text_content(message)
        outcome = await acall_bounded(_grade, content, self.task.kind, self.task.gold,
                                      self.max_chars, self.task.question, timeout_s=self.timeout_s)
        grade = outcome.value if outcome.ok else AlgebraGrade(
            False, False, "grader_timeout" if outcome.timed_out else "grader_error")
        self._graded = (content, grade)
        result = await super().step(action, extra=extra)
        result.metrics["parse_error"] = float(not grade.format_ok)
        result.metrics["too_long"] = float(grade.status == "too_long")
        if grade.status == "grader_timeout":
            result.metrics["grader_timeout"] = 1.0
        result.logs["answer_status"] = grade.status
        return result


_DOCS = {
    "kinds": f"which questions to ask, a non-empty list from {list(KINDS)}",
    "max_coef": "largest absolute constant in a linear factor (or root), 2-20",
    "leading": "'monic' (factors x + b) or 'any' (factors ax + b with a in 1-3, so roots may "
    "be fractions)",
    "irrational": "roots questions only: whether roots are p ± √q (then the quadratic is monic)",
    "format_coef": "penalty for a reply that is not one candidate in the asked form, 0-1",
}


class AlgebraSource(EnvSource):
    """Expand / factor / solve quadratics; knobs in `DEFAULTS` (see the card)."""

    DEFAULTS: dict[str, Any] = {
        "kinds": list(KINDS), "max_coef": 9, "leading": "monic", "irrational": False,
        "format_coef": 0.1,
    }
    card = EnvCard(
        id="llm/Algebra-v0",
        family="math",
        description=(
            "Symbolic answers about quadratics with integer coefficients, generated offline and "
            "graded with math-verify: expand a product of two linear factors ('Expand (x + 2)(x "
            "- 3).' -> 'x^2 - x - 6'), factor a quadratic, or give both roots of a quadratic "
            "equation (integers by default; fractions with leading='any', p ± √q with "
            "irrational=True). The answer is read under the one answer policy "
            "(llm_gym.grading.POLICY) and parsed completely in the asked form: an expanded "
            "polynomial with each power once, a product of linear factors, or exactly the "
            "roots - so echoing the question back, two expressions in one answer, '\\pm', "
            "decimals and LaTeX beyond \\frac/\\sqrt get no credit; then math-verify judges "
            "equivalence with the gold (gold first, its own timeouts off, the call bounded by "
            "llm_gym.grading.bounded)."
        ),
        answer_contract="an expression in the asked form (AlgebraAnswer): the expanded polynomial, the factored "
        "form or the roots, judged equivalent by math-verify",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for an equivalent answer in the asked form, "
            "0 for a well-formed wrong one, -format_coef (0.1) when no candidate in the asked "
            "form can be read (empty, hedged, several, wrong form, unsupported LaTeX, over "
            "4096 characters, invalid UTF-8) or grading ran past 5 s; a reply not ended by "
            "the renderer's end of turn loses format_coef but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed (no dataset); grader: math-verify "
        "(Apache-2.0)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Expand (x + 2)(x - 3). Reply with just the expanded "
             "polynomial, like x^2 + 4x - 5."},
            {"role": "assistant", "content": "x^2 - x - 6"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.kinds = check_kinds("kinds", own["kinds"], KINDS)
        self.max_coef = check_int("max_coef", own["max_coef"], 2, 20)
        self.leading = check_choice("leading", own["leading"], ("monic", "any"))
        self.irrational = check_choice("irrational", own["irrational"], (True, False))
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)
        warm_up()

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def _factor(self, rng: np.random.Generator) -> tuple[int, int]:
        while True:
            a = 1 if self.leading == "monic" else int(rng.integers(1, 4))
            b = int(rng.integers(-self.max_coef, self.max_coef + 1))
            if b and math.gcd(a, b) == 1:
                return a, b

    def draw_task(self, rng: np.random.Generator) -> AlgebraTask:
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        if kind == "roots" and self.irrational:
            p = int(rng.integers(-self.max_coef, self.max_coef + 1))
            while True:
                q = int(rng.integers(2, 4 * self.max_coef + 1))
                if all(q % (k * k) for k in range(2, math.isqrt(q) + 1)):  # square-free
                    break
            poly = poly_text(1, -2 * p, p * p - q)
            gold = (f"{p}+\\sqrt{{{q}}}", f"{p}-\\sqrt{{{q}}}")
            reference = (f"{p} + \\sqrt{{{q}}}, {p} - \\sqrt{{{q}}}" if p
                         else f"\\sqrt{{{q}}}, -\\sqrt{{{q}}}")
            question = f"Solve {poly} = 0. " + _instruction(
                "roots", "the two roots separated by a comma, in exact form like 1 + \\sqrt{3}, 1 - \\sqrt{3}")
            return AlgebraTask(kind, question, gold, reference, f"{poly} = 0",
                               f"roots:1,{-2 * p},{p * p - q}",
                               f"{p} + \\sqrt{{{q + 1}}}, {p} - \\sqrt{{{q}}}")
        while True:
            (a, b), (c, d) = self._factor(rng), self._factor(rng)
            if kind != "roots" or a * d != b * c:  # roots: two distinct roots
                break
        if (a, b) > (c, d):
            (a, b), (c, d) = (c, d), (a, b)
        A, B, C = a * c, a * d + b * c, b * d
        poly = poly_text(A, B, C)
        factored = linear_text(a, b) + linear_text(c, d) if (a, b) != (c, d) else linear_text(a, b) + "^2"
        key = f"{kind}:{A},{B},{C}"
        if kind == "expand":
            question = f"Expand {factored}. " + _instruction("expand", "the expanded polynomial, like x^2 + 4x - 5")
            return AlgebraTask(kind, question, (poly.replace(" ", ""),), poly, factored, key,
                               poly_text(A, B, C + 1))
        if kind == "factor":
            question = f"Factor {poly}. " + _instruction("factor", "the factored form, like (x + 1)(x - 4)")
            flipped = linear_text(a, -b) + (linear_text(c, d) if (a, b) != (c, d) else "^2")
            return AlgebraTask(kind, question, (factored.replace(" ", ""),), factored, poly, key,
                               flipped)
        roots = sorted({Fraction(-b, a), Fraction(-d, c)})
        gold = tuple(f"{r.numerator}/{r.denominator}" if r.denominator != 1 else str(r.numerator)
                     for r in roots)
        question = f"Solve {poly} = 0. " + _instruction(
            "roots", "the two roots separated by a comma, like -1, 4 (fractions as a/b)")
        shifted = roots[0] + 1
        wrong = ", ".join([f"{shifted.numerator}/{shifted.denominator}" if shifted.denominator != 1
                           else str(shifted.numerator), gold[1]])
        return AlgebraTask(kind, question, gold, ", ".join(gold), f"{poly} = 0", key, wrong)

    def make_env(self, rng: np.random.Generator) -> AlgebraEnv:
        for _ in range(MAX_DRAWS):
            task = self.draw_task(rng)
            if split_of(f"algebra:{task.key}") == self.split:
                return AlgebraEnv(self.renderer, task, format_coef=self.format_coef)
        raise RuntimeError(f"AlgebraSource: no {self.split!r} task in {MAX_DRAWS} draws; widen "
                           "the knobs")

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference, boxed, on an 'Answer:' line and in LaTeX (`$...$`, x^{2},
        \\cdot) score 1. Adversarial (no credit): the question echoed back, several expressions
        listed (the gold among them), an undeclared reply whose last line is wrong, a hedge in
        the answer, two boxes, a wrong answer in the right form,
        an unsimplified-but-equal form, LaTeX tricks (\\phantom, \\color, \\text, \\neq), an
        empty box and an empty reply."""
        lo = -1.0

        def latex(env, ob):
            s = env.reference.replace("x^2", "x^{2}")
            s = re.sub(r"(\d)x", r"\1 \\cdot x", s)
            return f"$\\boxed{{{s}}}$"

        def wrong(env, ob):
            return env.task.wrong

        def unsimplified(env, ob):
            t = env.task
            if t.kind == "expand":  # each power once is required: split the x term
                return t.reference + " + x - x"
            if t.kind == "factor":
                return f"1({t.reference}) + 0"
            return f"{t.gold[0]}, {t.gold[1]}, {t.gold[0]}"

        return [
            ScriptedCase("reference", "gold", lambda env, ob: env.reference, 1.0, 1.0),
            ScriptedCase("boxed", "gold", lambda env, ob: f"\\boxed{{{env.reference}}}", 1.0, 1.0),
            ScriptedCase("answer line", "gold",
                         lambda env, ob: f"Working it out step by step.\nAnswer: {env.reference}",
                         1.0, 1.0),
            ScriptedCase("latex form", "gold", latex, 1.0, 1.0),
            ScriptedCase("question echoed", "adversarial", lambda env, ob: env.task.echo, lo, 0.0),
            ScriptedCase("echo boxed", "adversarial",
                         lambda env, ob: f"\\boxed{{{env.task.echo}}}", lo, 0.0),
            ScriptedCase("several expressions", "adversarial",
                         lambda env, ob: f"{env.task.echo}, {env.reference}, {wrong(env, ob)}",
                         lo, 0.0),
            ScriptedCase("the right answer, then a wrong last line", "adversarial",
                         lambda env, ob: f"{env.reference}\n{wrong(env, ob)}", lo, 0.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{env.reference} or {wrong(env, ob)}", lo, 0.0),
            ScriptedCase("two boxes", "adversarial",
                         lambda env, ob: f"\\boxed{{{wrong(env, ob)}}} \\boxed{{{env.reference}}}",
                         lo, 0.0),
            ScriptedCase("answer line and box disagree", "adversarial",
                         lambda env, ob: f"Answer: {wrong(env, ob)}\n\\boxed{{{env.reference}}}",
                         lo, 0.0),
            ScriptedCase("wrong answer", "adversarial", wrong, lo, 0.0),
            ScriptedCase("unsimplified", "adversarial", unsimplified, lo, 0.0),
            ScriptedCase("phantom", "adversarial",
                         lambda env, ob: f"$\\phantom{{{env.reference}}}{wrong(env, ob)}$", lo, 0.0),
            ScriptedCase("color", "adversarial",
                         lambda env, ob: f"\\boxed{{\\color{{white}}{{{wrong(env, ob)}}}"
                         f"{env.reference}}}", lo, 0.0),
            ScriptedCase("text wrapper", "adversarial",
                         lambda env, ob: f"\\boxed{{\\text{{{env.reference} or not}}}}", lo, 0.0),
            ScriptedCase("not equal", "adversarial",
                         lambda env, ob: f"\\boxed{{\\neq {env.reference}}}", lo, 0.0),
            ScriptedCase("plus-minus", "adversarial",
                         lambda env, ob: f"\\boxed{{\\pm({env.reference})}}", lo, 0.0),
            ScriptedCase("empty box", "adversarial", lambda env, ob: "\\boxed{}", lo, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", lo, 0.0),
        ]
