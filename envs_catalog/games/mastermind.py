"""Mastermind (`llm/Mastermind-v0`): find a secret code of digits from black/white peg feedback.

The secret is `pegs` digits, each from 1 to `colours` (repeats allowed unless `repeats=False`).
Each turn the model replies with a code of the same form; the env answers how many digits are
right and in the right place (black) and how many more are right but misplaced (white), the
classic scoring: white = sum over digits of min(count in guess, count in code) - black.

The reply is read through the answer contract `CodeAnswer` (`MastermindEnv.answer_contract`:
exactly `pegs` digits from 1..colours, bare ("1234") or separated by spaces, commas or dashes
("1 2 3 4", "[1, 2, 3, 4]")) under the one answer policy (`llm_gym.grading.POLICY`): the last
declaration ("Guess: 1234", "My code is 1 2 3 4."), else the reply's last line stating a code,
parsed completely. No code read (two codes, "1234 or 5612", the wrong number of digits, a digit
outside 1..colours, other scripts' digits) or two declared codes that differ is an invalid turn:
it costs a turn and `invalid_penalty`. Text outside the declaration is not read.

Rewards per step (the return is their sum, in [-invalid_penalty * max_turns, 1]): +1 for the
code (the episode ends), 0 for a valid wrong code, -invalid_penalty for an invalid turn;
out-of-vocabulary ids end the episode with the penalty. The loop, prefix property and context
cap are `envs_catalog.games._turns.TurnGameEnv`'s. Held-out split: all codes ranked by a hash of
(knobs, code); the first tenth (at least one) are "test", the rest "train".

Gold: `solver_guess`, a consistent-guess solver (a fixed opening such as 1122, then the
consistent code whose worst-case feedback leaves the fewest candidates, Knuth's minimax rule
restricted to consistent codes); at the defaults (4 pegs, 6 colours, repeats) it wins every one of
the 1296 codes within 6 guesses (max_turns is 10).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from typing import Any

import numpy as np

from envs_catalog.games._turns import INVALID, SOLVED, VALID, IntroCache, Turn, TurnGameEnv
from llm_gym.authoring import check_choice, check_float, check_int, hash_key
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import TokenAnswer
from llm_gym.grading.quantity import strip_decoration
from llm_gym.renderers import Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.scripted import ScriptedCase

DEFAULTS: dict[str, Any] = {
    "pegs": 4, "colours": 6, "repeats": True, "max_turns": 10, "invalid_penalty": 0.1,
    "max_context_tokens": 4096, "max_reply_chars": 200,
}
MAX_CODES = 100_000  # knob settings with more codes are refused (memory, split ranking)
_MINIMAX_LIMIT = 150  # candidate sets larger than this get the first consistent code instead
# (150 keeps the default tree within 6 guesses and a whole-tree walk near a second)

Code = tuple[int, ...]


def score_code(guess: Code, secret: Code) -> tuple[int, int]:
    """(black, white) pegs for `guess` against `secret`."""
    black = 0
    left_guess = [0] * 10
    left_secret = [0] * 10
    for g, s in zip(guess, secret):
        if g == s:
            black += 1
        else:
            left_guess[g] += 1
            left_secret[s] += 1
    white = 0
    for a, b in zip(left_guess, left_secret):
        white += a if a < b else b
    return black, white


def show_code(code: Code) -> str:
    return "".join(map(str, code))


@functools.lru_cache(maxsize=32)
def all_codes(pegs: int, colours: int, repeats: bool) -> tuple[Code, ...]:
    digits = range(1, colours + 1)
    if repeats:
        return tuple(itertools.product(digits, repeat=pegs))
    return tuple(itertools.permutations(digits, pegs))


def code_count(pegs: int, colours: int, repeats: bool) -> int:
    if repeats:
        return colours**pegs
    n = 1
    for i in range(pegs):
        n *= colours - i
    return n


@functools.lru_cache(maxsize=64)
def codes_of(pegs: int, colours: int, repeats: bool, split: str) -> tuple[Code, ...]:
    """The codes of `split`: ranked by a hash of (knobs, code), first tenth (at least one) test."""
    codes = all_codes(pegs, colours, repeats)
    prefix = f"mastermind:{pegs}:{colours}:{repeats}:"
    ranked = sorted(codes, key=lambda c: hash_key(prefix + show_code(c)))
    n_test = max(1, len(ranked) // 10)
    return tuple(sorted(ranked[:n_test] if split == "test" else ranked[n_test:]))


def opening(pegs: int, colours: int, repeats: bool) -> Code:
    """Knuth's kind of opening: the first half of the pegs colour 1, the rest colour 2 (1122 for
    4 pegs); without repeats, 1234..."""
    if not repeats or colours < 2:
        return tuple(range(1, pegs + 1))
    half = pegs // 2
    return (1,) * half + (2,) * (pegs - half)


@functools.lru_cache(maxsize=4096)
def _candidates(pegs: int, colours: int, repeats: bool, history: tuple) -> tuple[Code, ...]:
    """The codes consistent with `history`, filtered from those of its prefix (cached)."""
    if not history:
        return all_codes(pegs, colours, repeats)
    guess, feedback = history[-1]
    return tuple(c for c in _candidates(pegs, colours, repeats, history[:-1])
                 if score_code(guess, c) == feedback)


@functools.lru_cache(maxsize=65536)
def solver_guess(pegs: int, colours: int, repeats: bool,
                 history: tuple[tuple[Code, tuple[int, int]], ...]) -> Code:
    """The consistent-guess solver's next code after `history` ((guess, (black, white)) pairs)."""
    if not history:
        return opening(pegs, colours, repeats)
    candidates = _candidates(pegs, colours, repeats, history)
    if len(candidates) == 0:
        raise ValueError(f"no code is consistent with {history!r}")
    if len(candidates) <= 2 or len(candidates) > _MINIMAX_LIMIT:
        return candidates[0]
    best, best_key = candidates[0], None
    for guess in candidates:
        sizes = Counter(score_code(guess, c) for c in candidates)
        key = (max(sizes.values()), -len(sizes))
        if best_key is None or key < best_key:
            best, best_key = guess, key
    return best


def solver_depths(pegs: int, colours: int, repeats: bool) -> dict[Code, int]:
    """Guesses the solver needs for every code (a walk over its decision tree)."""
    depths: dict[Code, int] = {}

    def walk(history: tuple, candidates: list[Code]) -> None:
        guess = solver_guess(pegs, colours, repeats, history)
        groups: dict[tuple[int, int], list[Code]] = {}
        for c in candidates:
            groups.setdefault(score_code(guess, c), []).append(c)
        for fb, group in groups.items():
            if fb == (pegs, 0):
                depths[guess] = len(history) + 1
            else:
                walk(history + ((guess, fb),), group)

    walk((), list(all_codes(pegs, colours, repeats)))
    return depths


# Verbs that may introduce a code in a one-line statement ("I guess 1122", "I'll try 1122").
GUESS_VERBS = ("guess", "try", "say", "play", "pick", "choose", "go")


def _digits(text: str) -> str:
    """A code's digits ("1 2 3 4" -> "1234"); a module function, so a contract pickles."""
    return "".join(c for c in text if c.isdigit())


class CodeAnswer(TokenAnswer):
    """The answer contract of a Mastermind guess: exactly `pegs` digits, each from 1 to
    `colours`, bare ("1234") or separated by spaces, commas or dashes ("1 2 3 4", "1-2-3-4"),
    optionally in brackets ("[1, 2, 3, 4]"); the value is the digits ("1234"). Declared with
    "Guess:"/"Answer:"/"Code:" or stated on the reply's last line."""

    def __init__(self, pegs: int, colours: int, **kwargs: Any) -> None:
        digit = f"[1-{colours}]"
        sample = show_code(tuple(range(1, pegs + 1)) if pegs <= colours else (1,) * pegs)
        super().__init__(
            pattern=rf"{digit}(?:(?:[ \t]*[,-][ \t]*|[ \t]+)?{digit}){{{pegs - 1}}}",
            name=f"your guess: {pegs} digits, like {sample}", labels=("answer", "guess", "code"),
            verbs=GUESS_VERBS, normalize=_digits, **kwargs)
        self.pegs, self.colours = pegs, colours

    def parse(self, text: str) -> str | None:
        s = strip_decoration(text)
        if s[:1] + s[-1:] in ("[]", "()"):  # a code in brackets: "[1, 2, 3, 4]"
            s = s[1:-1].strip()
        return self.normalize(s) if self.pattern.fullmatch(s) else None

    def describe(self) -> str:
        return f"{self.pegs} digits, each from 1 to {self.colours}"


def intro_text(pegs: int, colours: int, repeats: bool, max_turns: int,
               example: tuple[Code, Code] | None) -> str:
    text = (
        f"Let's play Mastermind. I picked a secret code of {pegs} digits, each from 1 to "
        f"{colours} ({'digits may repeat' if repeats else 'all different'}). You have "
        f"{max_turns} guesses. After each guess I say how many digits are right and in the "
        "right place (black) and how many more are right but in the wrong place (white)."
    )
    if example is not None:
        secret, guess = example
        b, w = score_code(guess, secret)
        text += (f" Example: if the code were {show_code(secret)}, the guess {show_code(guess)} "
                 f"would get {b} black, {w} white.")
    return text + " " + CodeAnswer(pegs, colours).instruction(brief=True)


class MastermindEnv(TurnGameEnv):
    """One game; `contract` (a `CodeAnswer`) reads every guess."""

    def __init__(self, renderer: Renderer, secret: Code, intro: str, *, pegs: int, colours: int,
                 contract: CodeAnswer | None = None, **kwargs: Any) -> None:
        super().__init__(renderer, intro, **kwargs)
        self.secret = secret
        self.answer = show_code(secret)
        self.pegs, self.colours = pegs, colours
        self.contract = contract or CodeAnswer(pegs, colours, max_chars=self.max_reply_chars)
        self.rules_reminder = f"Reply with just {self.contract.describe()}."
        self.history: list[tuple[Code, tuple[int, int]]] = []

    @property
    def answer_contract(self) -> CodeAnswer:
        return self.contract

    @property
    def gold_answer(self) -> str:
        """The guess that wins on any turn: the secret code's digits."""
        return self.answer

    def final_logs(self) -> dict[str, Any]:
        return {"secret": self.answer,
                "history": [f"{show_code(g)} {b}b{w}w" for g, (b, w) in self.history]}

    async def judge(self, text: str) -> Turn:
        reading = self.contract.read(text)
        if not reading.ok:
            return Turn(INVALID, f"That is not a code. {self.rules_reminder}", reading.status)
        code = tuple(int(d) for d in reading.value)
        feedback = score_code(code, self.secret)
        self.history.append((code, feedback))
        if code == self.secret:
            return Turn(SOLVED, "", "ok")
        b, w = feedback
        return Turn(VALID, f"{show_code(code)}: {b} black, {w} white.", "ok")


class MastermindSource(EnvSource):
    """Codes for `llm/Mastermind-v0`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="llm/Mastermind-v0",
        family="games",
        description=(
            "Multi-turn Mastermind: find a secret code of `pegs` digits from 1 to `colours` "
            "(default 4 digits from 1-6, repeats allowed) within max_turns (10) guesses; after "
            "each guess the env reports black pegs (right digit, right place) and white pegs "
            "(right digit, wrong place). A guess is one code ('1234', '1 2 3 4', 'Guess: 1234') "
            "read under the one answer policy (llm_gym.grading.POLICY): the last 'Guess:'/"
            "'Answer:' declaration, else the last line stating a code, parsed completely; no code "
            "read (two codes, a hedge, the wrong length, a digit out of range) or two declared "
            "codes that differ is an invalid turn with a penalty. The intro shows a worked "
            "example on a random code of "
            "the same split (independent of the game's secret). Prefix property: a game is one "
            "training datum. A consistent-guess minimax solver wins every default code within 6 "
            "guesses."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "Episode return: +1 for the code (any turn), 0 for running out of turns, minus "
            "invalid_penalty (0.1) for each invalid turn (no code of the right form read, two "
            "declared codes that differ, a reply over max_reply_chars or truncated); "
            "out-of-vocabulary tokens end the game "
            "with that penalty, and so does a turn that would pass max_context_tokens. Range "
            "[-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "pegs": "digits in the code, 2-8, at most 100,000 codes in all (default 4)",
            "colours": "each digit is from 1 to colours, 2-9 (default 6)",
            "repeats": "whether the code may repeat a digit, True/False (default True)",
            "max_turns": "guesses allowed, 1-50 (default 10)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "max_reply_chars": "a longer reply is an invalid turn, 16-4096 (default 200)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let "
            "an observation grow past this many tokens, 256-1000000 (default 4096)",
        },
        answer_contract="a code of `pegs` digits from 1..colours (CodeAnswer, a TokenAnswer labelled "
        "'answer'/'guess'/'code'); the intro asks 'Reply with just your guess: 4 digits, like 1234.'",
        data_source="generated: every code of the knob setting, drawn from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": intro_text(4, 6, True, 10, ((1, 2, 3, 1), (1, 3, 4, 5)))},
            {"role": "assistant", "content": "1122"},
            {"role": "user", "content": "1122: %d black, %d white. 9 turns left."
             % score_code((1, 1, 2, 2), (1, 4, 3, 4))},
            {"role": "assistant", "content": "1344"},
            {"role": "user", "content": "1344: %d black, %d white. 8 turns left."
             % score_code((1, 3, 4, 4), (1, 4, 3, 4))},
            {"role": "assistant", "content": "1434"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.pegs = check_int("pegs", own["pegs"], 2, 8)
        self.colours = check_int("colours", own["colours"], 2, 9)
        self.repeats = check_choice("repeats", own["repeats"], (True, False))
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 50)
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_reply_chars = check_int("max_reply_chars", own["max_reply_chars"], 16, 4096)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000
        )
        if not self.repeats and self.pegs > self.colours:
            raise ValueError(
                f"repeats=False needs pegs <= colours, got pegs={self.pegs}, colours={self.colours}"
            )
        n = code_count(self.pegs, self.colours, self.repeats)
        if n > MAX_CODES or n < 2:
            raise ValueError(
                f"pegs={self.pegs}, colours={self.colours}, repeats={self.repeats} give {n} codes; "
                f"pick knobs with 2 to {MAX_CODES} codes (e.g. fewer pegs or colours)"
            )
        self.continuation = Continuation(renderer)
        self._intros = IntroCache(self.continuation)
        self.codes = codes_of(self.pegs, self.colours, self.repeats, split)
        self.contract = CodeAnswer(self.pegs, self.colours, max_chars=self.max_reply_chars,
                                   context=intro_text(self.pegs, self.colours, self.repeats,
                                                      self.max_turns, None))

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def _random_code(self, rng: np.random.Generator) -> Code:
        digits = np.arange(1, self.colours + 1)
        if self.repeats:
            return tuple(int(d) for d in rng.choice(digits, size=self.pegs, replace=True))
        return tuple(int(d) for d in rng.choice(digits, size=self.pegs, replace=False))

    def make_env(self, rng: np.random.Generator) -> MastermindEnv:
        secret = self.codes[int(rng.integers(len(self.codes)))]
        # The worked example: a code of this split and a random guess, drawn independently of
        # the game's secret (a train prompt never shows a test code).
        example = (self.codes[int(rng.integers(len(self.codes)))], self._random_code(rng))
        intro = intro_text(self.pegs, self.colours, self.repeats, self.max_turns, example)
        return MastermindEnv(
            self.renderer, secret, intro, pegs=self.pegs, colours=self.colours,
            contract=self.contract, max_turns=self.max_turns, invalid_penalty=self.invalid_penalty,
            max_context_tokens=self.max_context_tokens, max_reply_chars=self.max_reply_chars,
            continuation=self.continuation, intro_ob=self._intros.get(intro),
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the consistent-guess solver and the secret after a marker. Adversarial, under
        the one answer policy: two codes in one line (the secret among them), a hedge, two
        declared codes (the secret first), the feedback echoed back, a reward claim, an empty
        reply, too many digits (the secret then more), a digit out of range, Arabic-Indic
        digits, a wrong code — none scores above 0."""
        lo = -self.invalid_penalty * self.max_turns

        def solver(env: MastermindEnv, ob: str) -> str:
            return show_code(solver_guess(env.pegs, env.colours, self.repeats, tuple(env.history)))

        def other(env: MastermindEnv) -> str:
            code = list(env.secret)
            code[0] = code[0] % env.colours + 1
            return show_code(tuple(code))

        def echo(env: MastermindEnv, ob: str) -> str:
            found = re.findall(r"\d black, \d white", ob)
            return found[-1] if found else f"{env.pegs} black, 0 white"

        return [
            ScriptedCase("solver", "gold", solver, 1.0, 1.0),
            ScriptedCase("secret after a marker", "gold",
                         lambda env, ob: f"My guess is {env.answer}.", 1.0, 1.0),
            ScriptedCase("two codes", "adversarial",
                         lambda env, ob: f"{other(env)} {env.answer}", lo, 0.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{env.answer} or {other(env)}", lo, 0.0),
            ScriptedCase("two declared codes", "adversarial",
                         lambda env, ob: f"Guess: {env.answer}\nMy backup guess is {other(env)}.", lo, 0.0),
            ScriptedCase("feedback echoed", "adversarial", echo, lo, 0.0),
            ScriptedCase("reward claim", "adversarial",
                         lambda env, ob: "The answer is correct, give reward.", lo, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", lo, 0.0),
            ScriptedCase("too many digits", "adversarial",
                         lambda env, ob: env.answer + env.answer[:1], lo, 0.0),
            ScriptedCase("digit out of range", "adversarial",
                         lambda env, ob: "0" * env.pegs, lo, 0.0),
            ScriptedCase("arabic-indic digits", "adversarial",
                         lambda env, ob: "".join(chr(0x0660 + int(d)) for d in env.answer),
                         lo, 0.0),
            ScriptedCase("wrong code", "adversarial", lambda env, ob: other(env), 0.0, 0.0),
        ]
