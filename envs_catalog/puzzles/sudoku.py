"""Sudoku (`llm/Sudoku-v0`): complete a 4x4 or 9x9 grid; any valid completion of the givens wins.

A task is a full random Sudoku grid (a base pattern shuffled by digit relabelling, row and column
swaps within bands and stacks, band and stack swaps and transposition, all from the episode's
generator) with `holes` cells emptied. With `unique=False` (default) the holes are chosen at
random and the puzzle may have several solutions -- the verifier accepts every one; with
`unique=True` cells are emptied one at a time only while the solution stays unique (a bitmask
backtracking solver counts solutions), up to `holes` of them.

The answer contract is `SudokuAnswer` (`SudokuEnv.answer_contract`), a
`llm_gym.grading.GridAnswer` of N rows of N digits 1-N, read under the one answer policy
(`llm_gym.grading.POLICY`): the block after the last "Answer:" label (else the reply's last run of
grid rows, `envs_catalog.puzzles._grid.answer_runs_apart`) is parsed completely -- one row per
line, digits run together or separated by spaces, tabs, commas or "|", a "Row k:" label, brackets,
bold or a bullet around a row, rule lines of only "-", "+", "|", "=", ":" between rows, a code
fence, a markdown table or a JSON list of rows; or the N*N digits on one line. A cell left empty
(".", "0", "_"), a digit above N, a row of the wrong length or any other line in the grid makes it
not a grid (`malformed`); a second declared grid that differs voids the credit; nothing else in
the reply is read. The verifier then checks that every given is kept (`givens_changed`) and each
row, column and box holds 1..N once (`row_repeat`, `column_repeat`, `box_repeat`).

Held-out split: the puzzle string (givens and holes) is hashed by `llm_gym.authoring.split_of`;
draws are rejection-sampled into the source's split.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import OK, PuzzleEnv, answer_runs_apart
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import GridAnswer
from llm_gym.grading.contracts.structured import strip_block
from llm_gym.grading.policy import Declaration
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

Grid = list[list[int]]  # 0 = empty
_MAX_DRAWS = 10_000
# A rule line between bands ("--+--", "|---|---|", "======").
_SEPARATOR = re.compile(r"[-+|=: \t]*[-=][-+|=: \t]*")

_KNOB_DOCS = {
    "size": "4 (2x2 boxes) or 9 (3x3 boxes)",
    "holes": "empty cells in the puzzle, 1..size*size",
    "unique": "whether the puzzle must have exactly one solution (then at most `holes` cells "
    "are emptied, as many as uniqueness allows)",
    "format_coef": "penalty for a reply with no readable grid, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in _KNOB_DOCS.items()}


def _box(n: int) -> int:
    return 2 if n == 4 else 3


def random_solution(rng: np.random.Generator, n: int) -> Grid:
    """A uniformly shuffled valid full grid of side `n` (4 or 9)."""
    b = _box(n)
    bands = rng.permutation(b).tolist()
    rows = [band * b + r for band in bands for r in rng.permutation(b).tolist()]
    stacks = rng.permutation(b).tolist()
    cols = [stack * b + c for stack in stacks for c in rng.permutation(b).tolist()]
    digits = (rng.permutation(n) + 1).tolist()
    grid = [[digits[(b * (r % b) + r // b + c) % n] for c in cols] for r in rows]
    if rng.random() < 0.5:
        grid = [list(col) for col in zip(*grid)]
    return grid


def count_solutions(
    grid: Grid, limit: int = 2, descending: bool = False
) -> tuple[int, Grid | None]:
    """(number of completions of `grid` up to `limit`, the first one found) by bitmask
    backtracking with the most-constrained cell first; `descending` tries digits n..1."""
    n, b = len(grid), _box(len(grid))
    g = [row[:] for row in grid]
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    empty = []
    for r in range(n):
        for c in range(n):
            v = g[r][c]
            if v:
                bit = 1 << v
                k = (r // b) * b + c // b
                if rows[r] & bit or cols[c] & bit or boxes[k] & bit:
                    return 0, None
                rows[r] |= bit
                cols[c] |= bit
                boxes[k] |= bit
            else:
                empty.append((r, c))
    full = sum(1 << d for d in range(1, n + 1))
    found: list[Grid] = []
    count = 0

    def rec() -> None:
        nonlocal count
        best, best_free = None, 0
        for r, c in empty:
            if g[r][c]:
                continue
            free = full & ~(rows[r] | cols[c] | boxes[(r // b) * b + c // b])
            if best is None or bin(free).count("1") < bin(best_free).count("1"):
                best, best_free = (r, c), free
                if not free:
                    return
        if best is None:
            count += 1
            if not found:
                found.append([row[:] for row in g])
            return
        r, c = best
        k = (r // b) * b + c // b
        order = range(n, 0, -1) if descending else range(1, n + 1)
        for d in order:
            bit = 1 << d
            if best_free & bit:
                g[r][c] = d
                rows[r] |= bit
                cols[c] |= bit
                boxes[k] |= bit
                rec()
                g[r][c] = 0
                rows[r] &= ~bit
                cols[c] &= ~bit
                boxes[k] &= ~bit
                if count >= limit:
                    return

    rec()
    return count, (found[0] if found else None)


def puzzle_string(grid: Grid) -> str:
    return "\n".join("".join(str(v) if v else "." for v in row) for row in grid)


class SudokuAnswer(GridAnswer):
    """A completed N x N Sudoku grid (`GridAnswer` of the digits 1..N, N rows of N cells), as the
    module docstring says; values are tuples of row strings ("1234", ...)."""

    def __init__(self, *, n: int, **kwargs: Any) -> None:
        super().__init__(alphabet="123456789"[:n], rows=n, cols=n, **kwargs)
        self.n = n
        # One digit per cell, so any run of spaces, tabs, commas or "|" between two cells (a box
        # border: "12|34") is a separator, never part of a cell.
        cell = f"[1-{n}]"
        self._row = re.compile(rf"{cell}(?:[ \t,|;]*{cell})*")

    def line_ok(self, line: str) -> bool:
        return super().line_ok(line) or _SEPARATOR.fullmatch(line.strip()) is not None

    def parse(self, text: str) -> tuple[str, ...] | None:
        lines = [line for line in strip_block(text).split("\n") if not _SEPARATOR.fullmatch(line.strip())]
        if len(lines) == 1:  # the N*N digits on one line
            cells = self._row_cells(lines[0])
            if cells is not None and len(cells) == self.n * self.n:
                return tuple(cells[i * self.n:(i + 1) * self.n] for i in range(self.n))
        return super().parse("\n".join(lines))

    def last_answer(self, visible: str) -> Declaration | None:
        return super().last_answer(answer_runs_apart(visible, self.line_ok))

    def instruction(self, *, brief: bool = False) -> str:
        if brief:
            return super().instruction(brief=True)
        return f"End with 'Answer:' and the full grid, one row of {self.n} digits per line."


def check_grid(answer: Grid, puzzle: Grid) -> str:
    """"ok" when `answer` is a valid full grid that keeps every given of `puzzle`."""
    n, b = len(puzzle), _box(len(puzzle))
    if any(not 1 <= v <= n for row in answer for v in row):
        return "digit_out_of_range"
    if any(puzzle[r][c] and puzzle[r][c] != answer[r][c] for r in range(n) for c in range(n)):
        return "givens_changed"
    target = set(range(1, n + 1))
    if any(set(row) != target for row in answer):
        return "row_repeat"
    if any({answer[r][c] for r in range(n)} != target for c in range(n)):
        return "column_repeat"
    for br in range(0, n, b):
        for bc in range(0, n, b):
            if {answer[r][c] for r in range(br, br + b) for c in range(bc, bc + b)} != target:
                return "box_repeat"
    return OK


class SudokuEnv(PuzzleEnv):
    def __init__(self, renderer: Renderer, puzzle: Grid, solution: Grid, *,
                 format_coef: float = 0.1) -> None:
        self.puzzle, self.solution = puzzle, solution
        n = len(puzzle)
        b = _box(n)
        task = (
            f"Complete this {n}x{n} Sudoku: every row, column and {b}x{b} box must hold each of "
            f"1-{n} once; '.' is an empty cell.\n{puzzle_string(puzzle)}\n"
        )
        question = task + SudokuAnswer(n=n).instruction()
        super().__init__(renderer, question, format_coef=format_coef)
        self.contract = SudokuAnswer(n=n, context=question, max_chars=self.max_chars)

    @property
    def gold_answer(self) -> tuple[str, ...]:
        return tuple("".join(map(str, row)) for row in self.solution)

    def check(self, value: tuple[str, ...]) -> str:
        return check_grid([[int(ch) for ch in row] for row in value], self.puzzle)

    def reference_payload(self) -> str:
        return puzzle_string(self.solution)


class SudokuSource(EnvSource):
    """Sudoku tasks; knobs in `DEFAULTS` (see the card). Registered as `llm/Sudoku-v0`."""

    DEFAULTS: dict[str, Any] = {"size": 4, "holes": 6, "unique": False, "format_coef": 0.1}
    card = EnvCard(
        id="llm/Sudoku-v0",
        family="puzzles",
        description=(
            "Sudoku generated offline: a shuffled valid grid (default 4x4 with 2x2 boxes; 9x9 by "
            "knob) with `holes` cells emptied (default 6), shown with '.' for empty cells. The "
            "reply gives 'Answer:' and the completed grid, one row per line (digits run together "
            "or separated by spaces, tabs, commas or '|'; all on one line also reads). Any valid "
            "completion that keeps the givens wins (with unique=False a puzzle may have several); "
            "the verifier checks rows, columns, boxes and givens, so echoing the puzzle, leaving "
            "a cell empty or changing a given earns nothing. The grid is read under the one "
            "answer policy (llm_gym.grading.POLICY): the block after the last 'Answer:' (else the "
            "reply's last block stating a grid), parsed completely; a second declared grid that "
            "differs voids the credit, and nothing else in the reply is read."
        ),
        answer_contract="N x N grid of the digits 1..N (SudokuAnswer, a GridAnswer); any valid completion counts",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a valid completed grid keeping every "
            "given; 0 for a full grid that breaks a rule or changes a given; -format_coef (0.1) "
            "when no single grid can be read (no grid, an incomplete or unreadable one, two "
            "declared grids that differ). A reply not ending on the end of turn loses "
            "format_coef."
        ),
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Complete this 4x4 Sudoku: every row, column and 2x2 box must hold each of 1-4 "
                "once; '.' is an empty cell.\n1.3.\n.412\n2.43\n.3.1\nEnd with 'Answer:' and the "
                "full grid, one row of 4 digits per line.")},
            {"role": "assistant", "content": "Answer:\n1234\n3412\n2143\n4321"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.size = check_choice("size", own["size"], (4, 9))
        self.holes = check_int("holes", own["holes"], 1, self.size * self.size)
        self.unique = check_choice("unique", own["unique"], (True, False))
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def _dig(self, rng: np.random.Generator, solution: Grid) -> Grid:
        n = self.size
        puzzle = [row[:] for row in solution]
        order = rng.permutation(n * n).tolist()
        if not self.unique:
            for i in order[: self.holes]:
                puzzle[i // n][i % n] = 0
            return puzzle
        removed = 0
        for i in order:
            if removed == self.holes:
                break
            r, c = divmod(i, n)
            keep, puzzle[r][c] = puzzle[r][c], 0
            if count_solutions(puzzle, limit=2)[0] == 1:
                removed += 1
            else:
                puzzle[r][c] = keep
        return puzzle

    def make_env(self, rng: np.random.Generator) -> SudokuEnv:
        for _ in range(_MAX_DRAWS):
            solution = random_solution(rng, self.size)
            puzzle = self._dig(rng, solution)
            if split_of(f"sudoku:{puzzle_string(puzzle)}") != self.split:
                continue
            return SudokuEnv(self.renderer, puzzle, solution, format_coef=self.format_coef)
        raise RuntimeError(  # pragma: no cover - needs a split with almost no puzzles
            f"SudokuSource: no {self.split!r} puzzle in {_MAX_DRAWS} draws; widen the knobs"
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the generator's solution, a solver's completion (digits tried from the top, so
        often a different valid grid), the grid on one line, the grid tab-separated after the
        puzzle echoed and working. Adversarial: the puzzle echoed, holes filled with 0, a valid
        grid with two digits swapped everywhere (givens changed), one cell changed, two
        different Answer blocks, an alternative inside the block, another grid after a blank
        line (the declared block is the wrong one), two grids in prose with no label (the last
        one, wrong, is read), a row missing, an earlier declared grid that differs."""

        def grid_text(grid: Grid) -> str:
            return "\n".join("".join(map(str, row)) for row in grid)

        def swapped(env: SudokuEnv) -> str:
            n = len(env.puzzle)
            given = next((v for row in env.puzzle for v in row if v), None)
            if given is None:  # no givens: every valid grid wins, so break a rule instead
                return one_cell_off(env)
            other = given % n + 1
            table = {given: other, other: given}
            return grid_text([[table.get(v, v) for v in row] for row in env.solution])

        def one_cell_off(env: SudokuEnv) -> str:
            n = len(env.puzzle)
            r, c = next((r, c) for r in range(n) for c in range(n) if not env.puzzle[r][c])
            grid = [row[:] for row in env.solution]
            grid[r][c] = grid[r][c] % n + 1
            return grid_text(grid)

        def solver(env: SudokuEnv) -> str:
            solution = count_solutions(env.puzzle, 1, descending=True)[1]
            assert solution is not None  # the puzzles have a solution
            return "Answer:\n" + grid_text(solution)

        def hedged_row(env: SudokuEnv) -> str:  # the last row offered two ways inside the block
            rows = grid_text(env.solution).split("\n")
            return "\n".join(rows[:-1] + [f"{rows[-1]} (or {rows[-1][::-1]})"])

        sol = lambda env: grid_text(env.solution)  # noqa: E731
        return [
            ScriptedCase("solution", "gold", lambda env, ob: env.get_reference_response(), 1.0, 1.0),
            ScriptedCase("solver", "gold", lambda env, ob: solver(env), 1.0, 1.0),
            ScriptedCase("one line", "gold",
                         lambda env, ob: "Answer: " + sol(env).replace("\n", ""), 1.0, 1.0),
            ScriptedCase("puzzle echoed, working, tabs", "gold", lambda env, ob: (
                f"The puzzle:\n{puzzle_string(env.puzzle)}\n"
                "Filling each row, the answer is below.\nAnswer:\n"
                + "\n".join("\t".join(map(str, row)) for row in env.solution)),
                1.0, 1.0),
            ScriptedCase("puzzle echoed", "adversarial",
                         lambda env, ob: "Answer:\n" + puzzle_string(env.puzzle), -1.0, 0.0),
            ScriptedCase("zeros for holes", "adversarial",
                         lambda env, ob: "Answer:\n" + grid_text(env.puzzle), -1.0, 0.0),
            ScriptedCase("givens changed", "adversarial",
                         lambda env, ob: "Answer:\n" + swapped(env), -1.0, 0.0),
            ScriptedCase("one cell off", "adversarial",
                         lambda env, ob: "Answer:\n" + one_cell_off(env), -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer:\n{one_cell_off(env)}\nAnswer:\n{sol(env)}",
                         -1.0, 0.0),
            ScriptedCase("alternative in the block", "adversarial",
                         lambda env, ob: "Answer:\n" + hedged_row(env), -1.0, 0.0),
            ScriptedCase("two grids", "adversarial",
                         lambda env, ob: f"Answer:\n{one_cell_off(env)}\n\n{sol(env)}", -1.0, 0.0),
            ScriptedCase("wrong grid last in prose", "adversarial",
                         lambda env, ob: f"Try\n{sol(env)}\nor\n{one_cell_off(env)}", -1.0, 0.0),
            ScriptedCase("row missing", "adversarial",
                         lambda env, ob: "Answer:\n" + "\n".join(sol(env).split("\n")[:-1]),
                         -1.0, 0.0),
            ScriptedCase("earlier declared grid", "adversarial", lambda env, ob: (
                f"First answer:\n{one_cell_off(env)}\n\nAnswer:\n{sol(env)}"), -1.0, 0.0),
        ]
