"""The single-turn scaffold: a `ProblemEnv` task (count a letter in a random word) with its
source, card, knobs, split and scripted cases, and its tests."""

from __future__ import annotations

DEFAULT_KWARGS = '{"word_length": 6, "alphabet_size": 4}'
TRAIN_FLAGS = "         # SFT warm start on the reference answers, then GRPO"

ENV = '''\
"""__ENV_ID__: a single-turn task written against llm-gym's seed API.

As generated it is a small working toy task -- "How many times does the letter 'b' appear in
'abbcab'?" -- so that `llm-gym check __ENV_ID__` and the tests pass from the start. Replace the
parts marked TASK LOGIC with your own task; keep the rest of the structure:

- `__CLASS__Env` (a `llm_gym.rl.ProblemEnv`) is one question: `get_question`, `check_format`,
  `check_answer` and `get_reference_answer` (which the SFT warm start of `llm-gym train` and the
  gold scripted case use). `ProblemEnv.step` scores `format_coef * (format_ok - 1) + correct`.
- `__CLASS__Source` (an `llm_gym.env_source.EnvSource`) draws a task from the numpy generator it
  is given (the only randomness allowed: that is what makes `reset(seed=...)` reproducible),
  validates its difficulty knobs, keeps split="train" and split="test" disjoint, and declares
  its card and its scripted cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llm_gym.authoring import check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, Grade, IntegerAnswer
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv
from llm_gym.scripted import ScriptedCase

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_MAX_DRAWS = 10_000
INSTRUCTION = IntegerAnswer().instruction(brief=True)

# Difficulty knobs: constructor keywords with their defaults (documented on the card below, and
# registered with these values in __init__.py's ENV_SPECS).
DEFAULTS: dict[str, Any] = {"word_length": 6, "alphabet_size": 4, "format_coef": 0.1}


# --- TASK LOGIC: what a task is, its canonical key (for the split) and its answer -----------------
def draw_task(rng: np.random.Generator, word_length: int, alphabet_size: int) -> tuple[str, str]:
    """A random word over the first `alphabet_size` letters and the letter to count."""
    letters = ALPHABET[:alphabet_size]
    word = "".join(letters[i] for i in rng.integers(0, alphabet_size, size=word_length).tolist())
    letter = letters[int(rng.integers(0, alphabet_size))]
    return word, letter


def task_key(word: str, letter: str) -> str:
    """The task's identity: one task is in exactly one split (see `split_of`)."""
    return f"__NAME__:{word}:{letter}"


def question_text(word: str, letter: str) -> str:
    # the answer instruction comes from the contract the env grades with ("Reply with just the number.")
    return f"How many times does the letter '{letter}' appear in '{word}'? {INSTRUCTION}"
# --- end of TASK LOGIC ----------------------------------------------------------------------------


class __CLASS__Env(ProblemEnv):
    """One question. Metrics: `format`, `correct` (from ProblemEnv) and `parse_error`."""

    def __init__(self, renderer: Renderer, word: str, letter: str, *, format_coef: float) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.word, self.letter = word, letter
        self.answer = word.count(letter)  # TASK LOGIC: the reference answer
        # TASK LOGIC: the answer contract (llm_gym.grading): what an answer is, read under the one
        # answer policy -- here an integer; a grid, a mapping, a word... have contracts too, and
        # `llm-gym check` attacks the env with replies generated for its contract.
        self.answer_contract = IntegerAnswer(context=self.get_question(), max_chars=MAX_RESPONSE_CHARS)
        self.gold_answer = self.answer
        self._graded: tuple[str, Grade] | None = None

    def _verify(self, sample_str: str) -> Grade:
        if self._graded is None or self._graded[0] != sample_str:
            self._graded = (sample_str, self.answer_contract.grade(sample_str, self.answer))
        return self._graded[1]

    def get_question(self) -> str:
        return question_text(self.word, self.letter)

    def check_format(self, sample_str: str) -> bool:
        return self._verify(sample_str).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return self._verify(sample_str).correct

    def get_reference_answer(self) -> str:
        return str(self.answer)

    async def step(self, action, *, extra=None):
        result = await super().step(action, extra=extra)
        result.metrics["parse_error"] = float(not (self._graded and self._graded[1].format_ok))
        return result


class __CLASS__Source(EnvSource):
    """Tasks for `__ENV_ID__`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="__ENV_ID__",
        family="__FAMILY__",
        description=(
            # TASK LOGIC: one paragraph on the task, the expected reply and what gets credit.
            "Count a letter in a random word: 'How many times does the letter b appear in "
            "abbcab?'. The reply is a number, read under the one answer policy "
            "(llm_gym.grading.POLICY). A scaffold generated by `llm-gym new`."
        ),
        answer_contract="integer (IntegerAnswer): an 'Answer:' line, \\\\boxed{} or the last line",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the right count, 0 for a wrong number, "
            "-format_coef (0.1) when no single number can be read or the reply did not end on "
            "the renderer's end of turn."
        ),
        difficulty_knobs={
            "word_length": "letters in the word, 2-40 (default 6)",
            "alphabet_size": "the word uses the first N letters of the alphabet, 2-26 (default 4)",
            "format_coef": "penalty for a reply that is not a single number, 0-1 (default 0.1)",
        },
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": question_text("abbcab", "b")},
            {"role": "assistant", "content": "3"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)  # unknown knobs raise here
        self.word_length = check_int("word_length", own["word_length"], 2, 40)
        self.alphabet_size = check_int("alphabet_size", own["alphabet_size"], 2, 26)
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> __CLASS__Env:
        for _ in range(_MAX_DRAWS):  # rejection-sample a task of this source's split
            word, letter = draw_task(rng, self.word_length, self.alphabet_size)
            if split_of(task_key(word, letter)) == self.split:
                return __CLASS__Env(self.renderer, word, letter, format_coef=self.format_coef)
        raise RuntimeError(f"no {self.split!r} task in {_MAX_DRAWS} draws; widen the knobs")

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference answer (bare and boxed) scores 1. Adversarial: a hedge, two
        answers, a wrong number, prose without a number, an empty reply -- none above 0.
        TASK LOGIC: add the tricks that could fool *your* verifier."""
        return [
            ScriptedCase("reference answer", "gold", lambda env, ob: str(env.answer), 1.0, 1.0),
            ScriptedCase("boxed answer", "gold",
                         lambda env, ob: f"\\\\boxed{{{env.answer}}}", 1.0, 1.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{env.answer} or {env.answer + 1}", -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer: {env.answer}\\nAnswer: {env.answer + 2}",
                         -1.0, 0.0),
            ScriptedCase("wrong number", "adversarial", lambda env, ob: str(env.answer + 1), -1.0, 0.0),
            ScriptedCase("no number", "adversarial", lambda env, ob: "Many of them.", -1.0, 0.0),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
'''

TESTS = '''\
"""__ENV_ID__: gold and adversarial scripted cases, the verifier, determinism, splits, knobs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401 - registers __ENV_ID__ through the entry point
from llm_gym import get_renderer, load_tokenizer
from llm_gym.scripted import run_scripted_case

from __PKG__.env import __CLASS__Source, question_text

TOK = load_tokenizer()
RENDERERS = ["chatml", "role_colon"]


def source(renderer="chatml", split="train", **knobs):
    return __CLASS__Source(renderer=get_renderer(renderer, TOK), split=split, **knobs)


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_gold_cases_score_the_maximum(renderer, split):
    src = source(renderer, split)
    gold = [c for c in src.scripted_cases() if c.kind == "gold"]
    assert gold
    for case in gold:
        for seed in range(5):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.episode_return == pytest.approx(1.0), (case.name, seed)


@pytest.mark.parametrize("renderer", RENDERERS)
def test_adversarial_cases_get_no_credit(renderer):
    src = source(renderer)
    adversarial = [c for c in src.scripted_cases() if c.kind == "adversarial"]
    assert len(adversarial) >= 3
    for case in adversarial:
        for seed in range(5):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.episode_return <= 0.0 and outcome.ok, (case.name, seed)


def test_the_verifier():
    env = source().make_env(np.random.default_rng(0))
    right, wrong = str(env.answer), str(env.answer + 1)
    assert env.check_answer(right) and env.check_answer(f"Answer: {right}")
    for text in (wrong, f"{right} or {wrong}", "", "no idea", f"{right}, actually {wrong}"):
        assert not env.check_answer(text), text


def test_same_seed_same_task_and_seeds_vary():
    env = gym.make("__ENV_ID__")
    first = [env.reset(seed=s)[1]["text"] for s in range(20)]
    again = [gym.make("__ENV_ID__").reset(seed=s)[1]["text"] for s in range(20)]
    assert first == again
    assert len(set(first)) > 1


def test_splits_are_disjoint():
    def questions(split):
        src = source(split=split)
        return {src.make_env(np.random.default_rng(s)).get_question() for s in range(200)}

    train, test = questions("train"), questions("test")
    assert train and test and not train & test


def test_knobs_are_validated():
    with pytest.raises(ValueError, match="word_length"):
        source(word_length=1)
    with pytest.raises(TypeError, match="alphabet_size"):
        source(alphabet_size="4")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        source(word_lenght=5)
    assert question_text("ab", "a").endswith("Reply with just the number.")
'''

FILES = {
    "__PKG__/env.py": ENV,
    "tests/test___NAME__.py": TESTS,
}
