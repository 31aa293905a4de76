"""Cryptarithms: `CryptarithmSource` (`llm/Cryptarithm-v0`), single-turn letter-arithmetic puzzles.

A puzzle such as "KQX + KTZ = UXZ" is made from random numbers, so it is always solvable:
`num_addends` numbers of `word_length` digits (no leading zero) are drawn from the seed, summed,
and each digit 0-9 gets its own random letter. The grader accepts any assignment that passes
`check_assignment` (distinct digits, no leading zero, the sum holds): random sums rarely have a
unique solution, so by default any valid one scores. With `require_unique=True` the column-wise
backtracking solver `count_solutions` must find exactly one assignment, or the puzzle is redrawn
(slow for short words: about 1 draw in 150 is unique with 3-letter addends).

The answer contract is `CryptarithmAnswer` (`CryptarithmEnv.answer_contract`), a
`llm_gym.grading.MappingAnswer` from each letter of the puzzle to one digit, read under the one
answer policy (`llm_gym.grading.POLICY`): the block after the last "Answer:" label, else the
reply's last run of mapping lines (`envs_catalog.puzzles._grid.answer_runs_apart`), is parsed
completely -- `A=1, B=2, ...` on one line (commas, semicolons, "and" or spaces between the
entries) or one entry per line (`A = 1`, `A: 1`, `A -> 1`), a code fence, a markdown table or a
JSON object -- and must give every letter of the puzzle exactly one digit (letters
case-insensitive). A letter missing or given twice, a letter not in the puzzle or anything else in
the block makes it no answer; a second declared mapping that differs voids the credit; working,
hypotheses and tentative mappings outside the answer are never read. The mapping read is then
checked by `check_assignment`; `gold_answer` is the mapping the puzzle was made from, one valid
answer of possibly several.

Held-out split: the puzzle's letter pattern (letters renamed in order of first appearance, the
addends in their least order, so a relabelled or reordered copy is the same task) is hashed by
`llm_gym.authoring.split_of`; about one puzzle in ten is in split="test".
"""

from __future__ import annotations

import itertools
import re
import string
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import answer_runs_apart
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, MappingAnswer, Reading
from llm_gym.grading.policy import Declaration
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra
from llm_gym.scripted import ScriptedCase

_MAX_DRAWS = 5_000


def count_solutions(addends: list[str], result: str, limit: int = 2) -> int:
    """How many letter->digit assignments solve `sum(addends) == result` (distinct digits, no
    leading zero), counting at most `limit`: a column-by-column backtracking search from the
    right, where each column's result letter is forced by the addend digits and the carry."""
    width = max(len(result), *(len(w) for w in addends))
    if len(result) < max(len(w) for w in addends):
        return 0
    columns = [[w[-1 - c] for w in addends if c < len(w)] for c in range(width)]
    results = [result[-1 - c] if c < len(result) else None for c in range(width)]
    leading = {w[0] for w in addends + [result] if len(w) > 1}
    digit_of: dict[str, int] = {}
    used = [False] * 10
    found = 0

    def assign_column(c: int, i: int, carry: int) -> None:
        nonlocal found
        if found >= limit:
            return
        if c == width:
            if carry == 0:
                found += 1
            return
        col = columns[c]
        if i < len(col):
            letter = col[i]
            if letter in digit_of:
                assign_column(c, i + 1, carry)
                return
            for d in range(1 if letter in leading else 0, 10):
                if not used[d]:
                    digit_of[letter], used[d] = d, True
                    assign_column(c, i + 1, carry)
                    del digit_of[letter]
                    used[d] = False
            return
        total = carry + sum(digit_of[x] for x in col)
        digit, carry_out = total % 10, total // 10
        r = results[c]
        if r is None:
            if digit == 0:  # the result is shorter than this column: nothing may be left over
                assign_column(c + 1, 0, carry_out)
            return
        if r in digit_of:
            if digit_of[r] == digit:
                assign_column(c + 1, 0, carry_out)
            return
        if used[digit] or (digit == 0 and r in leading):
            return
        digit_of[r], used[digit] = digit, True
        assign_column(c + 1, 0, carry_out)
        del digit_of[r]
        used[digit] = False

    assign_column(0, 0, 0)
    return found


def check_assignment(addends: list[str], result: str, mapping: dict[str, int]) -> str:
    """"ok" when `mapping` solves the puzzle, else what is wrong with it."""
    letters = set("".join(addends) + result)
    if set(mapping) != letters:
        return "letters_mismatch"
    if len(set(mapping.values())) != len(mapping):
        return "duplicate_digit"
    if any(len(w) > 1 and mapping[w[0]] == 0 for w in addends + [result]):
        return "leading_zero"

    def value(word: str) -> int:
        return int("".join(str(mapping[x]) for x in word))

    return "ok" if sum(value(w) for w in addends) == value(result) else "sum_wrong"


def invalid_swap(puzzle: "Puzzle") -> dict[str, int]:
    """The solution with two letters' digits swapped so that it no longer solves the puzzle (the
    first such swap; a non-unique puzzle may have valid ones)."""
    letters = list(puzzle.solution)
    for a, b in itertools.combinations(reversed(letters), 2):
        mapping = {**puzzle.solution, a: puzzle.solution[b], b: puzzle.solution[a]}
        if check_assignment(list(puzzle.addends), puzzle.result, mapping) != "ok":
            return mapping
    mapping = dict(puzzle.solution)  # one letter: give it another digit (the sum then fails)
    mapping[letters[0]] = (mapping[letters[0]] + 1) % 10 or 1
    return mapping


def canonical_key(addends: list[str], result: str) -> str:
    """The letter pattern, invariant to renaming letters and reordering addends."""
    best = None
    for order in itertools.permutations(addends):
        names: dict[str, str] = {}
        text = "+".join(order) + "=" + result
        pattern = "".join(
            c if c in "+=" else names.setdefault(c, string.ascii_lowercase[len(names)]) for c in text)
        best = pattern if best is None or pattern < best else best
    assert best is not None  # permutations() yields at least one order
    return best


# Two entries apart by spaces only ("A=1 B=2"): a value is one digit and a key one letter, so a
# space before "<letter>=" (or ":", "->", "→") can only start the next entry.
_SPACED_ENTRY = re.compile(r"(?<=[0-9])[ \t]+(?=[A-Za-z][ \t]*(?:=|:|->|→))")


class CryptarithmAnswer(MappingAnswer):
    """Each letter's digit: a `MappingAnswer` from `letters` to 0-9 (entries may also stand apart
    by spaces alone), with the puzzle's own answer instruction."""

    def __init__(self, *, letters: tuple[str, ...] | list[str], **kwargs: Any) -> None:
        super().__init__(keys=tuple(letters), values={str(d): d for d in range(10)}, **kwargs)

    def _entries(self, text: str) -> dict[str, Any] | None:
        return super()._entries(_SPACED_ENTRY.sub(", ", text))

    def last_answer(self, visible: str) -> Declaration | None:
        return super().last_answer(answer_runs_apart(visible, self.line_ok))

    def instruction(self, *, brief: bool = False) -> str:
        if brief:
            return super().instruction(brief=True)
        return "Reply with the digit of every letter in the form 'A=1, B=2, ...' and nothing after it."


@dataclass(frozen=True)
class Puzzle:
    addends: tuple[str, ...]
    result: str
    solution: dict[str, int]  # the assignment the puzzle was made from (letter order of appearance)

    def equation(self) -> str:
        return " + ".join(self.addends) + " = " + self.result

    unique: bool = False

    def question(self) -> str:
        any_valid = "" if self.unique else " Any valid solution counts."
        return (
            f"Solve the cryptarithm {self.equation()}\n"
            "Each letter stands for a different digit (0-9) and no number starts with 0."
            f"{any_valid} {CryptarithmAnswer(letters=list(self.solution)).instruction()}"
        )

    def answer_text(self) -> str:
        return ", ".join(f"{x}={d}" for x, d in self.solution.items())


def generate(rng: np.random.Generator, word_length: int, num_addends: int, require_unique: bool,
             split: str) -> Puzzle:
    low, high = (1 if word_length == 1 else 10 ** (word_length - 1)), 10**word_length
    for _ in range(_MAX_DRAWS):
        numbers = [int(x) for x in rng.integers(low, high, size=num_addends)]
        total = sum(numbers)
        letters = [string.ascii_uppercase[int(i)] for i in rng.choice(26, size=10, replace=False)]
        addends = ["".join(letters[int(d)] for d in str(x)) for x in numbers]
        result = "".join(letters[int(d)] for d in str(total))
        if require_unique and count_solutions(addends, result) != 1:
            continue
        if split_of(canonical_key(addends, result)) != split:
            continue
        solution = {}
        for x in "".join(addends) + result:
            solution.setdefault(x, letters.index(x))
        return Puzzle(tuple(addends), result, solution, require_unique)
    raise RuntimeError(
        f"no {split!r} cryptarithm found in {_MAX_DRAWS} draws with word_length={word_length}, "
        f"num_addends={num_addends}, require_unique={require_unique}; widen the knobs"
    )


# --- the environment ---------------------------------------------------------------------------
class CryptarithmEnv(ProblemEnv):
    """One cryptarithm. Metrics: `format`, `correct`, `parse_error` (no mapping read),
    `invalid_assignment` (read, but duplicate digits / a leading zero / the sum fails), `too_long`;
    `logs["answer_status"]` is the reading's status, or `check_assignment`'s verdict once read."""

    def __init__(self, renderer: Renderer, puzzle: Puzzle, *, format_coef: float = 0.1,
                 max_chars: int = MAX_RESPONSE_CHARS) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.puzzle = puzzle
        self.answer = dict(puzzle.solution)
        self.answer_contract = CryptarithmAnswer(letters=list(puzzle.solution), context=puzzle.question(),
                                                 max_chars=max_chars)
        self._read: tuple[str, Reading, str] | None = None

    @property
    def gold_answer(self) -> dict[str, int]:
        return dict(self.answer)

    def reading(self, sample_str: str) -> tuple[Reading, str]:
        if self._read is None or self._read[0] != sample_str:
            reading = self.answer_contract.read(sample_str)
            verdict = (check_assignment(list(self.puzzle.addends), self.puzzle.result, reading.value)
                       if reading.ok else reading.status)
            self._read = (sample_str, reading, verdict)
        return self._read[1], self._read[2]

    def get_question(self) -> str:
        return self.puzzle.question()

    def check_format(self, sample_str: str) -> bool:
        return self.reading(sample_str)[0].ok

    def check_answer(self, sample_str: str) -> bool:
        return self.reading(sample_str)[1] == "ok"

    def get_reference_answer(self) -> str:
        return self.puzzle.answer_text()

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        reading, verdict = self.reading(result.logs["response"])  # cached unless graded in a worker
        result.metrics["parse_error"] = float(not reading.ok)
        result.metrics["invalid_assignment"] = float(reading.ok and verdict != "ok")
        result.metrics["too_long"] = float(reading.status == "too_long")
        result.logs["answer_status"] = verdict
        return result


_KNOB_DOCS = {
    "word_length": "digits of each addend, 1-5",
    "num_addends": "numbers added, 2-4",
    "require_unique": "redraw until the solver finds exactly one solution (True; such puzzles are "
    "rare: about 1 draw in 150 for 3-letter words, 1 in 13 for 5-letter ones, so generation is "
    "slow for short words) or accept any solvable puzzle (False); the grader accepts any valid "
    "assignment either way",
    "format_coef": "penalty for a reply with no readable answer, 0-1",
}
_DEFAULTS: dict[str, Any] = {
    "word_length": 3, "num_addends": 2, "require_unique": False, "format_coef": 0.1,
}


class CryptarithmSource(EnvSource):
    """Letter-arithmetic puzzles made from random sums; knobs in `DEFAULTS`."""

    DEFAULTS: dict[str, Any] = _DEFAULTS
    card = EnvCard(
        id="llm/Cryptarithm-v0",
        family="puzzles",
        description=(
            "Letter-arithmetic puzzles (SEND + MORE = MONEY style) made from random numbers, so "
            "every one is solvable: each digit gets its own letter. The grader accepts ANY "
            "assignment with distinct digits, no leading zero and a sum that holds (random sums "
            "rarely have a unique solution); with require_unique=True a column-wise backtracking "
            "solver keeps only puzzles with exactly one solution. The reply is the mapping "
            "'A=1, B=2, ...', read under the one answer policy (llm_gym.grading.POLICY): the "
            "block after the last 'Answer:' label, else the reply's last block stating a "
            "mapping, parsed completely. No credit when a letter is missing, given twice or not "
            "in the puzzle, the block holds anything else or a second declared mapping differs; "
            "working and tentative mappings outside the answer are never read. split='test' "
            "holds about one letter pattern in ten (letters renamed, addends ordered, then "
            "hashed)."
        ),
        answer_contract=("letter -> digit for every letter (CryptarithmAnswer, a MappingAnswer); any valid "
                         "assignment counts"),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a valid assignment, 0 for a readable one "
            "that fails (duplicate digits, a leading zero, a wrong sum), -format_coef (0.1) when "
            "no single mapping can be read (empty, a letter missing or twice, two declared "
            "mappings that differ, over 4096 characters, invalid UTF-8). A reply that does not "
            "end on the renderer's end of turn loses format_coef but is still graded (0.9 if "
            "valid)."
        ),
        difficulty_knobs={k: f"{v} (default {_DEFAULTS[k]!r})" for k, v in _KNOB_DOCS.items()},
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Solve the cryptarithm AVQ + UXV = WHVU\nEach letter stands for a different digit "
                "(0-9) and no number starts with 0. Any valid solution counts. Reply with the "
                "digit of every letter in the form 'A=1, B=2, ...' and nothing after it."
            )},
            {"role": "assistant", "content": "A=8, V=3, Q=4, U=7, X=0, W=1, H=5"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.word_length = check_int("word_length", own["word_length"], 1, 5)
        self.num_addends = check_int("num_addends", own["num_addends"], 2, 4)
        self.require_unique = check_choice("require_unique", own["require_unique"], (True, False))
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)
        if self.word_length == 1 and self.require_unique:
            raise ValueError(
                "word_length=1 needs require_unique=False: one-letter addends never have a "
                "unique solution"
            )

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> CryptarithmEnv:
        puzzle = generate(rng, self.word_length, self.num_addends, self.require_unique, self.split)
        return CryptarithmEnv(self.renderer, puzzle, format_coef=self.format_coef)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference mapping, one letter per line after some working, a partial
        deduction then the mapping in a code fence. Adversarial (no credit): a wrong mapping
        declared before an undeclared right one (the declaration is read), a backup mapping
        declared after it, a digit used twice, a leading zero, one letter missing, a letter
        given twice, an alternative inside the mapping, the right mapping then a wrong one in
        one paragraph (the last run of mapping lines is read), the solved sum instead of a
        mapping, an empty reply."""

        def fmt(mapping):
            return ", ".join(f"{x}={d}" for x, d in mapping.items())

        def duplicate(env):  # two letters share a digit
            letters = list(env.answer)
            return {**env.answer, letters[1]: env.answer[letters[0]]}

        def leading_zero(env):  # swap the first letter's digit with 0's letter (or set it to 0)
            first = env.puzzle.addends[0][0]
            zero = next((x for x, d in env.answer.items() if d == 0), None)
            mapping = dict(env.answer)
            if zero is not None:
                mapping[zero] = mapping[first]
            mapping[first] = 0
            return mapping

        def wrong(env):  # two letters' digits swapped so that the assignment fails
            return invalid_swap(env.puzzle)

        return [
            ScriptedCase("reference mapping", "gold", lambda env, ob: fmt(env.answer), 1.0, 1.0),
            ScriptedCase("working then lines", "gold", lambda env, ob: (
                f"Column by column with carries, {env.puzzle.equation()} works out.\n\n"
                + "\n".join(f"{x} = {d}" for x, d in env.answer.items())), 1.0, 1.0),
            ScriptedCase("partial working, fenced answer", "gold", lambda env, ob: (
                f"The leading letter of the result gives {env.puzzle.result[0]} = "
                f"{env.answer[env.puzzle.result[0]]}.\nSo the answer is:\n```\n{fmt(env.answer)}"
                "\n```"), 1.0, 1.0),
            ScriptedCase("declared before", "adversarial", lambda env, ob: (
                f"My first answer: {fmt(wrong(env))}.\n\n{fmt(env.answer)}"), -1.0, 0.0),
            ScriptedCase("backup after", "adversarial", lambda env, ob: (
                f"{fmt(env.answer)}\nBackup answer: {fmt(wrong(env))}"), -1.0, 0.0),
            ScriptedCase("duplicate digit", "adversarial",
                         lambda env, ob: fmt(duplicate(env)), -1.0, 0.0),
            ScriptedCase("leading zero", "adversarial",
                         lambda env, ob: fmt(leading_zero(env)), -1.0, 0.0),
            ScriptedCase("letter missing", "adversarial",
                         lambda env, ob: fmt(dict(list(env.answer.items())[1:])), -1.0, 0.0),
            ScriptedCase("letter twice", "adversarial", lambda env, ob: (
                fmt(env.answer) + ", " + fmt(dict([next(iter(env.answer.items()))]))), -1.0, 0.0),
            ScriptedCase("alternative in the mapping", "adversarial", lambda env, ob: (
                fmt(env.answer) + f" (or maybe {fmt(wrong(env))})"), -1.0, 0.0),
            ScriptedCase("right then wrong", "adversarial", lambda env, ob: (
                "First try: " + fmt(env.answer) + "\nSecond try:\n" + fmt(wrong(env))), -1.0, 0.0),
            ScriptedCase("solved sum only", "adversarial", lambda env, ob: " + ".join(
                "".join(str(env.answer[x]) for x in w) for w in env.puzzle.addends) + " = "
                + "".join(str(env.answer[x]) for x in env.puzzle.result), -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
