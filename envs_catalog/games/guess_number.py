"""Guess-the-number (`llm/GuessNumber-v0`): a multi-turn game with "higher"/"lower" feedback.

The env draws a range of `max_number` consecutive integers, [start, start + max_number - 1], whose
start is one of 1..range_starts (range_starts=1: always 1..max_number, the classic game), and a
secret in it; the prompt names the range ("Guess my number from 37 to 56."). Each turn the model
replies with a guess and the env answers "Higher." or "Lower." until the guess is right or
`max_turns` guesses are used.

Rewards (per step; an episode's return is their sum):

- a correct guess: +1.0, episode ends (no discount for the number of turns, so the return of a
  solved episode without invalid turns is exactly 1; the `turns` metric records speed);
- a valid wrong guess: 0.0;
- an invalid turn (no single whole number, a number outside the range, a truncated response):
  `-invalid_penalty` (default 0.1), and the turn counts against `max_turns`; the env replies with
  the rules again;
- out-of-vocabulary token ids (a malformed action): `-invalid_penalty` and the episode ends,
  since such tokens cannot be extended into a valid next observation;
- a turn whose action would take the observation past `max_context_tokens` (default 8192): that
  turn's reward as above (so an oversized reply, which is also invalid, scores
  `-invalid_penalty`) and the episode ends, metric `context_exceeded` = 1; the observation never
  grows past the cap.

So the return lies in [-invalid_penalty * max_turns, 1]. The last step logs `stop_reason`
("solved", "out_of_turns", "malformed_tokens" or "context_exceeded").

A guess is read through the env's answer contract (`GuessNumberEnv.answer_contract`, an
`llm_gym.grading.IntegerAnswer` labelled "answer"/"guess") under the one answer policy
(`llm_gym.grading.POLICY`): the last declaration ("Answer: 7", "My guess is seven.",
`\\boxed{7}`), else the reply's last line stating a number ("7", "I guess 7"), parsed completely,
so "5 or 6", "7 7" or a list is no guess (an invalid turn) and a second declared guess with a
different value voids the turn ("conflicting"); nothing else in the reply is read. Special
tokens sampled inside a reply read as line breaks, so "7<|pad|>5" is never 75.

Observations keep the prefix property with every renderer
(`llm_gym.renderers.continuation.Continuation`); each continuing step's metrics carry its one-hot
`continuation/extended`, `continuation/appended` or `continuation/new_datum`. Held-out split:
a task is the pair (range start, secret) (`GuessNumberSource.task_key`); the max_number *
range_starts tasks are ranked by `hash_key` of (max_number, start, secret) and the first tenth (at
least one) form split="test", the rest "train" (`held_out_tasks`): 200 held-out tasks at the
defaults (20 numbers x 100 starts), max(1, max_number // 10) for the classic game.
"""

from __future__ import annotations

import functools
import heapq
import re
from typing import Any, cast

import numpy as np

from llm_gym.authoring import TEST_SPLIT_MODULUS, check_float, check_int, hash_key
from llm_gym.env_source import EnvCard, EnvSource
from envs_catalog.games.moves import read_integer_move
from llm_gym.grading import IntegerAnswer
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition
from llm_gym.scripted import ScriptedCase

DEFAULTS: dict[str, Any] = {
    "max_number": 20, "range_starts": 100, "max_turns": 8, "invalid_penalty": 0.1,
    "max_context_tokens": 8192,
}
MAX_TASKS = 1_000_000  # max_number * range_starts: the split ranks every task once per process


@functools.lru_cache(maxsize=16)
def held_out_tasks(max_number: int, range_starts: int) -> tuple[tuple[int, int], ...]:
    """The tasks (range start, secret) of split="test", sorted: all max_number * range_starts
    tasks (starts 1..range_starts, secrets start..start+max_number-1) ranked by `hash_key` of
    "guess:{max_number}:{start}:{secret}", the first tenth (at least one). Every other task is
    "train": disjoint, deterministic, never empty. Cached: an env is built per `gym.make`."""
    tasks = ((start, start + k) for start in range(1, range_starts + 1) for k in range(max_number))
    n_test = max(1, max_number * range_starts // TEST_SPLIT_MODULUS)
    ranked = heapq.nsmallest(n_test, tasks, key=lambda t: hash_key(f"guess:{max_number}:{t[0]}:{t[1]}"))
    return tuple(sorted(ranked))


@functools.lru_cache(maxsize=16)
def _held_out_set(max_number: int, range_starts: int) -> frozenset[tuple[int, int]]:
    return frozenset(held_out_tasks(max_number, range_starts))


# Verbs that may introduce a guess in a one-line statement ("I guess 7", "I'll say 7").
GUESS_VERBS = ("guess", "say", "try", "pick", "choose", "go")


def guess_contract(context: str = "") -> IntegerAnswer:
    """What a guess is: one integer, declared with "Answer:"/"Guess:" ("My guess is 7") or stated
    on the reply's last line (`context`: the game's intro, whose words may name the guess)."""
    return IntegerAnswer(labels=("answer", "guess"), verbs=GUESS_VERBS, context=context)


# The intro's answer instruction, from the contract every game reads guesses with.
_INTRO_END = guess_contract().instruction(brief=True)
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


def intro_text(low: int, high: int, max_turns: int) -> str:
    """The first user message: the range [low, high] and the number of guesses."""
    return (
        f"Guess my number from {low} to {high}. After each guess I say Higher or Lower. "
        f"You have {max_turns} guesses. {_INTRO_END}"
    )


def bisect_from_transcript(text: str) -> int:
    """The next binary-search guess, read off a decoded observation alone: the range from the
    intro ("from L to H."), narrowed by every (guess, "Higher."/"Lower.") pair after it, in order
    (the intro itself says "Higher or Lower." and is skipped). Renderer-agnostic: between a
    guess and its feedback there are only template tokens, which hold no digits."""
    found = re.search(r"from (\d+) to (\d+)\.", text)
    if found is None:
        raise ValueError("bisect_from_transcript: no 'from L to H.' intro in the text")
    lo, hi = int(found.group(1)), int(found.group(2))
    start = text.find(_INTRO_END, found.end())
    for guess, feedback in re.findall(r"(\d+)\D*?\b(Higher|Lower)\.", text[start:]):
        if feedback == "Higher":
            lo = max(lo, int(guess) + 1)
        else:
            hi = min(hi, int(guess) - 1)
    return (lo + hi) // 2


class GuessNumberEnv(Env):
    """One game against a fixed secret in [range_start, range_start + max_number - 1] (range_start
    1, the default: the classic 1..max_number). Step metrics: `invalid` (this turn) and, on a step that
    continues the game, the continuation's one-hot mode (`continuation/extended`, ...); on the last
    step `solved`, `turns`, `invalid_turns`, `context_exceeded` (and the log `stop_reason`)."""

    def __init__(
        self, renderer: Renderer, secret: int, *, max_number: int, max_turns: int,
        invalid_penalty: float, continuation: Continuation | None = None,
        intro: ModelInput | None = None, max_context_tokens: int = DEFAULTS["max_context_tokens"],
        range_start: int = 1,
    ) -> None:
        """`intro`, if given, must be the first observation this env would build (the source
        caches it: it depends only on the knobs)."""
        self.renderer = renderer
        self.secret = secret
        self.max_number = max_number
        self.range_start = range_start
        self.range_end = range_start + max_number - 1
        self.max_turns = max_turns
        self.invalid_penalty = invalid_penalty
        self.max_context_tokens = max_context_tokens
        self.continuation = continuation or Continuation(renderer)
        self._intro = intro
        self._stop = renderer.get_stop_sequences()
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []  # the conversation so far, for the continuation
        self._turns = 0
        self._invalid_turns = 0
        self._done = False
        self._contract: IntegerAnswer | None = None

    @property
    def stop_condition(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    @property
    def answer_contract(self) -> IntegerAnswer:
        """What a guess is (`guess_contract`, the intro as context); the same on every turn.
        Whether it lies in the range is the game's rule, checked after reading."""
        if self._contract is None:
            self._contract = guess_contract(intro_text(self.range_start, self.range_end, self.max_turns))
        return self._contract

    @property
    def gold_answer(self) -> int:
        """The guess that wins on any turn: the secret."""
        return self.secret

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        if self._intro is None:
            self._intro = self.continuation.first(self._intro_messages())
        self._ob = self._intro
        return self._ob, self.stop_condition

    def _intro_messages(self) -> list[Message]:
        return [{"role": "user", "content": intro_text(self.range_start, self.range_end,
                                                       self.max_turns)}]

    def _finish(self, reward: float, stop_reason: str, metrics: dict, logs: dict) -> StepResult:
        self._done = True
        metrics.update(
            solved=float(stop_reason == "solved"), turns=self._turns,
            invalid_turns=self._invalid_turns,
            context_exceeded=float(stop_reason == "context_exceeded"),
        )
        logs["stop_reason"] = stop_reason
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self._done:
            raise RuntimeError("GuessNumberEnv: call initial_observation() first; envs are single-use")
        self._turns += 1
        message, termination = self.renderer.parse_response(action)
        text = str(message.get("content", ""))
        clean = termination.is_clean
        guess, status = read_integer_move(self.answer_contract, text) if clean else (None, termination.value)
        logs = {"response": text, "secret": self.secret, "guess_status": status}
        valid = guess is not None and self.range_start <= guess <= self.range_end
        metrics: dict[str, float | int] = {"invalid": float(not valid)}
        # Ids outside the vocabulary cannot be appended to the transcript: end the game. Any other
        # unclean reply (truncated, say) is an invalid turn, and the game goes on.
        if termination is ParseTermination.MALFORMED and self.renderer.has_invalid_ids(action):
            self._invalid_turns += 1
            return self._finish(-self.invalid_penalty, "malformed_tokens", metrics, logs)
        if not valid or guess is None:  # (valid implies a guess; this narrows it)
            self._invalid_turns += 1
            reward = -self.invalid_penalty
            feedback = (f"Invalid. Reply with one whole number from {self.range_start} to "
                        f"{self.range_end}.")
        elif guess == self.secret:
            return self._finish(1.0, "solved", metrics, logs)
        else:
            reward = 0.0
            feedback = "Higher." if guess < self.secret else "Lower."
        if self._turns >= self.max_turns:
            return self._finish(reward, "out_of_turns", metrics, logs)
        # The cap is checked before the action is appended, so a huge action costs no copy.
        if self._ob.length + len(action) >= self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        # The conversation is built only once the game goes on (many games end on turn one).
        self._messages = (self._messages or self._intro_messages()) + [
            message, {"role": "user", "content": feedback}
        ]
        turn = self.continuation.next(self._ob, action, self._messages)
        ob = turn.observation
        if ob.length > self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        metrics.update(turn.metrics)
        self._ob = ob
        return StepResult(reward, False, self._ob, self.stop_condition, metrics, logs)


class GuessNumberSource(EnvSource):
    """Tasks (range start, secret) for `llm/GuessNumber-v0`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="llm/GuessNumber-v0",
        family="games",
        description=(
            "Multi-turn number guessing: the env picks a range of max_number consecutive numbers "
            "starting at one of 1..range_starts, named in the prompt ('Guess my number from 37 "
            "to 56'), and a secret in it; the model guesses, the env answers 'Higher.' or "
            "'Lower.'; binary search always wins within ceil(log2(max_number+1)) guesses. Each "
            "observation extends the previous one plus the sampled tokens (prefix property), so a "
            "whole game is one training datum. A guess is one "
            "integer (digits or words) read under the one answer policy (llm_gym.grading.POLICY): "
            "the last 'Answer:'/'Guess:' declaration ('My guess is seven.'), \\boxed{}, else the "
            "last line stating a number ('I guess 7'), parsed completely, so '5 or 6' or a list is "
            "an invalid turn, and a second declared guess with another value voids it. Held-out "
            "split: a task is (range start, secret); the max_number * range_starts tasks are "
            "ranked by a hash of (max_number, start, secret) and the first tenth (at least one) "
            "is split='test', the rest 'train': 200 held-out tasks at the defaults; keep "
            "max_number * range_starts >= 1000 for at least 100."
        ),
        multi_turn=True,
        reward_range=(-0.8, 1.0),
        reward_meaning=(
            "Episode return: +1 for guessing the secret (any turn), 0 for running out of turns, "
            "minus invalid_penalty (0.1) for each invalid turn (no single whole number in range "
            "read, two declared guesses that differ, or a truncated response); out-of-vocabulary "
            "tokens end the game "
            "with that penalty, and so does a turn that would take the observation past "
            "max_context_tokens (that turn scored as usual; metric context_exceeded). "
            "Range [-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "max_number": "how many numbers the range holds, 4-10000 (default 20)",
            "range_starts": "the range starts at one of 1..range_starts, 1-1000 (default 100; 1 "
            "is the classic game, always 1..max_number); max_number * range_starts is the number "
            "of tasks, at most 1000000",
            "max_turns": "guesses allowed, 1-100 (default 8)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let an "
            "observation grow past this many tokens, 256-1000000 (default 8192)",
        },
        answer_contract="integer (IntegerAnswer, labels 'answer'/'guess'): one guess in the range per "
        "reply; the intro asks 'Reply with just the number.'",
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": intro_text(37, 56, 8)},
            {"role": "assistant", "content": "46"},
            {"role": "user", "content": "Higher."},
            {"role": "assistant", "content": "51"},
            {"role": "user", "content": "Lower."},
            {"role": "assistant", "content": "49"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_number = check_int("max_number", own["max_number"], 4, 10_000)
        self.range_starts = check_int("range_starts", own["range_starts"], 1, 1000)
        if self.max_number * self.range_starts > MAX_TASKS:
            raise ValueError(
                f"max_number * range_starts must be at most {MAX_TASKS:,} (the tasks the split "
                f"ranks), got {self.max_number} * {self.range_starts}; lower range_starts")
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 100)
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000
        )
        self.continuation = Continuation(renderer)
        self._held_out = held_out_tasks(self.max_number, self.range_starts)
        # The first observation depends only on the range start: rendered once per start.
        self._intros: dict[int, ModelInput] = {}

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def task_key(self, env: GuessNumberEnv) -> list[int]:
        """The task `env` plays: [range start, secret] (max_number is the source's)."""
        return [env.range_start, env.secret]

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: binary search reading only the transcript (wins every task within
        ceil(log2(max_number+1)) guesses, 5 at the default 20; the case raises max_turns to that
        when the source allows fewer),
        and the secret after a marker. Adversarial, under the one answer policy — none scores
        above 0, the return of a game that never finds the number: two guesses in one line (the
        secret first), hedges in digits and in words, the secret in a list (the range's first 30
        numbers and the secret), two declared guesses (the secret last), a correction on the
        read line, the secret declared and another declaration after it, out-of-range numbers
        (0, one below and one above the range, minus the secret), prose with no number, a reward
        claim, an empty reply, the feedback echoed back, and a valid wrong guess every turn
        (exactly 0). (A reply over the reader's character cap is tested in
        tests/envs_catalog/games/test_guess_number.py instead: encoding one under role_colon takes seconds.)"""
        lo = -self.invalid_penalty * self.max_turns
        n = self.max_number
        needed = n.bit_length()  # = ceil(log2(n + 1)), the guesses binary search may need

        def other(env: GuessNumberEnv) -> int:
            return env.secret + 1 if env.secret < env.range_end else env.secret - 1

        def word(k: int) -> str:
            return _NUMBER_WORDS[k] if k < len(_NUMBER_WORDS) else str(k)

        def echo_feedback(env: GuessNumberEnv, ob: str) -> str:
            said = re.findall(r"\b(?:Higher|Lower)\.|Invalid\.[^<\n]*", ob[ob.find(_INTRO_END):])
            return said[-1] if said else str(other(env))  # a valid wrong guess, then echo

        def in_a_list(env: GuessNumberEnv) -> str:
            first = range(env.range_start, env.range_start + min(n, 30))
            return ", ".join(map(str, sorted(set(first) | {env.secret})))

        def case(name: str, reply: Any, low: float = lo, high: float = 0.0) -> ScriptedCase:
            return ScriptedCase(name, "adversarial", reply, low, high)

        return [
            ScriptedCase("binary search from the transcript", "gold",
                         lambda env, ob: str(bisect_from_transcript(ob)), 1.0, 1.0,
                         knobs={"max_turns": needed} if self.max_turns < needed else {},
                         note="reads only the observation text, never the secret"),
            ScriptedCase("secret after a marker", "gold",
                         lambda env, ob: f"My guess is {env.secret}.", 1.0, 1.0),
            case("two guesses, the secret first", lambda env, ob: f"{env.secret} {other(env)}"),
            case("two declared guesses", lambda env, ob: f"Guess: {other(env)}\nGuess: {env.secret}"),
            case("hedge", lambda env, ob: f"{other(env)} or {env.secret}"),
            case("hedge in words", lambda env, ob: f"{word(env.secret)} or {word(other(env))}"),
            case("the secret in a list", lambda env, ob: in_a_list(env)),
            case("second marker", lambda env, ob: f"My guess is {other(env)}. Answer: {env.secret}"),
            case("a backup guess declared", lambda env, ob: f"Answer: {env.secret}\nMy backup guess is {other(env)}."),
            case("correction", lambda env, ob: f"{other(env)}. Actually {env.secret}."),
            case("zero", lambda env, ob: "0"),
            case("below the range", lambda env, ob: str(env.range_start - 1)),
            case("above the range", lambda env, ob: str(env.range_end + 1)),
            case("negative secret", lambda env, ob: f"-{env.secret}"),
            case("words, no number", lambda env, ob: "I think it is a big number."),
            case("reward claim", lambda env, ob: "Correct! I guessed it, give me the reward."),
            case("empty", lambda env, ob: ""),
            case("feedback echoed", echo_feedback),
            case("same wrong number every turn", lambda env, ob: str(other(env)), 0.0, 0.0),
        ]

    def _draw_task(self, rng: np.random.Generator) -> tuple[int, int]:
        if self.split == "test":
            return self._held_out[int(rng.integers(len(self._held_out)))]
        held_out = _held_out_set(self.max_number, self.range_starts)
        while True:  # held out: a tenth of the tasks, a quarter at most (1 of max_number 4's 4)
            start = int(rng.integers(self.range_starts)) + 1
            task = (start, start + int(rng.integers(self.max_number)))
            if task not in held_out:
                return task

    def make_env(self, rng: np.random.Generator) -> GuessNumberEnv:
        start, secret = self._draw_task(rng)
        intro = self._intros.get(start)
        if intro is None:
            high = start + self.max_number - 1
            intro = self.continuation.first(
                [Message(role="user", content=intro_text(start, high, self.max_turns))])
            self._intros[start] = intro
        return GuessNumberEnv(
            self.renderer, secret, max_number=self.max_number, max_turns=self.max_turns,
            invalid_penalty=self.invalid_penalty, continuation=self.continuation,
            intro=intro, max_context_tokens=self.max_context_tokens, range_start=start,
        )
