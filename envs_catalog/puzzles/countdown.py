"""Countdown (`llm/Countdown-v0`): reach a target from given numbers with + - * / and brackets.

A task is a few numbers and a target, e.g. numbers 3 7 8 and target 29; any expression that
uses each given number at most once (`use_all=True`: exactly once) and equals the target wins:
"Answer: 3*7+8". Generation builds a random expression over a subset of the numbers first (its
intermediate values integers), so every task is solvable; that witness is the reference answer.

Verification never evaluates the reply as Python: the payload's characters are whitelisted
(digits, spaces, + - * / and brackets; "×", "÷" and "−" are read as *, / and -), the expression
is parsed with `ast`, and only `BinOp` nodes with `Add`/`Sub`/`Mult`/`Div` over plain integer
literals are accepted (no unary minus, no `**`, no `//`, no names or calls). The literals must
be a sub-multiset of the given numbers (checked before any arithmetic, so an attempt to build a
huge number fails first); then the expression is evaluated in exact `Fraction` arithmetic
(fractional intermediate values are allowed). An optional trailing "= N" must name the
target. Statuses: `malformed`, `illegal_operator`, `number_not_given`, `number_reused`,
`unused_number` (use_all), `division_by_zero`, `wrong_value`; reader statuses in
`envs_catalog.puzzles._grid`.

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
from llm_gym.grading.blocks import cued, strip_markup
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

_MAX_EXPR_CHARS = 200
_CHARS = re.compile(r"[0-9+\-*/() \t]+(?:=[ \t]*[0-9]+[ \t]*)?")
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_MAX_DRAWS = 20_000

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


def _canonical(node: ast.AST) -> Any:
    """`node` up to reordering: sums and products flattened into sorted signed terms / factors,
    so "3*7+8", "8+7*3" and "(3*7)+8" are one answer and "3*7+8" and "3*8+7" two."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        additive = type(node.op) in (ast.Add, ast.Sub)
        parts: list[tuple[int, Any]] = []

        def collect(n: ast.AST, sign: int) -> None:
            if isinstance(n, ast.BinOp) and (type(n.op) in (ast.Add, ast.Sub)) == additive \
                    and type(n.op) in _OPS:
                collect(n.left, sign)
                collect(n.right, -sign if type(n.op) in (ast.Sub, ast.Div) else sign)
            else:
                parts.append((sign, _canonical(n)))

        collect(node, 1)
        return ("+" if additive else "*", tuple(sorted(parts, key=repr)))
    return ast.dump(node)  # an illegal node: compared as written


def _expression_tree(text: str) -> ast.AST | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _balanced(text: str) -> str:
    """A run of expression characters cut out of prose, without the brackets or operators it
    caught at its ends ("(3+7" from "(3+7 = 10)", "3*7+8 (" from "3*7+8 (so ...")."""
    text = text.strip(" \t").rstrip(" \t+-*/(").lstrip(" \t+*/)")
    while text.count("(") > text.count(")") and text.startswith("("):
        text = text[1:].lstrip()
    while text.count(")") > text.count("(") and text.endswith(")"):
        text = text[:-1].rstrip()
    return text


_LABEL = re.compile(r"[^:]{1,40}:[ \t]*")
_LABEL_NUMBER = re.compile(r"[ \t]*[0-9]+[ \t]+")
_PRESENTED = re.compile(r"\b(?:answers?|option|alternatives?|alternatively|backup|candidate|"
                        r"plan|solution)\b[\W_]*(?:[\w-]+[\W_]+){0,3}$", re.IGNORECASE)
_VALUE_CLAIM = re.compile(r"\banswers?[ \t*_]*(?:is|=|:)[ \t*_]*$", re.IGNORECASE)
_RUN = re.compile(r"[0-9(][0-9+\-*/() \t]*(?:=[ \t]*[0-9]+)?")


def answer_key(payload: str, target: int) -> Any:
    """What an answer is compared by: the canonical form of its expression and the value it
    states when that is not the target ("3*7+8" and "8+7*3 = 29" agree, "3*7+8 = 30" not)."""
    lhs, eq, rhs = _signs(payload).strip().rstrip(".").partition("=")
    tree = _expression_tree(lhs)
    stated = int(rhs) if eq and rhs.strip().isdigit() and int(rhs) != target else None
    return None if tree is None else (_canonical(tree), stated)


def stated_expressions(text: str, numbers: list[int], target: int) -> list[Any]:
    """Canonical forms of the complete answers stated in `text`: an expression presented as an
    answer or option (`final_answer.CUE` before it on its line), an expression alone on a line
    or after a short label ("Option A: ..."), or one over given numbers only that reaches the
    target or says "= target", anywhere; "answer = 4" (another value claimed) too.
    Working is not an answer: a step that states another value ("3*7 = 21"), a step with an
    intermediate number ("21 + 8 = 29"), a bare number."""
    found: list[Any] = []
    available = Counter(numbers)
    for line in _signs(text).split("\n"):
        clean = strip_markup(line)
        for m in _RUN.finditer(clean):
            try:
                found += _stated_in(m, clean, available, target)
            except RecursionError:  # a chain of hundreds of operations: no answer to 2-6 numbers
                continue
    return found


def _stated_in(m: re.Match, clean: str, available: Counter, target: int) -> list[Any]:
    """The answers the expression run `m` of the line `clean` states (see `stated_expressions`)."""
    lhs, eq, rhs = m.group(0).partition("=")
    prefix = clean[: m.start()]
    tree = _expression_tree(_balanced(lhs))
    label_number = _LABEL_NUMBER.match(lhs)
    if tree is None and label_number and cued(prefix + " x "):
        tree = _expression_tree(_balanced(lhs[label_number.end():]))  # "Option 1 3+5"
    if isinstance(tree, ast.Constant):
        claimed = not eq and tree.value != target and _VALUE_CLAIM.search(prefix) and \
            clean[m.end():m.end() + 1] != ":"
        return [("value", tree.value)] if claimed else []  # "answer = 4"; not "Option 1:"
    if not isinstance(tree, ast.BinOp):
        return []
    if eq and int(rhs.strip()) != target:  # a step towards another value ("3*7 = 21") ...
        # ... unless presented as an answer ("Answer: 3*7+8 = 30")
        return [(_canonical(tree), int(rhs.strip()))] if _PRESENTED.search(prefix) else []
    used: list[int] = []
    try:
        _literals(tree, used)
        reaches = not Counter(used) - available and (bool(eq) or _evaluate(tree) == target)
    except _Illegal:
        reaches = False
    # alone on its line, or the value of a short label ("Option A: ...", in any script)
    alone = not eq and not clean[m.end():].strip(" .") and (
        not prefix.strip() or _LABEL.fullmatch(prefix))
    return [(_canonical(tree), None)] if reaches or alone or cued(prefix) else []


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
            f"Make the target using + - * / and brackets, {rule}. "
            f"End with one line: Answer: <expression>"
        )
        super().__init__(renderer, question, format_coef=format_coef)

    def verify(self, payload: str) -> tuple[bool, str]:
        return check_expression(payload, self.numbers, self.target, use_all=self.use_all)

    def reference_payload(self) -> str:
        return self.witness

    def answer_key(self, payload: str) -> Any:
        return answer_key(payload, self.target)

    def stated_answers(self, text: str) -> list[Any]:
        return stated_expressions(text, self.numbers, self.target)


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
            "line 'Answer: <expression>'. Any correct expression wins (many exist); the verifier "
            "parses it with ast over a whitelist of nodes and evaluates it in exact fractions "
            "(no eval, no powers, no unary minus), checking which numbers were used. The last "
            "'Answer:' line is the final answer: working before it and a check after it are "
            "fine, but any other expression offered as an answer anywhere in the reply (an "
            "earlier Answer line, 'Option A', a backup, one alone on a line, one claiming the "
            "target) earns nothing. Every task is solvable: it is generated from a random "
            "witness expression, the reference answer."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a legal expression equal to the target; "
            "0 for a parsed expression that is wrong or breaks a rule (a number used twice or not "
            "given, division by zero, a power); -format_coef (0.1) for no 'Answer:' line, an "
            "unreadable expression, another different answer stated in the reply or a hedge after "
            "it ('or ...', 'If not, ...'). A reply not ending on the end of turn loses format_coef."
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
        the witness in markup after working. Adversarial: the target as a literal,
        a number reused, division by zero, a power tower, floor division, unary minus, a wrong
        value, two different Answer lines, a hedge, "Option A ... Option B", a backup answer
        after the answer, a Python call, the bare numbers, the witness in prose without a
        marker."""

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
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"Answer: {env.witness} or {wrong(env)[8:]}", -1.0, 0.0),
            ScriptedCase("option A, option B", "adversarial", lambda env, ob: (
                f"Option A: {wrong(env)[8:]}\nOption B:\nAnswer: {env.witness}"), -1.0, 0.0),
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
