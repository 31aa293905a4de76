"""N-Queens (`llm/NQueens-v0`): complete a board of N non-attacking queens around pre-placed ones.

A task is a board size N and `preplaced` queens taken from one of its solutions (so every task
is solvable; that solution is the reference answer). The board is shown with "Q" for a placed
queen and "." elsewhere; rows are numbered 1..N from the top and columns 1..N from the left.

The answer contract is `IndexedListAnswer` (`envs_catalog.puzzles._grid`; a
`llm_gym.grading.SequenceAnswer` of integers, `NQueensEnv.answer_contract`): "Answer: c1 c2 ...
cN" -- the column of the queen in row 1, row 2, ..., row N (spaces, commas or semicolons between
them, optional brackets or parentheses) -- or the N (row, column) pairs ("(1, 2), (2, 4), ...",
"[(1,2), ...]", "1:2 2:4 ..."), read under the one answer policy (`llm_gym.grading.POLICY`): the
last `Answer:` line is parsed completely, a second declared placement that differs voids the
credit, nothing else in the reply is read; anything but integers in the slot is `malformed`.
The verifier checks the count (`wrong_count`), the range (`out_of_range`: a column outside
1..N), that every pre-placed queen is kept (`givens_moved`) and that no two queens share a column
(`same_column`) or a diagonal (`same_diagonal`); one queen per row is implied by the format.

Held-out split: the task key (N and the sorted pre-placed squares) is hashed by
`llm_gym.authoring.split_of`. When the task space is small (up to 20,000 (solution, subset)
pairs, which includes every setting with preplaced <= 1) the distinct tasks are enumerated once
per process and drawn uniformly from the split's list (a knob setting whose split is empty, such
as n=4 or preplaced=0, raises a ValueError saying so); otherwise draws are rejection-sampled
into the split.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import OK, IndexedListAnswer, PuzzleEnv
from llm_gym.authoring import check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

Placement = tuple[int, ...]  # column (0-based) of the queen in each row
_TABLE_MAX = 20_000
_MAX_DRAWS = 10_000

_KNOB_DOCS = {
    "n": "board side and number of queens, 4-10",
    "preplaced": "queens already on the board (taken from a solution), 0..n-1",
    "format_coef": "penalty for a reply with no readable answer line, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in _KNOB_DOCS.items()}


@functools.lru_cache(maxsize=16)
def all_solutions(n: int) -> tuple[Placement, ...]:
    """Every solution of the n-queens problem, in lexicographic order (cached per process)."""
    out: list[Placement] = []
    cols: list[int] = []

    def rec(used: int, diag1: int, diag2: int) -> None:
        r = len(cols)
        if r == n:
            out.append(tuple(cols))
            return
        for c in range(n):
            free = not (used >> c) & 1 and not (diag1 >> (r + c)) & 1
            if free and not (diag2 >> (r - c + n)) & 1:
                cols.append(c)
                rec(used | 1 << c, diag1 | 1 << (r + c), diag2 | 1 << (r - c + n))
                cols.pop()

    rec(0, 0, 0)
    return tuple(out)


def task_key(n: int, given: tuple[tuple[int, int], ...]) -> str:
    return f"{n}:" + ",".join(f"{r}-{c}" for r, c in sorted(given))


@functools.lru_cache(maxsize=32)
def _task_table(n: int, k: int, split: str) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Distinct pre-placed sets of the split (sorted, so draws are stable)."""
    tasks = set()
    for sol in all_solutions(n):
        for rows in itertools.combinations(range(n), k):
            given = tuple((r, sol[r]) for r in rows)
            if split_of(task_key(n, given)) == split:
                tasks.add(given)
    return tuple(sorted(tasks))


def check_placement(cols: list[int], n: int, given: tuple[tuple[int, int], ...]) -> str:
    """"ok" when `cols` (1-based column per row) is a solution keeping every given queen."""
    if any(not 1 <= c <= n for c in cols):
        return "out_of_range"
    cols0 = [c - 1 for c in cols]
    if any(cols0[r] != c for r, c in given):
        return "givens_moved"
    if len(set(cols0)) != n:
        return "same_column"
    sums = {r + c for r, c in enumerate(cols0)}
    if len(sums) != n or len({r - c for r, c in enumerate(cols0)}) != n:
        return "same_diagonal"
    return OK


def board_text(n: int, given: tuple[tuple[int, int], ...]) -> str:
    placed = set(given)
    return "\n".join("".join("Q" if (r, c) in placed else "." for c in range(n)) for r in range(n))


def placement_contract(n: int, context: str = "", **kwargs: Any) -> IndexedListAnswer:
    """The answer contract of an n x n board: the column of the queen in each row."""
    return IndexedListAnswer(count=n, what=f"the column of the queen in each row, rows 1 to {n}",
                             item_name="column", context=context, **kwargs)


class NQueensEnv(PuzzleEnv):
    def __init__(self, renderer: Renderer, n: int, given: tuple[tuple[int, int], ...],
                 solution: Placement, *, format_coef: float = 0.1) -> None:
        self.n, self.given, self.solution = n, given, solution
        keep = ""
        if given:
            keep = (" Q is a queen already placed; keep it." if len(given) == 1
                    else " Each Q is a queen already placed; keep them.")
        question = (
            f"Place {n} queens on this {n}x{n} board so that no two share a row, column or "
            f"diagonal.{keep}\n{board_text(n, given)}\nRows are 1-{n} from the top, columns 1-{n} "
            f"from the left. {placement_contract(n).instruction()}"
        )
        super().__init__(renderer, question, format_coef=format_coef)
        self.contract = placement_contract(n, question, max_chars=self.max_chars)

    @property
    def gold_answer(self) -> tuple[int, ...]:
        return tuple(c + 1 for c in self.solution)

    def check(self, value: tuple[int, ...]) -> str:
        if len(value) != self.n:
            return "wrong_count"
        return check_placement(list(value), self.n, self.given)

    def reference_payload(self) -> str:
        return " ".join(str(c + 1) for c in self.solution)


class NQueensSource(EnvSource):
    """N-Queens tasks; knobs in `DEFAULTS` (see the card). Registered as `llm/NQueens-v0`."""

    DEFAULTS: dict[str, Any] = {"n": 7, "preplaced": 2, "format_coef": 0.1}
    card = EnvCard(
        id="llm/NQueens-v0",
        family="puzzles",
        description=(
            "N-Queens completion, generated offline: an NxN board (default 7x7, up to 10x10) "
            "with `preplaced` queens (default 2) taken from a solution; place the rest so no two "
            "queens share a row, column or diagonal. The reply gives 'Answer:' and the column of "
            "the queen in each row (e.g. 'Answer: 1 3 5 7 2 4 6'; a list, a tuple or (row, column) "
            "pairs also read). Any non-attacking placement that keeps the pre-placed queens wins; "
            "duplicate columns, diagonal attacks, moved queens, columns off the board or a wrong "
            "count earn nothing. The placement is read under the one answer policy "
            "(llm_gym.grading.POLICY): the last 'Answer:' line (else the last line stating a "
            "placement), parsed completely; a second declared placement that differs voids the "
            "credit, and nothing else in the reply is read."
        ),
        answer_contract=(
            "N column numbers, one per row (IndexedListAnswer, a SequenceAnswer; (row, column) "
            "pairs also read); any valid placement counts"
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a valid placement keeping the pre-placed "
            "queens; 0 for a readable placement that breaks a rule or has the wrong count; "
            "-format_coef (0.1) when no single list of integers can be read (none, a slot with "
            "anything else, two declared placements that differ). A reply not ending on the end of turn loses "
            "format_coef."
        ),
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source="generated on the fly from the seed (exhaustive n-queens solutions, no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Place 7 queens on this 7x7 board so that no two share a row, column or diagonal. "
                "Each Q is a queen already placed; keep them.\n.......\n.......\n.......\n"
                "......Q\n.......\nQ......\n.......\nRows are 1-7 from the top, columns 1-7 "
                "from the left. End with one line: Answer: the column of the queen in each row, "
                "rows 1 to 7, separated by spaces.")},
            {"role": "assistant", "content": "Answer: 2 6 3 7 4 1 5"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.n = check_int("n", own["n"], 4, 10)
        self.preplaced = check_int("preplaced", own["preplaced"], 0, self.n - 1)
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)
        self._solutions = all_solutions(self.n)
        self._table = None
        if len(self._solutions) * math.comb(self.n, self.preplaced) <= _TABLE_MAX:
            self._table = _task_table(self.n, self.preplaced, split)
            if not self._table:
                raise ValueError(
                    f"NQueens: no {split!r} task exists with n={self.n}, preplaced="
                    f"{self.preplaced} (too few distinct tasks to split); raise n or preplaced"
                )

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def _solution_with(
        self, given: tuple[tuple[int, int], ...], rng: np.random.Generator
    ) -> Placement:
        matching = [s for s in self._solutions if all(s[r] == c for r, c in given)]
        return matching[int(rng.integers(len(matching)))]

    def make_env(self, rng: np.random.Generator) -> NQueensEnv:
        if self._table is not None:
            given = self._table[int(rng.integers(len(self._table)))]
            return NQueensEnv(self.renderer, self.n, given, self._solution_with(given, rng),
                              format_coef=self.format_coef)
        for _ in range(_MAX_DRAWS):
            sol = self._solutions[int(rng.integers(len(self._solutions)))]
            rows = sorted(rng.choice(self.n, size=self.preplaced, replace=False).tolist())
            given = tuple((r, sol[r]) for r in rows)
            if split_of(task_key(self.n, given)) == self.split:
                return NQueensEnv(self.renderer, self.n, given, sol, format_coef=self.format_coef)
        raise RuntimeError(  # pragma: no cover - large spaces always have both splits
            f"NQueens: no {self.split!r} task in {_MAX_DRAWS} draws; change n or preplaced"
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference solution, another solution found by search (the last matching
        one), the bracketed comma form, (row, column) pairs after working. Adversarial: the
        board echoed, one queen duplicated into another row's column, a solution that moves a
        pre-placed queen, 0-based columns, a column off the board, N-1 entries, two different
        Answer lines, a second placement in the slot, the answer among wrong ones in prose (no
        marker) or in a candidate list, an earlier declared placement that differs."""

        def last_solution(env: NQueensEnv) -> str:
            sol = [s for s in all_solutions(env.n) if all(s[r] == c for r, c in env.given)][-1]
            return "Answer: " + " ".join(str(c + 1) for c in sol)

        def duplicated(env: NQueensEnv) -> str:
            cols = [c + 1 for c in env.solution]
            r = next(r for r in range(env.n) if r not in {g for g, _ in env.given})
            cols[r] = cols[(r + 1) % env.n]
            return "Answer: " + " ".join(map(str, cols))

        def moved(env: NQueensEnv) -> str:
            other = next((s for s in all_solutions(env.n)
                          if any(s[r] != c for r, c in env.given)), None)
            if other is None:
                return duplicated(env)
            return "Answer: " + " ".join(str(c + 1) for c in other)

        ref = lambda env: env.reference_payload()  # noqa: E731
        return [
            ScriptedCase("solution", "gold", lambda env, ob: env.get_reference_response(), 1.0, 1.0),
            ScriptedCase("other solution", "gold", lambda env, ob: last_solution(env), 1.0, 1.0),
            ScriptedCase("bracketed", "gold",
                         lambda env, ob: f"Answer: [{ref(env).replace(' ', ', ')}]", 1.0, 1.0),
            ScriptedCase("(row, column) pairs", "gold", lambda env, ob: (
                "Each queen as (row, column); the answer is below.\nAnswer: " + ", ".join(
                    f"({r + 1}, {c + 1})" for r, c in enumerate(env.solution))), 1.0, 1.0),
            ScriptedCase("board echoed", "adversarial",
                         lambda env, ob: "Answer:\n" + board_text(env.n, env.given), -1.0, 0.0),
            ScriptedCase("duplicate queen", "adversarial", lambda env, ob: duplicated(env), -1.0, 0.0),
            ScriptedCase("given moved", "adversarial", lambda env, ob: moved(env), -1.0, 0.0),
            ScriptedCase("zero-based", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(str(c) for c in env.solution),
                         -1.0, 0.0),
            ScriptedCase("off the board", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(
                             [str(env.n + 1)] + ref(env).split()[1:]),
                         -1.0, 0.0),
            ScriptedCase("too few", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(ref(env).split()[:-1]), -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"{duplicated(env)}\nAnswer: {ref(env)}", -1.0, 0.0),
            ScriptedCase("second value in the slot", "adversarial",
                         lambda env, ob: f"Answer: {ref(env)} or {duplicated(env)[8:]}", -1.0, 0.0),
            ScriptedCase("buried in prose", "adversarial",
                         lambda env, ob: f"It is {duplicated(env)[8:]} or maybe {ref(env)}.",
                         -1.0, 0.0),
            ScriptedCase("candidate list", "adversarial",
                         lambda env, ob: f"Answer: {duplicated(env)[8:]}, {ref(env)}", -1.0, 0.0),
            ScriptedCase("earlier declared placement", "adversarial",
                         lambda env, ob: f"My first answer: {duplicated(env)[8:]}\n\nAnswer: {ref(env)}",
                         -1.0, 0.0),
        ]
