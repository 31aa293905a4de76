"""`llm/CodeOutput-v0`: predict the exact standard output of a short generated Python program.

A program is `length` blocks drawn from the source's generator, each one to four lines over a few
int variables, string variables (fruit names) and a list: assignments, arithmetic with `+ - * //
%`, string slicing, reversal, case, replacement, repetition and concatenation, `len`/`sum`/
`max`/`sorted`, `for` loops over `range(k)` or a string, `if`/`else`, and `while` loops whose
counter is set right before them -- so every loop is bounded by construction and the program runs
in microseconds. The last block prints, output is at most `max_output_lines` lines (programs
printing more, or an empty or whitespace-edged line, are redrawn).

The reference output is computed at task-generation time by running the generated program -- our
own trusted code, never the model's -- in-process with `print` bound to a buffer and only the
handful of builtins the generator uses (`_run`). No model code runs at all: the reply is text.

Reading the reply: the answer contract is `OutputAnswer` (`CodeOutputEnv.answer_contract`), an
`llm_gym.grading.ExactTextAnswer` read under the one answer policy (`llm_gym.grading.POLICY`): the
block after an "Output:" or "Answer:" label that starts its line (the last one; another label
declaring a different output voids the credit), else the reply's last fenced block when the reply
ends with it, else the whole reply. A reply over `max_chars` is `too_long`, one with U+FFFD
(invalid UTF-8) `invalid_text`. The text read -- one fence around it taken off, each line's
trailing whitespace and the blank lines around the whole dropped -- must equal the reference line
by line (case, spaces inside lines, line order, the number of lines): a reply that is the output
with prose around it and no label, or several candidate outputs, is not the output.
Split: the program's source text hashed by `llm_gym.authoring.split_of`.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.authoring import check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading.contracts import ExactTextAnswer
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Renderer
from llm_gym.renderers.base import get_text_content
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra, Observation, StopCondition
from llm_gym.scripted import ScriptedCase

__all__ = ["CodeOutputEnv", "CodeOutputSource", "OutputAnswer", "Program", "generate_program"]

_WORDS = ("kiwi", "lemon", "mango", "plum", "pear", "fig", "grape", "melon", "apple", "cherry",
          "peach", "lime", "olive", "date")
_INTS = ("a", "b", "c", "n", "k")
_STRS = ("s", "t", "w")
_MAX_DRAWS = 500


@dataclass(frozen=True)
class Program:
    source: str
    output: str  # what it prints, trailing newline removed

    @property
    def key(self) -> str:
        return "codeout|" + self.source


class _Gen:
    """Builds one program block by block, tracking which variables exist."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.ints: list[str] = []
        self.strs: list[str] = []
        self.has_list = False

    def k(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def word(self) -> str:
        return self.pick(_WORDS)

    def new_int(self) -> str:
        free = [v for v in _INTS if v not in self.ints]
        name = self.pick(free) if free else self.pick(self.ints)
        if name not in self.ints:
            self.ints.append(name)
        return name

    def new_str(self) -> str:
        free = [v for v in _STRS if v not in self.strs]
        name = self.pick(free) if free else self.pick(self.strs)
        if name not in self.strs:
            self.strs.append(name)
        return name

    # -- blocks: each returns its lines ----------------------------------------------------------
    def int_assign(self) -> list[str]:
        if self.ints and self.rng.random() < 0.6:
            src = self.pick(self.ints)
            op = self.pick(["+", "-", "*", "//", "%"])
            rhs = str(self.k(2, 5)) if op in ("//", "%", "*") else (
                self.pick(self.ints) if self.rng.random() < 0.4 else str(self.k(1, 9)))
            return [f"{self.new_int()} = {src} {op} {rhs}"]
        return [f"{self.new_int()} = {self.k(0, 12)}"]

    def str_assign(self) -> list[str]:
        if self.strs and self.rng.random() < 0.6:
            src = self.pick(self.strs)
            i = self.k(0, 2)
            expr = self.pick([
                f"{src}.upper()", f"{src}[::-1]", f"{src}[{i}:{i + self.k(1, 3)}]",
                f"{src} * 2", f"{src}[0] + {src}[-1]", f'{src}.replace("{self.pick("aeiou")}", '
                f'"{self.pick("xyz")}")',
                f"{src} + {self.pick(self.strs)}", f'{src} + "-" + str({self.pick(self.ints)})'
                if self.ints else f"{src}.capitalize()",
            ])
            return [f"{self.new_str()} = {expr}"]
        return [f'{self.new_str()} = "{self.word()}"']

    def list_block(self) -> list[str]:
        if not self.has_list:
            self.has_list = True
            values = ", ".join(str(self.k(0, 9)) for _ in range(self.k(2, 5)))
            return [f"xs = [{values}]"]
        return [self.pick([
            f"xs.append({self.pick(self.ints) if self.ints else self.k(0, 9)})",
            "print(sum(xs))", "print(max(xs))", "print(sorted(xs))", "print(xs[::-1])",
            "print(len(xs))", "xs = [x * 2 for x in xs]", "xs = [x for x in xs if x % 2 == 1]",
        ])]

    def print_block(self) -> list[str]:
        options = []
        if self.ints:
            a = self.pick(self.ints)
            options += [f"print({a})", f"print({a}, {self.pick(self.ints)})", f"print({a} * 2 + 1)"]
        if self.strs:
            s = self.pick(self.strs)
            options += [f"print({s})", f"print(len({s}))", f"print({s}.upper())",
                        f"print({s}[::-1])"]
        if self.ints and self.strs:
            options += [f'print(f"{{{self.pick(self.strs)}}}:{{{self.pick(self.ints)}}}")']
        if not options:
            options = [f'print("{self.word()}")']
        return [self.pick(options)]

    def for_block(self) -> list[str]:
        if self.strs and self.rng.random() < 0.4:
            s, var = self.pick(self.strs), self.new_int()
            vowels = self.pick(["aeiou", "ae", "o", "rl"])
            return [f"{var} = 0", f"for ch in {s}:", f'    if ch in "{vowels}":',
                    f"        {var} = {var} + 1", f"print({var})"]
        var = self.pick(self.ints) if self.ints else self.new_int()
        lines = [] if var in self.ints and self.rng.random() < 0.5 else [f"{var} = {self.k(0, 5)}"]
        if var not in self.ints:
            self.ints.append(var)
        body = self.pick([f"{var} = {var} + i", f"{var} = {var} * 2", f"{var} = {var} - i",
                          f"{var} = {var} + {self.k(1, 4)}"])
        lines += [f"for i in range({self.k(1, 5)}):", f"    {body}"]
        if self.rng.random() < 0.5:
            lines.append(f"    print(i, {var})")
        else:
            lines.append(f"print({var})")
        return lines

    def if_block(self) -> list[str]:
        if not self.ints:
            return self.int_assign()
        a = self.pick(self.ints)
        cond = self.pick([f"{a} > {self.k(0, 12)}", f"{a} % 2 == 0", f"{a} < {self.k(0, 12)}",
                          f"{a} == {self.k(0, 6)}"])
        yes, no = self.pick([('"yes"', '"no"'), ('"big"', '"small"'), (a, f"{a} + 1"),
                             ('"even"', '"odd"') if "% 2" in cond else ('"hi"', '"lo"')])
        return [f"if {cond}:", f"    print({yes})", "else:", f"    print({no})"]

    def while_block(self) -> list[str]:
        var = self.new_int()
        start, step = self.k(0, 5), self.k(1, 4)
        if self.rng.random() < 0.5:
            return [f"{var} = {start}", f"while {var} < {self.k(6, 20)}:",
                    f"    {var} = {var} + {step}", f"print({var})"]
        start = self.k(1, 4)
        return [f"{var} = {start}", f"while {var} < {self.k(10, 60)}:",
                f"    {var} = {var} * 2", f"print({var})"]

    def block(self) -> list[str]:
        kind = int(self.rng.integers(8))
        return [self.int_assign, self.str_assign, self.list_block, self.print_block,
                self.for_block, self.if_block, self.while_block, self.print_block][kind]()


_BUILTINS = {"range": range, "len": len, "sum": sum, "max": max, "sorted": sorted, "str": str}


def _run(source: str) -> str | None:
    """What `source` (a program this module generated: trusted, loops bounded by construction)
    prints, or None when it raises."""
    buffer = io.StringIO()
    namespace = {"__builtins__": {**_BUILTINS, "print": functools.partial(print, file=buffer)}}
    try:
        exec(compile(source, "<program>", "exec"), namespace)  # noqa: S102 - our own code
    except Exception:
        return None
    return buffer.getvalue()


def generate_program(rng: np.random.Generator, *, length: int, max_output_lines: int,
                     split: str | None = None) -> Program:
    """One program of `length` blocks, drawn from `rng` only, in `split` when given."""
    for _ in range(_MAX_DRAWS):
        gen = _Gen(rng)
        lines: list[str] = []
        for _ in range(length - 1):
            lines += gen.block()
        last = gen.block()
        while not any(line.lstrip().startswith("print(") for line in last):
            last = gen.print_block()
        lines += last
        source = "\n".join(lines) + "\n"
        out = _run(source)
        if out is None or not out:
            continue
        printed = out[:-1].split("\n") if out.endswith("\n") else out.split("\n")
        if len(printed) > max_output_lines or len(out) > 80 * max_output_lines:
            continue
        if any(not line or line != line.strip() or "`" in line for line in printed):
            continue
        program = Program(source, "\n".join(printed))
        if split is not None and split_of(program.key) != split:
            continue
        return program
    raise RuntimeError(f"no {split or 'any'!r} CodeOutput program found in {_MAX_DRAWS} draws "
                       f"with length={length}, max_output_lines={max_output_lines}; widen the knobs")


class OutputAnswer(ExactTextAnswer):
    """A program's predicted output: an `ExactTextAnswer` (compared line by line) that may be
    declared by an "Output:" label as well as an "Answer:" one. Its instruction is the one the
    prompt has always had (the reply is the output alone; a label is read, not asked for)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(labels=("answer", "output"), name="the program's exact output", **kwargs)

    def instruction(self, *, brief: bool = False) -> str:
        return ("Reply with exactly its output -- every printed line, in order, and nothing else (no "
                "explanation, no label).")


QUESTION = (
    "What does this Python program print? " + OutputAnswer().instruction()
    + "\n\n```python\n{source}```"
)

METRIC_KEYS = ("format", "correct", "too_long", "invalid_text", "empty", "conflicting", "unreadable",
               "fenced", "lines_expected", "lines_given")
# Reading statuses with a metric of their own; any other failure to read is "unreadable".
_STATUS_METRICS = ("too_long", "invalid_text", "empty", "conflicting")


class CodeOutputEnv(ProblemEnv):
    """One program, one reply; reward 1 when the reply's declared output is exactly the program's
    (see the module docstring), else 0. Metrics on every step: `format` (the reply ended on the
    stop sequence), `correct`, `too_long`, `invalid_text`, `empty`, `conflicting` (two declared
    outputs), `unreadable` (bidirectional overrides and the like), `fenced` (the output read was
    in a fence), `lines_expected`, `lines_given`."""

    def __init__(self, renderer: Renderer, program: Program, *, max_chars: int) -> None:
        super().__init__(renderer, format_coef=0.0, grader_timeout_s=None)
        self.program = program
        self.answer = program.output
        self.max_chars = max_chars
        self.answer_contract = OutputAnswer(context=self.get_question(), max_chars=max_chars)

    @property
    def gold_answer(self) -> tuple[str, ...]:
        """The output's lines (the contract's value type)."""
        return tuple(self.program.output.split("\n"))

    def get_question(self) -> str:
        return QUESTION.format(source=self.program.source)

    def get_reference_answer(self) -> str:
        return self.program.output

    def check_format(self, sample_str: str) -> bool:
        return self.answer_contract.read(sample_str).ok

    def check_answer(self, sample_str: str) -> bool:
        return self.answer_contract.grade(sample_str, self.gold_answer).correct

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        return self.renderer.build_generation_prompt(self.conversation()), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        content = get_text_content(message)
        metrics: dict[str, float] = dict.fromkeys(METRIC_KEYS, 0.0)
        metrics["format"] = float(termination.is_stop_sequence)
        metrics["lines_expected"] = float(self.program.output.count("\n") + 1)
        reading = self.answer_contract.read(content)
        if not reading.ok:
            metrics[reading.status if reading.status in _STATUS_METRICS else "unreadable"] = 1.0
        else:
            metrics["fenced"] = float(reading.source == "last_block" or reading.text.lstrip().startswith("```"))
            metrics["lines_given"] = float(len(reading.value))
            metrics["correct"] = float(self.answer_contract.matches(reading.value, self.gold_answer))
        return StepResult(
            reward=metrics["correct"], episode_done=True, next_observation=ModelInput.empty(),
            next_stop_condition=self.stop_condition, metrics=metrics,
            logs={"response": content[:2000], "reference": self.program.output,
                  "read_as": reading.source or reading.status, "termination": termination.value},
        )


_DEFAULTS: dict[str, Any] = {"length": 3, "max_output_lines": 8, "max_chars": 2000}
_KNOB_DOCS = {
    "length": "blocks in the program (each 1-4 lines: an assignment, a print, a loop, an "
    "if/else...), 1-12",
    "max_output_lines": "most lines the program may print (longer ones are redrawn), 1-30",
    "max_chars": "longest reply graded, in characters (longer ones score 0: too_long), 100-20000",
}


def _example_episode() -> list[dict[str, str]]:
    program = generate_program(np.random.default_rng(1), length=3, max_output_lines=4)
    return [{"role": "user", "content": QUESTION.format(source=program.source)},
            {"role": "assistant", "content": program.output}]


class CodeOutputSource(EnvSource):
    """Generated predict-the-output tasks; knobs in `DEFAULTS`. Registered as `llm/CodeOutput-v0`."""

    DEFAULTS = _DEFAULTS
    card = EnvCard(
        id="llm/CodeOutput-v0",
        family="code",
        description=(
            "Predict the exact output of a short generated Python program: `length` blocks of "
            "integer arithmetic (+ - * // %), string slicing, reversal, case, replacement and "
            "concatenation over fruit names, list sums, maxima and sorting, bounded for/while "
            "loops and if/else, at most max_output_lines printed lines. The reference output "
            "comes from running the generated (trusted) program in-process when the task is "
            "drawn; the model's reply is text only, read under the one answer policy "
            "(llm_gym.grading.POLICY): the block after an 'Output:' or 'Answer:' label, else a "
            "fenced block ending the reply, else the whole reply; it is compared line by line "
            "with the output (trailing whitespace and surrounding blank lines aside)."
        ),
        answer_contract="exact text (OutputAnswer, an ExactTextAnswer): the block after 'Output:'/'Answer:', "
        "else a final fenced block, else the whole reply; the prompt asks for the output alone",
        multi_turn=False,
        reward_range=(0.0, 1.0),
        reward_meaning=(
            "1 when the reply's declared output is exactly the program's output (every line, in "
            "order), else 0: the output with unlabelled prose around it, several candidate "
            "outputs, two labels declaring different outputs (conflicting), a reply over "
            "max_chars (too_long) or with invalid UTF-8 (invalid_text) all score 0."
        ),
        difficulty_knobs={k: f"{doc} (default {_DEFAULTS[k]!r})" for k, doc in _KNOB_DOCS.items()},
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=_example_episode(),
        answer_form="exact text",
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.length = check_int("length", own["length"], 1, 12)
        self.max_output_lines = check_int("max_output_lines", own["max_output_lines"], 1, 30)
        self.max_chars = check_int("max_chars", own["max_chars"], 100, 20_000)

    def make_env(self, rng: np.random.Generator) -> CodeOutputEnv:
        program = generate_program(rng, length=self.length,
                                   max_output_lines=self.max_output_lines, split=self.split)
        return CodeOutputEnv(self.renderer, program, max_chars=self.max_chars)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the true output, plain and in one ``` fence. Adversarial: several candidate
        outputs, two "Output:" labels declaring different outputs, the output twice, the lines
        reversed, one line wrong, the program echoed back, an empty reply: none scores above 0."""
        def off(env: CodeOutputEnv) -> str:
            lines = env.answer.split("\n")
            lines[-1] = lines[-1] + "0"
            return "\n".join(lines)

        def reversed_lines(env: CodeOutputEnv) -> str:
            lines = env.answer.split("\n")
            flipped = lines[::-1]
            return "\n".join(flipped if flipped != lines else flipped + ["x"])

        return [
            ScriptedCase("true output", "gold", lambda env, ob: env.answer, 1.0, 1.0),
            ScriptedCase("fenced output", "gold", lambda env, ob: f"```\n{env.answer}\n```",
                         1.0, 1.0),
            ScriptedCase("several candidates", "adversarial",
                         lambda env, ob: f"{env.answer}\n\nor\n\n{off(env)}", 0.0, 0.0),
            ScriptedCase("two fences", "adversarial",
                         lambda env, ob: f"```\n{env.answer}\n```\n```\n{off(env)}\n```", 0.0, 0.0),
            ScriptedCase("two labelled outputs", "adversarial",
                         lambda env, ob: f"Output:\n{env.answer}\n\nOutput:\n{off(env)}", 0.0, 0.0),
            ScriptedCase("output twice", "adversarial",
                         lambda env, ob: f"{env.answer}\n{env.answer}", 0.0, 0.0),
            ScriptedCase("lines reordered", "adversarial", lambda env, ob: reversed_lines(env),
                         0.0, 0.0),
            ScriptedCase("one line wrong", "adversarial", lambda env, ob: off(env), 0.0, 0.0),
            ScriptedCase("program echoed", "adversarial", lambda env, ob: env.program.source,
                         0.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", 0.0, 0.0),
        ]
