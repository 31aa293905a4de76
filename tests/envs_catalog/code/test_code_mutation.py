"""Hidden-test adequacy of llm/PyFunc-v0 and llm/BugFix-v0, by mutation testing (`mutants.py`).

The mutation machinery itself: every class of one-edit mutant is generated, a runaway or
dangerous mutant cannot hang or reach the host, each call gets its own copy of its input, `score`
sorts mutants into trivial / distinguishable / killed, `cover` kills everything it can. Then, per
family over a fixed sample of seeds: at least 99% of the distinguishable mutants of the reference
fail a hidden test, every dropped step does, BugFix's wrong fixes fail too, and the hidden inputs
stay deterministic and inside the task's input space. The wide sweep (harder knobs, more seeds)
is marked slow.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from envs_catalog.code.bugfix import BUG_KINDS, generate_bugfix_task
from envs_catalog.code.harness import strict_equal
from envs_catalog.code.mutants import (MUTANT_CLASSES, RAISED, Mutant, cover, kill_masks, load,
                                       mutants, run, score)
from envs_catalog.code.pyfunc import ENTRY_POINT, FAMILIES, PyFuncSource, generate_task

DEFAULTS = {k: PyFuncSource.DEFAULTS[k] for k in ("min_transforms", "max_transforms", "num_tests",
                                                   "num_examples", "max_len", "max_value")}
EVERY_CONSTRUCT = '''def solve(xs):
    """Not mutated."""
    xs = [x + 3 for x in xs if x > 0 and x != 7]
    xs = sorted(xs, reverse=True)[1:]
    if xs:
        xs = xs[:len(xs) - 1]
    s = ' '.join(str(-x).upper() for x in xs)
    return max(s.count('ab'), 0) if s else len(xs) // 2
'''


# -- the machinery ---------------------------------------------------------------------------------

def test_every_mutant_class_is_generated_and_each_mutant_is_one_distinct_edit():
    found = mutants(EVERY_CONSTRUCT, "solve")
    assert {m.kind for m in found} == set(MUTANT_CLASSES)
    assert len({m.source for m in found}) == len(found)
    reference = load(EVERY_CONSTRUCT, "solve")
    assert reference is not None and run(reference, [[5, 1, 9, -2], [1]]) == [0, 0]
    for m in found:
        assert m.source != EVERY_CONSTRUCT and '"""Not mutated."""' in m.source
        compile(m.source, "<mutant>", "exec")  # every mutant is valid Python
    assert sorted(m.line for m in found if m.kind == "drop") == [3, 4, 5, 6, 7, 8]  # nested too
    whats = {m.what for m in found}
    assert {"> -> >=", "and -> or", "3 -> 4", "max -> min", "upper -> lower", "+ -> -",
            "drop the filter", "always the else branch", "True -> False", "'ab' -> 'b'",
            "drop USub", "upper bound + 1", "negated condition", "operands of //"} <= whats


def test_mutants_name_the_missing_function():
    with pytest.raises(ValueError, match="no top-level 'def main"):
        mutants(EVERY_CONSTRUCT, "main")


def test_a_runaway_mutant_is_abandoned_by_its_step_budget():
    looping = load("def solve(n):\n    while True:\n        n += 1\n", "solve")
    start = time.process_time()
    assert run(looping, [1, 2]) == [RAISED, RAISED]
    assert time.process_time() - start < 5.0
    # the budget is a BaseException: a mutant's own `except Exception` cannot swallow it
    stubborn = load("def solve(n):\n    while True:\n        try:\n            n += 1\n"
                    "        except Exception:\n            pass\n", "solve")
    assert run(stubborn, [0]) == [RAISED]
    # comprehensions and recursion spend it too
    endless = load("def solve(n):\n    return sum(1 for _ in range(n) for _ in range(n))\n",
                   "solve")
    assert run(endless, [10, 10_000]) == [100, RAISED]
    deep = load("def solve(n):\n    return solve(n - 1) + solve(n - 2) if n > 1 else n\n",
                "solve")
    assert run(deep, [10, 40]) == [55, RAISED]


@pytest.mark.parametrize("body", [
    "for _ in range(40):\n        n = n * n\n    return n",  # squaring: 2**(2**40)
    "for _ in range(40):\n        n *= n\n    return n",
    "return 7 ** (n * 10**6)",
    "return 1 << (n * 10**7)",
    "return 'ab' * (n * 10**6)",
    "return [n] * (n * 10**6)",
    "return sum(range(n * 10**9))",  # one C-level loop, no step spent
])
def test_a_mutant_that_would_build_a_huge_value_is_refused_before_the_work(body):
    fn = load(f"def solve(n):\n    {body}\n", "solve")
    start = time.process_time()
    assert run(fn, [3]) == [RAISED]
    assert time.process_time() - start < 5.0


def test_the_budget_depends_on_the_code_and_the_input_only():
    # Another tracer (a debugger, coverage) or a signal handler spends nothing of it, and an
    # exception that is not an Exception (a time limit's, Ctrl-C) is never taken for "over budget"
    fn = load("def solve(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n",
              "solve")
    budget = 1 + 50  # the call and the loop's 50 iterations, nothing else
    plain = run(fn, [50, 51], budget=budget)
    calls = []

    def tracer(frame, event, arg):
        calls.append(event)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        traced = run(fn, [50, 51], budget=budget)
    finally:
        sys.settrace(previous)
    assert plain == traced == [1225, RAISED] and calls

    class Stop(BaseException):
        pass

    class Bomb:
        def __add__(self, other):
            raise Stop

    adds = load("def solve(n):\n    return n + 1\n", "solve")
    with pytest.raises(Stop):
        run(adds, [Bomb()])
    with pytest.raises(TypeError, match="mutants.load"):
        run(lambda n: n, [1])


def test_mutants_run_with_a_few_builtins_only():
    assert load("import os\ndef solve(x):\n    return x\n", "solve") is None
    for body in ("return open('/etc/hostname').read()", "return eval('1')",
                 "return __import__('os').getpid()", "return globals()"):
        fn = load(f"def solve(x):\n    {body}\n", "solve")
        assert fn is not None and run(fn, [0]) == [RAISED], body
    assert load("def solve(x)\n", "solve") is None  # a syntax error: no function


def test_each_call_gets_its_own_copy_of_its_input():
    fn = load("def solve(xs):\n    xs.append(1)\n    xs[0].append(2) if isinstance(xs[0], list) "
              "else None\n    return len(xs)\n", "solve")
    flat, nested = [5], [[0], 3]
    assert run(fn, [flat, flat, nested, nested]) == [2, 2, 3, 3]
    assert flat == [5] and nested == [[0], 3]


def test_score_sorts_mutants_into_trivial_distinguishable_and_killed():
    reference = "def solve(n):\n    return n % 4\n"
    tests = [(5, 1), (0, 0)]
    sample = [(x, x % 4) for x in range(-8, 9)]
    candidates = [
        Mutant("arith", 2, "raises", "def solve(n):\n    return n // 0\n"),  # trivial
        Mutant("arith", 2, "same", "def solve(n):\n    return n & 3\n"),  # equivalent on ints
        Mutant("constant", 2, "4 -> 5", "def solve(n):\n    return n % 5\n"),  # killed by n=5
        Mutant("arith", 2, "abs", "def solve(n):\n    return abs(n) % 4\n"),  # survives
    ]
    result = score(reference, "solve", tests, sample, candidates=candidates)
    assert (result.mutants, result.trivial, result.distinguishable, result.killed) == (4, 1, 2, 1)
    assert [m.what for m in result.survivors] == ["abs"] and result.kill_rate == 0.5
    assert result.killed_by_kind == {"arith": (0, 1), "constant": (1, 1)}
    # a mutant that only returns a look-alike of another type is told apart (type-strict)
    lookalike = [Mutant("call", 2, "bool", "def solve(n):\n    return n % 4 == 1\n")]
    assert score(reference, "solve", [(5, 1)], [], candidates=lookalike).killed == 1


def test_cover_picks_inputs_that_kill_every_killable_function():
    masks = [0b0011, 0b0110, 0b0100, 0, 0b1000, 0b0100]
    picks = cover(masks)
    assert picks == [2, 0, 3]  # input 2 kills three; then the lowest index among the ties
    assert all(m == 0 or any(m >> i & 1 for i in picks) for m in masks)
    assert cover(masks, chosen=0b0110) == [3]  # inputs 1 and 2 already taken
    fns = [load(f"def solve(n):\n    return n + {k}\n", "solve") for k in (0, 1)] + [None]
    assert kill_masks(fns, [1, 2], [1, 3]) == [0b10, 0b01, 0b11]


# -- the families ----------------------------------------------------------------------------------

def _pyfunc_scores(family: str, seeds: range, knobs: dict):
    for seed in seeds:
        task = generate_task(np.random.default_rng(seed), families=(family,), **knobs)
        yield task, task.mutation_score(np.random.default_rng([seed, 1]), 300)


def _check_family(results, *, floor: float = 0.99) -> None:
    killed = distinguishable = 0
    for task, result in results:
        killed += result.killed
        distinguishable += result.distinguishable
        drop_killed, drop_found = result.killed_by_kind.get("drop", (0, 0))
        assert drop_killed == drop_found, (task.key, result.survivors)  # every dropped step
        # the reference code (what the gold answer runs) agrees with the trusted reference
        reference = load(task.reference_source(), ENTRY_POINT)
        got = run(reference, [x for x, _ in task.tests])
        assert all(strict_equal(g, want) for g, (_, want) in zip(got, task.tests)), task.key
    assert distinguishable > 0 and killed / distinguishable >= floor, (killed, distinguishable)


@pytest.mark.parametrize("family", FAMILIES)
def test_pyfunc_hidden_tests_kill_the_one_edit_mutants(family):
    _check_family(list(_pyfunc_scores(family, range(20), DEFAULTS)))


@pytest.mark.parametrize("family", FAMILIES)
def test_bugfix_hidden_tests_kill_the_mutants_and_the_wrong_fixes(family):
    tasks = [generate_bugfix_task(np.random.default_rng(seed), kinds=BUG_KINDS, split=None,
                                  families=(family,), **DEFAULTS) for seed in range(15)]
    _check_family([(t.func, t.func.mutation_score(np.random.default_rng([s, 1]), 300))
                   for s, t in enumerate(tasks)])
    wrong = [t.wrong_fix_score(np.random.default_rng([s, 1]), 300) for s, t in enumerate(tasks)]
    assert sum(r.killed for r in wrong) >= 0.99 * sum(r.distinguishable for r in wrong)
    # the right fix is among the buggy code's mutants, and is not counted as a wrong one
    for s, task in enumerate(tasks):
        fix = [m for m in mutants(task.buggy_source(), ENTRY_POINT)
               if m.source.endswith(task.fixed_body)]
        result = score(task.func.reference_source(), ENTRY_POINT, task.func.tests,
                       task.func.sample(np.random.default_rng([s, 1]), 300), candidates=fix)
        assert len(fix) == 1 and result.distinguishable == 0, task.key


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [{}, {"min_transforms": 4, "max_transforms": 6},
                                   {"max_len": 50, "max_value": 1000}, {"num_tests": 3},
                                   {"num_tests": 1, "max_len": 3, "max_value": 4}])
def test_pyfunc_mutation_sweep(knobs):
    for family in FAMILIES:
        _check_family(list(_pyfunc_scores(family, range(100, 160), {**DEFAULTS, **knobs})))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_bugfix_mutation_sweep(family):
    tasks = [generate_bugfix_task(np.random.default_rng(seed), kinds=BUG_KINDS, split=None,
                                  families=(family,), **DEFAULTS) for seed in range(100, 160)]
    _check_family([(t.func, t.func.mutation_score(np.random.default_rng([s, 1]), 300))
                   for s, t in enumerate(tasks)])
    wrong = [t.wrong_fix_score(np.random.default_rng([s, 1]), 300) for s, t in enumerate(tasks)]
    assert sum(r.killed for r in wrong) >= 0.99 * sum(r.distinguishable for r in wrong)


@pytest.mark.parametrize("knobs", [{}, {"max_len": 1, "max_value": 1}, {"num_tests": 2},
                                   {"max_len": 50, "max_value": 1000, "max_transforms": 1}])
def test_hidden_inputs_are_deterministic_distinct_and_inside_the_space(knobs):
    knobs = {**DEFAULTS, **knobs}
    for seed in range(12):
        family = FAMILIES[seed % 3]
        task = generate_task(np.random.default_rng(seed), families=(family,), split="test", **knobs)
        again = generate_task(np.random.default_rng(seed), families=(family,), split="test",
                              **knobs)
        assert (task.key, task.examples, task.tests) == (again.key, again.examples, again.tests)
        inputs = [x for x, _ in task.tests]
        assert len(inputs) == knobs["num_tests"] or knobs["max_len"] == 1
        assert len(set(map(repr, inputs))) == len(inputs)
        assert not {repr(x) for x in inputs} & {repr(x) for x, _ in task.examples}
        if knobs["num_tests"] >= 3:
            assert inputs[0] in ([], "", 0)  # the edge case first
        v, top = knobs["max_value"], knobs["max_len"]
        for x in inputs:
            if family == "int":
                assert type(x) is int and abs(x) <= 50 * v
            elif family == "list":
                assert type(x) is list and len(x) <= top and all(abs(e) <= v for e in x)
            else:
                assert type(x) is str and len(x) <= top and set(x) <= set(task.space.alphabet)
