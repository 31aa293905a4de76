"""Shared machinery of the puzzles family: `PuzzleEnv` (one puzzle, one reply, one verdict),
`IndexedListAnswer` (the answer contract of N-Queens and graph colouring) and
`answer_runs_apart` (how every contract of the family finds an undeclared block answer).

Every puzzle here (Countdown, Sudoku, N-Queens, graph colouring) may have many valid answers, so
a reply is never compared with a reference string: the env's answer contract
(`PuzzleEnv.answer_contract`, a `llm_gym.grading.contracts` object) reads the one answer the reply
declares under the one answer policy (`llm_gym.grading.POLICY`: the last `Answer:` line or block,
`\\boxed{}` or "the answer is ..." sentence, else the last line or block stating an answer,
parsed completely; a second declaration with a different value voids the credit; nothing else in
the reply is read), and the puzzle's own rule checker (`PuzzleEnv.check`) decides whether that
value solves the puzzle.

Rewards are `ProblemEnv`'s: `format_coef * (format_ok - 1) + correct`, where format_ok means the
contract read a value (and the reply ended on the renderer's end of turn) and correct means the
rule checker accepted it. No partial credit: a near-solution scores the same 0 as any other wrong
one. Metrics (all episodes, always present): `parse_error`, `too_long`, `rule_violation` (read
but breaks a rule); `logs["answer_status"]` names the exact reason (a reading status of
`llm_gym.grading.Reading` or a rule status of the puzzle).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from llm_gym.grading import MAX_RESPONSE_CHARS, AnswerContract, SequenceAnswer
from llm_gym.grading.contracts.structured import strip_block
from llm_gym.grading.policy import Declaration
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra

__all__ = ["OK", "IndexedListAnswer", "PuzzleEnv", "Verdict", "answer_runs_apart", "unwrap"]

# The status of a value every rule checker accepts.
OK = "ok"

_WRAP = re.compile(r"^(?:\*\*|__|`)+|(?:\*\*|__|`)+$")


def unwrap(value: str) -> str:  # (also used by envs_catalog.text.lists)
    """`value` stripped of surrounding spaces, bold and backticks ("**3*7+8**", "`2 4 1 3`")."""
    return _WRAP.sub("", value.strip()).strip()


# --- undeclared block answers -----------------------------------------------------------------
_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[^\n]*")


def answer_runs_apart(visible: str, line_ok: Callable[[str], bool]) -> str:
    """`visible` with a blank line before every run of answer lines (`line_ok`) that follows a
    prose line of the same paragraph (fenced blocks left as they are).

    The policy reads an undeclared block answer from the reply's last block stating an answer,
    and a block's answer from its first line on. Every contract of this family reads its
    undeclared answer through this (`last_answer`), so that a block is a run of answer lines: a
    paragraph "Let me check." + answer lines reads the answer lines, and "Input:" + grid +
    "Output:" + grid reads the last grid -- as the last line is read for a one-line answer."""
    out: list[str] = []
    prose, fenced = False, False
    for line in visible.split("\n"):
        if _FENCE_LINE.fullmatch(line):
            fenced, prose = not fenced, False
        elif not fenced:
            ok = bool(line.strip()) and line_ok(line)
            if ok and prose:
                out.append("")
            prose = bool(line.strip()) and not ok
        out.append(line)
    return "\n".join(out)


# --- (index, value) lists --------------------------------------------------------------------
_PAIR = re.compile(
    r"[ \t]*(?:[(\[][ \t]*([0-9]{1,4})[ \t]*[,;]?[ \t]*([0-9]{1,4})[ \t]*[)\]]"
    r"|([0-9]{1,4})[ \t]*:[ \t]*([0-9]{1,4}))[ \t]*(?:[,;][ \t]*)?"
)


def _pairs(text: str) -> list[tuple[int, int]] | None:
    """The (index, value) pairs that make up all of `text` -- "(1, 2), (2, 4)", "[(1,2), (2,4)]",
    "[[1, 2], [2, 4]]", "1:2 2:4" -- or None."""
    s = text.strip()
    if s.startswith("[") and s.endswith("]") and s[1:].lstrip().startswith(("(", "[")):
        s = s[1:-1].strip()
    pairs, pos = [], 0
    while pos < len(s):
        m = _PAIR.match(s, pos)
        if m is None or m.end() == pos:
            return None
        a, b = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        pairs.append((int(a), int(b)))
        pos = m.end()
    return pairs or None


class IndexedListAnswer(SequenceAnswer):
    """A list of integers meant as the values for index 1, 2, ..., `count` in order -- a list as
    `SequenceAnswer` reads it (spaces, commas or semicolons between the items, bullets, a JSON
    list), also in parentheses ("(2, 4, 1, 3)") -- or (index, value) pairs that give every index
    1..`count` exactly one value, in any order ("(1, 2), (2, 4), ...", "1:2 2:4 ..."). Values are
    tuples of ints in index order. A flat list of another length is still one (wrong) answer:
    the env's rule checker refuses it, and declared next to the right one it is a second answer.
    `what` names the list in the prompt's instruction ("the column of the queen in each row,
    rows 1 to 8")."""

    def __init__(self, *, count: int, what: str, **kwargs: Any) -> None:
        super().__init__(item="int", **kwargs)
        self.count = count
        self.what = what

    def _unwrapped(self, text: str) -> str | None:
        """`text` without one pair of parentheses around a whole flat list, or None."""
        s = strip_block(text)
        if s.startswith("(") and s.endswith(")") and not any(c in s[1:-1] for c in "()[]"):
            return s[1:-1]
        return None

    def parse(self, text: str) -> tuple[Any, ...] | None:
        value = super().parse(text)
        if value is not None:
            return value
        inner = self._unwrapped(text)
        if inner is not None:
            return super().parse(inner)
        pairs = _pairs(strip_block(text))
        if pairs is None or sorted(i for i, _ in pairs) != list(range(1, self.count + 1)):
            return None
        return tuple(v for _, v in sorted(pairs))

    def line_ok(self, line: str) -> bool:
        if super().line_ok(line):
            return True
        inner = self._unwrapped(line.strip().rstrip("."))
        if inner is not None and super().line_ok(inner):
            return True
        return _pairs(strip_block(line).rstrip(".")) is not None

    def last_answer(self, visible: str) -> Declaration | None:
        return super().last_answer(answer_runs_apart(visible, self.line_ok))

    def instruction(self, *, brief: bool = False) -> str:
        if brief:
            return super().instruction(brief=True)
        return f"End with one line: Answer: {self.what}, separated by spaces."

    def describe(self) -> str:
        return f"{self.count} integers on one line, {self.what} (or index:value pairs)"


# --- the env -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What the env made of a reply: `format_ok` (the contract read a value), `correct` (the
    value obeys every rule) and the reason (`"ok"`, a reading status or a rule status)."""

    format_ok: bool
    correct: bool
    status: str


class PuzzleEnv(ProblemEnv):
    """One puzzle, one reply, one verdict (`judge`). Subclasses set `self.contract` (their answer
    contract, built with the task's text as context) and implement `gold_answer`, `check(value)`
    (`OK` or the rule the value breaks) and `reference_payload()`; metrics are `format`,
    `correct`, `parse_error`, `too_long`, `rule_violation`, and `logs["answer_status"]` says why."""

    contract: AnswerContract

    def __init__(
        self, renderer: Renderer, question: str, *, format_coef: float = 0.1,
        max_chars: int = MAX_RESPONSE_CHARS,
    ) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.question = question
        self.max_chars = max_chars
        self._verdict: tuple[str, Verdict] | None = None

    # -- subclass API --
    @property
    def answer_contract(self) -> AnswerContract:
        """What an answer is (`llm_gym.grading.contracts`), read under `llm_gym.grading.POLICY`."""
        return self.contract

    @property
    def gold_answer(self) -> Any:  # pragma: no cover - abstract
        """The reference solution in the contract's value type."""
        raise NotImplementedError

    def check(self, value: Any) -> str:  # pragma: no cover - abstract
        """`OK` when `value` (read by the contract) solves the puzzle, else the rule it breaks."""
        raise NotImplementedError

    def reference_payload(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- ProblemEnv API --
    def judge(self, sample_str: str) -> Verdict:
        # ProblemEnv.step asks check_format and check_answer about one string: read it once.
        if self._verdict is None or self._verdict[0] != sample_str:
            reading = self.contract.read(sample_str)
            if not reading.ok:
                verdict = Verdict(False, False, reading.status)
            else:
                status = self.check(reading.value)
                verdict = Verdict(True, status == OK, status)
            self._verdict = (sample_str, verdict)
        return self._verdict[1]

    def get_question(self) -> str:
        return self.question

    def check_format(self, sample_str: str) -> bool:
        return self.judge(sample_str).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return self.judge(sample_str).correct

    def get_reference_answer(self) -> str:
        return self.reference_payload()

    def get_reference_response(self) -> str:
        payload = self.reference_payload()
        return f"Answer:\n{payload}" if "\n" in payload else f"Answer: {payload}"

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        # The verdict is cached when grading ran in this process; a worker process (the bounded
        # grader's fallback) leaves none here, so recompute it (readers and checkers are bounded).
        if "grader_timeout" in result.metrics:
            verdict = Verdict(False, False, "grader_timeout")
        else:
            verdict = self.judge(result.logs["response"])
        result.metrics["parse_error"] = float(not verdict.format_ok)
        result.metrics["too_long"] = float(verdict.status == "too_long")
        result.metrics["rule_violation"] = float(verdict.format_ok and not verdict.correct)
        result.logs["answer_status"] = verdict.status
        return result
