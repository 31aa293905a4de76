"""The math family beyond arithmetic: Fractions, LinearEquation, WordProblem, NumberTheory,
UnitConversion, Algebra. Scripted gold/adversarial cases on both splits and renderers, solvers
that recompute answers from the question text, split disjointness, determinism, knob errors, and
the Algebra reader's own unit tests."""

from __future__ import annotations

import asyncio
import math
import re
from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

from envs_catalog.math import algebra
from envs_catalog.math._numeric import format_fraction
from envs_catalog.math.algebra import AlgebraSource, grade_answer, read_answer
from envs_catalog.math.fractions_env import FractionsSource
from envs_catalog.math.linear import LinearEquationSource
from envs_catalog.math.number_theory import NumberTheorySource
from envs_catalog.math.units import UNITS, UnitConversionSource
from envs_catalog.math.word_problems import WordProblemSource
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
from llm_gym.scripted import reply_tokens, run_scripted_case

TOK = load_tokenizer()
RENDERERS = {name: get_renderer(name, TOK) for name in ("chatml", "role_colon")}
CHATML = RENDERERS["chatml"]

SOURCES = [FractionsSource, LinearEquationSource, WordProblemSource, NumberTheorySource,
           UnitConversionSource, AlgebraSource]
# harder settings that must keep every promise too
VARIANTS = [
    (FractionsSource, {"operators": "+-*/", "num_operands": 3, "decimals": True,
                       "allow_negative": True}),
    (LinearEquationSource, {"unknowns": 2, "solution": "fraction"}),
    (LinearEquationSource, {"both_sides": True, "solution": "fraction"}),
    (WordProblemSource, {"steps": 4, "max_value": 200}),
    (NumberTheorySource, {"kinds": "powmod,next_prime", "max_value": 100000}),
    (UnitConversionSource, {"systems": "mixed", "tolerance": 0.0}),
    (UnitConversionSource, {"systems": "imperial", "max_value": 1000}),
    (AlgebraSource, {"leading": "any"}),
    (AlgebraSource, {"kinds": ["roots"], "irrational": True}),
]


def play(env, text, renderer=CHATML):
    async def go():
        await env.initial_observation()
        return await env.step(reply_tokens(renderer, text))

    return asyncio.run(go())


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("cls", SOURCES, ids=lambda c: c.card.id)
def test_scripted_cases_keep_their_promises(cls, split, renderer):
    src = cls(renderer=RENDERERS[renderer], split=split)
    cases = src.scripted_cases()
    assert any(c.kind == "gold" for c in cases) and sum(c.kind == "adversarial" for c in cases) >= 6
    for case in cases:
        for seed in range(2):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)
            if case.kind == "adversarial":
                assert outcome.episode_return <= 0.0


@pytest.mark.parametrize("cls,knobs", VARIANTS, ids=lambda v: str(v))
def test_scripted_cases_hold_under_harder_knobs(cls, knobs):
    for split in ("train", "test"):
        src = cls(renderer=CHATML, split=split, **knobs)
        for case in src.scripted_cases():
            for seed in range(2):
                outcome = run_scripted_case(src, case, seed)
                assert outcome.ok, (case.name, seed, outcome.episode_return, outcome.replies)


@pytest.mark.parametrize("cls,knobs", [(c, {}) for c in SOURCES] + VARIANTS, ids=lambda v: str(v))
def test_reference_scores_one_and_garbage_gets_no_credit(cls, knobs):
    src = cls(renderer=CHATML, **knobs)
    assert src.reward_range == (-0.1, 1.0)
    for seed in range(8):
        env = src.make_env(np.random.default_rng(seed))
        result = play(env, env.get_reference_response())
        assert result.reward == 1.0 and result.metrics["correct"] == 1.0, env.get_question()
        assert result.metrics["parse_error"] == 0.0
    env = src.make_env(np.random.default_rng(0))
    reference = env.get_reference_response()
    for bad, metric in [(reference + " " + "x" * 5000, "too_long"), ("", "parse_error"),
                        (reference[:1] + "\ufffd" + reference[1:], "parse_error")]:
        env = src.make_env(np.random.default_rng(0))
        result = play(env, bad)
        assert result.reward == pytest.approx(-0.1) and result.metrics[metric] == 1.0
    env = src.make_env(np.random.default_rng(0))

    async def oov():  # out-of-vocabulary ids and a truncated reply: defined rewards, no crash
        await env.initial_observation()
        return await env.step(TOK.encode(reference) + [10**9, -5])

    result = asyncio.run(oov())
    assert result.metrics["format"] == 0.0 and -0.1 <= result.reward <= 0.9


@pytest.mark.parametrize("cls", SOURCES, ids=lambda c: c.card.id)
def test_same_seed_same_task_and_seeds_vary(cls):
    src = cls(renderer=CHATML)
    question = lambda seed: src.make_env(np.random.default_rng(seed)).get_question()  # noqa: E731
    assert [question(s) for s in range(5)] == [question(s) for s in range(5)]
    assert len({question(s) for s in range(60)}) >= 30


def _key(src, env):
    task = env.task
    return f"algebra:{task.key}" if isinstance(src, AlgebraSource) else src.split_key(task)


@pytest.mark.parametrize("cls,knobs", [(c, {}) for c in SOURCES] + VARIANTS[:3], ids=lambda v: str(v))
def test_train_and_test_splits_are_disjoint(cls, knobs):
    keys = {}
    for split, n in (("train", 200), ("test", 80)):
        src = cls(renderer=CHATML, split=split, **knobs)
        keys[split] = {_key(src, src.make_env(np.random.default_rng(s))) for s in range(n)}
        assert all(split_of(k) == split for k in keys[split])
    assert keys["train"] and keys["test"] and not keys["train"] & keys["test"]


# --- solvers: recompute each answer from the question text ----------------------------------------
def _fraction_expr(question: str) -> Fraction:
    expr = question.split("Compute ", 1)[1].split(". Reply", 1)[0]
    expr = expr.replace("×", "*").replace("÷", "/")
    expr = re.sub(r"(\d+(?:\.\d+)?)(/(\d+))?", lambda m: f"Fraction('{m.group(0)}')"
                  if m.group(2) and " " not in m.group(0) else f"Fraction('{m.group(1)}')", expr)
    return eval(expr, {"Fraction": Fraction})  # noqa: S307 - test oracle on generated text


def test_fractions_answers_match_an_independent_evaluation():
    src = FractionsSource(renderer=CHATML, operators="+-*/", num_operands=4, decimals=True,
                          allow_negative=True, max_denominator=30)
    for seed in range(200):
        env = src.make_env(np.random.default_rng(seed))
        assert _fraction_expr(env.get_question()) == env.answer, env.get_question()
    non_negative = FractionsSource(renderer=CHATML, operators="-", num_operands=3)
    assert all(non_negative.make_env(np.random.default_rng(s)).answer >= 0 for s in range(100))


def _linear(text: str) -> dict[str, Fraction]:
    """Coefficients of a linear expression such as "3x - y + 4" ({"x": 3, "y": -1, "": 4})."""
    out: dict[str, Fraction] = {"x": Fraction(0), "y": Fraction(0), "": Fraction(0)}
    for sign, coef, var in re.findall(r"([+-]?)\s*(\d*)([xy]?)", text.replace(" ", "")):
        if not coef and not var:
            continue
        out[var] += (-1 if sign == "-" else 1) * Fraction(int(coef) if coef else 1)
    return out


def test_linear_answers_solve_the_equations():
    for knobs in ({}, {"both_sides": True}, {"solution": "fraction", "both_sides": True}):
        src = LinearEquationSource(renderer=CHATML, **knobs)
        for seed in range(60):
            env = src.make_env(np.random.default_rng(seed))
            equation = env.get_question().split(": ", 1)[1].split(". Reply", 1)[0]
            left, right = map(_linear, equation.split(" = "))
            x = env.answer  # substitute the answer: both sides agree, and only for it
            assert left["x"] * x + left[""] == right["x"] * x + right[""]
            assert left["x"] != right["x"]
            if knobs.get("solution") == "fraction":
                assert env.answer.denominator != 1
    for solution_kind in ("integer", "fraction"):
        src = LinearEquationSource(renderer=CHATML, unknowns=2, solution=solution_kind)
        for seed in range(60):
            env = src.make_env(np.random.default_rng(seed))
            q = env.get_question()
            system = q.split("system ", 1)[1].split(". What", 1)[0]
            (l1, r1), (l2, r2) = [tuple(map(_linear, part.split(" = "))) for part in system.split(", ")]
            det = l1["x"] * l2["y"] - l1["y"] * l2["x"]  # Cramer's rule
            x = (r1[""] * l2["y"] - l1["y"] * r2[""]) / det
            y = (l1["x"] * r2[""] - r1[""] * l2["x"]) / det
            asked = re.search(r"What is ([xy])\?", q).group(1)
            assert (x if asked == "x" else y) == env.answer
            assert (env.answer.denominator == 1) == (solution_kind == "integer")


def test_linear_accepts_the_asked_variable_only():
    env = LinearEquationSource(renderer=CHATML).make_env(np.random.default_rng(1))
    assert play(env, f"x = {env.reference}").reward == 1.0
    env = LinearEquationSource(renderer=CHATML).make_env(np.random.default_rng(1))
    assert play(env, f"Answer: x = {env.reference}").reward == 1.0
    for bad in (f"y = {env.reference}", f"x == {env.reference}", f"2x = {2 * env.answer}",
                f"x = {env.reference}, x = {env.answer + 1}"):
        env = LinearEquationSource(renderer=CHATML).make_env(np.random.default_rng(1))
        assert play(env, bad).reward <= 0.0, bad


def test_number_theory_answers_match_brute_force():
    src = NumberTheorySource(renderer=CHATML, max_value=300)
    seen = set()
    for seed in range(300):
        env = src.make_env(np.random.default_rng(seed))
        q, answer = env.get_question(), int(env.answer)
        nums = [int(n) for n in re.findall(r"\d+", q)]
        if q.startswith("What is gcd"):
            a, b = nums
            expected = max(d for d in range(1, min(a, b) + 1) if a % d == 0 and b % d == 0)
        elif q.startswith("What is lcm"):
            a, b = nums
            expected = next(m for m in range(max(a, b), a * b + 1) if m % a == 0 and m % b == 0)
        elif "^" in q:
            a, k, m = nums
            expected = (a**k) % m
        elif "mod" in q:
            a, m = nums[:2]
            expected = a - m * (a // m)
        elif "prime" in q:
            expected = next(k for k in range(nums[0] + 1, 2 * nums[0] + 3)
                            if all(k % d for d in range(2, k)))
        else:
            expected = sum(1 for d in range(1, nums[0] + 1) if nums[0] % d == 0)
        assert answer == expected, q
        seen.add(q.split()[2])
    assert len(seen) >= 5  # every kind came up
    only = NumberTheorySource(renderer=CHATML, kinds=["divisors"])
    assert all("divisors" in only.make_env(np.random.default_rng(s)).get_question() for s in range(20))


def test_unit_factors_are_the_exact_definitions():
    size = lambda dim, unit: UNITS[dim][unit][0]  # noqa: E731
    assert size("length", "mi") / size("length", "km") == Fraction("1.609344")
    assert size("length", "ft") == Fraction("0.3048") and size("length", "yd") == Fraction("0.9144")
    assert size("mass", "lb") / size("mass", "g") == Fraction("453.59237")
    assert size("mass", "oz") / size("mass", "g") == Fraction("28.349523125")
    assert size("volume", "gal") == Fraction("3.785411784")
    assert size("volume", "cup") / size("volume", "mL") == Fraction("236.5882365")
    assert size("time", "week") / size("time", "h") == 168


def test_unit_conversion_tolerance_is_relative_and_stated():
    src = UnitConversionSource(renderer=CHATML, systems="mixed", tolerance=0.01)
    for seed in range(20):
        env = src.make_env(np.random.default_rng(seed))
        assert "within 1%" in env.get_question()
        near, far = env.answer * Fraction(1005, 1000), env.answer * Fraction(102, 100)
        assert play(env, format_fraction(near, decimals=False)).reward == 1.0
        env = src.make_env(np.random.default_rng(seed))
        assert play(env, format_fraction(far, decimals=False)).reward == 0.0
        env = src.make_env(np.random.default_rng(seed))  # two close values: still a conflict
        assert play(env, f"{format_fraction(near, False)} or {env.reference}").reward < 0
    exact = UnitConversionSource(renderer=CHATML, systems="mixed", tolerance=0.0)
    env = exact.make_env(np.random.default_rng(3))
    assert play(env, format_fraction(env.answer * Fraction(10001, 10000), False)).reward == 0.0


_NUM = re.compile(r"\d+")


def _solve_word_problem(q: str) -> int:
    """An independent reading of every template's sentences."""
    sentences = [s.strip() for s in re.split(r"(?<=[.?])\s+", q) if s.strip()]
    n = lambda s: [int(v) for v in _NUM.findall(s)]  # noqa: E731
    if " buys " in q and "dollars each" in q:
        total = sum(int(c) * int(p) for c, p in re.findall(r"(\d+) \w+ at (\d+) dollars each", q))
        note = re.search(r"(\d+)-dollar note", q)
        return int(note.group(1)) - total if note else total
    if "km per hour" in q:
        if "route is" in q:
            return n(q.split("route is")[1])[0] - sum(
                int(s) * int(h) for s, h in re.findall(r"at (\d+) km per hour for (\d+) hours", q))
        return sum(int(s) * int(h) for s, h in re.findall(r"at (\d+) km per hour for (\d+) hours", q))
    count = 0
    for s in sentences:
        v = n(s)
        if " rows of " in s and "with" in s:
            count = v[0] * v[1]
        elif "more rows of" in s:
            count += v[0] * v[1]
        elif " has " in s:
            count = v[0]
        elif "finds" in s or "more" in s and "planted" in s:
            count += v[0]
        elif "gives" in s or "picked" in s:
            count -= v[0]
        elif "packs" in s:
            count += v[0] * v[1]
        elif "shares" in s:
            count //= v[0]
    return count


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_word_problem_answers_match_an_independent_solver(steps):
    src = WordProblemSource(renderer=CHATML, steps=steps, max_value=50)
    templates = set()
    for seed in range(120):
        env = src.make_env(np.random.default_rng(seed))
        q = env.get_question()
        assert env.answer >= 0 and env.answer.denominator == 1
        assert _solve_word_problem(q) == env.answer, q
        templates.add(env.task.key.split(":")[0])
    assert templates == {"inventory", "shopping", "travel", "groups"}


def test_word_problem_steps_make_longer_stories():
    lengths = {}
    for steps in (1, 4):
        src = WordProblemSource(renderer=CHATML, steps=steps)
        lengths[steps] = np.mean([len(_NUM.findall(src.make_env(np.random.default_rng(s)).get_question()))
                                  for s in range(60)])
    assert lengths[4] > lengths[1] + 2


def _quadratic(text: str) -> tuple[int, int, int]:
    """(A, B, C) of "2x^2 - x - 6" or of a product "(2x + 3)(x - 2)" / "(x + 2)^2"."""
    text = text.replace(" ", "")
    factors = re.findall(r"\((\d*)x([+-]\d+)\)", text)
    if factors:
        if text.endswith("^2"):
            factors = factors * 2
        (a, b), (c, d) = [(int(f or 1), int(g)) for f, g in factors]
        return a * c, a * d + b * c, b * d
    coefs = {2: 0, 1: 0, 0: 0}
    for sign, coef, var, power in re.findall(r"([+-]?)(\d*)(x?)(\^2)?", text):
        if coef or var:
            k = 2 if power else 1 if var else 0
            coefs[k] += (-1 if sign == "-" else 1) * int(coef or 1)
    return coefs[2], coefs[1], coefs[0]


def test_algebra_gold_is_consistent():
    src = AlgebraSource(renderer=CHATML, leading="any")
    irr = AlgebraSource(renderer=CHATML, kinds=["roots"], irrational=True)
    kinds = set()
    for seed in range(80):
        for s in (src, irr):
            task = s.make_env(np.random.default_rng(seed)).task
            kinds.add(task.kind)
            A, B, C = _quadratic(task.echo.split(" = ")[0])
            if task.kind == "roots" and "sqrt" in task.gold[0]:
                p, q = map(int, re.fullmatch(r"(-?\d+)\+\\sqrt\{(\d+)\}", task.gold[0]).groups())
                assert (A, B, C) == (1, -2 * p, p * p - q) and math.isqrt(q) ** 2 != q
            elif task.kind == "roots":
                roots = [Fraction(g) for g in task.gold]
                assert len(set(roots)) == 2 and all(A * r * r + B * r + C == 0 for r in roots)
            else:
                assert _quadratic(task.gold[0]) == (A, B, C)
    assert kinds == {"expand", "factor", "roots"}


# --- the Algebra reader ----------------------------------------------------------------------------
@pytest.mark.parametrize("text,kind,n", [
    ("x^2 - x - 6", "expand", 2), ("\\boxed{x^{2} - x - 6}", "expand", 2),
    ("$2 \\cdot x^2 - 5x - 12$", "expand", 2), ("The final answer is x^2 - x - 6.", "expand", 2),
    ("I expand it term by term.\nAnswer: $x^2-x-6$", "expand", 2), ("x²−x−6", "expand", 2),
    ("(x+2)(x-3) = x^2+2x-3x-6\nAnswer: \\boxed{x^2 - x - 6}", "expand", 2),
    ("Answer: x^2 - x - 6\nFinal answer: $x^2-x-6$", "expand", 2),
    ("(x + 2)(x - 3)", "factor", 2), ("\\boxed{\\left(x+2\\right)\\left(x-3\\right)}", "factor", 2),
    ("(x-3)*(x+2)", "factor", 2), ("(x + 2)^2", "factor", 2), ("-2, 3", "roots", 2),
    ("x = -2, x = 3", "roots", 2), ("x_1 = 3 and x_2 = -2", "roots", 2),
    ("\\boxed{\\{-2, 3\\}}", "roots", 2), ("\\frac{3}{2}, -1", "roots", 2),
    ("1 + \\sqrt{2}, 1 - \\sqrt{2}", "roots", 2), ("1+√2, 1-√2", "roots", 2),
])
def test_reader_accepts_the_asked_forms(text, kind, n):
    assert read_answer(text, kind, n).ok, read_answer(text, kind, n)


_TRICK_GOLD = {"expand": ("x^2-x-6",), "factor": ("(x+2)(x-3)",), "roots": ("-2", "3")}


@pytest.mark.parametrize("text,kind,status", [
    ("(x + 2)(x - 3)", "expand", "wrong_form"),  # the question echoed back
    ("x^2 - 3x + 2x - 6", "expand", "wrong_form"),  # equal but not simplified
    ("x(x - 1) - 6", "expand", "wrong_form"),
    ("x^2 - x - 6, (x+2)(x-3)", "expand", "wrong_form"),
    ("x^2 - x - 6\nx^2 + x - 6", "expand", "wrong"),  # no label: the last line is read
    ("x^2 - x - 6 or x^2 + x - 6", "expand", "hedged"),
    ("x^2 - x - 6, actually x^2 + x - 6", "expand", "hedged"),
    ("\\boxed{x^2 - x - 6} \\boxed{x^2 + x - 6}", "expand", "conflicting"),
    ("Answer: x^2 - x - 6\nAnswer: x^2 + x - 6", "expand", "conflicting"),
    ("\\boxed{x^2 - x - 6", "expand", "malformed"),
    ("Answer: x^2 + x - 6\n\\boxed{x^2 - x - 6}", "expand", "conflicting"),
    ("x^{12} - x - 6", "expand", "wrong_form"), ("(x + 2)^{99999}", "factor", "wrong_form"),
    ("x^2 - x - 6000000000", "expand", "wrong_form"),
    ("$\\phantom{x^2-x-6}x^2+x-6$", "expand", "unsupported_latex"),
    ("\\boxed{\\color{white}{x^2}x^2-x-6}", "expand", "unsupported_latex"),
    ("\\boxed{\\neq x^2-x-6}", "expand", "unsupported_latex"),
    ("x^2 - x - 6.0", "expand", "wrong_form"),
    ("x^2 \u2212 x \u2212 6 \u202e", "expand", "unsupported_text"),
    ("x^2 - x - 6", "factor", "wrong_form"),  # the question echoed back
    ("(x^2 - x - 6)", "factor", "wrong_form"),
    ("(x+2)(x-3) + 0", "factor", "wrong_form"),
    ("x^2 - x - 6 = 0", "roots", "wrong_form"),
    ("-2, 3, 4", "roots", "wrong_form"),
    ("x = -2", "roots", "wrong_form"),
    ("\\pm 3", "roots", "hedged"),
    ("-2.0, 3", "roots", "wrong_form"),
    ("", "roots", "empty"), ("\\boxed{}", "roots", "empty"),
    ("x" * 5000, "roots", "too_long"), ("-2, \ufffd3", "roots", "invalid_text"),
])
def test_reader_refuses_tricks(text, kind, status):
    """None of these earns credit. `status` names the trick; under the one answer policy most
    read as no answer in the asked form ("malformed"), two lines without a label as the last
    one (a wrong answer), two declarations as "conflicting"."""
    assert not grade_answer(text, kind, _TRICK_GOLD[kind]).correct, read_answer(text, kind, 2)
    reading = read_answer(text, kind, 2)
    if status in ("conflicting", "too_long", "invalid_text", "wrong"):
        assert reading.status == ("ok" if status == "wrong" else status), reading
    else:
        assert not reading.ok, reading


def test_grading_is_equivalence_in_any_order_and_exact():
    gold = ("-2", "3")
    assert grade_answer("3, -2", "roots", gold).correct
    assert not grade_answer("3, 3", "roots", gold).correct
    assert not grade_answer("-2, \\frac{3000001}{1000000}", "roots", gold).correct
    assert grade_answer("(x-3)(x+2)", "factor", ("(x+2)(x-3)",)).correct
    assert not grade_answer("(x-3)(x-2)", "factor", ("(x+2)(x-3)",)).correct
    irr = ("1+\\sqrt{8}", "1-\\sqrt{8}")
    assert grade_answer("1 - 2\\sqrt{2}, 1 + 2\\sqrt{2}", "roots", irr).correct
    assert not grade_answer("1 - \\sqrt{7}, 1 + \\sqrt{8}", "roots", irr).correct


def test_a_hung_equivalence_check_times_out_without_credit(monkeypatch):
    def hang(gold, candidate):
        while True:
            pass

    monkeypatch.setattr(algebra, "equivalent", hang)
    grade = grade_answer("x^2 - x - 6", "expand", ("x^2-x-6",), timeout_s=0.5)
    assert grade.status == "grader_timeout" and not grade.correct and not grade.format_ok


# --- knobs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,knobs,pattern", [
    (FractionsSource, {"max_denominator": 1}, r"max_denominator must be in \[2, 100\]"),
    (FractionsSource, {"operators": "+%"}, r"operators must be"),
    (FractionsSource, {"decimals": 1}, r"decimals must be one of"),
    (LinearEquationSource, {"unknowns": 3}, r"unknowns must be in \[1, 2\]"),
    (LinearEquationSource, {"solution": "real"}, r"solution must be one of"),
    (LinearEquationSource, {"max_coef": "9"}, r"max_coef must be an integer"),
    (WordProblemSource, {"steps": 5}, r"steps must be in \[1, 4\]"),
    (WordProblemSource, {"templates": ["poetry"]}, r"templates must be names from"),
    (WordProblemSource, {"templates": []}, r"templates must be a non-empty list"),
    (NumberTheorySource, {"kinds": ["gcd", "factorial"]}, r"kinds must be names from .*factorial"),
    (NumberTheorySource, {"max_value": 5}, r"max_value must be in \[10, 1000000\]"),
    (UnitConversionSource, {"systems": "nautical"}, r"systems must be one of"),
    (UnitConversionSource, {"tolerance": 0.5}, r"tolerance must be in \[0.0, 0.05\]"),
    (UnitConversionSource, {"dimensions": ["speed"]}, r"dimensions must be names from"),
    (AlgebraSource, {"leading": "cubic"}, r"leading must be one of"),
    (AlgebraSource, {"kinds": "integrate"}, r"kinds must be names from"),
    (AlgebraSource, {"max_coef": 1}, r"max_coef must be in \[2, 20\]"),
    (AlgebraSource, {"format_coef": -1}, r"format_coef must be in"),
    (FractionsSource, {"max_denominatr": 9}, r"unexpected keyword argument 'max_denominatr'"),
])
def test_bad_knobs_are_named(cls, knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        cls(renderer=CHATML, **knobs)


@pytest.mark.parametrize("cls", SOURCES, ids=lambda c: c.card.id)
def test_cards_describe_the_registered_defaults(cls):
    card = cls.card
    assert card.family == "math" and not card.multi_turn and card.reward_range == (-0.1, 1.0)
    defaults = getattr(cls, "DEFAULTS")
    assert set(card.difficulty_knobs) == set(defaults)
    assert all(f"(default {defaults[k]!r})" in doc for k, doc in card.difficulty_knobs.items())
    question, answer = card.example_episode[0]["content"], card.example_episode[-1]["content"]
    # the example is graded correct (its question worked out by hand here)
    if cls is AlgebraSource:
        assert grade_answer(answer, "expand", ("x^2-x-6",)).correct and "(x + 2)(x - 3)" in question
    else:
        expected = {
            FractionsSource: Fraction(1, 2) + Fraction(2, 3), LinearEquationSource: Fraction(5),
            WordProblemSource: Fraction(12), NumberTheorySource: Fraction(math.gcd(84, 36)),
            UnitConversionSource: Fraction(3000),
        }[cls]
        assert Fraction(answer) == expected


@pytest.mark.parametrize("env_id", ["llm/Math-v0", "llm/Fractions-v0", "llm/LinearEquation-v0",
                                    "llm/UnitConversion-v0", "llm/WordProblem-v0", "llm/Algebra-v0"])
def test_the_generated_attack_suite_finds_nothing(env_id):
    """The generated suite (llm_gym.checks.attacks) on two tasks: every reply built to earn
    credit earns it, every reply built not to does not."""
    from llm_gym.checks.attacks import audit_source

    source = gym.make(env_id).unwrapped.source
    cls, renderer = type(source), source.renderer
    report = audit_source(lambda knobs: cls(renderer=renderer, **knobs), [0, 1], per_seed=120)
    assert report.runs >= 400, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings[:5]
