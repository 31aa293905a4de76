"""Print how well the hidden tests of the generated code envs tell a right program from a wrong one.

For each family of `llm/PyFunc-v0` and `llm/BugFix-v0` (list, str, int; the envs' default knobs,
`--knobs` to override), tasks are drawn from seeds `--seed`.. `--seed`+`--tasks`-1 and their
hidden tests scored against the reference's one-edit mutants (`PyFuncTask.mutation_score`;
`envs_catalog/code/mutants.py` says what counts as trivial, distinguishable and killed), on the
tests plus `--sample` fresh inputs from each task's distribution (seeded by [seed, 1]). BugFix has
a second row: its buggy function's one-edit mutants, i.e. the other fixes a model could make
(`BugFixTask.wrong_fix_score`). Deterministic: the same arguments print the same table.

`--humaneval N` adds a row for the first N HumanEval problems (164: all): each one-edit mutant of
the canonical solution is graded in `llm_gym.sandbox` against the dataset's own tests (dataset
code is not run in-process). HumanEval has no input generator, so equivalent mutants cannot be
told apart from test gaps: its rate is killed / non-trivial mutants, a lower bound.

    python scripts/mutation_report.py --tasks 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs_catalog.code.bugfix import BUG_KINDS, generate_bugfix_task  # noqa: E402
from envs_catalog.code.mutants import MutationScore, mutants  # noqa: E402
from envs_catalog.code.pyfunc import FAMILIES, PyFuncSource, generate_task  # noqa: E402

_TASK_KNOBS = ("min_transforms", "max_transforms", "num_tests", "num_examples", "max_len",
               "max_value")


@dataclass
class Row:
    name: str
    tasks: int = 0
    mutants: int = 0
    trivial: int = 0
    distinguishable: int = 0
    killed: int = 0
    drops: list[int] = field(default_factory=lambda: [0, 0])  # killed, distinguishable
    tasks_with_survivors: int = 0
    survivors: list[str] = field(default_factory=list)  # a few, for the reader

    def add(self, key: str, result: MutationScore) -> None:
        self.tasks += 1
        self.mutants += result.mutants
        self.trivial += result.trivial
        self.distinguishable += result.distinguishable
        self.killed += result.killed
        killed, found = result.killed_by_kind.get("drop", (0, 0))
        self.drops[0] += killed
        self.drops[1] += found
        self.tasks_with_survivors += bool(result.survivors)
        self.survivors += [f"{key}: {m.kind} line {m.line} ({m.what})" for m in result.survivors]

    def cells(self) -> list[str]:
        rate = self.killed / self.distinguishable if self.distinguishable else 1.0
        drops = f"{self.drops[0]}/{self.drops[1]}" if self.drops[1] else "-"
        return [self.name, str(self.tasks), str(self.mutants), str(self.trivial),
                str(self.distinguishable), str(self.killed), f"{100 * rate:.2f}%", drops,
                str(self.tasks_with_survivors)]


HEADER = ["family", "tasks", "mutants", "trivial", "distinguishable", "killed", "kill rate",
          "drop-step killed", "tasks w/ survivor"]


def generated_rows(tasks: int, seed: int, sample: int, knobs: dict[str, Any]) -> list[Row]:
    rows = []
    for family in FAMILIES:
        pyfunc, bugfix, wrong_fix = (Row(f"PyFunc {family}"), Row(f"BugFix {family}"),
                                     Row(f"BugFix {family} wrong fixes"))
        for s in range(seed, seed + tasks):
            task = generate_task(np.random.default_rng(s), families=(family,), **knobs)
            pyfunc.add(task.key, task.mutation_score(np.random.default_rng([s, 1]), sample))
            bug = generate_bugfix_task(np.random.default_rng(s), kinds=BUG_KINDS, split=None,
                                       families=(family,), **knobs)
            bugfix.add(bug.key, bug.func.mutation_score(np.random.default_rng([s, 1]), sample))
            wrong_fix.add(bug.key, bug.wrong_fix_score(np.random.default_rng([s, 1]), sample))
        rows += [pyfunc, bugfix, wrong_fix]
    return rows


def humaneval_row(limit: int) -> Row:
    from envs_catalog.code.harness import grade
    from envs_catalog.code.humaneval import load_problems

    row = Row("HumanEval (lower bound)")

    async def grade_all(problem, sources):
        return await asyncio.gather(*(grade(problem.task, src, test_timeout_s=3.0, budget_s=20.0)
                                      for src in sources))

    for problem in load_problems()[:limit]:
        found = mutants(problem.prompt + problem.canonical_solution, problem.entry_point)
        verdicts = asyncio.run(grade_all(problem, [m.source for m in found]))
        loaded = [(m, v) for m, v in zip(found, verdicts)
                  if v.status not in ("syntax_error", "load_error")]
        survivors = tuple(m for m, v in loaded if v.all_passed)
        by_kind: dict[str, tuple[int, int]] = {}
        for m, v in loaded:
            killed, total = by_kind.get(m.kind, (0, 0))
            by_kind[m.kind] = (killed + (not v.all_passed), total + 1)
        row.add(problem.task_id, MutationScore(len(found), len(found) - len(loaded), len(loaded),
                                               len(loaded) - len(survivors), survivors, by_kind))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200,
                        help="tasks per family (default 200; 0: HumanEval only)")
    parser.add_argument("--seed", type=int, default=0, help="first task seed (default 0)")
    parser.add_argument("--sample", type=int, default=300,
                        help="fresh inputs per task that judge distinguishability (default 300)")
    parser.add_argument("--knobs", default="{}",
                        help="JSON of generator knobs over the defaults, "
                        'e.g. \'{"max_transforms": 6}\'')
    parser.add_argument("--humaneval", type=int, default=0, metavar="N",
                        help="also grade the mutants of the first N HumanEval problems (sandbox)")
    parser.add_argument("--survivors", type=int, default=0, metavar="K",
                        help="list up to K surviving mutants per row")
    args = parser.parse_args(argv)
    knobs = {k: PyFuncSource.DEFAULTS[k] for k in _TASK_KNOBS}
    extra = json.loads(args.knobs)
    unknown = set(extra) - set(_TASK_KNOBS)
    if unknown:
        parser.error(f"--knobs takes {', '.join(_TASK_KNOBS)}; got {', '.join(sorted(unknown))}")
    knobs.update(extra)
    start = time.monotonic()
    rows = generated_rows(args.tasks, args.seed, args.sample, knobs) if args.tasks else []
    if args.humaneval:
        rows.append(humaneval_row(args.humaneval))
    table = [HEADER] + [row.cells() for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    if args.tasks:
        print(f"knobs: {json.dumps(knobs, sort_keys=True)}; seeds {args.seed}.."
              f"{args.seed + args.tasks - 1}; {args.sample} sampled inputs per task")
    for i, r in enumerate(table):
        print("| " + " | ".join(c.ljust(w) if j == 0 else c.rjust(w)
                                for j, (c, w) in enumerate(zip(r, widths))) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        for line in row.survivors[:args.survivors]:
            print(f"  survivor ({row.name}) {line}")
    print(f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
