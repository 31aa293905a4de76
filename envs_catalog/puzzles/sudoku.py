"""Sudoku (`llm/Sudoku-v0`): complete a 4x4 or 9x9 grid; any valid completion of the givens wins.

A task is a full random Sudoku grid (a base pattern shuffled by digit relabelling, row and column
swaps within bands and stacks, band and stack swaps and transposition, all from the episode's
generator) with `holes` cells emptied. With `unique=False` (default) the holes are chosen at
random and the puzzle may have several solutions -- the verifier accepts every one; with
`unique=True` cells are emptied one at a time only while the solution stays unique (a bitmask
backtracking solver counts solutions), up to `holes` of them.

The reply gives "Answer:" and the completed grid: N lines of N digits (spaces, tabs, commas, "|"
or brackets between digits allowed, markdown bold and a "Row k:" label around a row too; rule
lines of only "-", "+", "|", "=", ":" and code fences ignored; bands may stand apart by blank
lines), or the N*N digits on the marker's line. The last Answer block is the final answer; any
other complete grid stated in the reply that differs from it (`stated_grids`) gets no credit,
while the puzzle echoed (holes left) and working rows do not count (`envs_catalog.puzzles._grid`).
An empty cell left in the answer (".", "0", "_"), a row of the wrong length or any other character
is `malformed`; a digit above N is `digit_out_of_range`. The verifier checks that every given is
kept (`givens_changed`) and each row, column and box holds 1..N once (`row_repeat`,
`column_repeat`, `box_repeat`).

Held-out split: the puzzle string (givens and holes) is hashed by `llm_gym.authoring.split_of`;
draws are rejection-sampled into the source's split.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import OK, PuzzleEnv, unwrap
from llm_gym.grading.blocks import FENCE, strip_markup
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

Grid = list[list[int]]  # 0 = empty
_MAX_DRAWS = 10_000
_SEPARATOR = re.compile(r"[-+|=: \t]*[-=][-+|=: \t]*")
_ROW = re.compile(r"[0-9._|, \t\[\]]+")
_LABEL = re.compile(r"[^:]{1,40}:[ \t]*")
_ROW_LABEL = re.compile(r"^row[ \t]*[0-9]+[ \t]*[:.)=-]?[ \t]*", re.IGNORECASE)

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


def row_cells(line: str) -> str | None:
    """The cells of a grid row line ("1234", "1 2 3 4", "1\t2\t3\t4", "12|34", "| 1 | 2 |",
    "[1, 2, 3, 4]", "**1234**", "Row 1: 1234"), digits and holes ("._") only, or None."""
    text = _ROW_LABEL.sub("", strip_markup(line))
    if not text or not _ROW.fullmatch(text):
        return None
    return re.sub(r"[ \t|,\[\]]", "", text) or None


def _is_separator(line: str) -> bool:
    return bool(_SEPARATOR.fullmatch(line.strip())) or bool(FENCE.match(line))


def grid_block(lines: list[str], n: int) -> tuple[list[str], int]:
    """The grid rows starting at the first row line of `lines` and the index after them: row
    lines with rule lines ("--+--", "|---|") and code fences between them; a blank line ends the
    block unless fewer than `n` rows are read and a row line comes next (bands apart)."""
    i = 0
    while i < len(lines) and (not lines[i].strip() or _is_separator(lines[i])):
        i += 1
    rows: list[str] = []
    while i < len(lines):
        line = lines[i]
        cells = row_cells(line)
        if cells is not None:
            rows.append(cells)
        elif not line.strip():
            j = i
            while j < len(lines) and not lines[j].strip():
                j += 1
            if not rows or len(rows) >= n or j == len(lines) or row_cells(lines[j]) is None:
                break
        elif not _is_separator(line):
            break
        i += 1
    return rows, i


def parse_grid(payload: str, n: int) -> tuple[Grid | None, str]:
    """The completed grid in `payload` (see the module docstring), or (None, reason)."""
    if not payload.isascii():
        return None, "malformed"
    rows, end = grid_block(payload.split("\n"), n)
    if any(ln.strip() and not _is_separator(ln) for ln in payload.split("\n")[end:]):
        return None, "malformed"
    if len(rows) == 1 and len(rows[0]) == n * n:
        rows = [rows[0][i * n:(i + 1) * n] for i in range(n)]
    if len(rows) != n or any(len(row) != n for row in rows):
        return None, "malformed"
    if any(ch in "0._" for row in rows for ch in row):
        return None, "malformed"  # an empty cell left: not a completed grid
    return [[int(ch) for ch in row] for row in rows], OK


def _after_label(line: str) -> str:
    """A row after a short label ("Option A: 1234341221434321", "Answer: 1234") as that row."""
    if row_cells(line) is None:
        m = _LABEL.match(strip_markup(line))
        if m and row_cells(strip_markup(line)[m.end():]) is not None:
            return strip_markup(line)[m.end():]
    return line


def stated_grids(text: str, n: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every complete grid stated in `text`: a block of `n` rows of `n` digits 1-9 (several
    blocks in a row too), or all n*n digits on one line. The puzzle echoed (holes left) and
    single rows of working are not answers."""
    lines = [_after_label(line) for line in text.split("\n")]
    found = []
    i = 0
    while i < len(lines):
        if row_cells(lines[i]) is None:
            i += 1
            continue
        rows, end = grid_block(lines[i:], n)
        if len(rows) == 1 and len(rows[0]) == n * n:
            rows = [rows[0][k * n:(k + 1) * n] for k in range(n)]
        if len(rows) % n == 0 and all(len(r) == n for r in rows):
            for k in range(0, len(rows), n):
                grid = rows[k:k + n]
                if not any(ch in "0._" for row in grid for ch in row):
                    found.append(tuple(tuple(int(ch) for ch in row) for row in grid))
        i += max(end, 1)
    return found


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
        question = (
            f"Complete this {n}x{n} Sudoku: every row, column and {b}x{b} box must hold each of "
            f"1-{n} once; '.' is an empty cell.\n{puzzle_string(puzzle)}\n"
            f"End with 'Answer:' and the full grid, one row of {n} digits per line."
        )
        super().__init__(renderer, question, format_coef=format_coef)

    def verify(self, payload: str) -> tuple[bool, str]:
        grid, status = parse_grid(payload, len(self.puzzle))
        if grid is None:
            return False, status
        return True, check_grid(grid, self.puzzle)

    def reference_payload(self) -> str:
        return puzzle_string(self.solution)

    def answer_block(self, rest: str) -> tuple[str | None, list[str]]:
        """The grid block after the marker (its first row may share the marker's line; other
        text there, "the grid below", is ignored) and the lines after it."""
        lines = rest.split("\n")
        if row_cells(lines[0]) is None and unwrap(lines[0]):
            lines = lines[1:]
        rows, end = grid_block(lines, len(self.puzzle))
        if not rows:
            return None, lines
        payload = "\n".join(ln for ln in lines[:end] if ln.strip() and not _is_separator(ln))
        return payload, lines[end:]

    def answer_key(self, payload: str) -> tuple[tuple[int, ...], ...] | None:
        grid, _ = parse_grid(payload, len(self.puzzle))
        return None if grid is None else tuple(tuple(row) for row in grid)

    def stated_answers(self, text: str) -> list[tuple[tuple[int, ...], ...]]:
        return stated_grids(text, len(self.puzzle))


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
            "a cell empty or changing a given earns nothing. The last Answer block is the final "
            "answer: working and a check around it are fine, any other complete grid in the "
            "reply (an earlier attempt, an alternative, a second grid) earns nothing."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a valid completed grid keeping every "
            "given; 0 for a full grid that breaks a rule or changes a given; -format_coef (0.1) "
            "for no 'Answer:' block, an unreadable or incomplete grid, another different grid in "
            "the reply or a hedge after it. A reply not ending on the end of turn loses "
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
        puzzle echoed and working. Adversarial: the puzzle echoed, holes
        filled with 0, a valid grid with two digits swapped everywhere (givens changed), one cell
        changed, two different Answer blocks, a hedge, two grids after one marker, grids in prose
        with no marker, a row missing, an alternative grid after the answer, an earlier
        attempt before it."""

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
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"Answer:\n{sol(env)}\nor\n{one_cell_off(env)}", -1.0, 0.0),
            ScriptedCase("two grids", "adversarial",
                         lambda env, ob: f"Answer:\n{one_cell_off(env)}\n\n{sol(env)}", -1.0, 0.0),
            ScriptedCase("buried in prose", "adversarial",
                         lambda env, ob: f"Try\n{one_cell_off(env)}\nor\n{sol(env)}", -1.0, 0.0),
            ScriptedCase("row missing", "adversarial",
                         lambda env, ob: "Answer:\n" + "\n".join(sol(env).split("\n")[:-1]),
                         -1.0, 0.0),
            ScriptedCase("alternative after", "adversarial", lambda env, ob: (
                f"Answer:\n{sol(env)}\nAlternatively:\n{one_cell_off(env)}"), -1.0, 0.0),
            ScriptedCase("earlier attempt", "adversarial", lambda env, ob: (
                f"First attempt:\n{one_cell_off(env)}\n\nAnswer:\n{sol(env)}"), -1.0, 0.0),
        ]
