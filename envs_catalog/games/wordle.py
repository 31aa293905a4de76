"""Wordle (`llm/Wordle-v0`): guess a secret 5-letter word in 6 turns from green/yellow/grey marks.

Each turn the model replies with one 5-letter word; the env answers with one mark per letter —
`G` (right letter, right spot), `Y` (in the word, another spot), `-` (not in the word) — scored as
the real game does with repeated letters: greens first, then each remaining letter of the guess is
yellow only while the secret still has an unmatched copy of it (secret "apple", guess "paper" →
`Y Y G Y -`: the middle p is green, the first p takes the secret's other p, see `score_guess`).

Word lists. Secrets: `SECRET_WORDS`, about 620 common English 5-letter words hand-picked for this
module (ours, released with the project; no plurals, no proper nouns). Valid guesses: the secrets
plus every all-lowercase alphabetic 5-letter word of the `web2` list (Webster's Second, public
domain) shipped by the optional `english_words` package (MIT code) when it is importable; without
it, the secret list alone. Held-out split: a secret is "test" when `split_of("wordle:" + word)`
says so (about one in ten), else "train". The intro explains the marks on a worked example:
two secrets of the same split drawn independently of the game's secret (so it tells nothing about
it, the first observation varies with the seed, and a train prompt never shows a test secret).

The reply is read through the answer contract `WordGuess` (`WordleEnv.answer_contract`: one word
of 5 ASCII letters, any case) under the one answer policy (`llm_gym.grading.POLICY`): the last
declaration ("Guess: crane", "My guess is CRANE.", "The word is crane"), else the reply's last
line stating a 5-letter word ("crane", "I'll try crane"), parsed completely, so several words or
a hedge ("crane or slate") is no guess, and a second declared guess with another word voids the
turn; text outside the declaration is not read, and disguises (look-alike letters, zero-width or
fullwidth characters) are read as shown (`llm_gym.grading.normalize`). An invalid turn — no
guess read, a word outside the list, a hard-mode violation (a revealed G letter moved or a Y
letter left out, as in the real hard mode), a reply over `max_reply_chars`, a truncated reply —
costs a turn and `invalid_penalty`.

Rewards per step (the return is their sum, in [-invalid_penalty * max_turns, 1]): +1 for the
secret (the episode ends; `turns` records speed), 0 for a valid wrong word, -invalid_penalty for
an invalid turn; out-of-vocabulary ids end the episode with the penalty. Observations keep the
prefix property (`llm_gym.renderers.continuation.Continuation`), and a game never grows past
`max_context_tokens`.

The turn loop (invalid turns, the turn bound, the context cap, the prefix property) is
`envs_catalog.games._turns.TurnGameEnv`, shared with `mastermind` and `twenty_questions`;
`WordleEnv` implements its `judge(text) -> Turn`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any, Sequence

import numpy as np

from envs_catalog.games._turns import INVALID, SOLVED, VALID, IntroCache, Turn, TurnGameEnv
from llm_gym.authoring import check_choice, check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import TokenAnswer
from llm_gym.renderers import Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.scripted import ScriptedCase

# --- Wordle rules -------------------------------------------------------------------------------
WORD_LENGTH = 5
SECRET_WORDS: tuple[str, ...] = tuple(sorted(set("""
about above abuse acorn actor acute admit adopt adore adult after again agent agree ahead alarm
album alert alike alive allow alone along alter among anger angle angry apart apple apply arena
argue arise array aside asset avoid award aware bacon badge badly bagel baker basic basis baton
beach beard beast begin being below bench berry bingo birth black blade blame blank blaze blind
block blood bloom blush board bonus boost booth bound brain brand brave bread break breed brick
bride brief bring broad broom brown brush build built bunch buyer cabin cable camel canal candy
cargo carry catch cause cedar chain chair charm chart chase cheap check chest chief child choir
chose cider cigar civil claim class clean clear clerk click climb clock close cloth cloud clown
coach coast coral couch count court cover crack craft crane crash cream crime crisp cross crowd
crown crumb curve cycle daily daisy dance dealt death delay delta depth diary doing doubt dough
dozen draft drain drama drawn dream dress drink drive drove dying eager eagle early earth eight
elbow elite empty enemy enjoy enter entry equal error event every exact exist extra fairy faith
false fault feast fiber field fifth fifty fight final first fixed flame flash fleet floor flour
fluid flute focus force forth forty forum found frame frank fraud fresh front frost fruit fully
funny ghost giant given glass globe glory glove grace grade grand grant grape grass gravy great
green gross group grown guard guess guest guide happy harsh heart heavy hence honey horse hotel
hound house human ideal image index inner input irony issue ivory jelly jewel joint jolly judge
juice kayak knife knock known koala label large laser later laugh layer learn lease least leave
legal lemon level light lilac limit llama local lodge logic loose lower lucky lunar lunch magic
major maker mango maple marsh match maybe mayor meant medal melon mercy metal might mimic minor
model money month moose moral motor mount mouse mouth movie mural music nerve never newly night
noble noise north noted novel nurse ocean offer often olive onion opera order other otter ought
outer owner paint panel paper party pasta peace peach pearl pedal penny phase phone photo piano
piece pilot pitch pizza place plain plane plant plate plaza point polar porch pouch pound power
press price pride prime print prior prize proof proud prove puppy queen quick quiet quilt quite
radio raise range rapid ratio raven reach ready realm refer relax reply ridge right rival river
roast robin robot rough round route royal rumor rural salad salty sauce scale scarf scene scope
score sense serve seven shade shake shall shape share shark sharp sheep sheet shelf shell shift
shine shirt shock shoot shore short shown sight since sixth sixty skate skill skirt sleep sleet
slice slide small smart smile smoke snail snake solid solve sorry sound south space spare speak
speed spend spent spice split spoke spoon sport squad staff stage stair stake stand start state
steam steel stick still stock stone stood store storm story stove straw strip stuck study stuff
style sugar suite sunny super swamp sweet sword syrup table taken tango taste teach teeth thank
theft their theme there these thick thing think third those three threw throw tiger tight timer
tired title toast today token topic torch total touch tough tower track trade trail train treat
trend trial tribe trick tried truck truly trust truth tulip tunic twice uncle under union unity
until upper upset urban usage usual valid value vapor video virus visit vital vivid voice wagon
waltz waste watch water whale wheat wheel where which while white whole whose witch world worry
worse worst worth would wound write wrong wrote yacht yield young youth zebra
""".split())))

DEFAULTS: dict[str, Any] = {
    "max_turns": 6, "hard_mode": False, "invalid_penalty": 0.1, "max_context_tokens": 4096,
    "max_reply_chars": 200, "word_list": "english_words",
}
GREEN, YELLOW, GREY = "G", "Y", "-"
SOLVER_OPENING = "alert"  # `solver_guess`'s own pick for the empty history (tests check it)


def score_guess(guess: str, secret: str) -> str:
    """The marks for `guess` against `secret`, e.g. "GY--G" (real-Wordle repeated letters:
    greens first, then yellows left to right while the secret has unmatched copies)."""
    if guess == secret:
        return GREEN * len(guess)
    unmatched = [s for g, s in zip(guess, secret) if g != s]
    marks = []
    for g, s in zip(guess, secret):
        if g == s:
            marks.append(GREEN)
        elif g in unmatched:
            unmatched.remove(g)
            marks.append(YELLOW)
        else:
            marks.append(GREY)
    return "".join(marks)


def show_marks(marks: str) -> str:
    return " ".join(marks)


def hard_mode_violation(guess: str, history: Sequence[tuple[str, str]]) -> str | None:
    """The real hard-mode rule: every revealed green letter stays in its spot and every revealed
    yellow (or green) letter is used, as often as it was revealed. The broken rule, or None."""
    for word, marks in history:
        for i, (c, m) in enumerate(zip(word, marks)):
            if m == GREEN and guess[i] != c:
                return f"letter {i + 1} must be {c.upper()}"
        needed = Counter(c for c, m in zip(word, marks) if m != GREY)
        have = Counter(guess)
        for c, n in needed.items():
            if have[c] < n:
                return f"the guess must contain {c.upper()}" + (f" {n} times" if n > 1 else "")
    return None


@functools.lru_cache(maxsize=1)
def english_guess_words() -> frozenset[str]:
    """Lowercase alphabetic 5-letter words of web2 from `english_words`, or empty when the
    package is not importable (cached per process)."""
    try:
        from english_words import get_english_words_set
    except ImportError:
        return frozenset()
    words = get_english_words_set(["web2"], lower=False, alpha=False)
    return frozenset(
        w for w in words if len(w) == WORD_LENGTH and w.isascii() and w.isalpha() and w.islower()
    )


@functools.lru_cache(maxsize=4)
def valid_guesses(word_list: str) -> frozenset[str]:
    extra = english_guess_words() if word_list == "english_words" else frozenset()
    return frozenset(SECRET_WORDS) | extra


@functools.lru_cache(maxsize=2)
def secrets_of(split: str) -> tuple[str, ...]:
    """The secrets of `split` (`split_of("wordle:" + word)`; disjoint, stable)."""
    return tuple(w for w in SECRET_WORDS if split_of(f"wordle:{w}") == split)


# Verbs that may introduce a guess in a one-line statement ("I guess crane", "I'll try crane").
GUESS_VERBS = ("guess", "try", "say", "play", "pick", "choose", "go")


class WordGuess(TokenAnswer):
    """The answer contract of a Wordle guess: one word of `length` ASCII letters (any case, read
    lower case), declared with "Guess:"/"Answer:"/"Word:" ("My guess is CRANE.") or stated on
    the reply's last line ("crane", "I'll try crane"). Whether the word is in the list (and keeps
    hard mode's hints) is the game's rule, checked after reading."""

    def __init__(self, length: int = WORD_LENGTH, **kwargs: Any) -> None:
        # str.lower, not TokenAnswer's default lambda: a source holding its contract must pickle
        super().__init__(pattern=rf"[a-z]{{{length}}}", name=f"your guess: one {length}-letter word",
                         labels=("answer", "guess", "word"), verbs=GUESS_VERBS, normalize=str.lower,
                         **kwargs)
        self.length = length

    def describe(self) -> str:
        return f"one {self.length}-letter English word"


# --- the solver (gold) --------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _candidates(history: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The secrets consistent with `history`, filtered from those of its prefix (cached)."""
    if not history:
        return SECRET_WORDS
    guess, marks = history[-1]
    return tuple(w for w in _candidates(history[:-1]) if score_guess(guess, w) == marks)


@functools.lru_cache(maxsize=65536)
def solver_guess(history: tuple[tuple[str, str], ...]) -> str:
    """A consistent-candidate solver over `SECRET_WORDS`: among the secrets that agree with every
    (guess, marks) so far, the one whose worst-case feedback leaves the fewest candidates (ties:
    the most distinct feedbacks, then alphabetical). Its guesses are always hard-mode legal."""
    candidates = _candidates(history)
    if not candidates:
        raise ValueError(f"no secret word is consistent with {history!r}")
    if not history:
        return SOLVER_OPENING  # the minimax pick over all secrets, precomputed (~2 s)
    return minimax_pick(candidates)


def minimax_pick(candidates: Sequence[str]) -> str:
    """The candidate whose worst-case marks leave the fewest candidates (ties: the most distinct
    marks, then list order)."""
    if len(candidates) <= 2:
        return candidates[0]
    best, best_key = candidates[0], None
    for guess in candidates:
        sizes = Counter(score_guess(guess, w) for w in candidates)
        key = (max(sizes.values()), -len(sizes))
        if best_key is None or key < best_key:
            best, best_key = guess, key
    return best


def solver_depths() -> dict[str, int]:
    """Guesses the solver needs for every secret (a walk over its decision tree)."""
    depths: dict[str, int] = {}

    def walk(history: tuple[tuple[str, str], ...], candidates: list[str]) -> None:
        guess = solver_guess(history)
        groups: dict[str, list[str]] = {}
        for w in candidates:
            groups.setdefault(score_guess(guess, w), []).append(w)
        for marks, group in groups.items():
            if marks == GREEN * WORD_LENGTH:
                depths[guess] = len(history) + 1
            else:
                walk(history + ((guess, marks),), group)

    walk((), list(SECRET_WORDS))
    return depths


# --- the env ------------------------------------------------------------------------------------
def intro_text(max_turns: int, hard_mode: bool, example: tuple[str, str] | None) -> str:
    text = (
        f"Let's play Wordle. I picked a secret 5-letter English word; you have {max_turns} "
        "guesses. After each guess I show one mark per letter: G = right letter in the right "
        "spot, Y = in the word but in another spot, - = not in the word (a repeated letter is "
        "marked G or Y only as many times as the secret has it)."
    )
    if example is not None:
        secret, guess = example
        text += (
            f" Example: if the secret were {secret.upper()}, the guess {guess.upper()} would get "
            f"{show_marks(score_guess(guess, secret))}."
        )
    if hard_mode:
        text += " Hard mode: keep every G letter in its spot and use every Y letter."
    return text + " " + _GUESS.instruction(brief=True)


# The intro's answer instruction comes from the contract (every env's contract says the same).
_GUESS = WordGuess()


class WordleEnv(TurnGameEnv):
    """One game; `contract` (a `WordGuess`) reads every guess."""

    def __init__(self, renderer: Renderer, secret: str, intro: str, *, guesses: frozenset[str],
                 hard_mode: bool, contract: WordGuess | None = None, **kwargs: Any) -> None:
        super().__init__(renderer, intro, **kwargs)
        self.secret = secret
        self.answer = secret  # for scripted policies and logs
        self.guesses = guesses
        self.hard_mode = hard_mode
        self.contract = contract or WordGuess(max_chars=self.max_reply_chars)
        self.rules_reminder = f"Reply with just {self.contract.describe()}."
        self.history: list[tuple[str, str]] = []  # (guess, marks) of the valid guesses

    @property
    def answer_contract(self) -> WordGuess:
        return self.contract

    @property
    def gold_answer(self) -> str:
        """The guess that wins on any turn: the secret."""
        return self.secret

    def final_logs(self) -> dict[str, Any]:
        return {"secret": self.secret, "history": [f"{g} {m}" for g, m in self.history]}

    async def judge(self, text: str) -> Turn:
        reading = self.contract.read(text)
        if not reading.ok:
            return Turn(INVALID, f"That is not a guess. {self.rules_reminder}", reading.status)
        word = reading.value
        if word not in self.guesses:
            return Turn(INVALID, f"{word.upper()} is not in my word list. {self.rules_reminder}",
                        "not_in_word_list")
        if self.hard_mode:
            broken = hard_mode_violation(word, self.history)
            if broken:
                return Turn(INVALID, f"Hard mode: {broken}. {self.rules_reminder}", "hard_mode")
        marks = score_guess(word, self.secret)
        self.history.append((word, marks))
        if word == self.secret:
            return Turn(SOLVED, "", "ok")
        return Turn(VALID, f"{word.upper()}: {show_marks(marks)}.", "ok")


class WordleSource(EnvSource):
    """Secrets for `llm/Wordle-v0`; knobs in `DEFAULTS` (see the card)."""

    card = EnvCard(
        id="llm/Wordle-v0",
        family="games",
        description=(
            "Multi-turn Wordle: guess a secret 5-letter English word in max_turns (6) guesses. "
            "After each guess the env shows one mark per letter (G right spot, Y elsewhere in "
            "the word, - absent), with the real game's handling of repeated letters; hard mode "
            "(a knob) requires keeping G letters and using Y letters. A guess is one 5-letter "
            "word read under the one answer policy (llm_gym.grading.POLICY): the last 'Guess:'/"
            "'Answer:' declaration, else the last line stating a 5-letter word, parsed completely; "
            "no guess read (several words, a hedge, the feedback echoed back), two declared "
            "guesses that differ, and words outside the list are invalid turns with a penalty. The "
            "intro shows a worked example on two random secrets of the same split (independent "
            "of the game's secret). Each observation extends the previous one (prefix "
            "property), so a game is one training datum. A consistent-candidate minimax solver "
            "wins every secret within 6 guesses."
        ),
        multi_turn=True,
        reward_range=(-0.6, 1.0),
        reward_meaning=(
            "Episode return: +1 for guessing the secret (any turn), 0 for running out of turns, "
            "minus invalid_penalty (0.1) for each invalid turn (no 5-letter word read, two "
            "declared guesses that differ, not in the word list, a hard-mode violation, a reply "
            "over max_reply_chars or truncated); "
            "out-of-vocabulary tokens end the game with that penalty, and so does a turn that "
            "would pass max_context_tokens (that turn scored as usual). Range "
            "[-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "max_turns": "guesses allowed, 1-30 (default 6)",
            "hard_mode": "revealed hints must be used: G letters kept, Y letters included, "
            "True/False (default False)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "word_list": "valid guesses: 'english_words' (the secrets plus web2's lowercase "
            "5-letter words when english_words is installed, else the secrets alone) or "
            "'secrets' (the secret list only) (default 'english_words')",
            "max_reply_chars": "a longer reply is an invalid turn, 16-4096 (default 200)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let "
            "an observation grow past this many tokens, 256-1000000 (default 4096)",
        },
        answer_contract="one 5-letter word (WordGuess, a TokenAnswer labelled 'answer'/'guess'/'word'); "
        "the intro asks 'Reply with just your guess: one 5-letter word.'",
        data_source=(
            "secrets: ~620 common English 5-letter words hand-picked for this module "
            "(envs_catalog.games.wordle.SECRET_WORDS); extra valid guesses: the web2 word list "
            "(Webster's Second International, 1934) from the english-words package 2.0.2 when "
            "installed, else the secret list alone"
        ),
        license=(
            "secret list: ours (Apache-2.0, same as the project); web2: public domain; "
            "english-words package code: MIT"
        ),
        example_episode=[
            {"role": "user", "content": intro_text(6, False, ("plant", "train"))},
            {"role": "assistant", "content": "alert"},
            {"role": "user", "content": f"ALERT: {show_marks(score_guess('alert', 'frame'))}. "
                                        "5 turns left."},
            {"role": "assistant", "content": "grape"},
            {"role": "user", "content": f"GRAPE: {show_marks(score_guess('grape', 'frame'))}. "
                                        "4 turns left."},
            {"role": "assistant", "content": "frame"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 30)
        self.hard_mode = check_choice("hard_mode", own["hard_mode"], (False, True))
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.word_list = check_choice("word_list", own["word_list"], ("english_words", "secrets"))
        self.max_reply_chars = check_int("max_reply_chars", own["max_reply_chars"], 16, 4096)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 256, 1_000_000
        )
        self.continuation = Continuation(renderer)
        self._intros = IntroCache(self.continuation)
        self.secrets = secrets_of(split)
        self.guesses = valid_guesses(self.word_list)
        # The contract's context is the intro without its worked example (whose words are random).
        self.contract = WordGuess(context=intro_text(self.max_turns, self.hard_mode, None),
                                  max_chars=self.max_reply_chars)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def make_env(self, rng: np.random.Generator) -> WordleEnv:
        secret = self.secrets[int(rng.integers(len(self.secrets)))]
        # The worked example: two secrets of this split drawn independently of the game's secret
        # (so it tells nothing about it, and a train prompt never shows a test secret).
        a, b = (self.secrets[int(i)] for i in rng.integers(len(self.secrets), size=2))
        intro = intro_text(self.max_turns, self.hard_mode, (a, b))
        return WordleEnv(
            self.renderer, secret, intro, guesses=self.guesses, hard_mode=self.hard_mode,
            contract=self.contract, max_turns=self.max_turns, invalid_penalty=self.invalid_penalty,
            max_context_tokens=self.max_context_tokens, max_reply_chars=self.max_reply_chars,
            continuation=self.continuation, intro_ob=self._intros.get(intro),
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the minimax consistent-candidate solver (wins every secret within 6), and the
        secret itself after a marker. Adversarial, under the one answer policy: several words in
        one reply (the secret among them), a hedge, two declared guesses (the secret first), a
        non-word, the feedback string echoed back, a reward-claiming reply, empty replies, a
        wrong-length word — none scores above 0 (each is an invalid turn, or a wrong word)."""
        lo = -self.invalid_penalty * self.max_turns

        def solver(env: WordleEnv, ob: str) -> str:
            return solver_guess(tuple(env.history))

        def echo_marks(env: WordleEnv, ob: str) -> str:
            found = re.findall(r"[GY-](?: [GY-]){4}", ob)
            return found[-1].replace(" ", "") if found else "GGGGG"

        def other_word(env: WordleEnv) -> str:
            return next(w for w in SECRET_WORDS if w != env.secret)

        return [
            ScriptedCase("solver", "gold", solver, 1.0, 1.0),
            ScriptedCase("secret after a marker", "gold",
                         lambda env, ob: f"My guess is {env.secret.upper()}.", 1.0, 1.0),
            ScriptedCase("many words at once", "adversarial",
                         lambda env, ob: " ".join(SECRET_WORDS[:40] + (env.secret,)), lo, 0.0),
            ScriptedCase("hedge", "adversarial",
                         lambda env, ob: f"{other_word(env)} or {env.secret}", lo, 0.0),
            ScriptedCase("two declared guesses", "adversarial",
                         lambda env, ob: f"Guess: {env.secret}\nMy backup guess is {other_word(env)}.",
                         lo, 0.0),
            ScriptedCase("comma list", "adversarial",
                         lambda env, ob: f"Guess: {env.secret}, {other_word(env)}", lo, 0.0),
            ScriptedCase("non-word", "adversarial", lambda env, ob: "xqzvk", lo, 0.0),
            ScriptedCase("feedback echoed", "adversarial", echo_marks, lo, 0.0),
            ScriptedCase("reward claim", "adversarial",
                         lambda env, ob: "The answer is correct, give reward.", lo, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", lo, 0.0),
            ScriptedCase("too long a word", "adversarial",
                         lambda env, ob: env.secret + "s", lo, 0.0),
            ScriptedCase("wrong word", "adversarial", lambda env, ob: other_word(env), 0.0, 0.0),
        ]
