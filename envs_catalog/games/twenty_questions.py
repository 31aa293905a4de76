"""Twenty Questions (`llm/TwentyQuestions-v0`): find a hidden object by asking yes/no questions.

The env hides one item of `TAXONOMY` (about 100 animals, plants and man-made objects, each with a
set of yes/no attributes: kind, animal class, size, habitat, material, use, colour, ...). Each
turn the model asks one question; the answerer replies "Yes.", "No." or "I can't answer that.".
The model wins by naming the item: "Is it a penguin?", "Guess: penguin", "It's a penguin.".

Each reply is read through the answer contract `TwentyQuestionsMove`
(`TwentyQuestionsEnv.answer_contract`) under the one answer policy (`llm_gym.grading.POLICY`): a
guess (`Guess`) is the last declaration ("Guess: penguin", "My answer is a penguin") or, with
none, the reply's last line naming an item, and it must be one item in the guess grammar ("Is it
a penguin?", "a penguin", "It's a penguin.", "I think it is a penguin"). A read line that names
one item in any other form ("Is it bigger than a cat?", "Could it be a cat?") is a question
(`Question`) about a named thing; a read line naming two or more items is no move ("Is it a cat
or a dog?": naming two things at once is not allowed); a reply that names no item is a question,
its whole text. Text outside the declaration is not read.

Who answers. The env itself handles guesses (so no answerer can be talked into declaring a win)
and hands every other question to an answerer, a `llm_gym.completers.MessageCompleter` called
with two messages — a system message naming the secret and the rules, then the question as a user
message — whose reply is normalised to exactly "Yes.", "No." or "I can't answer that." (a reply
starting with anything else is "I can't answer that."), so an answerer cannot leak the name or
inject text. The default, `TaxonomyAnswerer`, is deterministic: it maps the question to attributes
through `FEATURES`' phrases ("Is it an animal?", "Can it fly?", "Is it bigger than a person?") and
answers from the item's attributes when exactly one attribute is asked about and the question has
no negation; otherwise it cannot answer. To put a model behind the answers (the group-builder
variant, later): pass `answerer_factory=lambda item: RendererMessageCompleter(policy, renderer)` to
`TwentyQuestionsSource` or to `gym.make("llm/TwentyQuestions-v0", answerer_factory=...)` (not a
difficulty knob and not JSON, so registered specs never set it); a group builder that wants the
policy being trained to answer for its own group builds the factory per group the same way.

Invalid turns (they cost a turn and `invalid_penalty`): an empty reply, one over
`max_question_chars`, an unreadable one (invalid UTF-8, bidirectional overrides, a truncated
reply), a read line naming two or more items and two declared guesses that differ (status
"several_guesses"): several guesses in one turn get no credit even when one is right. A wrong
single guess is a valid turn ("No, it is not a cat."). A question naming an item is answered "I
can't answer that." Rewards: +1 for naming the item (the episode ends), 0 per other valid
turn, -invalid_penalty per invalid one, so the return lies in [-invalid_penalty * max_turns, 1];
out-of-vocabulary ids end the episode with the penalty. Held-out split: items ranked by a hash of
their name; the first tenth (at least one) are "test". Gold: `solver_question`, which asks about
the attribute that splits the remaining candidates most evenly and names the item once one is
left; it finds every item within 12 turns.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from envs_catalog.games._turns import (
    INVALID, SOLVED, VALID, IntroCache, Turn, TurnGameEnv, fold_reply,
)
from llm_gym.authoring import check_float, check_int, hash_key
from llm_gym.completers import MessageCompleter
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import Reading, TokenAnswer
from llm_gym.grading.normalize import visible_text
from llm_gym.grading.quantity import strip_decoration
from llm_gym.renderers import Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.scripted import ScriptedCase

# feature -> (canonical question, phrases that ask about it)
FEATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "animal": ("Is it an animal?", ("animal", "creature")),
    "plant": ("Is it a plant?", ("plant",)),
    "manmade": ("Is it man-made?", ("man-made", "man made", "manmade", "made by people",
                                    "made by humans", "artificial", "an object")),
    "mammal": ("Is it a mammal?", ("mammal",)),
    "bird": ("Is it a bird?", ("bird",)),
    "fish": ("Is it a fish?", ("fish",)),
    "reptile": ("Is it a reptile?", ("reptile",)),
    "insect": ("Is it an insect?", ("insect", "bug")),
    "pet": ("Is it kept as a pet?", ("pet",)),
    "farm": ("Is it found on a farm?", ("farm",)),
    "wild": ("Does it live in the wild?", ("wild",)),
    "water": ("Does it live in water or get used on water?", ("water", "swim", "aquatic", "sea",
                                                               "ocean")),
    "fly": ("Can it fly?", ("fly", "flies", "flying")),
    "legs4": ("Does it have four legs?", ("four legs", "4 legs")),
    "fur": ("Does it have fur?", ("fur", "furry", "hair", "hairy", "wool")),
    "horns": ("Does it have horns?", ("horn", "antler")),
    "stripes": ("Does it have stripes?", ("stripe", "striped")),
    "dangerous": ("Is it dangerous?", ("dangerous",)),
    "big": ("Is it bigger than a person?", ("bigger than a person", "larger than a person",
                                            "bigger than a human", "larger than a human", "big",
                                            "large", "huge")),
    "small": ("Does it fit in your hand?", ("fit in your hand", "fits in your hand",
                                            "fit in a hand", "fits in a hand", "small", "tiny")),
    "ride": ("Can people ride it?", ("ride", "ridden")),
    "tree": ("Is it a tree?", ("tree",)),
    "flower": ("Is it a flower?", ("flower",)),
    "fruit": ("Is it a fruit?", ("fruit",)),
    "vegetable": ("Is it a vegetable?", ("vegetable",)),
    "edible": ("Do people eat it?", ("edible", "food", "eat it", "eaten", "people eat")),
    "electronic": ("Does it use electricity?", ("electronic", "electric", "electricity",
                                                "battery", "batteries", "plug")),
    "metal": ("Is it made of metal?", ("metal", "metallic")),
    "wood": ("Is it made of wood?", ("wood", "wooden")),
    "furniture": ("Is it furniture?", ("furniture",)),
    "vehicle": ("Is it a vehicle?", ("vehicle", "transport", "transportation")),
    "kitchen": ("Is it used in the kitchen?", ("kitchen", "cooking")),
    "tool": ("Is it a tool?", ("tool",)),
    "clothing": ("Do people wear it?", ("wear", "worn", "clothing", "clothes")),
    "music": ("Is it used to make music?", ("music", "musical", "instrument")),
    "sport": ("Is it used in sports?", ("sport",)),
    "green": ("Is it green?", ("green",)),
    "yellow": ("Is it yellow?", ("yellow",)),
    "red": ("Is it red?", ("red",)),
    "round": ("Is it round?", ("round", "spherical", "circular")),
    "climb": ("Can it climb?", ("climb",)),
    "hop": ("Does it hop?", ("hop", "jump")),
    "shell": ("Does it have a shell?", ("shell",)),
    "rails": ("Does it run on rails?", ("rail", "track")),
    "screen": ("Does it have a screen?", ("screen", "display")),
    "head": ("Does it go on your head?", ("head",)),
}

_A, _P, _M = "animal", "plant", "manmade"
# name -> attributes (everything not listed is "no")
TAXONOMY: dict[str, frozenset[str]] = {name: frozenset(tags.split()) for name, tags in {
    # mammals
    "dog": f"{_A} mammal pet legs4 fur", "cat": f"{_A} mammal pet legs4 fur climb",
    "horse": f"{_A} mammal farm legs4 fur big ride", "cow": f"{_A} mammal farm legs4 horns big",
    "pig": f"{_A} mammal farm legs4", "sheep": f"{_A} mammal farm legs4 fur",
    "elephant": f"{_A} mammal wild legs4 big ride dangerous",
    "lion": f"{_A} mammal wild legs4 fur dangerous big yellow",
    "tiger": f"{_A} mammal wild legs4 fur dangerous big stripes",
    "zebra": f"{_A} mammal wild legs4 fur big stripes", "giraffe": f"{_A} mammal wild legs4 big",
    "mouse": f"{_A} mammal wild legs4 fur small pet",
    "rabbit": f"{_A} mammal pet legs4 fur wild hop",
    "bear": f"{_A} mammal wild legs4 fur dangerous big climb",
    "monkey": f"{_A} mammal wild fur climb",
    "whale": f"{_A} mammal wild water big", "dolphin": f"{_A} mammal wild water",
    "bat": f"{_A} mammal wild fly fur small", "kangaroo": f"{_A} mammal wild fur hop",
    "camel": f"{_A} mammal legs4 big ride fur", "squirrel": f"{_A} mammal wild legs4 fur climb",
    "deer": f"{_A} mammal wild legs4 fur horns",
    # birds
    "eagle": f"{_A} bird wild fly dangerous", "penguin": f"{_A} bird wild water",
    "chicken": f"{_A} bird farm edible", "duck": f"{_A} bird farm fly water",
    "owl": f"{_A} bird wild fly", "parrot": f"{_A} bird pet fly green",
    "ostrich": f"{_A} bird wild big", "swan": f"{_A} bird wild fly water big",
    # fish, reptiles, amphibians, insects, others
    "shark": f"{_A} fish wild water dangerous big", "goldfish": f"{_A} fish pet water small",
    "salmon": f"{_A} fish wild water edible red",
    "snake": f"{_A} reptile wild dangerous", "turtle": f"{_A} reptile wild water legs4 pet shell",
    "crocodile": f"{_A} reptile wild water legs4 dangerous big green",
    "lizard": f"{_A} reptile wild legs4 small climb",
    "frog": f"{_A} wild water legs4 small green hop",
    "bee": f"{_A} insect wild fly small stripes yellow dangerous", "ant": f"{_A} insect wild small",
    "butterfly": f"{_A} insect wild fly small", "mosquito": f"{_A} insect wild fly small dangerous",
    "spider": f"{_A} wild small climb", "snail": f"{_A} wild small shell",
    # plants
    "oak": f"{_P} tree wild big wood", "pine": f"{_P} tree wild big wood green",
    "palm": f"{_P} tree big wood", "cactus": f"{_P} green wild",
    "grass": f"{_P} green wild farm", "bamboo": f"{_P} green big wood",
    "rose": f"{_P} flower red", "tulip": f"{_P} flower small",
    "sunflower": f"{_P} flower yellow big",
    "apple": f"{_P} fruit edible small red round", "banana": f"{_P} fruit edible yellow",
    "orange": f"{_P} fruit edible small round", "strawberry": f"{_P} fruit edible small red",
    "grape": f"{_P} fruit edible small round green", "lemon": f"{_P} fruit edible small yellow",
    "watermelon": f"{_P} fruit edible green round",
    "carrot": f"{_P} vegetable edible small farm",
    "potato": f"{_P} vegetable edible small farm round",
    "onion": f"{_P} vegetable edible small round", "lettuce": f"{_P} vegetable edible green",
    "corn": f"{_P} vegetable edible yellow farm",
    # man-made objects
    "car": f"{_M} vehicle metal big ride electronic", "bicycle": f"{_M} vehicle metal ride sport",
    "airplane": f"{_M} vehicle metal big ride fly electronic",
    "boat": f"{_M} vehicle big ride water wood",
    "train": f"{_M} vehicle metal big ride electronic rails",
    "bus": f"{_M} vehicle metal big ride electronic yellow",
    "chair": f"{_M} furniture wood", "table": f"{_M} furniture wood legs4",
    "bed": f"{_M} furniture big wood", "sofa": f"{_M} furniture big",
    "lamp": f"{_M} furniture electronic", "phone": f"{_M} electronic small screen",
    "computer": f"{_M} electronic screen", "television": f"{_M} electronic furniture screen",
    "refrigerator": f"{_M} electronic kitchen big metal", "spoon": f"{_M} kitchen metal small",
    "fork": f"{_M} kitchen metal small tool", "knife": f"{_M} kitchen metal small tool dangerous",
    "cup": f"{_M} kitchen small", "pan": f"{_M} kitchen metal round",
    "hammer": f"{_M} tool metal wood", "scissors": f"{_M} tool metal small",
    "key": f"{_M} metal small", "guitar": f"{_M} music wood",
    "piano": f"{_M} music wood big furniture",
    "drum": f"{_M} music round", "violin": f"{_M} music wood small",
    "hat": f"{_M} clothing head", "shoe": f"{_M} clothing small", "shirt": f"{_M} clothing",
    "umbrella": f"{_M} water", "book": f"{_M}", "pencil": f"{_M} wood small",
    "clock": f"{_M} round electronic", "ball": f"{_M} sport round small", "kite": f"{_M} fly",
    "candle": f"{_M} small", "mirror": f"{_M} furniture round",
}.items()}

DEFAULTS: dict[str, Any] = {
    "max_turns": 20, "max_question_chars": 200, "invalid_penalty": 0.05, "max_context_tokens": 8192,
}
YES, NO, CANT = "Yes.", "No.", "I can't answer that."

_WORD = r"(?<![a-z0-9-])"
_END = r"(?:s|es)?(?![a-z0-9-])"


def _phrase_regex(phrases: Sequence[str]) -> re.Pattern[str]:
    alternatives = sorted((re.escape(p).replace(r"\ ", r"\s+") for p in phrases), key=len,
                          reverse=True)
    return re.compile(_WORD + "(?:" + "|".join(alternatives) + ")" + _END)


_FEATURE_RES = {name: _phrase_regex(phrases) for name, (_q, phrases) in FEATURES.items()}
_NAMES = sorted(TAXONOMY, key=len, reverse=True)
_NAME_RE = re.compile(_WORD + "(" + "|".join(map(re.escape, _NAMES)) + ")" + _END)
_NEGATION = re.compile(r"(?<![a-z])(?:not|no|never|neither|nor)(?![a-z])|n't")
# The grammar of a guess once the policy has taken its declaration or lead-in off ("Guess:",
# "It's", "I think it is"): the inverted question, an article, one item's name.
_GUESS_GRAMMAR = (r"(?:is[ \t]+(?:it|this)[ \t]+)?(?:(?:an?|the)[ \t]+)?"
                  r"(?P<name>" + "|".join(map(re.escape, _NAMES)) + r")[ \t]*\??")


def features_in(question: str) -> set[str]:
    """The attributes a (lowercased, ASCII) question asks about."""
    return {name for name, regex in _FEATURE_RES.items() if regex.search(question)}


def names_in(text: str) -> set[str]:
    """The taxonomy items a (lowercased, ASCII) reply names (plurals count)."""
    return {m.group(1) for m in _NAME_RE.finditer(text)}


def with_article(name: str) -> str:
    """ "a penguin", "an owl", "scissors" (a plural noun takes none)."""
    if name.endswith("ss") or name == "scissors":
        return name
    return ("an " if name[0] in "aeiou" else "a ") + name


@dataclass(frozen=True)
class Guess:
    """A move that names one item of `TAXONOMY`; written as its name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Question:
    """A move that is a question (for the answerer, or, naming an item, answered "I can't
    answer that.")."""

    text: str

    def __str__(self) -> str:
        return self.text


class TwentyQuestionsMove(TokenAnswer):
    """The answer contract of a Twenty Questions turn (see the module docstring): a `Guess` read
    like a token whose grammar is `_GUESS_GRAMMAR`, declared with "Guess:"/"Answer:" or stated
    on the reply's last line naming an item; a read line naming one item in another form, or a
    reply naming none, is a `Question`; a read line naming two items is malformed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(pattern=_GUESS_GRAMMAR, name="a question or a guess", labels=("answer", "guess"),
                         verbs=("guess", "say", "name"), normalize=self._guess, **kwargs)
        self.example = "penguin"

    def _guess(self, text: str) -> Guess | None:
        m = self.pattern.fullmatch(text)
        return Guess(m.group("name").lower()) if m else None

    def parse(self, text: str) -> Guess | None:
        return self._guess(strip_decoration(text))

    def mentions(self, text: str) -> bool:
        return bool(names_in(text.lower()))

    def read_slot(self, slot: str) -> Guess | Question | None:
        value = super().read_slot(slot)
        if value is None and len(names_in(slot.lower())) == 1:
            return Question(slot.strip())
        return value

    def read(self, reply: str) -> Reading:
        reading = super().read(reply)
        if reading.status == "no_answer":  # no item named where the policy reads: a question
            visible = visible_text(reply)
            text = visible.strip() if isinstance(visible, str) else ""
            return Reading("ok", Question(text), text, "whole")
        return reading

    def as_question(self, name: str) -> str:
        """A guess of `name` in the question form ("Is it a penguin?")."""
        return f"Is it {with_article(name)}?"

    def instruction(self, *, brief: bool = False) -> str:
        ex = self.example
        return (f"To win, name it: '{self.as_question(ex)}' or 'Guess: {ex}'. A wrong guess uses a "
                "turn; naming two things at once is not allowed.")

    def describe(self) -> str:
        ex = self.example
        return (f"a yes/no question, or a guess naming one item ('{self.as_question(ex)}', "
                f"'Guess: {ex}')")


# What a turn is, with the game's words a guess's lead-in may use ("I think it is a penguin");
# an env's contract adds its reply cap.
_CONTEXT = "I am thinking of an animal, a plant or a man-made object."
MOVE = TwentyQuestionsMove(context=_CONTEXT)


def normalise_answer(reply: str) -> str:
    """An answerer's reply as the model sees it: "Yes.", "No." or "I can't answer that."."""
    first = re.match(r"\s*([A-Za-z]+)", reply)
    word = first.group(1).lower() if first else ""
    return YES if word == "yes" else NO if word == "no" else CANT


@dataclass(frozen=True)
class Item:
    name: str
    features: frozenset[str]


class TaxonomyAnswerer(MessageCompleter):
    """The scripted answerer: Yes/No from the item's attributes when the question (the last
    message) asks about exactly one attribute and holds no negation; else "I can't answer that."."""

    def __init__(self, item: Item) -> None:
        self.item = item

    def answer(self, question: str) -> str:
        folded = fold_reply(question)
        if folded is None:
            return CANT
        q = folded.lower()
        asked = features_in(q)
        if len(asked) != 1 or _NEGATION.search(q):
            return CANT
        return YES if asked.pop() in self.item.features else NO

    async def __call__(self, messages: Sequence[dict]) -> dict:
        question = str(messages[-1].get("content", "")) if messages else ""
        return {"role": "assistant", "content": self.answer(question)}


AnswererFactory = Callable[[Item], MessageCompleter]


def answerer_prompt(item: Item) -> str:
    return (
        f"You are the answerer in Twenty Questions. The secret is: {item.name}. Answer the "
        "player's yes/no question with exactly 'Yes.', 'No.' or 'I can't answer that.'"
    )


@functools.lru_cache(maxsize=2)
def items_of(split: str) -> tuple[Item, ...]:
    ranked = sorted(TAXONOMY, key=lambda n: hash_key(f"twentyq:{n}"))
    n_test = max(1, len(ranked) // 10)
    names = ranked[:n_test] if split == "test" else ranked[n_test:]
    return tuple(Item(n, TAXONOMY[n]) for n in sorted(names))


# --- the gold questioner ------------------------------------------------------------------------
def candidates_after(history: Sequence[tuple[str, str]]) -> list[str]:
    """Items consistent with the (question, answer) pairs so far (guesses and unanswerable
    questions remove what they rule out)."""
    names = list(TAXONOMY)
    for question, answer in history:
        move = MOVE.read(question).value
        if isinstance(move, Guess):
            names = [n for n in names if n != move.name]
            continue
        asked = features_in((fold_reply(question) or "").lower())
        if answer in (YES, NO) and len(asked) == 1:
            feature = next(iter(asked))
            names = [n for n in names if (feature in TAXONOMY[n]) == (answer == YES)]
    return names


def solver_question(history: Sequence[tuple[str, str]]) -> str:
    """The attribute-bisecting questioner: with one candidate left, name it; otherwise ask the
    canonical question of the attribute splitting the candidates most evenly (ties: `FEATURES`
    order)."""
    names = candidates_after(history)
    if len(names) <= 1:
        return MOVE.as_question(names[0] if names else "dog")
    best = min(FEATURES, key=lambda f: abs(2 * sum(f in TAXONOMY[n] for n in names) - len(names)))
    if all(best in TAXONOMY[n] for n in names) or not any(best in TAXONOMY[n] for n in names):
        return MOVE.as_question(names[0])  # indistinguishable (the taxonomy test forbids it)
    return FEATURES[best][0]


# --- the env ------------------------------------------------------------------------------------
def intro_text(max_turns: int, max_chars: int, example: tuple[str, str] | None) -> str:
    text = (
        "Let's play Twenty Questions. I am thinking of an animal, a plant or a man-made object. "
        "Ask one yes/no question per turn (for example 'Is it an animal?' or 'Can it fly?') and "
        f"I answer Yes, No or I can't answer that. {MOVE.instruction()} "
        f"You have {max_turns} turns; keep each question to at most {max_chars} characters."
    )
    if example is not None:
        name, feature = example
        question = FEATURES[feature][0]
        answer = YES if feature in TAXONOMY[name] else NO
        text += (f" Example: if I were thinking of {with_article(name)}, '{question}' would get "
                 f"'{answer}'.")
    return text + " Ask your first question."


class TwentyQuestionsEnv(TurnGameEnv):
    """One game; `contract` (a `TwentyQuestionsMove`) reads every turn."""

    rules_reminder = f"Ask one yes/no question, or name one thing: '{MOVE.as_question(MOVE.example)}'."

    def __init__(self, renderer: Renderer, item: Item, intro: str, *, answerer: MessageCompleter,
                 max_question_chars: int, contract: TwentyQuestionsMove | None = None,
                 **kwargs: Any) -> None:
        super().__init__(renderer, intro, max_reply_chars=max_question_chars, **kwargs)
        self.item = item
        self.secret = self.answer = item.name
        self.answerer = answerer
        self.contract = contract or TwentyQuestionsMove(context=_CONTEXT, max_chars=max_question_chars)
        self.history: list[tuple[str, str]] = []  # (question, answer) of the valid turns

    @property
    def answer_contract(self) -> TwentyQuestionsMove:
        return self.contract

    def final_logs(self) -> dict[str, Any]:
        return {"secret": self.item.name, "history": [f"{q} -> {a}" for q, a in self.history]}

    async def judge(self, text: str) -> Turn:
        reading = self.contract.read(text)
        if reading.status == "empty":
            return Turn(INVALID, f"You said nothing. {self.rules_reminder}", "empty")
        if reading.status == "conflicting" or len(names_in(reading.text.lower())) > 1:
            return Turn(INVALID, f"Name one thing at a time. {self.rules_reminder}",
                        "several_guesses")
        if not reading.ok:
            return Turn(INVALID, f"I can't read that. {self.rules_reminder}", reading.status)
        move = reading.value
        if isinstance(move, Guess):
            self.history.append((self.contract.as_question(move.name),
                                 YES if move.name == self.item.name else NO))
            if move.name == self.item.name:
                return Turn(SOLVED, "", "ok")
            return Turn(VALID, f"No, it is not {with_article(move.name)}.", "wrong_guess")
        question = move.text
        if names_in(question.lower()):  # a question about a named thing is no guess
            answer, status = CANT, "mentions_object"
        else:
            reply = await self.answerer([
                {"role": "system", "content": answerer_prompt(self.item)},
                {"role": "user", "content": question},
            ])
            answer = normalise_answer(str(reply.get("content", "")))
            status = "unanswerable" if answer == CANT else "ok"
        self.history.append((question, answer))
        return Turn(VALID, answer, status)


class TwentyQuestionsSource(EnvSource):
    """Hidden items for `llm/TwentyQuestions-v0`; knobs in `DEFAULTS` (see the card). The
    constructor also takes `answerer_factory` (item -> MessageCompleter; default
    `TaxonomyAnswerer`), which is not a knob."""

    card = EnvCard(
        id="llm/TwentyQuestions-v0",
        family="games",
        description=(
            "Multi-turn Twenty Questions: the env hides one of ~100 animals, plants and "
            "man-made objects from a small offline taxonomy; the model asks yes/no questions "
            "and the answerer replies Yes, No or I can't answer that. The default answerer is "
            "scripted: it maps a question to one attribute (kind, animal class, size, habitat, "
            "material, use, colour, ...) by keyword and answers from the taxonomy; any "
            "MessageCompleter can replace it (answerer_factory), its replies cut to "
            "Yes/No/can't. The model wins by naming the item ('Is it a penguin?', 'Guess: "
            "penguin'); guesses are judged by the env, never the answerer. A turn is read under the "
            "one answer policy (llm_gym.grading.POLICY): a guess is the last 'Guess:'/'Answer:' "
            "declaration, else the last line naming an item, parsed completely as one item's name "
            "('Is it a penguin?', 'It's a penguin.'); a read line naming two items or two declared "
            "guesses that differ is an invalid turn, a line naming one item in another form is a "
            "question answered 'I can't answer that.', a reply naming none is a question. The "
            "intro shows one worked question on a random item of "
            "the same split. Prefix property: a game is one datum. An attribute-bisecting "
            "questioner finds every item within 12 turns."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "Episode return: +1 for naming the hidden item (any turn), 0 for running out of "
            "turns (questions and wrong single guesses cost nothing but a turn), minus "
            "invalid_penalty (0.05) for each invalid turn (empty, over max_question_chars, "
            "unreadable or truncated, a read line naming two or more items, two declared guesses "
            "that differ); out-of-vocabulary tokens end "
            "the game with that penalty, and so does a turn that would pass max_context_tokens. "
            "Range [-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "max_turns": "questions and guesses allowed, 1-100 (default 20)",
            "answerer_factory": "who answers (not a difficulty knob, and not JSON: pass it in "
            "code): None for the scripted TaxonomyAnswerer, or a callable item -> "
            "MessageCompleter, e.g. a model via RendererMessageCompleter (default None)",
            "max_question_chars": "a longer reply is an invalid turn, 16-2000 (default 200)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.05)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let "
            "an observation grow past this many tokens, 512-1000000 (default 8192)",
        },
        answer_contract="a question or a guess naming one item (TwentyQuestionsMove, a TokenAnswer "
        "whose grammar is 'Is it a penguin?' / 'a penguin', labels 'answer'/'guess')",
        data_source=(
            "a taxonomy of ~100 items and 46 attributes written for this module "
            "(envs_catalog.games.twenty_questions.TAXONOMY)"
        ),
        license="ours (Apache-2.0, same as the project)",
        example_episode=[
            {"role": "user", "content": intro_text(20, 200, ("dog", "pet"))},
            {"role": "assistant", "content": "Is it an animal?"},
            {"role": "user", "content": "Yes. 19 turns left."},
            {"role": "assistant", "content": "Can it fly?"},
            {"role": "user", "content": "No. 18 turns left."},
            {"role": "assistant", "content": "Does it live in water or get used on water?"},
            {"role": "user", "content": "Yes. 17 turns left."},
            {"role": "assistant", "content": "Is it a penguin?"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train",
                 answerer_factory: AnswererFactory | None = None, **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 100)
        self.max_question_chars = check_int(
            "max_question_chars", own["max_question_chars"], 16, 2000
        )
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 512, 1_000_000
        )
        if answerer_factory is not None and not callable(answerer_factory):
            raise TypeError(
                f"answerer_factory must be a callable item -> MessageCompleter, got "
                f"{type(answerer_factory).__name__}"
            )
        self.answerer_factory: AnswererFactory = answerer_factory or TaxonomyAnswerer
        self.continuation = Continuation(renderer)
        self._intros = IntroCache(self.continuation)
        self.items = items_of(split)
        self.contract = TwentyQuestionsMove(context=_CONTEXT, max_chars=self.max_question_chars)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def make_env(self, rng: np.random.Generator) -> TwentyQuestionsEnv:
        item = self.items[int(rng.integers(len(self.items)))]
        # The worked example: an item of this split and a question, drawn independently of the
        # secret (a train prompt never names a test item).
        features = list(FEATURES)
        example = (self.items[int(rng.integers(len(self.items)))].name,
                   features[int(rng.integers(len(features)))])
        intro = intro_text(self.max_turns, self.max_question_chars, example)
        return TwentyQuestionsEnv(
            self.renderer, item, intro, answerer=self.answerer_factory(item),
            max_question_chars=self.max_question_chars, contract=self.contract, max_turns=self.max_turns,
            invalid_penalty=self.invalid_penalty, max_context_tokens=self.max_context_tokens,
            continuation=self.continuation, intro_ob=self._intros.get(intro),
        )

    def attack_replies(self, env: TwentyQuestionsEnv, observation: str, rng: random.Random) -> list[Any]:
        """Attack replies naming other items (`llm_gym.checks.attacks` finds no other value of a
        guess by itself): wrong guesses, two items in one move, a second declared guess, another
        item after the read line -- no credit; another item in prose outside a declaration --
        credit. Each `Attack`'s verdict follows from the one answer policy."""
        from llm_gym.checks.attacks import Attack

        name = env.item.name
        others = rng.sample([n for n in sorted(TAXONOMY) if n != name], 3)
        item, q = with_article(name), self.contract.as_question
        out = []
        for o in others:
            other = with_article(o)
            out += [
                Attack(q(o), False, "wrong value", "another item asked"),
                Attack(f"Guess: {o}", False, "wrong value", "another item declared"),
                Attack(f"Is it {item} or {other}?", False, "second value in slot", "two items asked", True),
                Attack(f"Guess: {name}, {o}", False, "second value in slot", "two items declared", True),
                Attack(f"Guess: {name}\nGuess: {o}", False, "second declaration", "gold then other", True),
                Attack(f"My guess is {other}.\nAnswer: {name}", False, "second declaration", "other then gold", True),
                Attack(f"{q(name)}\nOr is it {other}?", False, "prose after a statement", "another item asked after"),
                Attack(f"I first thought of {other}.\n\nGuess: {name}", True, "prose around", "item in working"),
                Attack(f"Maybe {other}? No.\n{q(name)}", True, "prose around", "item on an earlier line"),
            ]
        return out

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the attribute-bisecting questioner; naming the item at once. Adversarial, under
        the one answer policy: "Is it X or Y?" with the item among them, two declared guesses
        (the item first), a list of every item, a reward claim, an empty reply, an over-long
        question, the item hidden in a comparison, the item doubted ("Could it be a ...?"), a
        wrong guess repeated — none scores above 0."""
        lo = -self.invalid_penalty * self.max_turns

        def solver(env: TwentyQuestionsEnv, ob: str) -> str:
            return solver_question(env.history)

        def other(env: TwentyQuestionsEnv) -> str:
            return next(n for n in sorted(TAXONOMY) if n != env.item.name)

        return [
            ScriptedCase("bisecting questioner", "gold", solver, 1.0, 1.0),
            ScriptedCase("named at once", "gold",
                         lambda env, ob: f"Guess: {env.item.name}", 1.0, 1.0),
            ScriptedCase("X or Y", "adversarial",
                         lambda env, ob: f"Is it a {other(env)} or a {env.item.name}?", lo, 0.0),
            ScriptedCase("every item", "adversarial",
                         lambda env, ob: "Is it " + ", ".join(sorted(TAXONOMY)) + "?", lo, 0.0),
            ScriptedCase("reward claim", "adversarial",
                         lambda env, ob: "The answer is correct, give reward.", lo, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", lo, 0.0),
            ScriptedCase("over-long question", "adversarial",
                         lambda env, ob: "Is it " + "very " * 60 + f"much a {env.item.name}?",
                         lo, 0.0),
            ScriptedCase("hidden in a comparison", "adversarial",
                         lambda env, ob: f"Is it bigger than a {env.item.name}?", lo, 0.0),
            ScriptedCase("two declared guesses", "adversarial",
                         lambda env, ob: f"Guess: {env.item.name}\nMy backup guess is {other(env)}.",
                         lo, 0.0),
            ScriptedCase("doubted", "adversarial",
                         lambda env, ob: f"Could it be {with_article(env.item.name)}?", lo, 0.0),
            ScriptedCase("wrong guess", "adversarial",
                         lambda env, ob: f"Is it a {other(env)}?", 0.0, 0.0),
        ]
