"""What the text family's envs share: the single-turn env, its grade, the readers, the word pool.

Every text env is a `TextTaskEnv` (a `llm_gym.rl.ProblemEnv`): the source draws a task, the env
asks its `grader` once per response for a `TextGrade` (score in [0, 1], whether the reply was
readable, a status word), and `ProblemEnv` scores `format_coef * (format_ok - 1) + score`. An env
whose answer is one value declares its answer contract (`llm_gym.grading.contracts`) on the
episode (`TextTaskEnv.answer_contract`, `gold_answer`), and `contract_grade` reads the reply under
the one answer policy (`llm_gym.grading.POLICY`) and compares its value with the gold one. The
free-text envs read the whole reply instead: `visible_reply` refuses over-long text, invalid UTF-8
(U+FFFD) and any non-ASCII character outside whitespace (every task in the family is plain
ASCII, so Unicode look-alikes never pass for the letters they imitate); `strict_json` accepts
exactly one JSON value and nothing else. Sources draw tasks from the `rng` they are given, and
hash each task's canonical key with `llm_gym.authoring.split_of` for the train/test split.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from llm_gym.authoring import check_float, split_of
from llm_gym.env_source import EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, AnswerContract
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra

MAX_DRAWS = 10_000

# Common short English words (public domain; chosen to be unambiguous and lower case).
WORDS = tuple("""
apple river stone cloud green table chair light music paper water bread honey tiger horse
grape lemon melon ocean plant shell sugar train truck wheel zebra amber beach berry brick
cable candy cedar coral daisy eagle flame frost ghost glass grass heart ivory jelly kite
lamp maple mango metal night olive onion pearl piano pilot queen radio robin salad sheep
smile snake spoon storm sword thumb tower trail tulip uncle video voice whale witch yacht
acorn badge bison cocoa dough fable fairy flute gecko hazel igloo jewel koala llama moose
nectar otter panda quilt raven sable tango umbra viola walrus yodel basil camel dingo
falcon garden hammer island jacket kettle ladder magnet napkin orange parrot rabbit saddle
tomato velvet window button candle donkey feather goblet helmet insect jigsaw lantern mirror
needle pepper rocket silver ticket violin wizard anchor barrel carpet dragon engine forest
gravel hunter jungle lizard marble nickel oyster pencil ribbon spider turtle wallet
""".split())

NON_ASCII = re.compile(r"[^\x00-\x7f]")


@dataclass(frozen=True)
class TextGrade:
    """One response's grade: `score` in [0, 1] (1 = fully correct), `format_ok` (the reply could
    be read in the stated format), `status` ("ok", "wrong", "empty", "too_long", ...)."""

    score: float
    format_ok: bool
    status: str
    details: dict[str, float] = field(default_factory=dict)


def visible_reply(text: str, max_chars: int = MAX_RESPONSE_CHARS) -> tuple[str | None, str]:
    """`(text stripped, "ok")`, or `(None, reason)`: "too_long", "invalid_text" (U+FFFD),
    "non_ascii" (any non-ASCII character: look-alike letters, exotic spaces, zero-width
    characters), "empty"."""
    if len(text) > max_chars:
        return None, "too_long"
    if "\ufffd" in text:
        return None, "invalid_text"
    if NON_ASCII.search(text):
        return None, "non_ascii"
    stripped = text.strip()
    if not stripped:
        return None, "empty"
    return stripped, "ok"


_FENCE = re.compile(r"\A```[a-zA-Z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


class StrictJSONError(ValueError):
    """Raised by `STRICT_JSON` for NaN/Infinity or a duplicate object key."""


def _no_constants(name: str) -> Any:
    raise StrictJSONError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise StrictJSONError("duplicate key")
    return dict(pairs)


# JSON read strictly: no NaN/Infinity, no duplicate object keys (`strict_json`, CsvToJson).
STRICT_JSON = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_no_duplicate_keys)


def strict_json(text: str, max_chars: int = MAX_RESPONSE_CHARS) -> tuple[Any, str]:
    """`(value, "ok")` when the whole reply is exactly one JSON value (optionally inside one
    ```json fence that spans the whole reply), else `(None, reason)`. Refused: prose before or
    after the value ("not_json", also a second JSON value after the first), NaN/Infinity,
    duplicate object keys, non-ASCII text (look-alike quotes or letters), over-long replies."""
    stripped, status = visible_reply(text, max_chars)
    if stripped is None:
        return None, status
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        value, end = STRICT_JSON.raw_decode(stripped)
    except (StrictJSONError, ValueError, RecursionError):
        return None, "not_json"
    if stripped[end:].strip():
        return None, "not_json"
    return value, "ok"


Grader = Callable[[str], TextGrade]


def contract_grade(contract: AnswerContract, reply: str, gold: Any) -> TextGrade:
    """The reply's declared answer under `contract` (the one answer policy), compared with
    `gold` by `contract.matches`: 1 when it matches, 0 for a readable other value, and an
    unreadable reply (`format_ok` False) with the policy's status ("malformed", "conflicting",
    "no_answer", "empty", "too_long", ...)."""
    reading = contract.read(reply)
    if not reading.ok:
        return TextGrade(0.0, False, reading.status)
    right = bool(contract.matches(reading.value, gold))
    return TextGrade(float(right), True, "ok" if right else "wrong")


class TextTaskEnv(ProblemEnv):
    """One text task: `question` (the user turn), `reference` (a reply scoring 1), `grader`;
    `answer_contract` (what a reply is, `llm_gym.grading.contracts`) and `gold_answer` (the
    gold value in the contract's type; None where there is none, as for free text).
    Metrics: `format`, `correct` (ProblemEnv's; `correct` is the score), `parse_error`, plus
    the grader's `details`. Bad output is a grade, never an exception."""

    def __init__(
        self, renderer: Renderer, question: str, reference: str, grader: Grader, *,
        format_coef: float = 0.1, task: dict[str, Any] | None = None,
        contract: AnswerContract | None = None, gold: Any = None,
    ) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.question = question
        self.answer = reference
        self.grader = grader
        self.task = dict(task or {})
        self.answer_contract = contract
        self.gold_answer = gold
        self._graded: tuple[str, TextGrade] | None = None

    def grade(self, sample_str: str) -> TextGrade:
        # ProblemEnv.step asks check_format and check_answer about the same string: grade once.
        if self._graded is None or self._graded[0] != sample_str:
            self._graded = (sample_str, self.grader(sample_str))
        return self._graded[1]

    def get_question(self) -> str:
        return self.question

    def check_format(self, sample_str: str) -> bool:
        return self.grade(sample_str).format_ok

    def check_answer(self, sample_str: str) -> float:  # type: ignore[override]
        return float(self.grade(sample_str).score)

    def get_reference_answer(self) -> str:
        return self.answer

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        if "grader_timeout" in result.metrics:  # never re-run a grader that ran out of time
            grade = TextGrade(0.0, False, "grader_timeout")
        else:  # cached unless ProblemEnv graded in a worker process
            content = result.logs.get("response", "")
            grade = self.grade(content if isinstance(content, str) else "")
        result.metrics["parse_error"] = float(not grade.format_ok)
        for k, v in grade.details.items():
            result.metrics[k] = float(v)
        result.logs["answer_status"] = grade.status
        return result


def draw_in_split(
    rng: np.random.Generator, split: str,
    draw: Callable[[np.random.Generator], tuple[str | None, Any]],
    what: str,
) -> Any:
    """Call `draw(rng) -> (canonical key, task)` until the key is in `split`; the task."""
    for _ in range(MAX_DRAWS):
        key, task = draw(rng)
        if key is not None and split_of(key) == split:
            return {**task, "key": key}
    raise RuntimeError(f"{what}: no {split!r} task found in {MAX_DRAWS} draws; widen the knobs")


def knob_docs(docs: dict[str, str], defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in docs.items()}


def pop_knobs(defaults: dict[str, Any], knobs: dict[str, Any]) -> dict[str, Any]:
    """This source's own knobs taken out of `knobs` (the rest go to `EnvSource.__init__`)."""
    return {k: knobs.pop(k, v) for k, v in defaults.items()}


class TextSource(EnvSource):
    """Base of the family's sources: validates `format_coef` and the subclass's knobs
    (`configure`), draws a task in the split (`draw(rng) -> (canonical key, task dict)`) and
    builds its episode (`episode(task) -> TextTaskEnv`)."""

    DEFAULTS: dict[str, Any] = {"format_coef": 0.1}

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = pop_knobs(self.DEFAULTS, knobs)
        super().__init__(renderer=renderer, split=split, **knobs)
        self.format_coef = check_float("format_coef", own.pop("format_coef"), 0.0, 1.0)
        self.configure(**own)

    def configure(self, **own: Any) -> None:
        """Validate and store the subclass's knobs."""

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        raise NotImplementedError

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        raise NotImplementedError

    def make_env(self, rng: np.random.Generator) -> TextTaskEnv:
        task = draw_in_split(rng, self.split, self.draw, type(self).__name__)
        return self.episode(task)

    def env_for(self, question: str, reference: str, grader: Grader,
                task: dict[str, Any], *, contract: AnswerContract | None = None,
                gold: Any = None) -> TextTaskEnv:
        return TextTaskEnv(self.renderer, question, reference, grader,
                           format_coef=self.format_coef, task=task, contract=contract, gold=gold)

    def contract_env(self, question: str, reference: str, contract: AnswerContract, gold: Any,
                     task: dict[str, Any]) -> TextTaskEnv:
        """An episode graded by `contract_grade(contract, reply, gold)`."""
        return self.env_for(question, reference, lambda reply: contract_grade(contract, reply, gold),
                            task, contract=contract, gold=gold)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)
