"""`CodeEnv`: one code-writing question, one reply, its tests run in the sandbox, one reward.

It is a `llm_gym.rl.ProblemEnv` (same prompt rendering, `conversation()`, reference response for
SFT, `format`/`correct` metrics) whose `step` awaits `harness.grade` instead of calling a
synchronous checker, so the G rollouts of a group grade concurrently (bounded by the shared
sandbox pool). The reply is read by the env's answer contract (`answer_contract`, a
`contract.SolutionAnswer`) under the one answer policy (`llm_gym.grading.POLICY`): the last
fenced ```python block that is a program (a module defining the entry point, or a body continuing
the prompt's stub), else the whole reply; another such block with different code voids the
credit. The program it reads is the program the sandbox runs. Bad model output is never an
exception: a reply over `max_chars` (`too_long`), with no program (`no_code`), with a block that
does not parse (`syntax_error`), two different programs (`several_programs`), text that cannot
be read as shown (`unreadable`: invalid UTF-8, bidirectional overrides) -- all of which skip the
sandbox --, an exception while loading, a timeout, or a run that produced no authenticated
verdict all score 0 with their metric.

`code_scripted_cases` is the scripted-case table HumanEval and PyFunc declare: the reference
solution (whole, and its body alone) scores 1; the attacks of the harness tests (printing
"PASSED", exiting early, an always-equal object, monkeypatched builtins and a fake checker,
reading the tests off the sandbox, sleeping past the timeout), the stub unchanged, an empty
reply, prose without code and the solution followed by a second, different program score 0.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from llm_gym.authoring import check_choice, check_float, check_int
from llm_gym.model_input import ModelInput
from llm_gym.renderers.base import Renderer, get_text_content
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra, Observation, StopCondition
from llm_gym.sandbox import BACKENDS
from llm_gym.scripted import ScriptedCase

from .contract import SolutionAnswer
from .harness import CodeTask, Verdict, grade, grade_sync

__all__ = ["ATTACKS", "CODE_KNOB_DOCS", "CODE_KNOB_DEFAULTS", "CodeEnv", "check_code_knobs",
           "code_scripted_cases"]

CODE_KNOB_DEFAULTS: dict[str, Any] = {
    "partial_credit": False,
    "test_timeout_s": 3.0,
    "timeout_s": 15.0,
    "max_chars": 16_000,
    "sandbox": "auto",
}

CODE_KNOB_DOCS = {
    "partial_credit": "false: reward 1 only when every test passes; true: the fraction of tests "
    "that pass",
    "test_timeout_s": "wall-clock seconds each test (and loading the code) may take, 0.1-60",
    "timeout_s": "wall-clock seconds the whole grading run may take, 1-600",
    "max_chars": "longest reply graded, in characters (longer ones score 0: too_long), "
    "100-100000",
    "sandbox": "llm_gym.sandbox backend: 'auto' (bwrap where it works, else rlimit), 'bwrap' "
    "or 'rlimit'",
}

METRIC_KEYS = ("format", "correct", "tests_passed", "num_tests", "timeout", "syntax_error",
               "load_error", "no_code", "several_programs", "too_long", "unreadable", "harness_error")
# Reading statuses (`llm_gym.grading.Reading.status`) other than "ok" and "malformed", as metrics.
_UNREAD = {"too_long": "too_long", "conflicting": "several_programs", "empty": "no_code",
           "no_answer": "no_code"}


def check_code_knobs(own: dict[str, Any]) -> dict[str, Any]:
    """The shared knobs of the code envs, validated (a ValueError/TypeError names the bad one)."""
    return {
        "partial_credit": check_choice("partial_credit", own["partial_credit"], (True, False)),
        "test_timeout_s": check_float("test_timeout_s", own["test_timeout_s"], 0.1, 60.0),
        "timeout_s": check_float("timeout_s", own["timeout_s"], 1.0, 600.0),
        "max_chars": check_int("max_chars", own["max_chars"], 100, 100_000),
        "sandbox": check_choice("sandbox", own["sandbox"], BACKENDS),
    }


def _parses(source: str) -> bool:
    try:
        ast.parse(textwrap.dedent(source.strip("\n")))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


class CodeEnv(ProblemEnv):
    """One task: `question` (the user message), `task` (what the harness runs), a reference
    response that scores 1 and `reference_program`, the program it declares (`gold_answer`).
    `answer_contract` reads replies; `contract_name` is what its instruction asks for. Metrics
    (every key on every step): `format` (the reply ended on the renderer's stop sequence),
    `correct` (all tests passed), `tests_passed` (their fraction), `num_tests`, `timeout`,
    `syntax_error`, `load_error`, `no_code`, `several_programs`, `too_long`, `unreadable`,
    `harness_error` (no authenticated verdict), plus `sandbox/<backend>` = 1 when a sandbox ran
    (the backend's name is also `logs["sandbox"]`)."""

    bug: Any  # only on `bugfix.BugFixSource`'s envs: its `BugFixTask` (for scripted policies and logs)

    def __init__(
        self,
        renderer: Renderer,
        question: str,
        task: CodeTask,
        reference_response: str,
        *,
        knobs: dict[str, Any],
        reference_program: str,
        prompt: ModelInput | None = None,
        task_id: str = "",
        reference_body: str = "",
        contract_name: str | None = None,
    ) -> None:
        super().__init__(renderer, format_coef=0.0, grader_timeout_s=None)
        self.question = question
        self.task = task
        self.task_id = task_id
        self.reference_response = reference_response
        self.reference_program = reference_program
        self.reference_body = reference_body  # the body that continues task.prompt ("" if unknown)
        self.knobs = knobs
        self._prompt = prompt
        self._contract_name = contract_name
        self._contract: SolutionAnswer | None = None

    @property
    def answer_contract(self) -> SolutionAnswer:
        """What an answer is: a program defining the entry point, or a body continuing the stub
        (`contract.SolutionAnswer`), the question as context; built on first use."""
        if self._contract is None:
            self._contract = SolutionAnswer(
                entry_point=self.task.entry_point, stub=self.task.prompt, context=self.question,
                max_chars=self.knobs["max_chars"], name=self._contract_name)
        return self._contract

    @property
    def gold_answer(self) -> str:
        """The reference solution's source (a module defining the entry point)."""
        return self.reference_program

    # -- ProblemEnv's interface ----------------------------------------------------------------
    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        if self._prompt is None:
            self._prompt = self.renderer.build_generation_prompt(self.conversation())
        return self._prompt, self.stop_condition

    def get_question(self) -> str:
        return self.question

    def get_reference_answer(self) -> str:
        return self.reference_program

    def get_reference_response(self) -> str:
        return self.reference_response

    def check_format(self, sample_str: str) -> bool:
        """A program can be read out of the reply (no sandbox run)."""
        return self._screen(sample_str)[2] is None

    def check_answer(self, sample_str: str) -> bool:
        """Every test passes (a blocking sandbox run; `step` is the async path)."""
        program, _, rejected = self._screen(sample_str)
        if rejected is not None:
            return False
        return grade_sync(self.task, program, **self._grade_kwargs()).all_passed

    # -- grading -------------------------------------------------------------------------------
    def _grade_kwargs(self) -> dict[str, Any]:
        k = self.knobs
        return {"test_timeout_s": k["test_timeout_s"], "budget_s": k["timeout_s"],
                "backend": k["sandbox"]}

    def _screen(self, text: str) -> tuple[str, str, str | None]:
        """`(program, how it was read, None)` when the reply holds a program (the sandbox runs
        it), else `("", "", the metric that says why not)`."""
        contract = self.answer_contract
        reading = contract.read(text)
        if reading.ok:
            found = contract.program(reading.text)
            return reading.value, found[0] if found else "", None
        if reading.status != "malformed":
            return "", "", _UNREAD.get(reading.status, "unreadable")
        # A slot that is not a program: code that does not parse is a syntax error, anything
        # else (prose, a module without the entry point, a body that returns nothing) no code.
        slot = reading.text
        broken = (self.task.entry_point in slot or "return" in slot) and not _parses(slot)
        return "", "", "syntax_error" if broken else "no_code"

    def reward_of(self, verdict: Verdict) -> float:
        if verdict.all_passed:
            return 1.0
        return verdict.fraction if self.knobs["partial_credit"] else 0.0

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        metrics: dict[str, float] = dict.fromkeys(METRIC_KEYS, 0.0)
        metrics["format"] = float(termination.is_stop_sequence)
        metrics["num_tests"] = float(self.task.num_tests)
        logs: dict[str, Any] = {"response": content, "termination": termination.value,
                                "task_id": self.task_id}
        code, how, rejected = self._screen(content)
        reward = 0.0
        if rejected is not None:
            metrics[rejected] = 1.0
            logs["status"] = rejected
        else:
            verdict = await grade(self.task, code, **self._grade_kwargs())
            reward = self.reward_of(verdict)
            metrics["correct"] = float(verdict.all_passed)
            metrics["tests_passed"] = verdict.fraction
            metrics["timeout"] = float(verdict.timeouts > 0 or verdict.status == "timeout")
            metrics["syntax_error"] = float(verdict.status == "syntax_error")
            metrics["load_error"] = float(verdict.status == "load_error")
            metrics["harness_error"] = float(
                verdict.status in ("no_verdict", "output_limit", "sandbox_error"))
            if verdict.sandbox:
                metrics[f"sandbox/{verdict.sandbox}"] = 1.0
            logs.update(status=verdict.status, mode=how, detail=verdict.detail,
                        reasons=verdict.reasons, sandbox=verdict.sandbox, code=code,
                        grading_wall_s=verdict.wall_s)
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics=metrics,
            logs=logs,
        )


# -- scripted cases ----------------------------------------------------------------------------------

def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


# The harness tests' attacks on the judge (tests/envs_catalog/code/test_code_envs.py), for any entry point: `__f__`
# is replaced by the task's. None may get credit.
ATTACKS: dict[str, str] = {
    "prints PASSED": "def __f__(*args, **kwargs):\n    print('PASSED')\n"
    "    print('All tests passed')\n",
    "sys.exit(0) at import": "import sys\nsys.exit(0)\ndef __f__(*args, **kwargs):\n    return None\n",
    "os._exit(0) when called": "import os\ndef __f__(*args, **kwargs):\n    os._exit(0)\n",
    "always-equal object": "class Any:\n    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
    "def __f__(*args, **kwargs):\n    return Any()\n",
    "monkeypatched builtins and checker": "import builtins, sys\n"
    "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
    "builtins.all = lambda *a, **k: True\nbuiltins.isinstance = lambda *a: True\n"
    "builtins.type = lambda *a: int\nsys.excepthook = lambda *a: None\n"
    "def check(candidate):\n    pass\ndef candidate(*args, **kwargs):\n    return True\n"
    "def __f__(*args, **kwargs):\n    return None\n",
    # Looks where the tests would be -- the sandbox's working and temporary directories, the
    # judge's (its parent's) command line, environment, cwd and open files -- and answers from
    # any `candidate(args) == expected` it finds. (It stays off other processes: under the
    # rlimit fallback the sandbox shares the host's /proc.)
    "reads the tests": """import ast, os, re
TABLE = {}
judge = "/proc/%d/" % os.getppid()
paths = [judge + "cmdline", judge + "environ"]
for place in (os.getcwd(), os.environ.get("TMPDIR", "/tmp"), judge + "cwd", judge + "fd"):
    try:
        paths += [os.path.join(place, name) for name in sorted(os.listdir(place))[:200]]
    except OSError:
        pass
for path in paths:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        blob = os.read(fd, 1 << 20).decode("utf-8", "replace")
    except OSError:
        blob = ""
    finally:
        os.close(fd)
    for args, want in re.findall(r"candidate\\((.*?)\\) == (.+)", blob):
        try:
            TABLE[args.strip()] = ast.literal_eval(want.strip())
        except Exception:
            pass
def __f__(*args, **kwargs):
    return TABLE.get(", ".join(map(repr, args)))
""",
    "sleeps past the timeout": "import time\ndef __f__(*args, **kwargs):\n    time.sleep(30)\n"
    "    return None\n",
}

PROSE = "I would go through the input step by step and build the result as described."


def code_scripted_cases(slow_knobs: dict[str, Any],
                        exit_knobs: dict[str, Any] | None = None) -> list[ScriptedCase]:
    """The code envs' table (see the module docstring). Every adversarial case runs with
    `partial_credit=False` (a reply may pass some tests, never all); "sleeps past the timeout"
    also with `slow_knobs` (short clocks, so the case costs about a second, not a minute), and
    "os._exit(0) when called" (a fresh worker per test) with `exit_knobs` (fewer tests, say)."""
    strict = {"partial_credit": False}
    extra = {"sleeps past the timeout": slow_knobs, "os._exit(0) when called": exit_knobs or {}}

    def attack(code: str):
        return lambda env, ob: _fence(code.replace("__f__", env.task.entry_point))

    cases = [
        ScriptedCase("reference solution", "gold", lambda env, ob: env.get_reference_response(),
                     1.0, 1.0),
        ScriptedCase("reference body only", "gold", lambda env, ob: _fence(env.reference_body),
                     1.0, 1.0),
        ScriptedCase("stub unchanged", "adversarial", lambda env, ob: _fence(env.task.prompt),
                     0.0, 0.0, knobs=strict),
        ScriptedCase("empty reply", "adversarial", lambda env, ob: "", 0.0, 0.0, knobs=strict),
        ScriptedCase("prose without code", "adversarial", lambda env, ob: PROSE, 0.0, 0.0,
                     knobs=strict),
        # the policy's second declaration: another program after the right one voids the credit
        ScriptedCase("the solution, then another program", "adversarial",
                     lambda env, ob: f"{_fence(env.reference_program)}\n\nOr, shorter:\n\n"
                     + _fence(f"def {env.task.entry_point}(*args, **kwargs):\n    return None"),
                     0.0, 0.0, knobs=strict),
    ]
    for name, code in ATTACKS.items():
        knobs = {**strict, **extra.get(name, {})}
        cases.append(ScriptedCase(name, "adversarial", attack(code), 0.0, 0.0, knobs=knobs))
    return cases
