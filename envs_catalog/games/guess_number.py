"""Guess-the-number (`llm/GuessNumber-v0`): a multi-turn game with "higher"/"lower" feedback.

The env draws a secret integer in [1, max_number]; each turn the model replies with a guess and the
env answers "Higher." or "Lower." until the guess is right or `max_turns` guesses are used.

Rewards (per step; an episode's return is their sum):

- a correct guess: +1.0, episode ends (no discount for the number of turns, so the return of a
  solved episode without invalid turns is exactly 1; the `turns` metric records speed);
- a valid wrong guess: 0.0;
- an invalid turn (no single whole number, a number outside [1, max_number], a truncated
  response): `-invalid_penalty` (default 0.1), and the turn counts against `max_turns`; the env
  replies with the rules again;
- out-of-vocabulary token ids (a malformed action): `-invalid_penalty` and the episode ends,
  since such tokens cannot be extended into a valid next observation;
- a turn whose action would take the observation past `max_context_tokens` (default 8192): that
  turn's reward as above (so an oversized reply, which is also invalid, scores
  `-invalid_penalty`) and the episode ends, metric `context_exceeded` = 1; the observation never
  grows past the cap.

So the return lies in [-invalid_penalty * max_turns, 1]. The last step logs `stop_reason`
("solved", "out_of_turns", "malformed_tokens" or "context_exceeded").

Guesses are read by `llm_gym.grading.extract_single_integer` under the policy in
`llm_gym.grading`'s docstring: digits or English words ("seven"), bare, boxed, after a marker
("Answer:", "My guess is") or in a sentence holding exactly one number; a reply showing two
different numbers (a hedge "5 or 6", a list of guesses, a later correction, a second marker behind
look-alike letters or zero-width characters) is an invalid turn, never a hit. Special tokens
sampled inside a reply stay in the parsed text and read as line breaks, so "7<|pad|>5" is not 75.

Observations keep the prefix property with every renderer
(`llm_gym.renderers.continuation.Continuation`); each continuing step's metrics carry its one-hot
`continuation/extended`, `continuation/appended` or `continuation/new_datum`. Held-out split:
secrets are ranked by a hash of (max_number, secret); the first tenth (at least one) form
split="test", the rest "train".
"""

from __future__ import annotations

import re
from typing import Any, cast

import numpy as np

from llm_gym.authoring import check_float, check_int, hash_key
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import extract_single_integer
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition
from llm_gym.scripted import ScriptedCase

DEFAULTS: dict[str, Any] = {
    "max_number": 20, "max_turns": 8, "invalid_penalty": 0.1, "max_context_tokens": 8192,
}


def held_out_secrets(max_number: int, split: str) -> list[int]:
    """The secrets of `split`: secrets ranked by a hash of (max_number, secret); the first tenth
    (at least one) are "test", the rest "train". Disjoint, deterministic, never empty."""
    ranked = sorted(range(1, max_number + 1), key=lambda s: hash_key(f"guess:{max_number}:{s}"))
    n_test = max(1, max_number // 10)
    return sorted(ranked[:n_test] if split == "test" else ranked[n_test:])


_INTRO_END = "Reply with just the number."
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


def intro_text(max_number: int, max_turns: int) -> str:
    return (
        f"Guess my number from 1 to {max_number}. After each guess I say Higher or Lower. "
        f"You have {max_turns} guesses. {_INTRO_END}"
    )


def bisect_from_transcript(text: str) -> int:
    """The next binary-search guess, read off a decoded observation alone: the range from the
    intro ("from 1 to N"), narrowed by every (guess, "Higher."/"Lower.") pair after it, in order
    (the intro itself says "Higher or Lower." and is skipped). Renderer-agnostic: between a
    guess and its feedback there are only template tokens, which hold no digits."""
    found = re.search(r"from 1 to (\d+)\.", text)
    if found is None:
        raise ValueError("bisect_from_transcript: no 'from 1 to N.' intro in the text")
    lo, hi = 1, int(found.group(1))
    start = text.find(_INTRO_END, found.end())
    for guess, feedback in re.findall(r"(\d+)\D*?\b(Higher|Lower)\.", text[start:]):
        if feedback == "Higher":
            lo = max(lo, int(guess) + 1)
        else:
            hi = min(hi, int(guess) - 1)
    return (lo + hi) // 2


class GuessNumberEnv(Env):
    """One game against a fixed secret. Step metrics: `invalid` (this turn) and, on a step that
    continues the game, the continuation's one-hot mode (`continuation/extended`, ...); on the last
    step `solved`, `turns`, `invalid_turns`, `context_exceeded` (and the log `stop_reason`)."""

    def __init__(
        self, renderer: Renderer, secret: int, *, max_number: int, max_turns: int,
        invalid_penalty: float, continuation: Continuation | None = None,
        intro: ModelInput | None = None, max_context_tokens: int = DEFAULTS["max_context_tokens"],
    ) -> None:
        """`intro`, if given, must be the first observation this env would build (the source
        caches it: it depends only on the knobs)."""
        self.renderer = renderer
        self.secret = secret
        self.max_number = max_number
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

    @property
    def stop_condition(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        if self._intro is None:
            self._intro = self.continuation.first(self._intro_messages())
        self._ob = self._intro
        return self._ob, self.stop_condition

    def _intro_messages(self) -> list[Message]:
        return [{"role": "user", "content": intro_text(self.max_number, self.max_turns)}]

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
        guess, status = extract_single_integer(text) if clean else (None, termination.value)
        logs = {"response": text, "secret": self.secret, "guess_status": str(getattr(status, "value", status))}
        valid = guess is not None and 1 <= guess <= self.max_number
        metrics: dict[str, float | int] = {"invalid": float(not valid)}
        # Ids outside the vocabulary cannot be appended to the transcript: end the game. Any other
        # unclean reply (truncated, say) is an invalid turn, and the game goes on.
        if termination is ParseTermination.MALFORMED and self.renderer.has_invalid_ids(action):
            self._invalid_turns += 1
            return self._finish(-self.invalid_penalty, "malformed_tokens", metrics, logs)
        if not valid or guess is None:  # (valid implies a guess; this narrows it)
            self._invalid_turns += 1
            reward = -self.invalid_penalty
            feedback = f"Invalid. Reply with one whole number from 1 to {self.max_number}."
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
    """Secrets for `llm/GuessNumber-v0`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="llm/GuessNumber-v0",
        family="games",
        description=(
            "Multi-turn number guessing: the env picks a secret from 1 to max_number, the model "
            "guesses, the env answers 'Higher.' or 'Lower.'; binary search always wins within "
            "ceil(log2(max_number+1)) guesses. Each observation extends the previous one plus the "
            "sampled tokens (prefix property), so a whole game is one training datum. A guess may "
            "be digits or words ('seven'), bare, boxed, after 'Answer:'/'My guess is', or a "
            "sentence with exactly one number; a reply showing two different numbers (a hedge, a "
            "list, a later correction, a second marker hidden by look-alike letters or zero-width "
            "characters) is invalid, never a hit (answer policy: llm_gym.grading)."
        ),
        multi_turn=True,
        reward_range=(-0.8, 1.0),
        reward_meaning=(
            "Episode return: +1 for guessing the secret (any turn), 0 for running out of turns, "
            "minus invalid_penalty (0.1) for each invalid turn (no single whole number in range, "
            "conflicting numbers, or a truncated response); out-of-vocabulary tokens end the game "
            "with that penalty, and so does a turn that would take the observation past "
            "max_context_tokens (that turn scored as usual; metric context_exceeded). "
            "Range [-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "max_number": "the secret is drawn from 1..max_number, 4-10000 (default 20)",
            "max_turns": "guesses allowed, 1-100 (default 8)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let an "
            "observation grow past this many tokens, 256-1000000 (default 8192)",
        },
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": intro_text(20, 8)},
            {"role": "assistant", "content": "10"},
            {"role": "user", "content": "Higher."},
            {"role": "assistant", "content": "15"},
            {"role": "user", "content": "Lower."},
            {"role": "assistant", "content": "13"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_number = check_int("max_number", own["max_number"], 4, 10_000)
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 100)
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000
        )
        self.continuation = Continuation(renderer)
        self._secrets = held_out_secrets(self.max_number, split)
        intro = Message(role="user", content=intro_text(self.max_number, self.max_turns))
        self._intro = self.continuation.first([intro])  # the same for every game

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: binary search reading only the transcript (wins every secret within
        ceil(log2(max_number+1)) guesses, 5 at the default 20; the case raises max_turns to that
        when the source allows fewer),
        and the secret after a marker. Adversarial — none scores above 0, the return of a game
        that never finds the number: two guesses in one reply (the secret first), hedges in
        digits and in words, the secret in a list (1..30 and the secret), a second marker,
        a correction, out-of-range numbers (0, max_number+1, minus the secret), prose with no
        number, a reward claim, an empty reply, the feedback echoed back, and a valid wrong guess
        every turn (exactly 0). (A reply over the reader's character cap is tested in
        tests/envs_catalog/games/test_guess_number.py instead: encoding one under role_colon takes seconds.)"""
        lo = -self.invalid_penalty * self.max_turns
        n = self.max_number
        needed = n.bit_length()  # = ceil(log2(n + 1)), the guesses binary search may need

        def other(env: GuessNumberEnv) -> int:
            return env.secret + 1 if env.secret < n else env.secret - 1

        def word(k: int) -> str:
            return _NUMBER_WORDS[k] if k < len(_NUMBER_WORDS) else str(k)

        def echo_feedback(env: GuessNumberEnv, ob: str) -> str:
            said = re.findall(r"\b(?:Higher|Lower)\.|Invalid\.[^<\n]*", ob[ob.find(_INTRO_END):])
            return said[-1] if said else str(other(env))  # a valid wrong guess, then echo

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
            case("two guesses on two lines", lambda env, ob: f"{other(env)}\n{env.secret}"),
            case("hedge", lambda env, ob: f"{other(env)} or {env.secret}"),
            case("hedge in words", lambda env, ob: f"{word(env.secret)} or {word(other(env))}"),
            case("the secret in a list", lambda env, ob: ", ".join(
                map(str, sorted(set(range(1, min(n, 30) + 1)) | {env.secret})))),
            case("second marker", lambda env, ob: f"My guess is {other(env)}. Answer: {env.secret}"),
            case("correction", lambda env, ob: f"{other(env)}. Actually {env.secret}."),
            case("zero", lambda env, ob: "0"),
            case("above the range", lambda env, ob: str(n + 1)),
            case("negative secret", lambda env, ob: f"-{env.secret}"),
            case("words, no number", lambda env, ob: "I think it is a big number."),
            case("reward claim", lambda env, ob: "Correct! I guessed it, give me the reward."),
            case("empty", lambda env, ob: ""),
            case("feedback echoed", echo_feedback),
            case("same wrong number every turn", lambda env, ob: str(other(env)), 0.0, 0.0),
        ]

    def make_env(self, rng: np.random.Generator) -> GuessNumberEnv:
        secret = self._secrets[int(rng.integers(len(self._secrets)))]
        return GuessNumberEnv(
            self.renderer, secret, max_number=self.max_number, max_turns=self.max_turns,
            invalid_penalty=self.invalid_penalty, continuation=self.continuation,
            intro=self._intro, max_context_tokens=self.max_context_tokens,
        )
