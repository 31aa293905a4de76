"""`llm/PythonTool-v0`: math problems with a `python` tool that runs code in `llm_gym.sandbox`.

The problems (sums of primes, inclusion-exclusion counts, modular powers, Fibonacci numbers
modulo m, digit sums of powers) are quick to program and slow to do by hand. The tool runs the
model's program as `main.py` in a fresh offline sandbox (bubblewrap where the machine allows it,
else the rlimit fallback; `sandbox` knob) under a `timeout_s` wall clock and returns its stdout
(stderr appended on failure), capped like every tool output. The sandbox is created on the first
call, so building envs starts nothing. Knobs, episode, answer contract and reward:
`envs_catalog.tools.base`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs_catalog.tools.base import (
    COMMON_KNOBS, REWARD_MEANING, FinalNumberAnswer, GoldCall, ToolTaskSource, scripted_tool_cases,
)
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard
from llm_gym.scripted import ScriptedCase
from envs_catalog.tools.sandboxed import CLOSED_REPLY, SandboxedTool

STDERR_TAIL_CHARS = 2000
def format_run(result: Any, timeout_s: float) -> str:
    """A sandbox `Result` as the tool's reply: stdout; on failure also the stderr tail and why."""
    out = result.stdout
    if result.timed_out:
        return (out + "\n" if out else "") + f"Error: timed out after {timeout_s:g} s"
    if result.exit != 0 or result.killed_by:
        why = result.killed_by or f"exit status {result.exit}"
        err = result.stderr[-STDERR_TAIL_CHARS:]
        return (out + "\n" if out else "") + f"Error: the program failed ({why})\n{err}".rstrip()
    return out if out else "(no output: print the values you need)"


class PythonTool(SandboxedTool):
    """The `python(code)` tool of one episode, over its own sandbox (see `SandboxedTool`)."""

    def __init__(self, backend: str = "auto", timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s

        async def python(code: str) -> str:
            """Run a Python 3 program in a sandbox (no network, no files kept) and return what it prints.

            Args:
                code: A complete Python program; print the values you need.
            """
            if self.closed:
                return CLOSED_REPLY
            result = await self.sandbox().arun(code, timeout=self.timeout_s)
            return format_run(result, self.timeout_s)

        super().__init__(python, backend)


def make_python_tool(backend: str = "auto", timeout_s: float = 5.0) -> PythonTool:
    """A fresh `python(code)` tool (one per episode; see `PythonTool`)."""
    return PythonTool(backend, timeout_s)


def _primes_below(n: int) -> list[int]:
    sieve = bytearray([1]) * n
    sieve[:2] = b"\x00\x00"
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(range(i * i, n, i)))
    return [i for i in range(n) if sieve[i]]


def _fib_mod(n: int, m: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a


_SIEVE = """n = {n}
s = bytearray([1]) * n
s[:2] = b"\\x00\\x00"
for i in range(2, int(n ** 0.5) + 1):
    if s[i]:
        s[i * i::i] = bytearray(len(range(i * i, n, i)))
print(sum(i for i in range(n) if s[i]))"""
_COUNT = """from math import lcm
n, a, b, c = {n}, {a}, {b}, {c}
count = lambda d: n // d
print(count(a) + count(b) - count(lcm(a, b)) - count(lcm(a, c)) - count(lcm(b, c)) + count(lcm(a, b, c)))"""
_FIB = """a, b = 0, 1
for _ in range({n}):
    a, b = b, (a + b) % {m}
print(a)"""


def _problem(rng: np.random.Generator, scale: int) -> tuple[str, str, int, str]:
    """(key, question, answer, a program that prints the answer); `scale` 1-4 grows the numbers.
    The programs are written apart from the answers' computation (a sieve, inclusion-exclusion
    with math.lcm, pow, a Fibonacci loop, a digit sum) and fast at every scale."""
    big = 10 ** (scale + 2)
    kind = int(rng.integers(5))
    if kind == 0:
        n = int(rng.integers(big // 10, big))
        return (f"primes:{n}", f"What is the sum of all prime numbers less than {n}?",
                sum(_primes_below(n)), _SIEVE.format(n=n))
    if kind == 1:
        n = int(rng.integers(big, 10 * big))
        a, b, c = (int(x) for x in rng.choice(np.arange(2, 30), 3, replace=False))
        lcm = np.lcm.reduce
        either = n // a + n // b - n // int(lcm([a, b]))
        with_c = n // int(lcm([a, c])) + n // int(lcm([b, c])) - n // int(lcm([a, b, c]))
        count = either - with_c
        q = f"How many integers from 1 to {n} are divisible by {a} or by {b}, but not by {c}?"
        return f"div:{n}:{a}:{b}:{c}", q, count, _COUNT.format(n=n, a=a, b=b, c=c)
    if kind == 2:
        a, e, m = int(rng.integers(2, 1000)), int(rng.integers(big, 100 * big)), int(rng.integers(7, 10_000))
        return (f"pow:{a}:{e}:{m}", f"What is the remainder when {a}^{e} is divided by {m}?",
                pow(a, e, m), f"print(pow({a}, {e}, {m}))")
    if kind == 3:
        n, m = int(rng.integers(big // 10, big)), int(rng.integers(100, 100_000))
        q = (f"The Fibonacci numbers are F(1) = F(2) = 1 and F(k) = F(k-1) + F(k-2). What is F({n}) "
             f"modulo {m}?")
        return f"fib:{n}:{m}", q, _fib_mod(n, m), _FIB.format(n=n, m=m)
    a, e = int(rng.integers(2, 100)), int(rng.integers(20, 40 * scale))
    return (f"digits:{a}:{e}", f"What is the sum of the decimal digits of {a}^{e}?",
            sum(map(int, str(a ** e))), f"print(sum(int(d) for d in str({a} ** {e})))")


SYSTEM_PROMPT = (
    "Solve the problem. You may run Python with the python tool (print what you need). When you "
    "are done, " + FinalNumberAnswer(name=ToolTaskSource.ANSWER_NAME).instruction()
)
DEFAULTS: dict[str, Any] = {"scale": 2, "timeout_s": 5.0, "sandbox": "auto"}


class PythonToolSource(ToolTaskSource):
    """Problems for `llm/PythonTool-v0`; knobs: `scale`, `timeout_s`, `sandbox` + the family's."""

    OWN_DEFAULTS = DEFAULTS
    system_prompt = SYSTEM_PROMPT
    card = EnvCard(
        id="llm/PythonTool-v0",
        family="tools",
        description=(
            "Multi-turn math problems that are quick to program and slow by hand: sums of primes "
            "below n, inclusion-exclusion counts, a^e mod m, Fibonacci numbers modulo m, digit sums "
            "of powers. The model may call a `python` tool whose program runs in llm_gym.sandbox "
            "(offline, rlimits, wall timeout) and returns stdout, or stderr on failure, as a tool "
            "turn (Hermes/Qwen <tool_call> blocks). A turn without tool calls is the final answer, "
            "an integer read under the one answer policy (llm_gym.grading.POLICY: the last "
            "'Answer:' line, \\boxed{} or 'the answer is' sentence, else the last line stating a "
            "number, parsed completely; a second declared value voids the credit; the tool "
            "results are never read as the answer); each call costs tool_call_cost."
        ),
        answer_contract="integer (FinalNumberAnswer, an IntegerAnswer) in the last turn without a tool call; "
        "the system prompt asks for 'the final number only, with no tool call'",
        multi_turn=True,
        reward_range=(-0.15, 1.0),
        reward_meaning=REWARD_MEANING,
        difficulty_knobs={
            "scale": "size of the numbers (n up to 10^(scale+2)), 1-4 (default 2)",
            "timeout_s": "wall-clock seconds per python run, 0.5-60 (default 5)",
            "sandbox": "llm_gym.sandbox backend: 'auto', 'bwrap' or 'rlimit' (default 'auto')",
            **COMMON_KNOBS,
        },
        data_source="generated on the fly from the seed (5 problem kinds, no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "What is the sum of all prime numbers less than 1000?"},
            {"role": "assistant", "content": '<tool_call>\n{"name": "python", "arguments": {"code": '
             '"print(sum(p for p in range(2, 1000) if all(p % d for d in range(2, p))))"}}\n</tool_call>'},
            {"role": "tool", "content": "76127\n"},
            {"role": "assistant", "content": "76127"},
        ],
    )

    def configure(self, *, scale: int, timeout_s: float, sandbox: str) -> None:
        from llm_gym.sandbox import BACKENDS  # a tuple of names; probing happens on first run

        self.scale = check_int("scale", scale, 1, 4)
        self.timeout_s = check_float("timeout_s", timeout_s, 0.5, 60.0)
        self.sandbox = check_choice("sandbox", sandbox, BACKENDS)

    def tools(self) -> list:
        """A fresh tool per episode: releasing an episode closes its tool's sandbox, so a tool
        shared by the source would answer every later episode with CLOSED_REPLY."""
        return [make_python_tool(self.sandbox, self.timeout_s)]

    def draw_solved(self, rng: np.random.Generator) -> tuple[str, int, GoldCall]:
        """(question, answer, the python call whose program prints the answer)."""
        for _ in range(1000):
            key, question, answer, program = _problem(rng, self.scale)
            if split_of(f"py:{key}") == self.split:
                break
        return question, answer, ("python", {"code": program})

    def draw_task(self, rng: np.random.Generator) -> tuple[str, int]:
        question, answer, _ = self.draw_solved(rng)
        return question, answer

    def scripted_cases(self) -> list[ScriptedCase]:
        """The family's table (`base.scripted_tool_cases`): gold runs the task's program and
        answers what it printed (1 - tool_call_cost), or answers directly (1); adversarial: no
        tool under require_tool, a failing program then the answer, a hedge, two answers, the
        answer among wrong ones, a wrong number, an injection, prose, an empty answer, a
        malformed call, tool spam past max_tool_calls. Each case runs at most 3 programs."""
        return scripted_tool_cases(self, ("python", {"code": "raise SystemExit(3)"}))
