"""The multi-turn scaffold: a `Continuation`-based game (guess a secret letter with
"Earlier."/"Later." feedback) with its source, card, knobs, split, context bound and scripted
cases, and its tests (prefix property and turn bound included)."""

from __future__ import annotations

DEFAULT_KWARGS = '{"alphabet_size": 8, "max_turns": 6}'
TRAIN_FLAGS = "         # SFT warm start on the gold scripted episodes, then GRPO"

ENV = '''\
"""__ENV_ID__: a multi-turn game written against llm-gym's seed API.

As generated it is a small working toy game -- the env picks a secret letter, the model guesses,
the env answers "Earlier." or "Later." (in alphabetical order) -- so that `llm-gym check
__ENV_ID__` and the tests pass from the start. Replace the parts marked TASK LOGIC with your game;
keep the rest of the structure:

- `__CLASS__Env` (an `llm_gym.rl.types.Env`) plays one episode. Each next observation is built by
  `llm_gym.renderers.continuation.Continuation`, which keeps the prefix property (the next
  observation extends the last observation plus the sampled tokens) under every renderer, so a
  whole episode trains as one datum.
- Bad model output is a normal event: an unreadable reply is an invalid turn (a penalty, the game
  goes on), out-of-vocabulary ids end the game with that penalty, and the game ends (metric
  `context_exceeded`) rather than let an observation grow past `max_context_tokens`.
- `__CLASS__Source` draws the secret from the numpy generator it is given (the only randomness
  allowed), validates its knobs, keeps split="train" and split="test" disjoint, and declares its
  card and scripted cases. The episode return lies in [-invalid_penalty * max_turns, 1].
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from llm_gym.authoring import check_float, check_int, hash_key
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, TokenAnswer
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition
from llm_gym.scripted import ScriptedCase

ALPHABET = "abcdefghijklmnopqrstuvwxyz"

DEFAULTS: dict[str, Any] = {
    "alphabet_size": 8, "max_turns": 6, "invalid_penalty": 0.1, "max_context_tokens": 4096,
}


# --- TASK LOGIC: the secret, the split, the reader and the feedback --------------------------------
def held_out_secrets(alphabet_size: int, split: str) -> list[str]:
    """The secrets of `split`: letters ranked by a stable hash, the first quarter (at least one)
    "test", the rest "train". Disjoint, deterministic, never empty."""
    letters = sorted(ALPHABET[:alphabet_size], key=lambda c: hash_key(f"__NAME__:{alphabet_size}:{c}"))
    n_test = max(1, alphabet_size // 4)
    return sorted(letters[:n_test] if split == "test" else letters[n_test:])


# The answer contract (llm_gym.grading): a guess is one letter, read under the one answer policy --
# the last "Guess:"/"Answer:" declaration (or the last line that names a letter), parsed completely.
GUESS = TokenAnswer(pattern="[a-z]", name="the letter", labels=("answer", "guess"),
                    verbs=("guess", "pick", "choose", "try", "say"), max_chars=MAX_RESPONSE_CHARS)


def read_guess(text: str) -> str | None:
    """The guessed letter under the `GUESS` contract ("c", "Guess: D.", "I guess c"), or None:
    "a or b", "apple", "a, b, c" and a second declared letter are not guesses."""
    reading = GUESS.read(text)
    return reading.value if reading.ok else None


def intro_text(alphabet_size: int, max_turns: int) -> str:
    last = ALPHABET[alphabet_size - 1]
    return (f"Guess my secret letter from a to {last}. After each guess I say Earlier or Later "
            f"(in alphabetical order). You have {max_turns} guesses. {GUESS.instruction(brief=True)}")


def feedback_text(guess: str, secret: str) -> str:
    return "Later." if guess < secret else "Earlier."
# --- end of TASK LOGIC ----------------------------------------------------------------------------


class __CLASS__Env(Env):
    """One game. Step metrics: `invalid`, and the continuation's one-hot mode; on the last step
    `solved`, `turns`, `invalid_turns`, `context_exceeded` (and the log `stop_reason`)."""

    def __init__(self, renderer: Renderer, secret: str, *, alphabet_size: int, max_turns: int,
                 invalid_penalty: float, max_context_tokens: int,
                 continuation: Continuation | None = None) -> None:
        self.renderer = renderer
        self.secret = secret
        self.alphabet_size = alphabet_size
        self.max_turns = max_turns
        self.invalid_penalty = invalid_penalty
        self.max_context_tokens = max_context_tokens
        # TextEnv reads `continuation` to convert only the new tokens of each observation.
        self.continuation = continuation or Continuation(renderer)
        self._messages: list[Message] = [
            {"role": "user", "content": intro_text(alphabet_size, max_turns)}
        ]
        self._ob: ModelInput | None = None
        self._turns = self._invalid_turns = 0
        self._done = False

    # What a reply is (the contract `llm-gym check`'s generated attack suite is built from) and
    # the reply that wins now.
    answer_contract = GUESS

    @property
    def gold_answer(self) -> str:
        return self.secret

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        self._ob = self.continuation.first(self._messages)
        return self._ob, self.stop_condition

    def _finish(self, reward: float, stop_reason: str, metrics: dict, logs: dict) -> StepResult:
        self._done = True
        # `correct` at full credit is what accuracy counts (llm_gym.rl.outcome.episode_correct).
        metrics.update(solved=float(stop_reason == "solved"), correct=float(stop_reason == "solved"),
                       turns=self._turns,
                       invalid_turns=self._invalid_turns,
                       context_exceeded=float(stop_reason == "context_exceeded"))
        logs["stop_reason"] = stop_reason
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError("call initial_observation() first; envs are single-use")
        self._turns += 1
        message, termination = self.renderer.parse_response(action)
        text = str(message.get("content", ""))
        guess = read_guess(text) if termination.is_clean else None
        valid = guess is not None and guess in ALPHABET[: self.alphabet_size]
        metrics: dict[str, float | int] = {"invalid": float(not valid)}
        logs = {"response": text[:200], "secret": self.secret}
        # Out-of-vocabulary ids cannot be appended to the transcript: end the game.
        if termination is ParseTermination.MALFORMED and self.renderer.has_invalid_ids(action):
            self._invalid_turns += 1
            return self._finish(-self.invalid_penalty, "malformed_tokens", metrics, logs)
        if not valid:  # TASK LOGIC: what an invalid turn costs and what the env replies
            self._invalid_turns += 1
            reward = -self.invalid_penalty
            last = ALPHABET[self.alphabet_size - 1]
            feedback = f"Invalid. Reply with one letter from a to {last}."
        elif guess == self.secret:
            return self._finish(1.0, "solved", metrics, logs)
        else:
            reward, feedback = 0.0, feedback_text(guess, self.secret)
        if self._turns >= self.max_turns:
            return self._finish(reward, "out_of_turns", metrics, logs)
        # The context bound is checked before the action is appended (a huge reply costs no copy).
        if self._ob.length + len(action) >= self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        self._messages = self._messages + [message, {"role": "user", "content": feedback}]
        turn = self.continuation.next(self._ob, action, self._messages)
        if turn.observation.length > self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        metrics.update(turn.metrics)
        self._ob = turn.observation
        return StepResult(reward, False, self._ob, self.stop_condition, metrics, logs)


class __CLASS__Source(EnvSource):
    """Games for `__ENV_ID__`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="__ENV_ID__",
        family="__FAMILY__",
        description=(
            # TASK LOGIC: one paragraph on the game, the expected reply and what gets credit.
            "Multi-turn letter guessing: the env picks a secret letter, the model guesses one "
            "letter per turn and the env answers 'Earlier.' or 'Later.' (alphabetical order); "
            "binary search always wins. The guess is one letter, read under the one answer policy "
            "(llm_gym.grading.POLICY): the last 'Guess:'/'Answer:' declaration, else the last line "
            "naming a letter, parsed completely; 'a or b', a word or a list is an invalid turn. A "
            "scaffold generated by `llm-gym new`."
        ),
        answer_contract="one letter (TokenAnswer): a 'Guess:' line, 'I guess c', or the last line",
        multi_turn=True,
        reward_range=(-0.6, 1.0),
        reward_meaning=(
            "Episode return: +1 for guessing the secret, 0 for running out of turns, minus "
            "invalid_penalty (0.1) per invalid turn; out-of-vocabulary tokens end the game with "
            "that penalty, and so does a turn that would take the observation past "
            "max_context_tokens. Range [-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "alphabet_size": "the secret is one of the first N letters, 4-26 (default 8)",
            "max_turns": "guesses allowed, 1-26 (default 6)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "max_context_tokens": "the game ends (context_exceeded) rather than let an "
            "observation grow past this many tokens, 256-1000000 (default 4096)",
        },
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": intro_text(8, 6)},
            {"role": "assistant", "content": "d"},
            {"role": "user", "content": "Later."},
            {"role": "assistant", "content": "f"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)  # unknown knobs raise here
        self.alphabet_size = check_int("alphabet_size", own["alphabet_size"], 4, 26)
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 26)
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000)
        self.continuation = Continuation(renderer)
        self._secrets = held_out_secrets(self.alphabet_size, split)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def make_env(self, rng: np.random.Generator) -> __CLASS__Env:
        secret = self._secrets[int(rng.integers(len(self._secrets)))]
        return __CLASS__Env(
            self.renderer, secret, alphabet_size=self.alphabet_size, max_turns=self.max_turns,
            invalid_penalty=self.invalid_penalty, max_context_tokens=self.max_context_tokens,
            continuation=self.continuation)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the secret itself, and a binary search that reads the feedback off the
        observation, both score 1. Adversarial: a hedge, a word, a list of letters, an empty
        reply, a letter outside the alphabet -- none scores above 0.
        TASK LOGIC: add the tricks that could fool *your* reader."""
        outside = ALPHABET[min(self.alphabet_size, 25)] if self.alphabet_size < 26 else "1"
        return [
            ScriptedCase("the secret", "gold", lambda env, ob: env.secret, 1.0, 1.0),
            ScriptedCase("binary search", "gold", _binary_search, 1.0, 1.0),
            ScriptedCase("hedge", "adversarial", lambda env, ob: "a or b", -10.0, 0.0),
            ScriptedCase("a word", "adversarial", lambda env, ob: "apple", -10.0, 0.0),
            ScriptedCase("every letter", "adversarial",
                         lambda env, ob: ", ".join(ALPHABET[: env.alphabet_size]), -10.0, 0.0),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", -10.0, 0.0),
            ScriptedCase("outside the alphabet", "adversarial", lambda env, ob: outside, -10.0, 0.0),
        ]


def _binary_search(env: __CLASS__Env, observation_text: str) -> str:
    """A solver that sees only the transcript: it replays its own bisection over the feedback
    so far ("Earlier." / "Later." in order) and guesses the middle of what is left."""
    lo, hi = 0, env.alphabet_size - 1
    for feedback in re.findall(r"\\b(Earlier|Later)\\.", observation_text):
        middle = (lo + hi) // 2
        if feedback == "Later":
            lo = middle + 1
        else:
            hi = middle - 1
    return ALPHABET[(lo + hi) // 2]
'''

TESTS = '''\
"""__ENV_ID__: scripted cases, the reader, prefix property, turn bound, determinism, splits."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401 - registers __ENV_ID__ through the entry point
from llm_gym import get_renderer, load_tokenizer
from llm_gym import TokensWithLogprobs
from llm_gym.completers import TokenCompleter
from llm_gym.rl import do_single_rollout
from llm_gym.scripted import reply_tokens, run_scripted_case

from __PKG__.env import __CLASS__Source, held_out_secrets, read_guess

TOK = load_tokenizer()
RENDERERS = ["chatml", "role_colon"]


def source(renderer="chatml", split="train", **knobs):
    return __CLASS__Source(renderer=get_renderer(renderer, TOK), split=split, **knobs)


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("split", ["train", "test"])
def test_gold_cases_score_the_maximum(renderer, split):
    src = source(renderer, split)
    gold = [c for c in src.scripted_cases() if c.kind == "gold"]
    assert len(gold) >= 2
    for case in gold:
        for seed in range(6):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.episode_return == pytest.approx(1.0), (case.name, seed, outcome.replies)


@pytest.mark.parametrize("renderer", RENDERERS)
def test_adversarial_cases_get_no_credit(renderer):
    src = source(renderer)
    for case in [c for c in src.scripted_cases() if c.kind == "adversarial"]:
        for seed in range(4):
            outcome = run_scripted_case(src, case, seed)
            assert outcome.episode_return <= 0.0 and outcome.ok, (case.name, seed)
            assert outcome.turns <= src.max_turns


def test_the_reader():
    assert read_guess("c") == "c" and read_guess(" Answer: D. ") == "d"
    for text in ("a or b", "apple", "a, b", "", "ab", "1", "x" * 10_000):
        assert read_guess(text) is None, text


@pytest.mark.parametrize("renderer", RENDERERS)
class Hedger(TokenCompleter):
    """Always replies "a or b" (an invalid turn), as the renderer would sample it."""

    def __init__(self, renderer):
        self.tokens = reply_tokens(renderer, "a or b")

    async def __call__(self, model_input, stop, *, max_tokens=None):
        return TokensWithLogprobs(self.tokens, [0.0] * len(self.tokens))


@pytest.mark.parametrize("renderer", RENDERERS)
def test_prefix_property_and_turn_bound(renderer):
    src = source(renderer, max_turns=5)
    for seed in range(3):
        env = src.make_env(np.random.default_rng(seed))
        traj = asyncio.run(do_single_rollout(Hedger(src.renderer), env))
        assert sum(t.reward for t in traj.transitions) == pytest.approx(-0.5)
        assert len(traj.transitions) == 5  # every turn invalid: the game ends at max_turns
        for before, after in zip(traj.transitions, traj.transitions[1:]):
            prefix = before.ob.to_ints() + before.ac.tokens
            assert after.ob.to_ints()[: len(prefix)] == prefix


def test_same_seed_same_game():
    def game(seed):
        env = gym.make("__ENV_ID__")
        env.reset(seed=seed)
        return env.unwrapped.current_env.secret

    assert [game(s) for s in range(10)] == [game(s) for s in range(10)]
    assert len({game(s) for s in range(30)}) > 1


def test_splits_are_disjoint():
    for size in (4, 8, 26):
        train, test = held_out_secrets(size, "train"), held_out_secrets(size, "test")
        assert train and test and not set(train) & set(test)
        assert sorted(train + test) == sorted("abcdefghijklmnopqrstuvwxyz"[:size])


def test_knobs_are_validated():
    with pytest.raises(ValueError, match="alphabet_size"):
        source(alphabet_size=3)
    with pytest.raises(TypeError, match="max_turns"):
        source(max_turns=2.5)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        source(max_turn=5)
'''

FILES = {
    "__PKG__/env.py": ENV,
    "tests/test___NAME__.py": TESTS,
}
