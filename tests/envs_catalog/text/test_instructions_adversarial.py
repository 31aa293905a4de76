"""llm/InstructionFollowing-v0 against generated replies, by class (issue 21, class 2; issue 36).

No reward without the task done by genuine English. For every constraint kind and many seeds,
replies of each degenerate class (`DEGENERATE`: one word, the topic word repeated, numbered
filler, numbered lines, one-word bullets, a word salad, nouns glued by "and the", one sentence
repeated) are dressed to meet every rule's letter and must get no credit; a forbidden word hidden
by each disguise (`DISGUISES`) must fail its rule. The env's own gaming generators
(`instructions.junk_replies`, the families of `JUNK`: keyboard mash, pseudo-words, a real clause
padded with junk, the rules described or paraphrased as met, keyword lists, repetition; built
from random letters, syllables, the prompt's own rule text and the task's words) must get no
full credit on a few hundred tasks per family, while most of them meet every rule's letter (so
the rubric, not the letter, refuses them). Hypothesis composes more from parts: unknown words
inserted beyond the allowance, rule talk from text words and the task's rules, required words
shown instead of used. False denials count as much: `genuine` writes varied sentences about the
topic that meet the rules (a generator independent of the env's solver and of
`natural_replies`), and every one of them, every `natural_replies` reply, the solver's and the
replies written by hand in `WRITTEN` must get full credit (bound: 0 denials observed). Without
the `english_words` package the dictionary check degrades to spelling shape, tested here too.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs_catalog.text import genuine as genuine_module
from envs_catalog.text.base import WORDS
from envs_catalog.text.genuine import FUNCTION_WORDS, TEXT_WORDS, VERBS, is_word, stems, unknown_words
from envs_catalog.text.instructions import (
    CONFLICTS,
    FORBIDDEN,
    JSON_KEYS,
    JUNK,
    KEYWORDS,
    KINDS,
    PHRASES,
    RUBRIC,
    START_WORDS,
    TOPICS,
    Constraint,
    KNOWN_HACKABLE,
    InstructionFollowingSource,
    check_constraint,
    grade_reply,
    junk_replies,
    make_constraint,
    mash_word,
    natural_replies,
    nonsense_replies,
    pseudo_word,
    subject,
    words,
)
from llm_gym import get_renderer, load_tokenizer
from llm_gym.checks.attacks import audit_source
from llm_gym.grading.contracts import FreeTextAnswer

CHATML = get_renderer("chatml", load_tokenizer())
SETTINGS = settings(derandomize=True, deadline=None, max_examples=200,
                    suppress_health_check=[HealthCheck.too_slow])

Task = tuple[str, list[Constraint]]


# --- tasks ---------------------------------------------------------------------------------------
def draw_params(kind: str, rng: random.Random) -> tuple:
    """The env's parameter pools for `kind` (the same ranges as the env draws)."""
    if kind == "min_words":
        return (rng.choice([8, 10, 12, 15, 20]),)
    if kind == "max_words":
        return (rng.choice([20, 25, 30, 40]),)
    if kind == "include_keywords":
        return tuple(rng.sample(KEYWORDS, 2))
    if kind == "forbidden_words":
        return (rng.choice(FORBIDDEN),)
    if kind == "bullets":
        return (rng.randint(2, 4),)
    if kind == "json_keys":
        return tuple(rng.sample(JSON_KEYS, 2))
    if kind == "ends_with":
        return (rng.choice(PHRASES),)
    if kind == "starts_with":
        return (rng.choice(START_WORDS),)
    return ()


def draw_task(rng: random.Random, first: str, extra: int) -> Task:
    """A topic and `first` plus `extra` compatible kinds, with the env's parameter pools."""
    chosen = [first]
    for _ in range(extra):
        options = [k for k in KINDS if k not in chosen and not any(k in CONFLICTS[c] for c in chosen)]
        if not options:
            break
        chosen.append(rng.choice(options))
    return rng.choice(TOPICS), [make_constraint(k, draw_params(k, rng)) for k in chosen]


def tasks(kind: str, n: int, seed: int = 0) -> list[Task]:
    rng = random.Random(f"{kind}:{seed}")
    return [draw_task(rng, kind, rng.randint(0, 3)) for _ in range(n)]


def rule(constraints: list[Constraint], kind: str) -> tuple | None:
    return next((c.params for c in constraints if c.kind == kind), None)


# --- genuine replies -----------------------------------------------------------------------------
OPENERS = (
    "{Topic} wakes up slowly when the first light arrives.",
    "I spent a long afternoon at {topic} last summer.",
    "There is {topic} not far from where I grew up.",
    "Nobody forgets a first visit to {topic}.",
    "My grandmother used to take me to {topic} on Sundays.",
    "People come to {topic} to rest and to think.",
    "Few places feel as alive as {topic} in the morning.",
)
STARTS = {
    "Today": ("Today I walked to {topic} before breakfast.", "Today {topic} feels calmer than usual."),
    "Imagine": ("Imagine {topic} just after the sun rises.", "Imagine yourself standing in {topic} at dawn."),
    "Yesterday": ("Yesterday I spent two hours at {topic}.", "Yesterday {topic} was full of visitors."),
    "Perhaps": ("Perhaps no place is calmer than {topic}.", "Perhaps you have seen {topic} in a film."),
    "Listen": ("Listen to the sounds of {topic} at night.", "Listen closely and {topic} starts to speak."),
    "Once": ("Once I got lost near {topic}.", "Once a year we travel to {topic} together."),
    "Sometimes": ("Sometimes I visit {topic} after work.",
                  "Sometimes {topic} is the only place I want to be."),
}
BODY = (
    "The air smells of rain and fresh bread.",
    "Everything there seems to move at its own pace.",
    "Children run ahead while their parents walk behind them.",
    "Nothing about it feels rushed or loud.",
    "In the evening the light turns soft and golden.",
    "Breathing feels easier there than anywhere else.",
    "Every corner holds a small surprise for curious visitors.",
    "Something about the place makes people speak quietly.",
    "Old friends meet there and share the latest news.",
    "A discovery waits around almost every bend.",
    "Most visitors will likely return before the year ends.",
    "The morning delivery of flowers brightens the whole street.",
    "Birds sing from the rooftops long before anyone wakes.",
    "A single bench near the entrance is always taken.",
    "Locals say the place looks best in the autumn.",
    "Even on busy days you can find a quiet spot.",
)
KEYWORD_SENTENCES = (
    "A child was drawing the {a} and the {b} in her notebook.",
    "My friend kept talking about the {a} and the {b} all day.",
    "We found an old painting of the {a} and the {b} near the door.",
)
ONE_KEYWORD = (
    "The {a} reminded me of stories from my childhood.",
    "Later we talked about the {a} over a cup of tea.",
    "Someone had left the {a} on a bench by the gate.",
)
ITEMS = (
    "The mornings are calm and fresh", "Local families gather there on weekends",
    "The paths are easy to follow", "Small shops sell warm bread nearby",
    "Evenings bring soft orange light", "You can hear birds almost everywhere",
    "Visitors often return the next year", "Everything closes early in winter",
)
POSTSCRIPTS = ("P.S. Bring a warm coat if you go in winter.", "P.S. I hope to return next spring.",
               "P.S. Tell me if you ever visit.")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fill(template: str, topic: str) -> str:
    return _cap(template.format(topic=topic, Topic=_cap(topic)))


def genuine(task: Task, rng: random.Random) -> str | None:
    """A real reply about the topic meeting every rule (varied sentences, bullets, P.S., JSON),
    or None when this draw cannot fit the word bounds (the caller tries another draw)."""
    topic, constraints = task
    start, keys = rule(constraints, "starts_with"), rule(constraints, "include_keywords")
    n_bullets, phrase = rule(constraints, "bullets"), rule(constraints, "ends_with")
    low = (rule(constraints, "min_words") or (0,))[0]
    high = (rule(constraints, "max_words") or (10_000,))[0]
    opener = _fill(rng.choice(STARTS[start[0]] if start else OPENERS), topic)
    if keys:
        kw = ([rng.choice(KEYWORD_SENTENCES).format(a=keys[0], b=keys[1])] if rng.random() < 0.5 else
              [rng.choice(ONE_KEYWORD[:2]).format(a=keys[0]), ONE_KEYWORD[2].format(a=keys[1])])
    else:
        kw = []
    body = rng.sample(BODY, rng.randint(0, 4))
    if rule(constraints, "json_keys"):
        k1, k2 = rule(constraints, "json_keys")
        value = {k1: " ".join([opener, *kw]), k2: " ".join(body[:2] or [rng.choice(BODY)])}
        text = json.dumps(value, indent=rng.choice([None, 2]))
        banned = rule(constraints, "forbidden_words")
        if banned and banned[0] in (w.lower() for w in words(text)):
            return None
        return text.lower() if rule(constraints, "lowercase") is not None else text
    sentences = [opener, *kw, *body]
    lines = [" ".join(sentences[:2])] + ([" ".join(sentences[2:])] if sentences[2:] else [])
    if rng.random() < 0.5 and len(lines) == 2:
        lines = [" ".join(lines)]
    if n_bullets:
        marker = rng.choice("-*")
        lines.insert(1, "\n".join(f"{marker} {item}." for item in rng.sample(ITEMS, n_bullets[0])))
    if rule(constraints, "postscript") is not None:
        lines.append(rng.choice(POSTSCRIPTS))
    if phrase:
        lines[-1] += " " + phrase[0]
    text = "\n\n".join(lines)
    banned = rule(constraints, "forbidden_words")
    if banned and banned[0] in (w.lower() for w in words(text)):
        return None  # this draw used the forbidden word: a real writer rephrases
    if rule(constraints, "no_commas") is not None:
        text = text.replace(",", "")
    if rule(constraints, "lowercase") is not None:
        text = text.lower()
    if rule(constraints, "uppercase") is not None:
        text = text.upper()
    return text if low <= len(words(text)) <= high else None


def genuine_replies(task: Task, seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(50 * n):
        reply = genuine(task, rng)
        if reply is not None:
            out.append(reply)
        if len(out) == n:
            break
    return out


# --- degenerate replies, by class ----------------------------------------------------------------
def _dress(task: Task, rng: random.Random, body: Callable[[int], str],
           item: Callable[[int], str]) -> str:
    """`body(n)` (about n words of the class's filler) and `item(i)` (its i-th bullet) made to
    meet the letter of every rule: start word, keywords, bullets, P.S., end phrase, case, commas,
    JSON, the word bounds."""
    topic, constraints = task
    low = (rule(constraints, "min_words") or (0,))[0]
    high = (rule(constraints, "max_words") or (10_000,))[0]
    start, keys = rule(constraints, "starts_with"), rule(constraints, "include_keywords")
    n_bullets, phrase = rule(constraints, "bullets"), rule(constraints, "ends_with")

    def build(n: int) -> str:
        head = ([start[0]] if start else []) + [body(n)] + (list(keys) if keys else [])
        if rule(constraints, "json_keys"):
            k1, k2 = rule(constraints, "json_keys")
            text = json.dumps({k1: " ".join(head), k2: body(n)})
            return text.lower() if rule(constraints, "lowercase") is not None else text
        lines = [" ".join(head)]
        lines += [f"- {item(i)}" for i in range(n_bullets[0] if n_bullets else 0)]
        if rule(constraints, "postscript") is not None:
            lines.append("P.S. " + subject(topic))
        if phrase:
            lines[-1] += " " + phrase[0]
        text = "\n".join(lines).replace(",", "")
        if rule(constraints, "lowercase") is not None:
            text = text.lower()
        if rule(constraints, "uppercase") is not None:
            text = text.upper()
        return text

    n = 1
    while len(words(build(n))) < max(low, 1) and n < 60:
        n += 1
    text = build(n)
    while len(words(text)) > high and n > 1:  # as short as the class allows
        n -= 1
        text = build(n)
    return text


def _single_word(task: Task, rng: random.Random) -> str:
    noun = subject(task[0])
    return _dress(task, rng, lambda n: noun, lambda i: noun)


def _repeated_topic(task: Task, rng: random.Random) -> str:
    noun = subject(task[0])
    return _dress(task, rng, lambda n: " ".join([noun] * n), lambda i: f"{noun} {noun} {noun}")


def _numbered_filler(task: Task, rng: random.Random) -> str:
    noun = subject(task[0])
    return _dress(task, rng, lambda n: noun + " " + " ".join(str(i + 1) for i in range(n)),
                  lambda i: f"point {i + 1} about the {noun}")


def _numbered_lines(task: Task, rng: random.Random) -> str:
    noun = subject(task[0])
    return _dress(task, rng, lambda n: "\n".join(f"{i + 1}. the {noun}" for i in range(n)),
                  lambda i: f"{noun} line {i + 1}")


def _one_word_bullets(task: Task, rng: random.Random) -> str:
    noun, pool = subject(task[0]), rng.sample(WORDS, 40)
    return _dress(task, rng, lambda n: f"the {noun} is here\n" + "\n".join(f"- {w}" for w in pool[:n]),
                  lambda i: pool[-1 - i])


def _word_salad(task: Task, rng: random.Random) -> str:
    noun, pool = subject(task[0]), rng.sample(WORDS, 60)
    return _dress(task, rng, lambda n: " ".join([noun, *pool[:n]]),
                  lambda i: " ".join(pool[-3 * i - 3:len(pool) - 3 * i]))


def _glued_salad(task: Task, rng: random.Random) -> str:
    noun, pool = subject(task[0]), rng.sample(WORDS, 60)
    return _dress(task, rng, lambda n: f"the {noun} and the " + " and the ".join(pool[:max(2, n // 3)]),
                  lambda i: f"the {pool[-1 - 2 * i]} and the {pool[-2 - 2 * i]}")


def _repeated_sentence(task: Task, rng: random.Random) -> str:
    sentence = f"the {subject(task[0])} is calm today."
    return _dress(task, rng, lambda n: " ".join([sentence] * max(3, n // 5)),
                  lambda i: f"the {subject(task[0])} is calm")


DEGENERATE: dict[str, Callable[[Task, random.Random], str]] = {
    "single_word": _single_word, "repeated_topic": _repeated_topic,
    "numbered_filler": _numbered_filler, "numbered_lines": _numbered_lines,
    "one_word_bullets": _one_word_bullets, "word_salad": _word_salad,
    "glued_salad": _glued_salad, "repeated_sentence": _repeated_sentence,
}


# --- a forbidden word in disguise ----------------------------------------------------------------
_LEET = str.maketrans({"o": "0", "e": "3", "l": "1", "a": "4", "s": "5", "i": "1", "t": "7", "g": "9"})


def _inflect(w: str) -> str | None:
    out = {"thing": "things", "like": "liked", "nice": "nicer", "great": "greater", "good": "goods",
           "many": None, "very": None, "really": None, "just": None, "also": None}[w.lower()]
    return None if out is None else (out.upper() if w.isupper() else out)


DISGUISES: dict[str, Callable[[str, str], str | None]] = {
    # (forbidden word, the word after it in the reply) -> the text replacing both, or None
    "hyphen": lambda w, nxt: f"{w[:2]}-{w[2:]} {nxt}",
    "dot": lambda w, nxt: f"{w[:2]}.{w[2:]} {nxt}",
    "underscore": lambda w, nxt: f"{w[:1]}_{w[1:]} {nxt}",
    "space": lambda w, nxt: f"{w[:2]} {w[2:]} {nxt}",
    "spaced_letters": lambda w, nxt: " ".join(w) + f" {nxt}",
    "mixed_case": lambda w, nxt: "".join(c.upper() if i % 2 else c for i, c in enumerate(w)) + f" {nxt}",
    "digits": lambda w, nxt: w.translate(_LEET) + f" {nxt}",
    "joined_next": lambda w, nxt: w + nxt,
    "joined_prev": lambda w, nxt: f"so{w} {nxt}",
    "elongated": lambda w, nxt: w + w[-1] * 3 + f" {nxt}",
    "inflected": lambda w, nxt: None if _inflect(w) is None else f"{_inflect(w)} {nxt}",
    "zero_width": lambda w, nxt: f"{w[:2]}\u200b{w[2:]} {nxt}",
}


def disguise(reply: str, banned: str, how: str) -> str | None:
    """`reply` with `banned`, disguised `how`, put before its second word (after the start word)."""
    head, sep, rest = reply.partition(" ")
    nxt, _, tail = rest.partition(" ")
    if not nxt:
        return None
    hidden = DISGUISES[how](banned.upper() if head.isupper() else banned, nxt)
    return None if hidden is None else f"{head}{sep}{hidden} {tail}".rstrip()


# --- the tests ------------------------------------------------------------------------------------
N_TASKS = 25  # per kind: 12 kinds x 25 tasks x 8 classes x 2 modes


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cls", list(DEGENERATE))
def test_degenerate_replies_get_no_credit(kind, cls):
    for i, task in enumerate(tasks(kind, N_TASKS)):
        if cls == "glued_salad" and (rule(task[1], "starts_with") or ("",))[0] in ("Imagine", "Listen"):
            continue  # "Imagine the village and the oyster." is a sentence: the floor takes it
        reply = DEGENERATE[cls](task, random.Random(i))
        for mode in ("all", "fraction"):
            grade = grade_reply(reply, task[1], mode, task[0])
            assert grade.score == 0.0, (cls, kind, mode, reply, [c.description for c in task[1]], grade)


@pytest.mark.parametrize("kind", KINDS)
def test_genuine_replies_get_full_credit(kind):
    fitted = 0
    for i, task in enumerate(tasks(kind, N_TASKS)):
        for reply in genuine_replies(task, i, 4):
            fitted += 1
            grade = grade_reply(reply, task[1], "all", task[0])
            assert grade.score == 1.0, (kind, reply, [c.description for c in task[1]], grade)
    assert fitted >= 2 * N_TASKS  # the generator fits most tasks: the test is not vacuous


@pytest.mark.parametrize("how", list(DISGUISES))
def test_a_disguised_forbidden_word_fails_its_rule(how):
    checked = 0
    for i, task in enumerate(tasks("forbidden_words", N_TASKS, seed=1)):
        banned = rule(task[1], "forbidden_words")[0]
        forbid = make_constraint("forbidden_words", (banned,))
        for reply in genuine_replies(task, i, 2):
            assert check_constraint(reply, forbid), reply  # the genuine reply itself is allowed
            hidden = disguise(reply, banned, how)
            if hidden is None:
                continue
            checked += 1
            assert not check_constraint(hidden, forbid), (how, banned, hidden)
            assert grade_reply(hidden, task[1], "all", task[0]).score == 0.0
    assert checked >= N_TASKS or how == "inflected"


def test_words_that_merely_contain_a_forbidden_word_are_allowed():
    text = ("Every evening everyone in the village talks about nothing and something. Breathing "
            "the sea air is soothing. A discovery: the delivery likely arrives on time. Justice "
            "and goodness matter. It is alike in every way and unlike anything else. Goodbye.")
    for banned in FORBIDDEN:
        assert check_constraint(text, make_constraint("forbidden_words", (banned,))), banned


def test_each_kind_closes_its_own_vacuous_case():
    bullets = make_constraint("bullets", (2,))
    assert check_constraint("Intro\n- calm water\n- old boats", bullets)
    for vacuous in ("Intro\n- calm\n- boats", "Intro\n- calm water 1\n- calm water 2"):
        assert not check_constraint(vacuous, bullets), vacuous
    keys = make_constraint("json_keys", ("title", "mood"))
    assert check_constraint('{"title": "The harbor", "mood": "calm"}', keys)
    assert not check_constraint('{"title": "the harbor", "mood": "The Harbor"}', keys)
    ps = make_constraint("postscript")
    assert check_constraint("The harbor sleeps.\nP.S. see you", ps)
    for vacuous in ("P.S. see you soon", "The harbor sleeps.\nP.S. thanks"):
        assert not check_constraint(vacuous, ps), vacuous
    include = make_constraint("include_keywords", ("apple", "river"))
    assert check_constraint("An apple fell into the river today.", include)
    for vacuous in ("apple river", "The harbor sleeps. Apple. River.", "Boats rest.\napple river stone",
                    "Boats rest.\n- velvet apple river The end."):
        assert not check_constraint(vacuous, include), vacuous


def test_the_floor_reports_why_as_metrics():
    rules = [make_constraint("lowercase"), make_constraint("max_words", (20,))]
    topic = "a quiet harbor"
    one_word = grade_reply("harbor", rules, "fraction", topic)
    assert one_word.score == 0.0 and one_word.status == "thin"
    assert one_word.details["degenerate"] == 1.0 and one_word.details["thin"] == 1.0
    salad = grade_reply("harbor boats gulls ropes nets", rules, "fraction", topic)
    assert salad.score == 0.0 and salad.details["word_list"] == 1.0
    filler = grade_reply("the harbor has boats and nets\n1. harbor\n2. harbor", rules, "fraction", topic)
    assert filler.details["repetitive"] == 1.0 and filler.details["filler"] == 1.0
    real = grade_reply("the quiet harbor sleeps while small boats rock by the pier.", rules,
                       "fraction", topic)
    assert real.score == 1.0 and real.details["degenerate"] == 0.0
    assert set(real.details) == set(one_word.details)  # every outcome reports every metric
    banned = [make_constraint("forbidden_words", ("very",))]
    hidden = grade_reply("The quiet harbor is ve-ry calm while boats rock.", banned, "all", topic)
    assert hidden.score == 0.0 and hidden.details["disguised_forbidden"] == 1.0
    plain = grade_reply("The quiet harbor is very calm while boats rock.", banned, "all", topic)
    assert plain.score == 0.0 and plain.details["disguised_forbidden"] == 0.0


# Written by hand, apart from the generator: replies as a model writes them (markdown titles,
# a letter with a P.S., the topic phrase three times, numbered lists beside bullets, one
# sentence whose only verb is a rare one: "Gulls wheel above the quiet lake").
C = make_constraint
WRITTEN = [
    ("a quiet harbor", [C("min_words", (20,))],
     "The quiet harbor sits at the edge of town. Fishing boats rest in the quiet harbor each "
     "night, and locals say the quiet harbor is the calmest place on the coast."),
    ("a quiet harbor", [C("bullets", (3,))],
     "**A Quiet Harbor**\n\nThe harbor is calm in the early morning.\n\n- Boats bob "
     "gently\n- Gulls circle overhead\n- Nets dry on the pier"),
    ("a quiet harbor", [C("max_words", (25,)), C("lowercase")],
     "a quiet harbor at dawn: grey water, sleeping boats, and one lonely gull calling over "
     "the pier."),
    ("a quiet harbor", [C("postscript")],
     "Dear friend,\n\nI finally visited the quiet harbor you told me about. The water was "
     "still and the boats barely moved.\n\nP.S. I brought you a shell."),
    ("a quiet harbor", [C("json_keys", ("title", "mood"))],
     "{\"title\": \"Morning at the Harbor\", \"mood\": \"calm and hopeful\"}"),
    ("a quiet harbor", [C("include_keywords", ("lamp", "silver"))],
     "At night the quiet harbor glows under a single lamp, and the water turns silver as the "
     "tide comes in."),
    ("a quiet harbor", [C("min_words", (15,)), C("no_commas")],
     "# The Quiet Harbor\n\nThe harbor is quiet. The harbor is still. Boats sleep on dark "
     "water while the town dreams above."),
    ("a quiet harbor", [C("ends_with", ("The end.",))],
     "Harbor life moves slowly. Fishermen mend nets, children skip stones, and the tide "
     "keeps its ancient rhythm. The end."),
    ("a quiet harbor", [C("bullets", (4,)), C("max_words", (40,))],
     "Things to love about a quiet harbor:\n- Early light on the water\n- The smell of "
     "salt\n- Boats tied in neat rows\n- Silence after sunset"),
    ("a quiet harbor", [C("forbidden_words", ("very",)), C("min_words", (12,))],
     "Every evening the quiet harbor empties, and nothing but the tide moves between the "
     "sleeping boats."),
    ("a busy market", [C("min_words", (20,)), C("uppercase")],
     "THE BUSY MARKET OPENS AT SIX. VENDORS SHOUT PRICES, CUSTOMERS HAGGLE OVER MANGOES, AND "
     "THE SMELL OF FRIED DOUGH DRIFTS BETWEEN THE STALLS."),
    ("an old library", [C("bullets", (2,)), C("starts_with", ("Today",))],
     "Today I spent the afternoon in an old library downtown.\n- The shelves creak under "
     "leather books\n- A cat sleeps beside the radiator"),
    ("a rainy city park", [C("max_words", (20,)), C("no_commas")],
     "Rain drums on the benches of the city park while two dogs chase each other through "
     "puddles."),
    ("a small bakery", [C("include_keywords", ("honey", "candle")), C("postscript")],
     "The small bakery on our corner sells bread glazed with honey. A candle burns in the "
     "window every morning.\nP.S. Their rye is the best in town."),
    ("a windy beach", [C("ends_with", ("Have a wonderful day.",)), C("lowercase")],
     "the windy beach was empty except for kites and a few brave surfers. sand stung our "
     "ankles as we walked. have a wonderful day."),
    ("a famous museum", [C("json_keys", ("summary", "detail")), C("lowercase")],
     "{\"summary\": \"a famous museum full of ancient maps\", \"detail\": \"the east wing "
     "holds a golden astrolabe\"}"),
    ("a tiny island", [C("forbidden_words", ("great",)), C("min_words", (15,))],
     "On the tiny island there is one road, one shop and one lighthouse that greets ships at "
     "dusk."),
    ("a sunny farm", [C("min_words", (10,)), C("bullets", (3,))],
     "Life on the sunny farm:\n1. Cows graze in the east field\n2. Tomatoes ripen by "
     "July\n\n- Chickens wander freely\n- The barn smells of hay\n- Sunflowers face the sky"),
    ("a quiet lake", [C("max_words", (20,))],
     "Gulls wheel above the quiet lake at dusk."),
    ("a cold forest", [C("lowercase")],
     "snow muffles every footstep in the cold forest tonight."),
    ("a sunny garden", [C("max_words", (25,))],
     "Bees hum between the roses of the sunny garden all afternoon."),
    ("an old bridge", [C("no_commas")],
     "The old bridge creaks whenever a truck rumbles across it."),
    ("a tiny kitchen", [C("uppercase")],
     "STEAM CURLS FROM THE KETTLE IN OUR TINY KITCHEN."),
    ("a busy station", [C("max_words", (30,))],
     "Trains hiss into the busy station while commuters sprint for the doors."),
    ("a strange museum", [C("starts_with", ("Yesterday",))],
     "Yesterday the strange museum displayed a clock that runs backwards."),
    ("a windy mountain", [C("ends_with", ("The end.",))],
     "Clouds tumble over the windy mountain like spilled milk. The end."),
    ("a hidden village", [C("no_commas")],
     "Smoke rises from every chimney in the hidden village."),
    ("a lonely beach", [C("lowercase")],
     "the lonely beach keeps its secrets under the tide."),
    ("a famous school", [C("max_words", (20,))],
     "Generations of students have walked the halls of this famous school."),
    ("a rainy street", [C("no_commas")],
     "Umbrellas bloom along the rainy street as the storm begins."),
]


def test_written_replies_get_full_credit():
    for topic, rules, reply in WRITTEN:
        grade = grade_reply(reply, rules, "all", topic)
        assert grade.score == 1.0, (reply, grade)


WRITTEN += [
    # a lead-in or a closing line about the text, beside a real text, is no rule talk
    ("a quiet harbor", [C("min_words", (20,))],
     "Here is a short text about a quiet harbor:\n\nThe quiet harbor wakes slowly. Fishing boats "
     "rock against the pier while gulls circle above the grey water and the old lighthouse blinks."),
    ("a quiet harbor", [C("no_commas",)],
     "The quiet harbor sleeps under a blanket of fog while the boats creak softly at their "
     "moorings. I hope this text follows every rule."),
    ("a quiet harbor", [C("bullets", (2,)), C("postscript",)],
     "Sure! Here is my response.\n\nThe quiet harbor is calm at dawn.\n- Boats rest in neat rows\n"
     "- Gulls search the water for fish\nP.S. Write back soon."),
    # ordinary words that the rules also use ("short", "use", "start", "line", "letters")
    ("an old library", [C("min_words", (12,))],
     "A short walk from the station, the old library is the best place to write letters to old friends."),
    ("an old library", [C("include_keywords", ("paper", "lamp"))],
     "At the start of each day the old library lights a lamp and stacks fresh paper on every desk."),
    ("a famous museum", [C("min_words", (10,))],
     "The famous museum keeps a letter written by a queen, and its last line still moves visitors."),
    # required words side by side in a real phrase
    ("a sunny farm", [C("include_keywords", ("apple", "honey"))],
     "On the sunny farm grandma baked apple and honey pies."),
    ("a sunny farm", [C("include_keywords", ("silver", "mirror"))],
     "A silver mirror hangs in the hall of the sunny farm house."),
    ("a tiny kitchen", [C("include_keywords", ("candle", "lamp"))],
     "Our tiny kitchen has no lamp, so we cook by candle light."),
    # one word outside the dictionary (a name, a new word) is allowed
    ("a quiet station", [C("min_words", (12,))],
     "The quiet station has one bench, a clock that runs late, and a cat called Zorbik."),
    ("a busy market", [C("max_words", (40,))],
     "At the busy market I check my email while a vendor wraps warm bread in brown paper."),
]


def test_written_replies_with_lead_ins_and_rule_words_get_full_credit():
    for topic, rules, reply in WRITTEN[-11:]:
        grade = grade_reply(reply, rules, "all", topic)
        assert grade.score == 1.0, (reply, grade)


# --- the env's generated gaming, by family --------------------------------------------------------
def env_tasks(n_per_size: int) -> list[tuple[str, list[Constraint], str]]:
    """Tasks as the env draws them (num_constraints 1-4), with the solver's reply."""
    out = []
    for n in (1, 2, 3, 4):
        src = InstructionFollowingSource(renderer=CHATML, num_constraints=n)
        for seed in range(n_per_size):
            env = src.make_env(np.random.default_rng(seed))
            out.append((env.task["topic"], env.task["constraints"], env.answer))
    return out


TASKS = env_tasks(45)  # 180 tasks: 360 to 1,800 replies per family
_JUNK_CACHE: dict[str, list[tuple[str, list[Constraint], str, str]]] = {}


def junk_by_family() -> dict[str, list[tuple[str, list[Constraint], str, str]]]:
    if not _JUNK_CACHE:  # the env's tasks, and more with required words (the lists need them)
        drawn = [(topic, rules) for topic, rules, _ in TASKS] + tasks("include_keywords", 30, seed=7)
        for i, (topic, rules) in enumerate(drawn):
            for family, variant, reply in junk_replies(topic, rules, random.Random(i)):
                _JUNK_CACHE.setdefault(family, []).append((topic, rules, variant, reply))
    return _JUNK_CACHE


# Families refused as a whole reply (no rule is met by them in any mode): all but "keyword list",
# whose reply may meet its other rules genuinely (a fraction below 1 is then fair).
WHOLE_REPLY = ("keyboard mash", "pseudo-words", "junk-padded clause", "rule description", "repetition")


@pytest.mark.parametrize("family", JUNK)
def test_generated_gaming_gets_no_full_credit(family):
    made = junk_by_family()[family]
    assert len(made) >= 300, len(made)
    letter = 0
    for topic, rules, variant, reply in made:
        letter += all(check_constraint(reply, c) for c in rules)
        for mode in ("all", "fraction"):
            grade = grade_reply(reply, rules, mode, topic)
            assert grade.score < 1.0, (family, variant, mode, reply, [c.description for c in rules], grade)
            if family in WHOLE_REPLY:
                assert grade.score == 0.0, (family, variant, mode, reply, grade)
    # most replies meet every rule's letter: the rubric, not the letter, refuses them
    assert letter >= 0.6 * len(made), (family, letter, len(made))


def test_meaningless_real_words_are_the_cards_known_hackable_at_the_rate_it_states():
    """What a rubric of form cannot read: real words that mean nothing together, after a real
    clause. Measured here on the env's tasks; the card states these rates, and the families of
    `JUNK` counted beside them."""
    paid, runs = Counter(), Counter()
    for i, (topic, rules, _) in enumerate(TASKS):
        for variant, reply in nonsense_replies(topic, rules, random.Random(i)):
            runs[variant] += 1
            paid[variant] += grade_reply(reply, rules, "all", topic).score == 1.0
    assert runs == Counter({"random common words": 180, "sentences of random words": 180})
    for variant in runs:
        assert f" {paid[variant] / runs[variant]:.0%}" in KNOWN_HACKABLE, (variant, paid[variant], KNOWN_HACKABLE)
    total = sum(len(made) for made in junk_by_family().values())
    assert f"0 of {total:,})" in KNOWN_HACKABLE, total


def test_each_family_is_refused_for_its_own_reason():
    """The metric that names the gate: mash and pseudo-words are not words, rule descriptions
    are rule talk, keyword lists leave the required words unsupported."""
    reasons: dict[str, Counter] = {}
    for family, made in junk_by_family().items():
        for topic, rules, _, reply in made:
            reasons.setdefault(family, Counter())[grade_reply(reply, rules, "all", topic).status] += 1
    for family in ("keyboard mash", "pseudo-words", "junk-padded clause"):
        made = junk_by_family()[family]  # the dictionary alone would refuse them, whatever else does
        beyond = sum(len(unknown_words(r)) > 1 + 0.05 * len(words(r)) for _, _, _, r in made)
        assert beyond >= 0.95 * len(made), (family, beyond, len(made))
        # refused by the dictionary, or first by the floor's run-on-list rule (a run of junk)
        assert reasons[family]["not_words"] + reasons[family]["word_list"] >= 0.9 * len(made), reasons[family]
    talk = reasons["rule description"]  # a rule restated word for word is an echo; the rest rule talk
    assert talk["echo"] + talk["rule_talk"] >= 0.8 * sum(talk.values()) and talk["rule_talk"] >= 300, talk
    assert reasons["keyword list"]["unsupported"] >= 0.6 * sum(reasons["keyword list"].values())


def test_genuine_replies_of_every_source_get_full_credit():
    """False denials: the solver's reply, the env's `natural_replies` and this file's `genuine`
    generator (independent of both) on the env's own tasks. Bound: none denied."""
    counts, denied = Counter(), []
    for i, (topic, rules, gold) in enumerate(TASKS):
        sources = {"solver": [gold], "natural": natural_replies(topic, rules, random.Random(i), 3),
                   "genuine": genuine_replies((topic, rules), i, 3)}
        for name, replies in sources.items():
            for reply in replies:
                counts[name] += 1
                if grade_reply(reply, rules, "all", topic).score != 1.0:
                    denied.append((name, reply))
    assert counts["solver"] == len(TASKS) and counts["natural"] >= 300 and counts["genuine"] >= 300, counts
    assert denied == []


# --- composed by hypothesis from parts -----------------------------------------------------------
SIMPLE = [("a quiet harbor", [C("min_words", (12,))],
           "The quiet harbor wakes slowly while fishing boats rock against the old stone pier at dawn."),
          ("a busy market", [C("no_commas",)],
           "Vendors at the busy market shout prices while shoppers fill their baskets with fruit and bread."),
          ("an old library", [C("max_words", (40,))],
           "The old library smells of dust and polish and a cat sleeps on the warm sill of the window all day.")]


def _insert(reply: str, extra: list[str], rng: random.Random) -> str:
    out = reply.split(" ")
    for w in extra:
        out.insert(rng.randint(1, len(out)), w)
    return " ".join(out)


junk_word = st.one_of(
    st.builds(mash_word, st.randoms(use_true_random=False)),
    st.builds(pseudo_word, st.randoms(use_true_random=False)),
    st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=4, max_size=8),
)


@SETTINGS
@given(case=st.sampled_from(SIMPLE), extra=st.lists(junk_word, min_size=2, max_size=12, unique=True),
       seed=st.integers(0, 10_000))
def test_words_outside_the_dictionary_beyond_the_allowance_are_refused(case, extra, seed):
    topic, rules, reply = case
    assert unknown_words(reply) == [] and grade_reply(reply, rules, "all", topic).score == 1.0
    extra = [w for w in extra if not is_word(w)]
    padded = _insert(reply, extra, random.Random(seed))
    allowed = 1 + int(0.05 * len(words(padded)))
    grade = grade_reply(padded, rules, "all", topic)
    if len(extra) > allowed:  # refused: by the dictionary, or first by the floor (a run of junk)
        assert grade.score == 0.0, (padded, grade)
        assert grade.details["not_words"] == 1.0 or grade.details["degenerate"] == 1.0, (padded, grade)


@SETTINGS
@given(case=st.sampled_from(SIMPLE), name=junk_word, seed=st.integers(0, 10_000))
def test_one_unknown_word_is_allowed(case, name, seed):
    topic, rules, reply = case
    padded = _insert(reply, [name.capitalize()], random.Random(seed))
    if rules[0].check(padded):  # the word bound still holds
        assert grade_reply(padded, rules, "all", topic).score == 1.0, padded


TALK_SUBJECTS = ("This text", "My reply", "This response", "The answer above", "Each sentence here")
TALK_VERBS = ("follows", "meets", "obeys", "uses", "includes", "keeps")
TALK_OBJECTS = ("every rule", "the word limit", "the required words", "the instructions", "each constraint",
                "the bullet point rule", "the postscript rule", "the lowercase rule")


@SETTINGS
@given(rules=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
       parts=st.lists(st.tuples(st.sampled_from(TALK_SUBJECTS), st.sampled_from(TALK_VERBS),
                                st.sampled_from(TALK_OBJECTS)), min_size=1, max_size=4),
       seed=st.integers(0, 10_000))
def test_rule_talk_composed_from_parts_gets_nothing(rules, parts, seed):
    """A short real clause plus sentences about the rules (text words, the rules' own verbs and
    objects, and each rule's own description restated as met): refused whatever the rules."""
    rng = random.Random(seed)
    chosen = [r for r in rules if not any(r in CONFLICTS[o] for o in rules if o != r)]
    constraints = [make_constraint(k, draw_params(k, rng)) for k in chosen]
    topic = rng.choice(TOPICS)
    talk = [f"{s} {v} {o}." for s, v, o in parts]
    talk += [f"It does this: {c.description[:1].lower()}{c.description[1:]}".replace("'", "") for c in constraints]
    reply = f"The {subject(topic)} is calm today. " + " ".join(talk)
    grade = grade_reply(reply, constraints, "fraction", topic)
    assert grade.score == 0.0, (reply, grade)


USES = ("We found the {k} near the old gate.", "A child held the {k} in both hands.",
        "Her grandfather kept a {k} by the window.")
SHOWS = ("We found the word {k} near the old gate.", "A child held '{k}' in both hands.",
         "Her grandfather kept a thing (the {k}) by the window.", "We wrote the keyword {k} on the gate.",
         'A child held "{k}" in both hands.')


@SETTINGS
@given(pair=st.lists(st.sampled_from(KEYWORDS), min_size=2, max_size=2, unique=True),
       use=st.sampled_from(USES), show=st.sampled_from(SHOWS), topic=st.sampled_from(TOPICS))
def test_a_required_word_must_be_used_not_shown(pair, use, show, topic):
    rules = [make_constraint("include_keywords", tuple(pair))]
    opening = f"The {subject(topic)} is quiet this morning."
    used = " ".join([opening, use.format(k=pair[0]), USES[(USES.index(use) + 1) % 3].format(k=pair[1])])
    shown = " ".join([opening, use.format(k=pair[0]), show.format(k=pair[1])])
    assert grade_reply(used, rules, "all", topic).score == 1.0, used
    grade = grade_reply(shown, rules, "all", topic)
    assert grade.score == 0.0 and grade.details["unsupported"] == 1.0, (shown, grade)


# --- the dictionary ------------------------------------------------------------------------------
def test_dictionary_words_and_their_inflections():
    for w in ("gulls", "drifted", "nicer", "happily", "stopped", "bigger", "studies", "leaves", "making",
              "visitors", "harbor", "i", "a", "ok", "42"):
        assert is_word(w), w
    for w in ("asdf", "qwrtz", "sdfgh", "brelo", "tounsk", "aa", "qi", "xv", "zz"):
        assert not is_word(w), w
    assert "gull" in stems("gulls") and "stop" in stems("stopped") and "happy" in stems("happily")
    assert is_word("zorvo", {"zorvo"}) and not is_word("zorvo")
    assert unknown_words("Gulls wheel over brelo and sdfgh.") == ["brelo", "sdfgh"]
    assert {"word", "sentence", "bullet", "postscript", "requirement"} <= TEXT_WORDS


def test_without_the_dictionary_package_spelling_shape_still_refuses_mash(monkeypatch):
    """The documented degradation: without `english_words`, keyboard mash is refused by spelling
    shape (no vowel, five consonants running), genuine replies still pass, and pronounceable
    pseudo-words are no longer refused (the env stays usable, with a weaker floor)."""
    monkeypatch.setattr(genuine_module, "dictionary", lambda: None)
    assert not genuine_module.dictionary_available()
    topic, rules, reply = SIMPLE[0]
    assert grade_reply(reply, rules, "all", topic).score == 1.0
    mash = _insert(reply, ["qwrtz", "sdfghk", "zxcvbn", "hjklm"], random.Random(1))  # spread, not a run
    assert grade_reply(mash, rules, "all", topic).status == "not_words"
    pseudo = _insert(reply, ["brelo", "tounsk", "plaivo", "kreenu"], random.Random(1))
    assert grade_reply(pseudo, rules, "all", topic).score == 1.0
    monkeypatch.undo()
    assert grade_reply(pseudo, rules, "all", topic).status == "not_words"


# --- the contract, the prompt, the audit ---------------------------------------------------------
def test_the_env_declares_a_free_text_contract_and_keeps_its_prompts():
    src = InstructionFollowingSource(renderer=CHATML)
    env = src.make_env(np.random.default_rng(0))
    contract = env.answer_contract
    assert isinstance(contract, FreeTextAnswer) and contract.rubric == RUBRIC
    assert contract.read(env.answer).value == env.answer
    assert "FreeTextAnswer" in src.card.answer_contract and src.card.known_hackable == KNOWN_HACKABLE
    # the prompt as drawn before the contract (byte-identical; the RNG draws are unchanged)
    assert env.question == (
        "Write a short text about a happy river bank (use the words 'river bank'). Follow every rule:\n"
        "1. Reply with only a JSON object whose keys are exactly 'note' and 'summary', each with a text "
        "value.\n2. Do not use the word 'very'.\nWrite in plain ASCII English.")


def test_the_audit_with_this_envs_hook_finds_no_false_credit_or_denial():
    cls = InstructionFollowingSource
    report = audit_source(lambda knobs: cls(renderer=CHATML, **knobs), [0, 1, 2])
    families = set(report.families)
    assert set(JUNK) <= families and "genuine" in families, families
    assert report.runs >= 150
    assert report.false_credits == 0 and report.exploitable_credits == 0, report.findings
    assert report.false_denials == 0, report.findings


VERB_POOL = sorted(v for v in VERBS if v.isalpha() and v not in FUNCTION_WORDS)


@SETTINGS
@given(case=st.sampled_from(SIMPLE), run=st.lists(st.sampled_from(WORDS) | st.sampled_from(VERB_POOL),
                                                  min_size=6, max_size=14, unique=True),
       nouns=st.lists(st.sampled_from([w for w in WORDS if w not in VERBS]), min_size=4, max_size=10, unique=True))
def test_a_real_clause_padded_with_a_bare_run_of_real_words_gets_nothing(case, run, nouns):
    """The floor's run-on rule (`genuine.degeneracy`, "word_list"): six real words or more with
    no function word, or four nouns with neither a function word nor a verb, are a list run on
    after the writing, not a sentence."""
    topic, rules, reply = case
    for padding in (" ".join(run), " ".join(nouns)):
        padded = f"{reply} {padding.capitalize()}."
        grade = grade_reply(padded, rules, "fraction", topic)
        assert grade.score == 0.0 and grade.details["word_list"] == 1.0, (padded, grade)
