"""`llm/BugFix-v0`: a small generated Python function with one injected bug; the model fixes it.

The function is a `llm/PyFunc-v0` task (`pyfunc.generate_task`: its docstring states the intended
behaviour step by step with worked examples, its hidden tests and their trusted expected outputs
come with it), drawn in the source's split. Its reference code is then broken in exactly one
place by an `ast` mutation of one body line, one of the `bug_kinds`:

- **off_by_one**: an integer constant moved by one (`xs[:3]` -> `xs[:4]`, `x % 5` -> `x % 6`);
- **operator**: an arithmetic operator swapped (`+`/`-`, `*` -> `+`, `//`/`%`);
- **comparison**: a comparison changed (`>` -> `>=`, `<=` -> `<`, `==`/`!=`, `in`/`not in`);
- **swap**: two arguments or the operands of a subtraction swapped (`s.replace(a, b)` ->
  `s.replace(b, a)`, `b - a` -> `a - b`);
- **function**: a related builtin or method swapped (`max`/`min`, `upper`/`lower`,
  `reverse=True` -> `reverse=False`).

These are the plausible bugs to show; `mutants.py` has the wider set of one-edit mutants the
hidden tests are judged by. A mutation is kept only when the broken function (trusted code we
generated, run in-process at task-generation time by `mutants.run`, with a few builtins and a
step budget; model code never runs outside `llm_gym.sandbox`) gets at least one hidden test
wrong -- so the unchanged buggy code scores 0 -- and, where some mutation allows it, a docstring
example too (so the bug is visible). Then the hidden tests are chosen again
(`PyFuncTask.with_hidden_inputs`, PyFunc's mutation-tested selection) to kill, besides every
one-edit mutant of the fixed function, the buggy function itself and each of its one-edit
mutants that still differs from the fix -- the wrong fixes: the wrong line changed, the bug moved
-- as far as their candidate pool tells them apart (tests/envs_catalog/code/test_code_mutation.py measures both
against fresh inputs); a task whose tests cannot do that within `num_tests` is redrawn. Every
body line is shown re-printed by `ast.unparse`, so the formatting gives the broken line away no
more than the others. The reply is graded exactly as PyFunc's: its program is read by
`contract.SolutionAnswer` under the one answer policy (`llm_gym.grading.POLICY`: the last
```python block that is a program -- a module defining `solve`, or a body continuing the stub --,
a second, different program voiding the credit), `CodeEnv` runs that program in the sandbox
through `harness.grade` against the hidden inputs, and the host compares the returned values
type-strictly with the trusted ones. Quoting the buggy function in a second block is such a
second program.
Split: PyFunc's (the function's key hashed by `split_of`), so a test-split bug sits in a function
the train split never shows; the task key adds the bug (`<pyfunc key>|bug:<kind>:<line>:<what>`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from llm_gym.authoring import check_int
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

from .contract import instruction
from .env import CODE_KNOB_DEFAULTS, CODE_KNOB_DOCS, CodeEnv, check_code_knobs
from .mutants import MutationScore, load, mutants, run, same, score
from .pyfunc import ENTRY_POINT, FAMILIES, PyFuncTask, generate_task

__all__ = ["BUG_KINDS", "BugFixSource", "BugFixTask", "generate_bugfix_task", "mutations"]

BUG_KINDS = ("off_by_one", "operator", "comparison", "swap", "function")
_MAX_DRAWS = 200

_BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mod,
                ast.Mod: ast.FloorDiv}
_CMP_SWAPS = {ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
              ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In}
_NAME_SWAPS = {"max": "min", "min": "max"}
_ATTR_SWAPS = {"upper": "lower", "lower": "upper", "isupper": "islower", "islower": "isupper"}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=",
           ast.In: "in", ast.NotIn: "not in"}


def _parse_line(line: str) -> ast.stmt:
    """One body line of a reference solution as a statement (`return` needs a function)."""
    func = ast.parse("def _f():\n    " + line.strip()).body[0]
    assert isinstance(func, ast.FunctionDef)
    return func.body[0]


def _slice_steps(stmt: ast.AST) -> set[int]:
    """ids of nodes that are slice steps (`[::-1]`: moving its -1 makes a trivial ValueError)."""
    out: set[int] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Slice) and node.step is not None:
            out.update(id(n) for n in ast.walk(node.step))
    return out


def mutations(line: str) -> list[tuple[str, str, Callable[[ast.stmt], None]]]:
    """Every single-site bug for one body line: `(kind, what, apply)`, where `apply` edits a
    fresh parse of the line in place (the i-th site of the walk, so the edit is reproducible)."""
    stmt = _parse_line(line)
    steps = _slice_steps(stmt)
    found: list[tuple[str, str, Callable[[ast.stmt], None]]] = []
    for index, node in enumerate(ast.walk(stmt)):
        def at(fn, index=index):
            def apply(tree: ast.stmt) -> None:
                fn(list(ast.walk(tree))[index])
            return apply

        if (isinstance(node, ast.Constant) and type(node.value) is int and id(node) not in steps):
            for delta in (1, -1):
                new = node.value + delta
                if new < 0:
                    continue
                found.append(("off_by_one", f"{node.value}->{new}",
                              at(lambda n, new=new: setattr(n, "value", new))))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            found.append(("function", f"{node.value}->{not node.value}",
                          at(lambda n: setattr(n, "value", not n.value))))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            new_op = _BINOP_SWAPS[type(node.op)]
            found.append(("operator", f"{_SYMBOL[type(node.op)]}->{_SYMBOL[new_op]}",
                          at(lambda n, new_op=new_op: setattr(n, "op", new_op()))))
            if isinstance(node.op, ast.Sub) and not isinstance(node.left, ast.Constant):
                found.append(("swap", "operands of -", at(_swap_operands)))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_SWAPS:
            new_cmp = _CMP_SWAPS[type(node.ops[0])]
            found.append(("comparison", f"{_SYMBOL[type(node.ops[0])]}->{_SYMBOL[new_cmp]}",
                          at(lambda n, new_cmp=new_cmp: setattr(n, "ops", [new_cmp()]))))
        elif isinstance(node, ast.Call):
            if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
                found.append(("swap", "arguments", at(
                    lambda n: setattr(n, "args", [n.args[1], n.args[0], *n.args[2:]]))))
            if isinstance(node.func, ast.Name) and node.func.id in _NAME_SWAPS:
                new_name = _NAME_SWAPS[node.func.id]
                found.append(("function", f"{node.func.id}->{new_name}",
                              at(lambda n, new_name=new_name: setattr(n.func, "id", new_name))))
            if isinstance(node.func, ast.Attribute) and node.func.attr in _ATTR_SWAPS:
                new_attr = _ATTR_SWAPS[node.func.attr]
                found.append(("function", f"{node.func.attr}->{new_attr}",
                              at(lambda n, new_attr=new_attr: setattr(n.func, "attr", new_attr))))
    return found


def _swap_operands(node: ast.BinOp) -> None:
    node.left, node.right = node.right, node.left


def _show(stmt: ast.stmt) -> str:
    return "    " + ast.unparse(ast.fix_missing_locations(stmt)) + "\n"


def _wrong_on(fn: Callable[..., Any] | None, cases: tuple[tuple[Any, Any], ...]) -> int:
    """How many of `cases` the trusted function `fn` gets wrong (all when it did not load)."""
    if fn is None:
        return len(cases)
    return sum(not same(got, want) for got, (_, want) in zip(run(fn, [x for x, _ in cases]), cases))


@dataclass(frozen=True)
class BugFixTask:
    key: str
    func: PyFuncTask
    kind: str  # one of BUG_KINDS
    line: int  # 1-based body line that was broken
    what: str  # "+->-", "3->4", ...
    buggy_body: str
    fixed_body: str
    visible: bool  # a docstring example shows the bug

    def buggy_source(self) -> str:
        return self.func.stub() + self.buggy_body

    def fixed_source(self) -> str:
        return self.func.stub() + self.fixed_body

    def wrong_fix_score(self, rng: np.random.Generator, sample_size: int = 300) -> MutationScore:
        """How the hidden tests fare against the buggy function's one-edit mutants -- the fixes a
        model could make, the right one (equivalent to the reference, so not counted) among
        them; distinguishability judged on the tests and `sample_size` fresh inputs from `rng`."""
        func = self.func
        return score(func.reference_source(), ENTRY_POINT, func.tests,
                     func.sample(rng, sample_size),
                     candidates=mutants(self.buggy_source(), ENTRY_POINT))


def _body_lines(func: PyFuncTask) -> list[str]:
    return [line for line in func.reference_body().splitlines() if line.strip()]


def generate_bugfix_task(rng: np.random.Generator, *, kinds: tuple[str, ...], split: str | None,
                         **pyfunc_knobs: Any) -> BugFixTask:
    """One task drawn from `rng` only (see the module docstring)."""
    for _ in range(_MAX_DRAWS):
        func = generate_task(rng, split=split, **pyfunc_knobs)
        lines = _body_lines(func)
        stmts = [_parse_line(line) for line in lines]
        fixed_body = "".join(_show(s) for s in stmts)
        candidates = [(i, kind, what, apply) for i, line in enumerate(lines)
                      for kind, what, apply in mutations(line) if kind in kinds]
        if not candidates:
            continue
        chosen = fallback = None
        # kinds in random order (so a constant-heavy function is not always an off-by-one),
        # then that kind's sites in random order
        present = [k for k in kinds if any(c[1] == k for c in candidates)]
        ordered = []
        for kind_index in rng.permutation(len(present)).tolist():
            same = [c for c in candidates if c[1] == present[kind_index]]
            ordered += [same[j] for j in rng.permutation(len(same)).tolist()]
        for i, kind, what, apply in ordered:
            broken = _parse_line(lines[i])
            apply(broken)
            body = "".join(_show(broken) if k == i else _show(s) for k, s in enumerate(stmts))
            if body == fixed_body:
                continue
            fn = load(func.stub() + body, ENTRY_POINT)
            if fn is None or not _wrong_on(fn, func.tests):
                continue
            if _wrong_on(fn, func.examples):
                chosen = (i, kind, what, body, True)
                break
            fallback = fallback or (i, kind, what, body, False)
        chosen = chosen or fallback
        if chosen is None:
            continue
        i, kind, what, body, visible = chosen
        # tests chosen again to kill, besides the reference's mutants, the buggy function and
        # every wrong fix of it (its one-edit mutants that still differ from the reference)
        buggy = func.stub() + body
        wrong_fixes = [m.source for m in mutants(buggy, ENTRY_POINT)]
        func = func.with_hidden_inputs(rng, pyfunc_knobs["num_tests"],
                                       also_kill=[buggy, *wrong_fixes])
        if func is None or not _wrong_on(load(buggy, ENTRY_POINT), func.tests):
            continue
        key = f"{func.key}|bug:{kind}:{i + 1}:{what}"
        return BugFixTask(key, func, kind, i + 1, what, body, fixed_body, visible)
    raise RuntimeError(f"no {split or 'any'!r} BugFix task with bug kinds {kinds} found in "
                       f"{_MAX_DRAWS} draws; widen the knobs")


ANSWER_NAME = "the complete corrected function"  # what the contract's instruction asks for
INSTRUCTION = (
    "The Python function below has exactly one bug: its code does not do what its docstring "
    "says. Fix the bug. " + instruction(ANSWER_NAME)
)


def question_text(task: BugFixTask) -> str:
    return f"{INSTRUCTION}\n\n```python\n{task.buggy_source()}```"


def reference_response(task: BugFixTask) -> str:
    return f"```python\n{task.fixed_source()}```"


_DEFAULTS: dict[str, Any] = {
    "families": "list,str,int",
    "bug_kinds": ",".join(BUG_KINDS),
    "min_transforms": 1,
    "max_transforms": 3,
    "num_tests": 10,
    "num_examples": 2,
    "max_len": 8,
    "max_value": 20,
    **CODE_KNOB_DEFAULTS,
    "test_timeout_s": 2.0,
    "timeout_s": 10.0,
}

_KNOB_DOCS = {
    "families": "comma-separated subset of 'list,str,int': the kinds of function drawn",
    "bug_kinds": "comma-separated subset of 'off_by_one,operator,comparison,swap,function': the "
    "bugs that may be injected",
    "min_transforms": "fewest composed steps of the function, 1-6",
    "max_transforms": "most composed steps, min_transforms-6 (more lines hide the bug better)",
    "num_tests": "hidden inputs per task, 1-50 (tasks whose one-edit mutants and wrong fixes "
    "need more inputs to be caught are redrawn)",
    "num_examples": "worked examples in the docstring, 1-3",
    "max_len": "longest input list or string, 1-50",
    "max_value": "list elements lie in [-max_value, max_value], int inputs in "
    "[-50*max_value, 50*max_value]; 1-1000",
    **CODE_KNOB_DOCS,
}


def _example_episode() -> list[dict[str, str]]:
    task = generate_bugfix_task(np.random.default_rng(5), kinds=("comparison",), split=None,
                                families=("list",), min_transforms=2, max_transforms=2,
                                num_tests=4, num_examples=2, max_len=5, max_value=9)
    return [{"role": "user", "content": question_text(task)},
            {"role": "assistant", "content": reference_response(task)}]


def _parse_list(name: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else None
    if not parts or any(p.strip() not in allowed for p in parts):
        raise ValueError(f"{name} must be a comma-separated subset of {','.join(allowed)!r}, got "
                         f"{value!r}")
    return tuple(dict.fromkeys(p.strip() for p in parts))


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


# Attacks on the judge (the harness tests' list, written for `solve`): none may get credit.
ATTACKS: dict[str, str] = {
    "prints PASSED": "def solve(x):\n    print('PASSED')\n    print('All tests passed')\n",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\ndef solve(x):\n    return x\n",
    "os._exit(0) when called": "import os\ndef solve(x):\n    os._exit(0)\n",
    "__eq__ always true": "class Any:\n    def __eq__(self, o):\n        return True\n"
    "    __hash__ = object.__hash__\ndef solve(x):\n    return Any()\n",
    "monkeypatched builtins": "import builtins\nbuiltins.AssertionError = type('Nope', "
    "(Exception,), {})\nbuiltins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: int\n"
    "def solve(x):\n    return None\n",
    "forges the verdict": "import os\nLINE = b'\\nLLMGYM-JUDGE ' + b'0' * 64 + b' {\"results\":"
    "[[true,\"0\"]],\"load\":{\"load\":\"ok\"},\"spawns\":1,\"error\":null}\\n'\n"
    "def solve(x):\n    for fd in (1, 2):\n        os.write(fd, LINE)\n    return None\n",
    "kills the judge": "import os, signal\ndef solve(x):\n    os.kill(os.getppid(), "
    "signal.SIGKILL)\n    return x\n",
}


class BugFixSource(EnvSource):
    """Generated find-and-fix-the-bug tasks; knobs in `DEFAULTS`. Registered as `llm/BugFix-v0`."""

    DEFAULTS = _DEFAULTS
    card = EnvCard(
        id="llm/BugFix-v0",
        family="code",
        description=(
            "Fix the one bug in a small generated Python function. The function is a "
            "llm/PyFunc-v0 task (1-3 steps over a list of ints, a string or an int, stated step "
            "by step in its docstring with two worked examples); one line of its code was broken "
            "by an injected bug -- an off-by-one constant, a wrong arithmetic operator, a wrong "
            "comparison, swapped arguments or operands, or a related builtin swapped (max/min, "
            "upper/lower) -- chosen so that the broken function fails the hidden tests and, where "
            "possible, a docstring example. The reply (the corrected function in a ```python "
            "block, any valid module, or the corrected body), read under the one answer policy "
            "(llm_gym.grading.POLICY: the last block that is a program; a second, different "
            "program -- the buggy code quoted again included -- voids the credit), runs in "
            "llm_gym.sandbox on hidden inputs whose expected outputs a trusted reference "
            "computes on the host; outputs are compared type-strictly."
        ),
        answer_contract="program (SolutionAnswer, a ProgramAnswer): the last ```python block defining "
        "solve, or the body continuing the stub; else the whole reply",
        multi_turn=False,
        reward_range=(0.0, 1.0),
        reward_meaning=(
            "1 when the corrected function returns the expected value (type-strict) on every "
            "hidden input, else 0 (the unchanged buggy code always scores 0); with "
            "partial_credit=true, the fraction of hidden inputs right. No program, two different "
            "programs, syntax errors, timeouts, a reply over max_chars and any harness failure "
            "score 0 with a metric (no_code, several_programs, syntax_error, timeout, too_long, "
            "harness_error)."
        ),
        difficulty_knobs={k: f"{doc} (default {_DEFAULTS[k]!r})" for k, doc in _KNOB_DOCS.items()},
        data_source="generated on the fly from the seed (PyFunc's generator plus an ast mutation; "
        "no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=_example_episode(),
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.families = _parse_list("families", own["families"], FAMILIES)
        self.bug_kinds = _parse_list("bug_kinds", own["bug_kinds"], BUG_KINDS)
        self.min_transforms = check_int("min_transforms", own["min_transforms"], 1, 6)
        self.max_transforms = check_int("max_transforms", own["max_transforms"],
                                        self.min_transforms, 6)
        self.num_tests = check_int("num_tests", own["num_tests"], 1, 50)
        self.num_examples = check_int("num_examples", own["num_examples"], 1, 3)
        self.max_len = check_int("max_len", own["max_len"], 1, 50)
        self.max_value = check_int("max_value", own["max_value"], 1, 1000)
        self.knobs = check_code_knobs(own)

    def draw_task(self, rng: np.random.Generator) -> BugFixTask:
        return generate_bugfix_task(
            rng, kinds=self.bug_kinds, split=self.split, families=self.families,
            min_transforms=self.min_transforms, max_transforms=self.max_transforms,
            num_tests=self.num_tests, num_examples=self.num_examples, max_len=self.max_len,
            max_value=self.max_value,
        )

    def make_env(self, rng: np.random.Generator) -> CodeEnv:
        task = self.draw_task(rng)
        env = CodeEnv(self.renderer, question_text(task), task.func.code_task(),
                      reference_response(task), knobs=self.knobs, task_id=task.key,
                      reference_body=task.fixed_body, reference_program=task.fixed_source(),
                      contract_name=ANSWER_NAME)
        env.bug = task  # for scripted policies and logs
        return env

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the canonical fix, as a whole function and as its body alone. Adversarial: the
        buggy code unchanged, the docstring stub without a body, an empty reply, the fix followed
        by the buggy code quoted again (two programs), and the harness attacks (printing PASSED,
        exiting early, an always-equal object, monkeypatched builtins, a forged verdict, killing
        the judge): none scores above 0."""
        strict = {"partial_credit": False}  # the buggy code passes some tests: no partial credit
        cases = [
            ScriptedCase("canonical fix", "gold", lambda env, ob: reference_response(env.bug),
                         1.0, 1.0),
            ScriptedCase("fixed body only", "gold",
                         lambda env, ob: _fence(env.bug.fixed_body.rstrip("\n")), 1.0, 1.0),
            ScriptedCase("buggy code unchanged", "adversarial",
                         lambda env, ob: _fence(env.bug.buggy_source().rstrip("\n")), 0.0, 0.0,
                         knobs=strict),
            ScriptedCase("stub only", "adversarial",
                         lambda env, ob: _fence(env.bug.func.stub() + "    pass"), 0.0, 0.0,
                         knobs=strict),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", 0.0, 0.0),
            # a second program after the fix voids the credit (the policy's second declaration)
            ScriptedCase("the fix, then the buggy code again", "adversarial",
                         lambda env, ob: reference_response(env.bug) + "\n\nThe original was:\n\n"
                         + _fence(env.bug.buggy_source().rstrip("\n")), 0.0, 0.0, knobs=strict),
        ]
        for name, code in ATTACKS.items():
            cases.append(ScriptedCase(name, "adversarial", lambda env, ob, c=code: _fence(c),
                                      0.0, 0.0, knobs=strict))
        return cases
