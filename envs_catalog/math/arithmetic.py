"""Procedural arithmetic: `MathSource` (`llm/Math-v0`) and `MathMultiSource` (`llm/MathMulti-v0`).

A task is an integer expression such as "23+45=" drawn from the source's generator; the answer
contract is `llm_gym.grading.IntegerAnswer` (`MathEnv.answer_contract`), read under the one
answer policy (`llm_gym.grading.POLICY`: the last `Answer:` line, `\\boxed{}` or "the answer
is" sentence, else the last line stating a number, parsed completely; a second declared value
voids the credit). Episodes are single-turn `llm_gym.rl.ProblemEnv`s, so the reward is
`format_coef * (format_ok - 1) + correct`; a response that does not end on the renderer's end of
turn (truncated, or ended by EOS: `ProblemEnv`'s strict default) is not well formed but is still
graded (0.9 when its number is right). Special tokens sampled inside the response stay in the
parsed text and are line breaks for the grader, so "6<|pad|>8" is not 68. Everything
is computed in pure Python integers: no data, no network, no heavy parsing.

Held-out split: a task's canonical key (the expression; operands sorted when every operator is the
same commutative one, so "23+45" and "45+23" are one task) is hashed by
`llm_gym.authoring.split_of`; about one task in ten belongs to split="test", the rest to
"train". Task spaces of up to 20,000 expressions (the default's 8,100) are enumerated in the
constructor and `make_env` draws uniformly from the split's list; larger ones are
rejection-sampled until the drawn task is in the source's split.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from fractions import Fraction
from typing import Any

import numpy as np

from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, Grade, IntegerAnswer, NumberAnswer, grade_numeric_quick
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.model_input import ModelInput
from llm_gym.rl.types import Action, ActionExtra, Observation, StopCondition

OPERATORS = "+-*"
PROMPT_STYLES = ("compact", "question")
_MAX_DRAWS = 10_000
_TABLE_MAX_TASKS = 20_000  # task spaces up to this size are enumerated once, in the constructor
# The 'question' style's answer instruction, from the contract every MathEnv grades with.
_INSTRUCTION = IntegerAnswer().instruction(brief=True)

_KNOB_DOCS = {
    "digits": "digits per operand, 1-18 (1 means 0-9, d>1 means 10^(d-1)..10^d-1)",
    "operators": "non-empty subset of '+-*', drawn uniformly per position; '*' binds tighter",
    "num_operands": "operands per expression, 2-8",
    "allow_negative": "whether the answer may be negative (operands never are); if false, "
    "expressions with a negative value are redrawn",
    "prompt_style": "'compact' ('23+45=') or 'question' ('What is 23 + 45? Reply with just the "
    "number.')",
    "format_coef": "penalty for a response that is not a single number, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in _KNOB_DOCS.items()}


def evaluate(operands: list[int], ops: str) -> int:
    """Value of `operands[0] ops[0] operands[1] ...` with the usual precedence ('*' first)."""
    total, sign, term = 0, 1, operands[0]
    for op, x in zip(ops, operands[1:]):
        if op == "*":
            term *= x
        else:
            total += sign * term
            sign, term = (1 if op == "+" else -1), x
    return total + sign * term


def canonical_key(operands: list[int], ops: str) -> str:
    """The task's identity for the train/test split (commutative-only expressions sorted)."""
    if len(set(ops)) == 1 and ops[0] in "+*":
        operands = sorted(operands)
    return expression(operands, ops)


def expression(operands: list[int], ops: str, sep: str = "") -> str:
    """"23+45" (or "23 + 45" with sep=" ")."""
    parts = [str(operands[0])]
    for op, x in zip(ops, operands[1:]):
        parts += [op, str(x)]
    return sep.join(parts)


class MathEnv(ProblemEnv):
    """One arithmetic question. Metrics: `format`, `correct` (from `ProblemEnv`), plus
    `parse_error` (no single number found) and `too_long` (response over the length cap)."""

    def __init__(
        self, renderer: Renderer, question: str, answer: int | Fraction, *, format_coef: float = 0.1,
        max_chars: int = MAX_RESPONSE_CHARS, prompt: ModelInput | None = None,
    ) -> None:
        """`prompt`, if given, must be `renderer.build_generation_prompt(self.conversation())`
        (the source caches it per task)."""
        super().__init__(renderer, format_coef=format_coef)
        self.question = question
        self.answer = answer
        self.max_chars = max_chars
        self._prompt = prompt
        self._graded: tuple[str, Grade] | None = None
        self._contract: NumberAnswer | None = None

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        if self._prompt is None:
            return await super().initial_observation()
        return self._prompt, self.stop_condition

    @property
    def answer_contract(self) -> NumberAnswer:
        """What an answer is: an integer (`llm_gym.grading.IntegerAnswer`), the task's text as
        context; built on first use (a bare integer never needs it)."""
        if self._contract is None:
            self._contract = IntegerAnswer(context=self.question, max_chars=self.max_chars)
        return self._contract

    @property
    def gold_answer(self) -> int | Fraction:
        return self.answer

    def _grade_numeric(self, sample_str: str) -> Grade:
        # ProblemEnv.step asks check_format and check_answer about the same string: grade once.
        if self._graded is None or self._graded[0] != sample_str:
            grade = grade_numeric_quick(sample_str, self.answer, max_chars=self.max_chars)
            if grade is None:
                grade = self.answer_contract.grade(sample_str, self.answer)
            self._graded = (sample_str, grade)
        return self._graded[1]

    def _grade(self, content: str, well_formed: bool) -> tuple[float, float]:
        # ProblemEnv._grade's (format_ok, correct), with what check_format and check_answer
        # return read off one grade instead of asking for it twice (once per graded step).
        grade = self._grade_numeric(content)
        return float(well_formed and bool(grade.format_ok)), float(grade.correct)

    def _quick_grade(self, content: str, well_formed: bool) -> tuple[float, float] | None:
        # A bare integer against an integer answer: grade_numeric's bare-integer path, whose cost
        # is a few C passes over the reply, so it needs no watchdog. Any other reply, or a
        # subclass that grades its own way (NumericEnv), is graded under the bound.
        if type(self)._grade_numeric is not MathEnv._grade_numeric or type(self)._grade is not MathEnv._grade:
            return None
        grade = grade_numeric_quick(content, self.answer, max_chars=self.max_chars)
        if grade is None:
            return None
        self._graded = (content, grade)
        return float(well_formed and grade.format_ok), float(grade.correct)

    def get_question(self) -> str:
        return self.question

    def check_format(self, sample_str: str) -> bool:
        return self._grade_numeric(sample_str).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return self._grade_numeric(sample_str).correct

    def get_reference_answer(self) -> str:
        return str(self.answer)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        if "grader_timeout" in result.metrics:
            # The reply outran the grading bound: grading it again here, unbounded, would hand a
            # policy that found a slow input the trainer's time. Scored as malformed (no credit).
            result.metrics["parse_error"] = 1.0
            result.metrics["too_long"] = 0.0
            result.logs["answer_status"] = "grader_timeout"
            return result
        response = result.logs.get("response", "")
        # Cached, unless the bounded grader fell back to a forked worker (a loaded machine ran out
        # its in-thread budget), so the worker's cached grade never reached this process: regraded.
        grade = self._grade_numeric(response)
        result.metrics["parse_error"] = float(not grade.format_ok)
        result.metrics["too_long"] = float(grade.status == "too_long")
        result.logs["answer_status"] = grade.status
        return result


class MathSource(EnvSource):
    """Arithmetic tasks; knobs in `DEFAULTS` (see the card). Registered as `llm/Math-v0`."""

    DEFAULTS: dict[str, Any] = {
        "digits": 2, "operators": "+", "num_operands": 2, "allow_negative": False,
        "prompt_style": "compact", "format_coef": 0.1,
    }
    card = EnvCard(
        id="llm/Math-v0",
        family="math",
        description=(
            "Procedural integer arithmetic, fully offline. The default is two 2-digit numbers to "
            "add, with a short prompt ('23+45=') and a bare-number reference answer ('68'), sized "
            "for training a tiny byte-level model from scratch; the knobs scale it up to long "
            "mixed-operator expressions. The answer is one integer (digits, words, '5 billion'), "
            "read under the one answer policy (llm_gym.grading.POLICY): the last 'Answer:' line, "
            "\\boxed{} or 'the answer is' sentence, else the last line stating a number, parsed "
            "completely; a second declared value voids the credit."
        ),
        answer_contract="integer (IntegerAnswer); the 'question' style asks 'Reply with just the number.'",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the right number, 0 for a wrong number, "
            "-format_coef (0.1) when no single number can be read (empty, malformed or conflicting, "
            "over 4096 characters, invalid UTF-8). A response that does not end on the "
            "renderer's end of turn (truncated, or ended by EOS) loses format_coef but is still "
            "graded: 0.9 if its number is right, -0.1 otherwise."
        ),
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "23+45="},
            {"role": "assistant", "content": "68"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.digits = check_int("digits", own["digits"], 1, 18)
        ops = own["operators"]
        if not isinstance(ops, str) or not ops or any(o not in OPERATORS for o in ops):
            raise ValueError(
                f"operators must be a non-empty string of characters from {OPERATORS!r}, got {ops!r}"
            )
        self.operators = "".join(dict.fromkeys(ops))  # de-duplicated, order kept
        self.num_operands = check_int("num_operands", own["num_operands"], 2, 8)
        self.allow_negative = check_choice("allow_negative", own["allow_negative"], (True, False))
        self.prompt_style = check_choice("prompt_style", own["prompt_style"], PROMPT_STYLES)
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)
        self._low = 0 if self.digits == 1 else 10 ** (self.digits - 1)
        self._high = 10**self.digits  # exclusive
        # Small task spaces (the default has 90*90 = 8100 tasks) are enumerated once, so make_env
        # is one draw and a lookup, and each task's prompt tokens are cached on first use.
        self._table: list[tuple[str, int]] | None = None
        self._prompts: dict[int, ModelInput] = {}
        space = (self._high - self._low) ** self.num_operands * len(self.operators) ** (
            self.num_operands - 1
        )
        if space <= _TABLE_MAX_TASKS:
            # Cached per knob setting: every gym.make (GymEnvGroupBuilder over an id, a vector env)
            # builds a new source, and re-enumerating 8100 tasks each time cost ~0.15 s per env.
            table_key = (type(self), self.digits, self.operators, self.num_operands,
                         self.allow_negative, self.prompt_style, self.split)
            self._table = _cached_tasks(*table_key)
            # Prompt tokens depend only on the task and the renderer, so sources over one renderer
            # share them (a pool of Gymnasium envs holds hundreds, each with its own source).
            self._prompts = _shared_prompts(renderer, table_key)
            if not self._table:
                raise ValueError(
                    f"no {split!r} task exists with digits={self.digits}, operators="
                    f"{self.operators!r}, num_operands={self.num_operands}, allow_negative="
                    f"{self.allow_negative}; widen the knobs"
                )

    def _enumerate_tasks(self) -> list[tuple[str, int]]:  # uncached; see _cached_tasks
        tasks = []
        operand_range = range(self._low, self._high)
        for ops_tuple in itertools.product(self.operators, repeat=self.num_operands - 1):
            ops = "".join(ops_tuple)
            for operands_tuple in itertools.product(operand_range, repeat=self.num_operands):
                operands = list(operands_tuple)
                answer = evaluate(operands, ops)
                if answer < 0 and not self.allow_negative:
                    continue
                if split_of(canonical_key(operands, ops)) == self.split:
                    tasks.append((self.question_text(operands, ops), answer))
        return tasks

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the bare answer and a boxed one score 1. Adversarial: a hedge between two values,
        a second answer after the right one, the wrong number, prose without a number, the answer
        off by one inside a boxed correction — none scores above 0."""
        return [
            ScriptedCase("bare answer", "gold", lambda env, ob: str(env.answer), 1.0, 1.0),
            ScriptedCase("boxed answer", "gold", lambda env, ob: f"\\boxed{{{env.answer}}}", 1.0, 1.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{env.answer} or {env.answer + 1}", -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer: {env.answer}\nAnswer: {env.answer - 1}", -1.0, 0.0),
            ScriptedCase("wrong number", "adversarial", lambda env, ob: str(env.answer + 1), -1.0, 0.0),
            ScriptedCase("no number", "adversarial", lambda env, ob: "I am not sure.", -1.0, 0.0),
            ScriptedCase("correction", "adversarial",
                         lambda env, ob: f"{env.answer}, actually {env.answer + 2}", -1.0, 0.0),
        ]

    def question_text(self, operands: list[int], ops: str) -> str:
        if self.prompt_style == "compact":
            return expression(operands, ops) + "="
        return f"What is {expression(operands, ops, ' ')}? {_INSTRUCTION}"

    def make_env(self, rng: np.random.Generator) -> MathEnv:
        if self._table is not None:
            index = int(rng.integers(len(self._table)))
            question, answer = self._table[index]
            prompt = self._prompts.get(index)
            env = MathEnv(self.renderer, question, answer, format_coef=self.format_coef,
                          prompt=prompt)
            if prompt is None:
                self._prompts[index] = env.renderer.build_generation_prompt(env.conversation())
                env._prompt = self._prompts[index]
            return env
        n, ops_pool = self.num_operands, self.operators
        for _ in range(_MAX_DRAWS):
            operands = rng.integers(self._low, self._high, size=n).tolist()
            if len(ops_pool) == 1:
                ops = ops_pool * (n - 1)
            else:
                ops = "".join(ops_pool[i] for i in rng.integers(0, len(ops_pool), size=n - 1).tolist())
            answer = evaluate(operands, ops)
            if answer < 0 and not self.allow_negative:
                continue
            if split_of(canonical_key(operands, ops)) != self.split:
                continue
            return MathEnv(
                self.renderer, self.question_text(operands, ops), answer,
                format_coef=self.format_coef,
            )
        raise RuntimeError(
            f"{type(self).__name__}: no {self.split!r} task found in {_MAX_DRAWS} draws with "
            f"digits={self.digits}, operators={self.operators!r}, num_operands={self.num_operands}, "
            f"allow_negative={self.allow_negative}; widen the knobs"
        )


class MathMultiSource(MathSource):
    """Longer mixed-operator expressions (`llm/MathMulti-v0`): same env, harder default knobs."""

    DEFAULTS: dict[str, Any] = {
        "digits": 2, "operators": "+-*", "num_operands": 4, "allow_negative": True,
        "prompt_style": "compact", "format_coef": 0.1,
    }
    card = EnvCard(
        id="llm/MathMulti-v0",
        family="math",
        description=(
            "Harder procedural arithmetic: four 2-digit operands with mixed +, - and * "
            "(usual precedence, negative answers allowed), e.g. '12+34*56-78='. Same grader and "
            "knobs as llm/Math-v0, with harder defaults."
        ),
        answer_contract="integer (IntegerAnswer)",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=MathSource.card.reward_meaning,
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source=MathSource.card.data_source,
        license=MathSource.card.license,
        example_episode=[
            {"role": "user", "content": "12+34*56-78="},
            {"role": "assistant", "content": "1838"},
        ],
    )


# renderer -> task-table key -> {task index: prompt}; entries go away with their renderer.
_PROMPTS: "weakref.WeakKeyDictionary[Renderer, dict[tuple, dict[int, ModelInput]]]" = (
    weakref.WeakKeyDictionary()
)


def _shared_prompts(renderer: Renderer, table_key: tuple) -> dict[int, ModelInput]:
    """The prompt cache shared by every source with this renderer object and task table (a
    private dict when the renderer cannot be weakly referenced)."""
    try:
        by_table = _PROMPTS.get(renderer)
        if by_table is None:
            by_table = _PROMPTS[renderer] = {}
    except TypeError:
        return {}
    prompts = by_table.get(table_key)
    if prompts is None:
        prompts = by_table[table_key] = {}
    return prompts


def _clear_prompt_cache() -> None:
    """Forget every cached prompt (benchmarks use it to start cold)."""
    for by_table in list(_PROMPTS.values()):
        for prompts in list(by_table.values()):
            prompts.clear()


@functools.lru_cache(maxsize=32)
def _cached_tasks(cls, digits, operators, num_operands, allow_negative, prompt_style, split):
    """`MathSource._enumerate_tasks` for one knob setting, computed once per process (the returned
    list is shared: treat it as read-only)."""
    probe = object.__new__(cls)
    probe.digits, probe.operators, probe.num_operands = digits, operators, num_operands
    probe.allow_negative, probe.prompt_style, probe.split = allow_negative, prompt_style, split
    probe._low = 0 if digits == 1 else 10 ** (digits - 1)
    probe._high = 10**digits
    return probe._enumerate_tasks()
