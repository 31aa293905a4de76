"""Countdown (`llm/Countdown-v0`): reach a target from given numbers with + - * / and brackets.

A task is a few numbers and a target, e.g. numbers 3 7 8 and target 29; any expression that
uses each given number at most once (`use_all=True`: exactly once) and equals the target wins:
"Answer: 3*7+8". Generation builds a random expression over a subset of the numbers first (its
intermediate values integers), so every task is solvable; that witness is the reference answer.

The answer contract is `llm_gym.grading.ArithmeticExpressionAnswer` over the task's numbers and
target (`CountdownEnv.answer_contract`), read under the one answer policy
(`llm_gym.grading.POLICY`): the last `Answer:` line (or `\\boxed{}`, or "the answer is ..."
sentence; else the last line stating an expression) is parsed completely as one expression --
integers, + - * / ("x", "×", "÷" and LaTeX `\\times`, `\\div` read as * and /), brackets --
optionally followed by "= <its value>"; a second declared expression with another value or other
numbers voids the credit. The parsed expression is then checked by `check_expression`, which
never evaluates Python: the expression is parsed with `ast` and only `BinOp` nodes with
`Add`/`Sub`/`Mult`/`Div` over plain integer literals are accepted (no unary minus, no `**`, no
`//`, no names or calls). The literals must be a sub-multiset of the given numbers (checked
before any arithmetic, so an attempt to build a huge number fails first); then the expression is
evaluated in exact `Fraction` arithmetic (fractional intermediate values are allowed). Rule
statuses: `illegal_operator`, `number_not_given`, `number_reused`, `unused_number` (use_all),
`division_by_zero`, `wrong_value`; reading statuses are `llm_gym.grading.Reading`'s.

Held-out split: the canonical key (sorted numbers and target) is hashed by
`llm_gym.authoring.split_of`; draws are rejection-sampled into the source's split.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from fractions import Fraction
from typing import Any, cast

import numpy as np

from envs_catalog.puzzles._grid import OK, PuzzleEnv
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import ArithmeticExpressionAnswer
from llm_gym.grading.contracts.expression import Expression
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

_MAX_EXPR_CHARS = 200
_CHARS = re.compile(r"[0-9+\-*/() \t]+(?:=[ \t]*[0-9]+[ \t]*)?")
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_MAX_DRAWS = 20_000
# The prompt's answer instruction, from the contract every CountdownEnv grades with.
_INSTRUCTION = ArithmeticExpressionAnswer(numbers=(), target=0).instruction()

_KNOB_DOCS = {
    "num_numbers": "how many numbers are given, 2-6",
    "max_number": "the numbers are drawn uniformly from 1..max_number, 2-100",
    "min_target": "smallest target, 1-10000",
    "max_target": "largest target, min_target-10000",
    "use_all": "whether every number must be used exactly once (else at most once)",
    "format_coef": "penalty for a reply with no readable expression, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in _KNOB_DOCS.items()}


class _Illegal(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _literals(node: ast.AST, out: list[int]) -> None:
    """Collect the integer literals of a whitelisted tree, or raise `_Illegal`."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        out.append(node.value)
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        _literals(node.left, out)
        _literals(node.right, out)
    else:
        raise _Illegal("illegal_operator")


def _evaluate(node: ast.AST) -> Fraction:
    """Exact value of a tree `_literals` accepted (its literals already checked)."""
    if isinstance(node, ast.Constant):
        return Fraction(cast(int, node.value))
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left), _evaluate(node.right)
    op = type(node.op)
    if op is ast.Add:
        return left + right
    if op is ast.Sub:
        return left - right
    if op is ast.Mult:
        return left * right
    if right == 0:
        raise _Illegal("division_by_zero")
    return left / right


def _signs(text: str) -> str:
    return text.replace("\u00d7", "*").replace("\u00f7", "/").replace("\u2212", "-")


def check_expression(
    payload: str, numbers: list[int], target: int, *, use_all: bool = False
) -> tuple[bool, str]:
    """(parsed, status) for a Countdown answer: status "ok" when the expression is legal and
    equals `target`. Never evaluates Python; cost is bounded by the 200-character cap."""
    text = _signs(payload).strip()
    if text.endswith("."):
        text = text[:-1]  # a sentence's full stop
    if len(text) > _MAX_EXPR_CHARS or "\n" in text or not _CHARS.fullmatch(text):
        return False, "malformed"
    stated = None
    if "=" in text:
        text, _, rhs = text.partition("=")
        stated = int(rhs.strip())
    if "**" in text or "//" in text:
        return True, "illegal_operator"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False, "malformed"
    used: list[int] = []
    try:
        _literals(tree.body, used)
    except _Illegal as e:
        return True, e.status
    except RecursionError:
        return False, "malformed"
    available = Counter(numbers)
    for n, count in Counter(used).items():
        if available[n] == 0:
            return True, "number_not_given"
        if count > available[n]:
            return True, "number_reused"
    if use_all and sorted(used) != sorted(numbers):
        return True, "unused_number"
    # Only given numbers, each at most once, are left: values stay small (no blow-up possible).
    try:
        value = _evaluate(tree.body)
    except _Illegal as e:
        return True, e.status
    if value != target or (stated is not None and stated != target):
        return True, "wrong_value"
    return True, OK


def solve(numbers: list[int], target: int, *, use_all: bool = False) -> str | None:
    """An expression reaching `target` (exhaustive search over subsets and operations, exact
    fractions), or None. Exponential in len(numbers): meant for tests and small tasks."""
    start = tuple((Fraction(n), str(n)) for n in numbers)
    seen: set = set()

    def search(items: tuple) -> str | None:
        key = tuple(sorted(v for v, _ in items))
        if key in seen:
            return None
        seen.add(key)
        for v, e in items:
            if v == target and (not use_all or len(items) == 1):
                return e
        for i in range(len(items)):
            for j in range(len(items)):
                if i == j:
                    continue
                (a, ea), (b, eb) = items[i], items[j]
                rest = tuple(x for k, x in enumerate(items) if k not in (i, j))
                options = [(a + b, f"({ea}+{eb})"), (a - b, f"({ea}-{eb})"),
                           (a * b, f"({ea}*{eb})")]
                if b != 0:
                    options.append((a / b, f"({ea}/{eb})"))
                for value, expr in options:
                    found = search(rest + ((value, expr),))
                    if found:
                        return found
        return None

    found = search(start)
    if found is not None and found.startswith("("):
        return found[1:-1]  # the outermost operation's brackets
    return found


def _random_witness(
    rng: np.random.Generator, numbers: list[int], use_all: bool
) -> tuple[str, int]:
    """A random expression over a random subset (all, with use_all) of `numbers` whose every
    intermediate value is a positive integer, and its value."""
    k = len(numbers) if use_all else int(rng.integers(2, len(numbers) + 1))
    chosen = [numbers[i] for i in rng.permutation(len(numbers))[:k].tolist()]
    items = [(n, str(n)) for n in chosen]
    while len(items) > 1:
        i, j = rng.choice(len(items), size=2, replace=False).tolist()
        (a, ea), (b, eb) = items[i], items[j]
        ops = ["+", "*"]
        if a > b:
            ops.append("-")
        if b > 1 and a % b == 0:
            ops.append("/")
        op = ops[int(rng.integers(len(ops)))]
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]
        rest = [x for k2, x in enumerate(items) if k2 not in (i, j)]
        items = rest + [(value, f"({ea}{op}{eb})")]
    value, expr = items[0]
    return (expr[1:-1] if expr.startswith("(") else expr), value


def task_key(numbers: list[int], target: int) -> str:
    return " ".join(map(str, sorted(numbers))) + f" -> {target}"


class CountdownEnv(PuzzleEnv):
    def __init__(self, renderer: Renderer, numbers: list[int], target: int, witness: str, *,
                 use_all: bool = False, format_coef: float = 0.1) -> None:
        self.numbers, self.target, self.witness, self.use_all = numbers, target, witness, use_all
        rule = "each number exactly once" if use_all else "each number at most once"
        question = (
            f"Numbers: {' '.join(map(str, numbers))}\nTarget: {target}\n"
            f"Make the target using + - * / and brackets, {rule}. {_INSTRUCTION}"
        )
        super().__init__(renderer, question, format_coef=format_coef)
        self.contract = ArithmeticExpressionAnswer(numbers=numbers, target=target, use_all=use_all,
                                                   context=question, max_chars=self.max_chars)

    @property
    def gold_answer(self) -> Expression:
        value = self.contract.parse(self.witness)
        assert value is not None  # the witness is built from + - * / and brackets
        return value

    def check(self, value: Expression) -> str:
        return check_expression(value.text, self.numbers, self.target, use_all=self.use_all)[1]

    def reference_payload(self) -> str:
        return self.witness


class CountdownSource(EnvSource):
    """Countdown tasks; knobs in `DEFAULTS` (see the card). Registered as `llm/Countdown-v0`."""

    DEFAULTS: dict[str, Any] = {
        "num_numbers": 3, "max_number": 10, "min_target": 10, "max_target": 50,
        "use_all": False, "format_coef": 0.1,
    }
    card = EnvCard(
        id="llm/Countdown-v0",
        family="puzzles",
        description=(
            "The Countdown numbers game, generated offline: given a few numbers (default three "
            "from 1-10) and a target (default 10-50), write an arithmetic expression with + - * / "
            "and brackets that uses each number at most once and equals the target, as a last "
            "line 'Answer: <expression>'. Any correct expression wins (many exist). The answer "
            "is read under the one answer policy (llm_gym.grading.POLICY): the last 'Answer:' "
            "line (or \\boxed{}, or 'the answer is' sentence; else the last line stating an "
            "expression), parsed completely as one expression, optionally '= <its value>'; a "
            "second declared expression with another value voids the credit, and nothing else "
            "in the reply is read. The verifier parses the expression with ast over a whitelist "
            "of nodes and evaluates it in exact fractions (no eval, no powers, no unary minus), "
            "checking which numbers were used. Every task is solvable: it is generated from a "
            "random witness expression, the reference answer."
        ),
        answer_contract=(
            "arithmetic expression over the given numbers (ArithmeticExpressionAnswer); any "
            "legal expression equal to the target counts"
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a legal expression equal to the target; "
            "0 for a read expression that is wrong or breaks a rule (a number used twice or not "
            "given, a unary minus); -format_coef (0.1) when no single expression can be read (no "
            "answer, a slot that is not one expression -- a power, '//', a call, two "
            "expressions --, two declared answers that differ, over 4096 characters). A reply "
            "not ending on the end of turn loses format_coef."
        ),
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Numbers: 3 7 8\nTarget: 29\nMake the target using + - * / and brackets, each "
                "number at most once. End with one line: Answer: <expression>")},
            {"role": "assistant", "content": "Answer: 3*7+8"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.num_numbers = check_int("num_numbers", own["num_numbers"], 2, 6)
        self.max_number = check_int("max_number", own["max_number"], 2, 100)
        self.min_target = check_int("min_target", own["min_target"], 1, 10_000)
        self.max_target = check_int("max_target", own["max_target"], self.min_target, 10_000)
        self.use_all = check_choice("use_all", own["use_all"], (True, False))
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> CountdownEnv:
        for _ in range(_MAX_DRAWS):
            numbers = rng.integers(1, self.max_number + 1, size=self.num_numbers).tolist()
            witness, target = _random_witness(rng, numbers, self.use_all)
            if not self.min_target <= target <= self.max_target or target in numbers:
                continue
            if split_of(task_key(numbers, target)) != self.split:
                continue
            return CountdownEnv(self.renderer, numbers, target, witness, use_all=self.use_all,
                                format_coef=self.format_coef)
        raise RuntimeError(
            f"CountdownSource: no {self.split!r} task with a target in [{self.min_target}, "
            f"{self.max_target}] in {_MAX_DRAWS} draws (num_numbers={self.num_numbers}, "
            f"max_number={self.max_number}); widen the knobs"
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the witness, the witness with "= target", a brute-force solver's expression,
        the witness in markup after working. Adversarial: the target as a literal, a number
        reused, division by zero, a power tower, floor division, unary minus, a wrong value,
        two different Answer lines, a second value in the slot, an earlier declared answer that
        differs, a backup answer after the answer, a Python call, the bare numbers, two
        expressions on the last line with no declaration."""

        def reuse(env: CountdownEnv) -> str:
            m = max(env.numbers)
            return f"Answer: {env.witness}" + f"+{m}-{m}" * (env.numbers.count(m) + 1)

        def wrong(env: CountdownEnv) -> str:
            a, b = env.numbers[:2]
            for expr in (f"{a}+{b}", f"{a}*{b}", f"{a}-{b}", f"{a}"):
                if check_expression(expr, env.numbers, env.target)[1] != OK:
                    return f"Answer: {expr}"
            return "Answer: 0"

        def solver(env: CountdownEnv) -> str:
            return f"Answer: {solve(env.numbers, env.target, use_all=env.use_all)}"

        a = lambda env: env.numbers[0]  # noqa: E731
        return [
            ScriptedCase("witness", "gold", lambda env, ob: f"Answer: {env.witness}", 1.0, 1.0),
            ScriptedCase("witness = target", "gold",
                         lambda env, ob: f"I combine them.\nAnswer: {env.witness} = {env.target}",
                         1.0, 1.0),
            ScriptedCase("solver", "gold", lambda env, ob: solver(env), 1.0, 1.0),
            ScriptedCase("working and markup", "gold", lambda env, ob: (
                f"The target is {env.target}; the answer is below.\n**Answer:** `{env.witness}`"),
                1.0, 1.0),
            ScriptedCase("target literal", "adversarial",
                         lambda env, ob: f"Answer: {env.target}", -1.0, 0.0),
            ScriptedCase("number reused", "adversarial", lambda env, ob: reuse(env), -1.0, 0.0),
            ScriptedCase("division by zero", "adversarial",
                         lambda env, ob: f"Answer: {env.witness}+{a(env)}/({a(env)}-{a(env)})",
                         -1.0, 0.0),
            ScriptedCase("power tower", "adversarial",
                         lambda env, ob: f"Answer: ({env.witness})**9**9**9", -1.0, 0.0),
            ScriptedCase("floor division", "adversarial",
                         lambda env, ob: f"Answer: ({env.witness})//1", -1.0, 0.0),
            ScriptedCase("unary minus", "adversarial",
                         lambda env, ob: f"Answer: -(-({env.witness}))", -1.0, 0.0),
            ScriptedCase("wrong value", "adversarial", lambda env, ob: wrong(env), -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer: {env.witness}\n{wrong(env)}", -1.0, 0.0),
            ScriptedCase("second value in the slot", "adversarial",
                         lambda env, ob: f"Answer: {env.witness} or {wrong(env)[8:]}", -1.0, 0.0),
            ScriptedCase("earlier declared answer", "adversarial", lambda env, ob: (
                f"My first answer: {wrong(env)[8:]}\n\nAnswer: {env.witness}"), -1.0, 0.0),
            ScriptedCase("backup after", "adversarial", lambda env, ob: (
                f"Answer: {env.witness}\nBackup answer: {wrong(env)[8:]}"), -1.0, 0.0),
            ScriptedCase("python call", "adversarial",
                         lambda env, ob: f"Answer: __import__('os').getpid() or {env.target}",
                         -1.0, 0.0),
            ScriptedCase("numbers echoed", "adversarial",
                         lambda env, ob: "Answer: " + ", ".join(map(str, env.numbers)), -1.0, 0.0),
            ScriptedCase("no marker", "adversarial",
                         lambda env, ob: f"Maybe {wrong(env)[8:]} or {env.witness}.", -1.0, 0.0),
        ]
