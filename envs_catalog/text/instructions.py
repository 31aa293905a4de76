"""`llm/InstructionFollowing-v0`: IFEval-style writing tasks with verifiable constraints.

A task is "Write a short text about <topic>" plus `num_constraints` rules drawn per task from
the kinds in `CHECKS` (word-count bounds, required and forbidden words, all lower / upper case,
exactly N bullet points, a JSON object with given keys, a fixed start word or end phrase, no
commas, a P.S. line), never two that contradict each other (`CONFLICTS`). Every drawn task is
solved by `solve` and kept only if the solution passes all its checks, so each task is
satisfiable and the reference reply is a real solution.

Checking (`check_constraint`): the reply is first read by `envs_catalog.text.base.visible_reply`
(over-long, invalid UTF-8, non-ASCII — look-alike letters, exotic spaces, zero-width characters —
or blank replies are unreadable and pass nothing). Every checker also requires at least one word
(`[A-Za-z0-9]+`), so no constraint is satisfied vacuously: an empty or punctuation-only reply does
not pass "no commas" or "all lower case". Words are matched whole and case-insensitively
("apples" is not "apple"), except a forbidden word, which is also found in disguise
(`envs_catalog.text.disguise.uses_word`: split by hyphens, dots or spaces, digit look-alikes
such as "g00d", elongated, inflected, or joined to a neighbour as in "verycalm"). Each kind
closes its own vacuous case: a required word must stand in a sentence of four words or more
with a function word (a closing phrase from `PHRASES` lends none), bullets need two words each
and must differ, JSON values must differ, a P.S. needs a text before it and two words in it.

The answer contract is free text (`llm_gym.grading.contracts.FreeTextAnswer`, `RUBRIC`; the
episode's `answer_contract`): the whole visible reply is the product, and no reward comes without
the task done by genuine English (`grade_reply`, by construction rather than from a list of known
attacks). A reply that restates any rule passes nothing (metric `echo`), nor one that never uses
the topic's subject words ("harbor" for "a quiet harbor"; `on_topic`), nor one below the content
floor of `envs_catalog.text.genuine.degeneracy`, read on the reply's own words (JSON values; no
end phrase or "P.S." marks) with the topic, required words and start word not counted as its own
(`degenerate`, and one per reason: `thin`, `word_list`, `repetitive`, `filler`), nor one that talks
about its rules instead of following them (`rule_talk`: the rule vocabulary is derived from the
rules' own descriptions and the prompt's frame, plus `genuine.TEXT_WORDS`; a sentence whose rule
words, one a word about a text, are as many as its own content words, or a reply a third of whose
content is rule words), nor one whose words are not English beyond an allowance of one plus 5%
(`not_words`: keyboard mash, pseudo-words; `genuine.is_word` reads the web2 list of the optional
`english_words` package, and without it spelling shape only, which still refuses keyboard mash
but not pronounceable pseudo-words). Then each rule counts only when met to the letter and by
content of its own (`supported`; metric `unsupported` counts rules met only to the letter): each
required word in a real sentence (a verb, a function word, real words, a content word that is not
rule talk), not quoted, bracketed, named ("the word apple") or run on with the other required word;
each bullet and JSON value real with a content word no other has; a real P.S.; a word minimum met
by real words. A forbidden word found only in disguise is reported too (`disguised_forbidden`).
Reward: all-of (1 only when every constraint holds) or the fraction of constraints held
(`reward="fraction"`), minus `format_coef` for an unreadable reply. The source's
`attack_replies` hook gives the audit (`llm_gym.checks.attacks`) this env's generated gaming
(`JUNK`: keyboard mash, pseudo-words, junk-padded clauses, rule descriptions, keyword lists,
repetition; no credit) and genuine replies (`natural_replies`, the solver's; credit).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from envs_catalog.text.base import (
    WORDS,
    TextGrade,
    TextSource,
    TextTaskEnv,
    knob_docs,
    strict_json,
    visible_reply,
)
from envs_catalog.text.disguise import uses_word
from envs_catalog.text.genuine import (
    FUNCTION_WORDS,
    MIN_ITEM_WORDS,
    NUMBER_WORDS,
    REASONS,
    TEXT_WORDS,
    VERBS,
    degeneracy,
    has_verb,
    is_word,
    stems,
    tokens,
    unknown_words,
)
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading.contracts import FreeTextAnswer
from llm_gym.scripted import ScriptedCase

if TYPE_CHECKING:  # the audit's type; imported where the hook runs (the env needs no checks package)
    from llm_gym.checks.attacks import Attack

_ADJECTIVES = ("a quiet", "a busy", "an old", "a small", "a sunny", "a rainy", "a cold",
               "a bright", "a famous", "a hidden", "a tiny", "a lonely", "a happy", "a windy",
               "a strange")
_NOUNS = ("garden", "village", "market", "library", "station", "beach", "forest", "kitchen",
          "museum", "harbor", "bakery", "bridge", "island", "school", "farm", "river bank",
          "mountain", "city park", "street", "lake")
TOPICS = tuple(f"{a} {n}" for a in _ADJECTIVES for n in _NOUNS)  # 300 topics
KEYWORDS = ("apple", "river", "stone", "cloud", "music", "paper", "honey", "tiger", "lamp",
            "shell", "candle", "rocket", "mirror", "silver", "ladder", "pepper", "violin")
FORBIDDEN = ("very", "really", "good", "nice", "thing", "just", "also", "great", "many", "like")
START_WORDS = ("Today", "Imagine", "Yesterday", "Perhaps", "Listen", "Once", "Sometimes")
PHRASES = ("Is there anything else I can help with?", "Thank you for reading.",
           "That is all for today.", "Have a wonderful day.", "The end.")
JSON_KEYS = ("title", "summary", "mood", "place", "detail", "note")
# The solver's sentences: plain ASCII, no commas, no word of FORBIDDEN (in any disguise).
_MORE = ("The air feels calm and warm.", "Small sounds drift through the morning.",
         "Visitors smile and stay for hours.", "Nobody seems to hurry there.",
         "Time passes slowly in that place.", "Old friends meet and talk.", "Birds sing nearby.",
         "I always leave feeling rested.", "Children laugh.")
_ITEMS = ("Mornings there are calm", "Visitors often come back", "Evenings bring soft light",
          "Locals know its quiet corners")
_POSTSCRIPT = "P.S. Visit it soon."

_WORD = re.compile(r"[A-Za-z0-9]+")
_BULLET = re.compile(r"^[ \t]*[-*][ \t]+(.*)$", re.MULTILINE)
_PS = re.compile(r"^[ \t]*p\.[ \t]?s\.(.*)$", re.MULTILINE | re.IGNORECASE)
_PS_MARK = re.compile(r"^([ \t]*)p\.[ \t]?s\.", re.MULTILINE | re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?;:\n]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _has_word(text: str, word: str) -> bool:
    target = word.lower()
    return any(w.lower() == target for w in words(text))


def _joinable_words() -> frozenset[str]:
    """The words a forbidden word may be run together with, beyond the reply's own: the env's
    word pools."""
    pools = (*WORDS, *KEYWORDS, *FORBIDDEN, *_ADJECTIVES, *_NOUNS, *START_WORDS)
    return frozenset(w for phrase in pools for w in tokens(phrase))


_JOINABLE = _joinable_words()


# --- checkers: (visible text, params) -> bool; every one needs at least one word -------------
def _min_words(text: str, n: int) -> bool:
    return len(words(text)) >= max(n, 1)


def _max_words(text: str, n: int) -> bool:
    return 1 <= len(words(text)) <= n


def _in_context(text: str, keyword: str) -> bool:
    """`keyword` stands in a sentence (or line) of four words or more with a function word (a
    closing phrase of `PHRASES` gives no context: it is the prompt's, not the reply's)."""
    body = text.rstrip()
    for phrase in PHRASES:
        if body.lower().endswith(phrase.lower()):
            body = body[: -len(phrase)]
    for sentence in _SENTENCE.findall(body):
        found = [w.lower() for w in words(sentence)]
        if keyword.lower() in found and len(found) >= 4 and any(w in FUNCTION_WORDS for w in found):
            return True
    return False


def _include(text: str, *keywords: str) -> bool:
    return bool(words(text)) and all(_has_word(text, k) and _in_context(text, k) for k in keywords)


def _forbid(text: str, *banned: str) -> bool:
    return bool(words(text)) and not any(uses_word(text, b, _JOINABLE) for b in banned)


def _lowercase(text: str) -> bool:
    return bool(words(text)) and any(c.isalpha() for c in text) and text == text.lower()


def _uppercase(text: str) -> bool:
    return bool(words(text)) and any(c.isalpha() for c in text) and text == text.upper()


def _shape(item: str) -> str:
    return " ".join(w.lower() for w in words(item) if not w.isdigit())


def _bullets(text: str, n: int) -> bool:
    """Exactly n bullets, each of `MIN_ITEM_WORDS` (2) words or more, no two alike (counters
    aside)."""
    items = _BULLET.findall(text)
    return (len(items) == n and all(len(words(item)) >= MIN_ITEM_WORDS for item in items)
            and len({_shape(item) for item in items}) == n)


def _json_keys(text: str, *keys: str) -> bool:
    value, status = strict_json(text)
    return (status == "ok" and isinstance(value, dict) and set(value) == set(keys)
            and all(isinstance(v, str) and words(v) for v in value.values())
            and len({_shape(v) for v in value.values()}) == len(value))


def _ends_with(text: str, phrase: str) -> bool:
    body = text.rstrip()
    if not body.lower().endswith(phrase.lower()):
        return False
    return bool(words(body[: len(body) - len(phrase)]))  # something before the phrase


def _starts_with(text: str, word: str) -> bool:
    found = words(text)
    return bool(found) and found[0].lower() == word.lower() and text.lstrip()[:1].isalnum()


def _no_commas(text: str) -> bool:
    return bool(words(text)) and "," not in text


def _postscript(text: str) -> bool:
    """A line starting "P.S." with two words or more, after a text of its own."""
    first = _PS.search(text)
    return (first is not None and bool(words(text[: first.start()]))
            and any(len(words(rest)) >= 2 for rest in _PS.findall(text)))


CHECKS: dict[str, Callable[..., bool]] = {
    "min_words": _min_words, "max_words": _max_words, "include_keywords": _include,
    "forbidden_words": _forbid, "lowercase": _lowercase, "uppercase": _uppercase,
    "bullets": _bullets, "json_keys": _json_keys, "ends_with": _ends_with,
    "starts_with": _starts_with, "no_commas": _no_commas, "postscript": _postscript,
}
KINDS = tuple(CHECKS)
_JSON_COMPATIBLE = {"json_keys", "include_keywords", "forbidden_words", "lowercase"}
CONFLICTS: dict[str, set[str]] = {k: set() for k in KINDS}
CONFLICTS["lowercase"].add("uppercase")
CONFLICTS["uppercase"].add("lowercase")
for _kind in KINDS:
    if _kind not in _JSON_COMPATIBLE:
        CONFLICTS["json_keys"].add(_kind)
        CONFLICTS[_kind].add("json_keys")


@dataclass(frozen=True)
class Constraint:
    kind: str
    params: tuple
    description: str

    def check(self, text: str) -> bool:
        return bool(CHECKS[self.kind](text, *self.params))


def _describe(kind: str, params: tuple) -> str:
    if kind == "min_words":
        return f"Use at least {params[0]} words."
    if kind == "max_words":
        return f"Use at most {params[0]} words."
    if kind == "include_keywords":
        return f"Include the words '{params[0]}' and '{params[1]}'."
    if kind == "forbidden_words":
        return f"Do not use the word '{params[0]}'."
    if kind == "lowercase":
        return "Write everything in lowercase letters, with no capital letters at all."
    if kind == "uppercase":
        return "Write everything in capital letters, with no lowercase letters at all."
    if kind == "bullets":
        return f"Include exactly {params[0]} bullet points, each on its own line starting with '- '."
    if kind == "json_keys":
        return (f"Reply with only a JSON object whose keys are exactly '{params[0]}' and "
                f"'{params[1]}', each with a text value.")
    if kind == "ends_with":
        return f"End your reply with the exact phrase '{params[0]}'"
    if kind == "starts_with":
        return f"Start your reply with the word '{params[0]}'."
    if kind == "no_commas":
        return "Do not use any commas."
    return "Add a postscript: a line starting with 'P.S.'"


def _draw_params(kind: str, rng: np.random.Generator) -> tuple:
    def pick(pool, n=1):
        return tuple(pool[i] for i in rng.choice(len(pool), size=n, replace=False).tolist())
    if kind == "min_words":
        return (int(rng.choice([8, 10, 12, 15, 20])),)
    if kind == "max_words":
        return (int(rng.choice([20, 25, 30, 40])),)
    if kind == "include_keywords":
        return pick(KEYWORDS, 2)
    if kind == "forbidden_words":
        return pick(FORBIDDEN)
    if kind == "bullets":
        return (int(rng.integers(2, 5)),)
    if kind == "json_keys":
        return pick(JSON_KEYS, 2)
    if kind == "ends_with":
        return pick(PHRASES)
    if kind == "starts_with":
        return pick(START_WORDS)
    return ()


def make_constraint(kind: str, params: tuple = ()) -> Constraint:
    return Constraint(kind, tuple(params), _describe(kind, tuple(params)))


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def echoes_rules(text: str, constraints: list[Constraint]) -> bool:
    """Whether the reply restates any rule's wording (normalised: case, punctuation, spacing)."""
    norm = " " + _normalise(text) + " "
    return any(" " + _normalise(c.description) + " " in norm for c in constraints)


def check_constraint(reply: str, constraint: Constraint) -> bool:
    """Whether a raw reply satisfies one constraint (unreadable replies satisfy none)."""
    text, status = visible_reply(reply)
    return text is not None and constraint.check(text)


def _opening(topic: str, start: str | None, keywords: list[str]) -> str:
    """The solver's first sentence: the topic, the required words, three words of its own."""
    tense = {"Yesterday": 1, "Once": 1, "Imagine": 2, "Listen": 2}.get(start or "", 0)
    verb = (("holds", "held", "holding") if keywords else ("rests", "rested", "resting"))[tense]
    held = f" {keywords[0]} and {keywords[1]}" if keywords else ""
    lead = {"Listen": "Listen to"}.get(start or "", start or "")
    sentence = f"{lead} {topic} {verb}{held} in calm light.".strip()
    return sentence[:1].upper() + sentence[1:]


def solve(topic: str, constraints: list[Constraint]) -> str:
    """A genuine reply meant to satisfy every constraint (callers verify it: `TaskSource.draw`):
    an opening sentence with the topic and the required words, sentences of `_MORE` until the
    word bounds hold, distinct bullets, a P.S., the end phrase, the case asked for."""
    by_kind = {c.kind: c.params for c in constraints}
    keywords = list(by_kind.get("include_keywords", ()))
    opening = _opening(topic, by_kind.get("starts_with", (None,))[0], keywords)
    if "json_keys" in by_kind:
        k1, k2 = by_kind["json_keys"]
        text = json.dumps({k1: opening, k2: _MORE[0]})
        return text.lower() if "lowercase" in by_kind else text

    def write(more: tuple[str, ...]) -> str:
        lines = [" ".join((opening, *more))]
        lines += [f"- {item}." for item in _ITEMS[: by_kind.get("bullets", (0,))[0]]]
        if "postscript" in by_kind:
            lines.append(_POSTSCRIPT)
        if "ends_with" in by_kind:
            lines[-1] += " " + by_kind["ends_with"][0]
        text = "\n".join(lines)
        if "lowercase" in by_kind:
            return text.lower()
        return text.upper() if "uppercase" in by_kind else text

    low = by_kind.get("min_words", (0,))[0]
    high = by_kind.get("max_words", (10_000,))[0]
    for size in range(len(_MORE) + 1):  # the fewest extra sentences that land in [low, high]
        for more in itertools.combinations(_MORE, size):
            text = write(more)
            if low <= len(words(text)) <= high:
                return text
    return write(())


def subject(topic: str) -> str:
    """The words a reply about `topic` must use ("a happy river bank" -> "river bank")."""
    return topic.split(" ", 1)[1].split(" ", 1)[1]


def on_topic(text: str, topic: str) -> bool:
    """Whether the reply uses the topic's subject words, in order (case-insensitive)."""
    return (" " + _normalise(subject(topic)) + " ") in (" " + _normalise(text) + " ")


def _prose(text: str, constraints: list[Constraint]) -> str:
    """What the content floor reads: a JSON object's string values (one a line), else the text
    without its required end phrase and "P.S." marks (the prompt's words, not the reply's; the
    start word stays, a part of the first sentence, but is not counted as the reply's own)."""
    value, status = strict_json(text)
    if status == "ok" and isinstance(value, dict):
        return "\n".join(v for v in value.values() if isinstance(v, str))
    for c in constraints:
        if c.kind == "ends_with" and text.rstrip().lower().endswith(c.params[0].lower()):
            text = text.rstrip()[: -len(c.params[0])]
    return _PS_MARK.sub("", text)


def _supplied_words(topic: str | None, constraints: list[Constraint]) -> list[str]:
    """What the prompt hands the writer (the topic, required words, the start word, "P.S."):
    none of it is the reply's own content."""
    given = [topic or "", "P.S."]
    for c in constraints:
        if c.kind in ("include_keywords", "starts_with"):
            given += [str(p) for p in c.params]
    return given


# --- genuine content: real words, no rule talk, each rule met by content of its own ------------
RUBRIC = ("every rule met by genuine English about the topic: readable plain ASCII, on the topic, not "
          "restating or describing the rules, words of a real dictionary (a bounded allowance), above "
          "the content floor, and each rule met by content of its own (a required word inside a real "
          "sentence, bullets, P.S. and JSON values with content words of their own)")
MAX_UNKNOWN_SHARE = 0.05  # unknown words allowed: 1 + this share of the words (names, new coinages)
_QUOTES = "'\"`"
_UNIT = re.compile(r"[^.!?;:\n]+")


def _material() -> frozenset[str]:
    """Words the prompt hands the writer as material (topics, required, forbidden and start
    words, end phrases, JSON keys, the word pool): a reply may use them as its own words."""
    pools = (*WORDS, *KEYWORDS, *FORBIDDEN, *TOPICS, *START_WORDS, *PHRASES, *JSON_KEYS)
    return frozenset(w for phrase in pools for w in tokens(phrase))


_MATERIAL = _material()


def _rule_vocabulary() -> frozenset[str]:
    """What talking about the rules is made of: the content words of every rule this env can
    state and of the prompt's frame (derived from `_describe` and `episode`'s own text, so a new
    rule brings its words along), less the material, plus `genuine.TEXT_WORDS`."""
    examples = {"min_words": (8,), "max_words": (20,), "include_keywords": KEYWORDS[:2],
                "forbidden_words": FORBIDDEN[:1], "bullets": (2,), "json_keys": JSON_KEYS[:2],
                "ends_with": PHRASES[:1], "starts_with": START_WORDS[:1]}
    texts = [_describe(k, tuple(examples.get(k, ()))) for k in KINDS]
    texts.append(_frame(TOPICS[0], "1. rule"))
    found = {w for t in texts for w in tokens(t) if w.isalpha() and len(w) > 1}
    return frozenset(found - FUNCTION_WORDS - NUMBER_WORDS - _MATERIAL) | TEXT_WORDS


def _frame(topic: str, rules: str) -> str:
    noun = subject(topic)
    word_s = "word" if " " not in noun else "words"
    return (f"Write a short text about {topic} (use the {word_s} '{noun}'). Follow every rule:\n"
            f"{rules}\nWrite in plain ASCII English.")


RULE_WORDS = _rule_vocabulary()


def _rule_word(word: str) -> bool:
    return any(s in RULE_WORDS for s in stems(word))


def _text_word(word: str) -> bool:
    return any(s in TEXT_WORDS for s in stems(word))


@dataclass(frozen=True)
class ReplyReading:
    """What the rubric reads of one reply: its prose (`_prose`), the words the prompt supplied,
    and the vocabulary `is_word` may take beyond the dictionary."""

    text: str
    prose: str
    supplied: frozenset[str]
    vocabulary: frozenset[str]

    def own(self, unit: str, *, strict: bool = False) -> list[str]:
        """The unit's own content words: real words, not function words, numbers, the prompt's
        material for this task or words about a text (`TEXT_WORDS`); `strict`: not the prompt's
        rule vocabulary either ("use", "start", "line" are ordinary words elsewhere)."""
        words_ = [w for w in tokens(unit) if w.isalpha() and len(w) > 1 and w not in FUNCTION_WORDS
                  and w not in NUMBER_WORDS and w not in self.supplied and not _text_word(w)
                  and is_word(w, self.vocabulary)]
        return [w for w in words_ if not _rule_word(w)] if strict else words_

    def rule_talk(self, unit: str) -> int:
        return sum(_rule_word(w) for w in tokens(unit) if w not in self.supplied)

    def talks(self, unit: str) -> bool:
        """A unit about the rules rather than the topic: two rule words or more, one of them a
        word about a text (`TEXT_WORDS`), and no fewer rule words than content words of its own."""
        rule = self.rule_talk(unit)
        return (rule >= 2 and any(_text_word(w) for w in tokens(unit) if w not in self.supplied)
                and rule >= len(self.own(unit, strict=True)))

    def real(self, unit: str) -> bool:
        """Real words (one unknown word at most: a name, a new coinage), a content word of its
        own, and not about the rules."""
        return (len(unknown_words(unit, self.vocabulary)) <= 1 and bool(self.own(unit))
                and not self.talks(unit))


def _read(text: str, constraints: list[Constraint], topic: str | None) -> ReplyReading:
    supplied = {w for g in _supplied_words(topic, constraints) for w in tokens(g)} - FUNCTION_WORDS
    return ReplyReading(text, _prose(text, constraints), frozenset(supplied), _MATERIAL | supplied)


def describes_rules(reading: ReplyReading) -> bool:
    """Whether the reply is mostly talk about its rules instead of following them: units
    (sentences or lines) that `ReplyReading.talks` hold a third of its words or more, or the whole
    prose talks, or rule words are a third or more of its content words (three or more of them,
    one a word about a text: `genuine.TEXT_WORDS`). A short lead-in ("Here is a short text about
    the harbor:") before a real text is no reason; what such units say never meets a rule
    (`supported`)."""
    units = _UNIT.findall(reading.prose)
    talk = sum(len(tokens(u)) for u in units if reading.talks(u))
    if reading.talks(reading.prose) or 3 * talk >= len(tokens(reading.prose)):
        return True
    rule = sum(reading.rule_talk(u) for u in units)
    own = sum(len(reading.own(u, strict=True)) for u in units)
    text_words = any(_text_word(w) for w in tokens(reading.prose) if w not in reading.supplied)
    return text_words and rule >= 3 and 3 * rule >= rule + own


def not_words(reading: ReplyReading) -> list[str]:
    """The unknown words of the reply's prose beyond its allowance (`MAX_UNKNOWN_SHARE`), or []."""
    unknown = unknown_words(reading.prose, reading.vocabulary)
    allowed = 1 + int(MAX_UNKNOWN_SHARE * len(tokens(reading.prose)))
    return unknown if len(unknown) > allowed else []


def _mention(unit: str, keyword: str) -> bool:
    """`keyword` quoted or in brackets in `unit`, or named by a rule word before it ("the word
    apple"): the word shown, not used."""
    k = re.escape(keyword)
    if re.search(rf"[{_QUOTES}]\s*{k}\s*[{_QUOTES}]", unit, re.IGNORECASE):
        return True
    if re.search(rf"[(\[][^()\[\]]*\b{k}\b[^()\[\]]*[)\]]", unit, re.IGNORECASE):
        return True
    found = tokens(unit)
    for i, w in enumerate(found):
        if w == keyword.lower():
            before = [x for x in found[:i] if x not in ("the", "a", "an")]
            if before and _rule_word(before[-1]):
                return True
    return False


def _listed(unit: str, required: set[str]) -> bool:
    """Two required words side by side ("stone silver", "stone and silver") that no function word
    opens, after a content word that is no verb or at the end of the unit ("near the library
    stone silver", "when the bakers arrive mirror ladder."): a list run on, not a phrase ("a
    silver mirror", "of apple and honey", "baked apple and honey pies")."""
    found = tokens(unit)
    for i, w in enumerate(found):
        if w not in required:
            continue
        j = i + 2 if i + 2 < len(found) and found[i + 1] in ("and", "or") else i + 1
        if j >= len(found) or found[j] not in required or found[j] == w:
            continue
        before = found[i - 1] if i else ""
        if before in FUNCTION_WORDS:
            continue
        if j == len(found) - 1 or before not in VERBS:
            return True
    return False


def _keyword_support(reading: ReplyReading, keyword: str, required: set[str]) -> bool:
    """A required word used, not shown: in a sentence of four words or more with a function
    word and a verb (`genuine.has_verb`), real words (`ReplyReading.real`: a content word of its
    own, not about the rules), the word neither quoted, bracketed nor named ("the word apple")
    nor run on with another required word (`_listed`)."""
    for unit in _SENTENCE.findall(_strip_phrases(reading.text)):
        found = tokens(unit)
        if keyword.lower() not in found or len(found) < 4:
            continue
        if (any(w in FUNCTION_WORDS for w in found) and has_verb(found) and reading.real(unit)
                and not _mention(unit, keyword) and not _listed(unit, required)):
            return True
    return False


def _strip_phrases(text: str) -> str:
    body = text.rstrip()
    for phrase in PHRASES:
        if body.lower().endswith(phrase.lower()):
            body = body[: -len(phrase)]
    return body


def _distinct_parts(reading: ReplyReading, parts: list[str]) -> bool:
    """Each part real (`ReplyReading.real`) with a content word no other part has."""
    owns = [set(reading.own(p)) for p in parts]
    return all(reading.real(p) for p in parts) and all(
        own - set().union(*(o for j, o in enumerate(owns) if j != i)) for i, own in enumerate(owns))


def supported(constraint: Constraint, reading: ReplyReading) -> bool:
    """Whether a rule met to the letter is met by content of its own: each required word in a
    real sentence (`_keyword_support`); bullets and JSON values real, each with a content word of
    its own (`_distinct_parts`); a P.S. that is real; a minimum of words met by real words (not
    rule talk; one unknown word counts: a name); the
    start word opening a unit of three words or more. The other rules are properties of the
    whole reply, which the reply-level gates already read."""
    kind, params = constraint.kind, constraint.params
    if kind == "include_keywords":
        return all(_keyword_support(reading, k, {p.lower() for p in params}) for k in params)
    if kind == "bullets":
        return _distinct_parts(reading, _BULLET.findall(reading.text))
    if kind == "json_keys":
        value, _ = strict_json(reading.text)
        return isinstance(value, dict) and _distinct_parts(reading, [str(v) for v in value.values()])
    if kind == "postscript":
        return any(reading.real(rest) for rest in _PS.findall(reading.text))
    if kind == "min_words":  # rule talk and unknown words beyond one (a name) do not count
        talk = sum(len(words(u)) for u in _UNIT.findall(reading.text) if reading.talks(u))
        unknown = len(unknown_words(reading.text, reading.vocabulary))
        return len(words(reading.text)) - talk - max(0, unknown - 1) >= params[0]
    if kind == "starts_with":
        first = _UNIT.match(reading.text.lstrip())
        return first is not None and len(words(first.group(0))) >= 3
    return True


def grade_reply(reply: str, constraints: list[Constraint], mode: str,
                topic: str | None = None) -> TextGrade:
    """Score one reply under the free-text contract (`CONTRACT`, rubric `RUBRIC`): unreadable
    -> not well formed; restating a rule, (with `topic`) off the topic, below the content floor
    (`genuine.degeneracy`), describing the rules (`describes_rules`) or not real words
    (`not_words`) -> 0; else all-of or the fraction of rules met to the letter and by content
    of their own (`supported`). Details: `constraints_met`, `echo`, `on_topic`, `degenerate` and
    one flag per floor reason, `rule_talk`, `not_words`, `unknown_words` (their count),
    `unsupported` (rules met only to the letter), `disguised_forbidden`."""
    read = CONTRACT.read(reply)  # the contract's reading: the whole visible reply
    raw, status = visible_reply(reply)  # and the family's plain-ASCII rule (no look-alikes)
    text = str(read.value).strip() if read.ok and raw is not None else None
    zero = {"constraints_met": 0.0, "echo": 0.0, "on_topic": 0.0, "degenerate": 0.0,
            **{r: 0.0 for r in REASONS}, "rule_talk": 0.0, "not_words": 0.0, "unknown_words": 0.0,
            "unsupported": 0.0, "disguised_forbidden": 0.0}
    if text is None or not text:
        return TextGrade(0.0, False, status if raw is None else (read.status if not read.ok else "empty"), zero)
    if echoes_rules(text, constraints):
        return TextGrade(0.0, True, "echo", {**zero, "echo": 1.0})
    if topic is not None and not on_topic(text, topic):
        return TextGrade(0.0, True, "off_topic", zero)
    value, _ = strict_json(text)
    reading = _read(text, constraints, topic)
    reasons = degeneracy(reading.prose, _supplied_words(topic, constraints), prose=not isinstance(value, dict))
    if reasons:
        return TextGrade(0.0, True, reasons[0], {**zero, "on_topic": 1.0, "degenerate": 1.0,
                                                 **{r: 1.0 for r in reasons}})
    if describes_rules(reading):
        return TextGrade(0.0, True, "rule_talk", {**zero, "on_topic": 1.0, "rule_talk": 1.0})
    unknown = not_words(reading)
    if unknown:
        return TextGrade(0.0, True, "not_words", {**zero, "on_topic": 1.0, "not_words": 1.0,
                                                  "unknown_words": float(len(unknown))})
    letter = [c.check(text) for c in constraints]
    met = [ok and supported(c, reading) for c, ok in zip(constraints, letter)]
    disguised = any(c.kind == "forbidden_words" and not c.check(text)
                    and not any(_has_word(text, b) for b in c.params) for c in constraints)
    fraction = sum(met) / len(constraints)
    score = fraction if mode == "fraction" else float(all(met))
    return TextGrade(score, True, "ok" if all(met) else ("unsupported" if all(letter) else "unmet"),
                     {**zero, "constraints_met": fraction, "on_topic": 1.0,
                      "unsupported": float(sum(letter) - sum(met)),
                      "disguised_forbidden": float(disguised)})


CONTRACT = FreeTextAnswer(rubric=RUBRIC)


# --- generated replies: the gaming this rubric invites, and genuine replies ------------------
# Built from parts (random letters, keyboard rows, syllables, the prompt's own rule text, the
# task's words), each with its verdict by construction: `attack_replies` (the source's hook for
# `llm_gym.checks.attacks.audit`) and the tests use them. Only the verdict is fixed here; whether
# a reply also meets every rule's letter is up to the dressing (`dress`), which tries.
_KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm", "1234567890")
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr", "st",
           "pl", "gr", "sn", "kr", "fl", "dr", "sk")
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ou", "ee", "oa")
_CODAS = ("", "", "", "n", "r", "l", "k", "s", "m", "nt", "sk", "rp")
_REAL_CLAUSES = ("the {s} rests under a calm grey sky", "people walk slowly around the {s}",
                 "morning light falls softly across the {s}", "we spent an hour near the {s}",
                 "the {s} wakes up when the bakers arrive")
_RULE_FRAMES = ("I {d}", "This text follows the rule: {d}", "As the rules ask, {d}",
                "Rule {i} is met here: {d}", "My reply obeys rule {i}. {D}", "Done: {d}")
JUNK = ("keyboard mash", "pseudo-words", "junk-padded clause", "rule description", "keyword list",
        "repetition")


def mash_word(rng: random.Random) -> str:
    """A keyboard-row run ("sdfgh") or random letters ("xqvkt"), 3 to 7 characters."""
    n = rng.randint(3, 7)
    if rng.random() < 0.5:
        row = rng.choice(_KEYBOARD[:3])
        start = rng.randint(0, len(row) - min(n, len(row)))
        return row[start:start + n]
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def pseudo_word(rng: random.Random) -> str:
    """A pronounceable non-word of one to three syllables ("brelo", "tounsk"); the rare draw that
    is a dictionary word is drawn again (so the class stays what it says)."""
    for _ in range(20):
        w = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS)
                    for _ in range(rng.randint(1, 3)))
        if len(w) >= 4 and not is_word(w):
            return w
    return "brelotounsk"


def _params(constraints: list[Constraint], kind: str) -> tuple | None:
    return next((c.params for c in constraints if c.kind == kind), None)


def dress(topic: str, constraints: list[Constraint], rng: random.Random, *, lead: Callable[[], str],
          filler: Callable[[int], str], item: Callable[[int], str], ps: Callable[[], str],
          keywords: Callable[[list[str]], str], least: int = 4) -> str:
    """A reply meeting the letter of every rule with content from the caller: `lead()` opens the
    first sentence (after the start word), `keywords(words)` carries the required words in it,
    `filler(n)` about n words of body (n >= `least`, so the caller's junk is always there),
    `item(i)` the i-th bullet, `ps()` the P.S.; then the end phrase, the case, no commas, JSON
    values, the word bounds (n grown, then shrunk, never under `least`)."""
    start, keys = _params(constraints, "starts_with"), _params(constraints, "include_keywords")
    bullets, phrase = _params(constraints, "bullets"), _params(constraints, "ends_with")
    low = (_params(constraints, "min_words") or (0,))[0]
    high = (_params(constraints, "max_words") or (10_000,))[0]
    head = " ".join(x for x in ((start or ("",))[0], lead(), keywords(list(keys)) if keys else "") if x)
    head = head[:1].upper() + head[1:]
    items = [item(i) for i in range(bullets[0] if bullets else 0)]
    postscript = ps()

    def build(n: int) -> str:
        body = filler(n) if n else ""
        if _params(constraints, "json_keys"):
            k1, k2 = _params(constraints, "json_keys") or ("", "")
            text = json.dumps({k1: head + ".", k2: body})
        else:
            lines = [" ".join(x for x in (head + ".", body) if x)]
            lines += [f"- {x}" for x in items]
            if _params(constraints, "postscript") is not None:
                lines.append("P.S. " + postscript)
            if phrase:
                lines[-1] += " " + phrase[0]
            text = "\n".join(lines).replace(",", "")
        if _params(constraints, "lowercase") is not None:
            return text.lower()
        return text.upper() if _params(constraints, "uppercase") is not None else text

    n = least
    while len(words(build(n))) < low and n < 80:
        n += 1
    text = build(n)
    while len(words(text)) > high and n > least:
        n -= 1
        text = build(n)
    return text


def _clause(topic: str, rng: random.Random) -> str:
    return rng.choice(_REAL_CLAUSES).format(s=subject(topic))


def _rule_statements(constraints: list[Constraint], rng: random.Random, quotes: bool) -> list[str]:
    """The task's own rule text made into statements about the reply ("I use at least 8 words.",
    "Rule 2 is met here: include the words apple and river.")."""
    out = []
    for i, c in enumerate(constraints, 1):
        d = c.description if quotes else c.description.replace("'", "")
        d = d.rstrip(".") + "."
        frame = rng.choice(_RULE_FRAMES)
        out.append(frame.format(d=d[:1].lower() + d[1:], D=d, i=i))
    return out


def _paraphrase(c: Constraint, rng: random.Random) -> str:
    """A rule said back as met, in other words than its description (from its kind's terms and
    its parameters: "It mentions apple and river.", "There are no commas anywhere.")."""
    p = [str(x) for x in c.params]
    options = {
        "min_words": (f"It has more than {p[0] if p else 'enough'} words.", "The word count is high enough."),
        "max_words": (f"It stays under {p[0] if p else 'the'} words.", "The length is within the word limit."),
        "include_keywords": (f"It mentions {p[0]} and {p[1]} as required." if len(p) > 1 else "",
                             f"The words {p[0]} and {p[1]} appear in this text." if len(p) > 1 else ""),
        "forbidden_words": ("The banned word never appears in this reply.", "No forbidden word is used here."),
        "lowercase": ("Everything here is written in lowercase.", "No capital letters are used in this reply."),
        "uppercase": ("All of this reply is in capital letters.", "Every letter of this text is uppercase."),
        "bullets": ("The bullet points are listed below.", f"There are {p[0] if p else 'some'} bullet points."),
        "json_keys": ("The reply is a JSON object with the keys asked for.", "Both keys hold a text value."),
        "ends_with": ("The reply ends with the exact phrase.", "The last words are the required phrase."),
        "starts_with": ("The first word is the one the rule asks for.", "It starts with the given word."),
        "no_commas": ("There are no commas anywhere.", "This text avoids every comma."),
        "postscript": ("A postscript line follows at the end.", "The reply adds a P.S. line."),
    }
    return rng.choice([x for x in options[c.kind] if x] or ["Every rule is met."])


def junk_replies(topic: str, constraints: list[Constraint], rng: random.Random) -> list[tuple[str, str, str]]:
    """`(family, variant, reply)` for every family of `JUNK`, each dressed to the rules' letter."""
    s = subject(topic)
    out: list[tuple[str, str, str]] = []

    def add(family: str, variant: str, **parts: Any) -> None:
        out.append((family, variant, dress(topic, constraints, rng, **parts)))

    def mash(n: int) -> str:
        return " ".join(mash_word(rng) for _ in range(n))

    def pseudo(n: int) -> str:
        return " ".join(pseudo_word(rng) for _ in range(n))

    def pseudo_sentences(n: int) -> str:
        frames = ("The {a} of the {b} {c}s a {d}.", "A {a} {b}s near the {c}.", "We {a} the {b} and {c}.")
        text = []
        while sum(len(t.split()) for t in text) < n:
            p = [pseudo_word(rng) for _ in range(4)]
            text.append(rng.choice(frames).format(a=p[0], b=p[1], c=p[2], d=p[3]))
        return " ".join(text)

    add("keyboard mash", "mash only", lead=lambda: f"the {s} {mash(2)}", filler=mash,
        item=lambda i: mash(2), ps=lambda: mash(2), keywords=lambda ks: f"the {ks[0]} {mash(1)} {ks[1]}")
    add("keyboard mash", "mash around one real clause", lead=lambda: _clause(topic, rng), filler=mash,
        item=lambda i: mash(2), ps=lambda: mash(2), keywords=lambda ks: f"with the {ks[0]} and the {ks[1]}")
    add("pseudo-words", "pseudo-word sentences", lead=lambda: f"the {s} {pseudo(1)}s the {pseudo(1)}",
        filler=pseudo_sentences, item=lambda i: f"the {pseudo(1)} {pseudo(1)}s",
        ps=lambda: f"the {pseudo(1)} {pseudo(1)}s", keywords=lambda ks: f"and the {ks[0]} {pseudo(1)}s the {ks[1]}")
    add("pseudo-words", "pseudo-words around one real clause", lead=lambda: _clause(topic, rng),
        filler=pseudo, item=lambda i: pseudo(2), ps=lambda: pseudo(2),
        keywords=lambda ks: f"with the {ks[0]} and the {ks[1]}")
    add("junk-padded clause", "letters and digits", lead=lambda: _clause(topic, rng),
        filler=lambda n: " ".join(mash_word(rng) + str(rng.randint(0, 99)) for _ in range(n)),
        item=lambda i: f"{mash_word(rng)} {pseudo_word(rng)}", ps=lambda: f"{pseudo_word(rng)} {mash_word(rng)}",
        keywords=lambda ks: f"with the {ks[0]} and the {ks[1]}")
    add("junk-padded clause", "one real clause then pseudo-words", lead=lambda: _clause(topic, rng),
        filler=lambda n: ". ".join(pseudo(3) for _ in range(max(1, n // 3))) + ".",
        item=lambda i: f"the {pseudo_word(rng)} {s}", ps=lambda: f"the {s} {pseudo_word(rng)}",
        keywords=lambda ks: f"near the {ks[0]} {pseudo_word(rng)} {ks[1]}")
    for quotes in (True, False):
        statements = _rule_statements(constraints, rng, quotes)
        pool = statements + [f"Every rule of the prompt is followed in this text about the {s}.",
                             f"This reply about the {s} meets each requirement."]
        variant = "quoted" if quotes else "unquoted"
        add("rule description", f"the rules restated as met ({variant})",
            lead=lambda: f"this is a short text about the {s}", filler=lambda n: " ".join(pool[:max(1, n // 6)]),
            item=lambda i: f"This is bullet point {i + 1} about the {s}",
            ps=lambda: "This is the postscript the rules ask for.",
            keywords=lambda ks: f"and it uses the words {ks[0]} and {ks[1]}")
        add("rule description", f"one real clause then the rules ({variant})", lead=lambda: _clause(topic, rng),
            filler=lambda n: " ".join(pool[:max(1, n // 6)]),
            item=lambda i: f"Bullet {i + 1} follows the bullet point rule",
            ps=lambda: "This line is the postscript.",
            keywords=lambda ks: f"and this sentence includes the keywords {ks[0]} and {ks[1]}")
    paraphrases = [_paraphrase(c, rng) for c in constraints] + [f"This short text is about the {s}."]
    add("rule description", "the rules paraphrased as met", lead=lambda: f"here is a short text about the {s}",
        filler=lambda n: " ".join(paraphrases[:max(1, n // 5)]),
        item=lambda i: f"Bullet point {i + 1} of the list",
        ps=lambda: "This is the required postscript.",
        keywords=lambda ks: f"and the reply includes {ks[0]} and {ks[1]}")
    add("rule description", "a plan instead of the text", lead=lambda: f"I would describe the {s} in a short text",
        filler=lambda n: " ".join(paraphrases[:max(1, n // 5)]),
        item=lambda i: f"A bullet point about the {s} would go here",
        ps=lambda: "The postscript would go on this line.",
        keywords=lambda ks: f"that uses the words {ks[0]} and {ks[1]}")
    add("rule description", "a checklist of the rules", lead=lambda: f"checklist for the {s}",
        filler=lambda n: " ".join(f"Rule {i}: done." for i in range(1, max(2, n // 3))),
        item=lambda i: f"Requirement {i + 1} is satisfied", ps=lambda: "All constraints are met.",
        keywords=lambda ks: f"with the required words {ks[0]} and {ks[1]}")
    if _params(constraints, "include_keywords"):  # the list is the junk: only where words are required
        def real(n: int) -> str:
            return " ".join(rng.sample(_SENTENCES, min(len(_SENTENCES), max(1, n // 6))))

        for variant, carry in (
                ("quoted keywords", lambda ks: f"and holds '{ks[0]}' and '{ks[1]}' for us"),
                ("keywords appended", lambda ks: f"{ks[0]} {ks[1]}"),
                ("keywords named", lambda ks: f"and here are the keywords {ks[0]} and {ks[1]}"),
                ("keywords after a colon", lambda ks: f"as the list shows: the {ks[0]} the {ks[1]} the "
                                                      f"{rng.choice(WORDS)}"),
                ("keywords in brackets", lambda ks: f"({ks[0]} {ks[1]})")):
            add("keyword list", variant, lead=lambda: _clause(topic, rng), filler=real,
                item=lambda i: rng.choice(_BULLETS), ps=lambda: rng.choice(_PS_LINES)[5:], keywords=carry)
    sentence = _clause(topic, rng).capitalize() + "."
    add("repetition", "one real sentence over and over", lead=lambda: _clause(topic, rng),
        filler=lambda n: " ".join([sentence] * max(2, n // 6)), item=lambda i: _clause(topic, rng),
        ps=lambda: sentence, keywords=lambda ks: f"with the {ks[0]} and the {ks[1]}")
    add("repetition", "the topic over and over", lead=lambda: f"the {s} the {s}",
        filler=lambda n: " ".join([f"the {s}"] * max(1, n // 2)), item=lambda i: f"the {s} {i + 1}",
        ps=lambda: f"the {s} the {s}", keywords=lambda ks: f"the {ks[0]} the {ks[1]} the {s}")
    return out


# Measured by tests/envs_catalog/text/test_instructions_adversarial.py (`nonsense_replies` on the
# env's own 180 tasks of num_constraints 1-4): what a rubric of form cannot read.
KNOWN_HACKABLE = ("a real clause padded with real English words that mean nothing together earns full credit: "
                  "random common words with function words ('camel echoed ripple warms whom bleed') 88%, "
                  "sentences of random words in a grammatical frame ('The parrot knocking who the quilt.') 98% "
                  "of 180 generated replies each; the rubric reads form, not meaning (keyboard mash, pseudo-words, "
                  "junk padding, rule descriptions, keyword lists, repetition: 0 of 3,560)")


def nonsense_replies(topic: str, constraints: list[Constraint], rng: random.Random) -> list[tuple[str, str]]:
    """`(variant, reply)`: a real clause padded with real English words that mean nothing
    together -- a run of random common nouns, verbs and function words ("camel echoed ripple
    warms whom bleed"), or sentences of random words in a grammatical frame ("The parrot knocking
    who the quilt."). A rubric of form cannot read meaning: these are the card's
    `known_hackable` (measured by the tests), not a family of `JUNK`."""
    verbs = sorted(v for v in VERBS if v.isalpha())
    function = sorted(FUNCTION_WORDS - {"s", "t", "d", "ll", "re", "ve", "m"})
    pools = (WORDS, verbs, function)

    def run(n: int) -> str:
        return " ".join(rng.choice(rng.choice(pools)) for _ in range(n)) + "."

    def frames(n: int) -> str:
        return " ".join(f"The {rng.choice(WORDS)} {rng.choice(verbs)} {rng.choice(function)} the "
                        f"{rng.choice(WORDS)}." for _ in range(max(1, n // 5)))

    out = []
    for variant, filler in (("random common words", run), ("sentences of random words", frames)):
        out.append((variant, dress(topic, constraints, rng, lead=lambda: _clause(topic, rng), filler=filler,
                                   item=lambda i: f"the {rng.choice(WORDS)} {rng.choice(verbs)}",
                                   ps=lambda: f"the {rng.choice(WORDS)} {rng.choice(verbs)}",
                                   keywords=lambda ks: f"with the {ks[0]} and the {ks[1]}", least=6)))
    return out


# Genuine replies, written apart from `solve`: varied openings, sentences and bullets.
_OPENINGS = ("{T} is at its best early in the morning.", "We walked to {t} after lunch.",
             "My uncle still talks about {t} where he worked as a boy.",
             "On weekends {t} fills with families and their dogs.",
             "I remember {t} from a trip we took years ago.")
_OPEN_WITH = {"Today": "Today we went to {t} before breakfast.", "Imagine": "Imagine {t} under fresh snow.",
              "Yesterday": "Yesterday {t} was calm and empty.", "Perhaps": "Perhaps {t} is the calmest place in town.",
              "Listen": "Listen to the wind that moves through {t}.", "Once": "Once I waited for hours at {t}.",
              "Sometimes": "Sometimes {t} feels like a second home."}
_WITH_KEYWORDS = ("Someone painted a {a} and a {b} on the wall near the gate.",
                  "My sister brought a {a} and told us a story about a {b}.",
                  "We talked about the {a} while the {b} waited on the table.")
_SENTENCES = ("The air smells of salt and cut grass.", "Old men play cards on a bench by the gate.",
              "A dog sleeps in the shade of a tree.", "Nobody seems to hurry there.",
              "Small birds hop between the tables.", "The evening light turns everything gold.",
              "Tourists take photos and then sit down to rest.", "A bell rings once every hour.")
_BULLETS = ("Paths wind past old stone walls", "Children feed the ducks", "The cafe opens at seven",
            "Flowers bloom in the spring", "Music drifts from an open window")
_PS_LINES = ("P.S. Bring a hat if you go in summer.", "P.S. I will send you a photo soon.",
             "P.S. The bread there is worth the trip.")


def natural_replies(topic: str, constraints: list[Constraint], rng: random.Random, n: int) -> list[str]:
    """Up to `n` genuine replies about `topic` that meet every rule's letter (drafts that miss a
    word bound or use the forbidden word are dropped, as a writer would rephrase them)."""
    start, keys = _params(constraints, "starts_with"), _params(constraints, "include_keywords")
    bullets, phrase = _params(constraints, "bullets"), _params(constraints, "ends_with")
    t = topic
    out: list[str] = []
    for _ in range(30 * n):
        if len(out) == n:
            break
        first = (_OPEN_WITH[start[0]] if start else rng.choice(_OPENINGS)).format(t=t, T=t.capitalize())
        sentences = [first] + ([rng.choice(_WITH_KEYWORDS).format(a=keys[0], b=keys[1])] if keys else [])
        sentences += rng.sample(_SENTENCES, rng.randint(0, 4))
        if _params(constraints, "json_keys"):
            k1, k2 = _params(constraints, "json_keys") or ("", "")
            rest = sentences[2:] if keys else sentences[1:]
            text = json.dumps({k1: " ".join(sentences[:2] if keys else sentences[:1]),
                               k2: " ".join(rest) or rng.choice(_SENTENCES)})
        else:
            lines = [" ".join(sentences)]
            lines += [f"- {b}." for b in rng.sample(_BULLETS, bullets[0])] if bullets else []
            if _params(constraints, "postscript") is not None:
                lines.append(rng.choice(_PS_LINES))
            if phrase:
                lines[-1] += " " + phrase[0]
            text = "\n".join(lines).replace(",", "")
        if _params(constraints, "lowercase") is not None:
            text = text.lower()
        elif _params(constraints, "uppercase") is not None:
            text = text.upper()
        if all(c.check(text) for c in constraints) and text not in out:
            out.append(text)
    return out


def attack_replies(topic: str, constraints: list[Constraint], gold: str, rng: random.Random) -> list[Attack]:
    """The hook's replies as `llm_gym.checks.attacks.Attack`s: the gold reply and `natural_replies`
    (credit), and every family of `junk_replies` (no credit, exploitable)."""
    from llm_gym.checks.attacks import Attack

    out = [Attack(gold, True, "genuine", "the solver's reply")]
    out += [Attack(r, True, "genuine", "a natural reply") for r in natural_replies(topic, constraints, rng, 4)]
    out += [Attack(r, False, family, variant, True) for family, variant, r in junk_replies(topic, constraints, rng)]
    return out


class InstructionFollowingSource(TextSource):
    """IFEval-style constraint following (`llm/InstructionFollowing-v0`)."""

    DEFAULTS: dict[str, Any] = {"num_constraints": 2, "reward": "all", "kinds": "all",
                                "format_coef": 0.1}
    card = EnvCard(
        id="llm/InstructionFollowing-v0",
        family="text",
        description=(
            "IFEval-style instruction following: write a short text about a topic while obeying "
            "num_constraints rules drawn per task (word-count bounds, required and forbidden "
            "words, all lower or upper case, exactly N bullet points, a JSON object with given "
            "keys, a given first word or final phrase, no commas, a P.S. line), never two that "
            "contradict. Each rule has an exact checker (never met by an empty or punctuation-only "
            "reply; a forbidden word is found in disguise: split, digit look-alikes, elongated, "
            "inflected, joined to a neighbour), and counts only when met by genuine English: the "
            "reply uses the topic's words, does not restate or describe the rules (rule words, "
            "derived from the rules' own text, as many as its content words), is made of real "
            "dictionary words (web2 via the english_words package; an allowance of one word plus "
            "5%; without the package spelling shape only), is above the content floor (prose, not "
            "a word list, repetition or filler), and meets each rule with content of its own: a "
            "required word inside a real sentence (not quoted, bracketed, named or listed), "
            "bullets, JSON values and the P.S. real and distinct, a word minimum met by real "
            "words. Non-ASCII replies (look-alike letters) pass nothing."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "reward='all' (default): 1 when every constraint holds, else 0; reward='fraction': "
            "the fraction of constraints that hold (0 for a reply restating or describing the "
            "rules, off the topic, below the content floor or not real words). A rule holds when "
            "met to the letter and by content of its own. An unreadable reply (blank, non-ASCII, "
            "over 4096 characters, invalid UTF-8) or one not ending on the renderer's end of turn "
            "loses format_coef (0.1)."
        ),
        difficulty_knobs=knob_docs({
            "num_constraints": "rules per task, 1-5",
            "reward": "'all' (all-of) or 'fraction' (share of rules met)",
            "kinds": "'all' or a list of constraint kinds to draw from: " + ", ".join(KINDS),
            "format_coef": "penalty for an unreadable reply, 0-1",
        }, DEFAULTS),
        data_source="generated on the fly from the seed (built-in topic and word pools)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Write a short text about a quiet harbor (use the word 'harbor'). Follow every rule:\n"
                "1. Do not use any commas.\n2. Start your reply with the word 'Once'.\n"
                "Write in plain ASCII English.")},
            {"role": "assistant", "content": (
                "Once the quiet harbor wakes up and small boats drift past the old pier.")},
        ],
        answer_form="free text",
        known_hackable=KNOWN_HACKABLE,
        answer_contract=("free text (FreeTextAnswer): the whole visible reply, judged by the rubric: every "
                         "rule met to the letter and by genuine English about the topic (real words, no "
                         "rule talk, above the content floor, each rule met by content of its own)"),
    )

    def configure(self, *, num_constraints: int, reward: str, kinds: Any) -> None:
        self.reward = check_choice("reward", reward, ("all", "fraction"))
        if isinstance(kinds, str) and kinds == "all":
            self.kinds = KINDS
        elif isinstance(kinds, (list, tuple)) and kinds and all(
                isinstance(k, str) and k in CHECKS for k in kinds):
            self.kinds = tuple(dict.fromkeys(kinds))
        else:
            raise ValueError(f"kinds must be 'all' or a non-empty list of {list(KINDS)}, got {kinds!r}")
        self.num_constraints = check_int("num_constraints", num_constraints, 1, 5)
        if self.num_constraints > len(self.kinds):
            raise ValueError(f"num_constraints must be at most the {len(self.kinds)} kinds given, "
                             f"got {self.num_constraints}")

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        topic = TOPICS[int(rng.integers(len(TOPICS)))]
        chosen: list[str] = []
        for _ in range(self.num_constraints):
            options = [k for k in self.kinds if k not in chosen
                       and not any(k in CONFLICTS[c] for c in chosen)]
            if not options:
                return None, {}
            chosen.append(options[int(rng.integers(len(options)))])
        constraints = [make_constraint(k, _draw_params(k, rng)) for k in chosen]
        reference = solve(topic, constraints)
        if grade_reply(reference, constraints, "all", topic).score != 1.0:
            return None, {}
        key = f"if:{topic}:" + "|".join(sorted(c.description for c in constraints))
        return key, {"topic": topic, "constraints": constraints, "answer": reference}

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        rules = "\n".join(f"{i}. {c.description}" for i, c in enumerate(task["constraints"], 1))
        question = _frame(task["topic"], rules)
        constraints, mode, topic = task["constraints"], self.reward, task["topic"]
        # Free text: no gold value to compare; the audit reads the gold reply through the contract.
        return self.env_for(question, task["answer"], lambda r: grade_reply(r, constraints, mode, topic),
                            task, contract=FreeTextAnswer(rubric=RUBRIC, context=question))

    def attack_replies(self, env: TextTaskEnv, observation: Any, rng: random.Random) -> list[Attack]:
        """The audit's hook (`llm_gym.checks.attacks.audit`): this task's generated replies
        (`attack_replies`): genuine ones with credit, the gaming families of `JUNK` without."""
        return attack_replies(env.task["topic"], env.task["constraints"], env.answer, rng)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the solver's reply (all-of and fraction). Adversarial: the rules listed back,
        the whole prompt echoed, empty, punctuation only against 'no commas', digits only
        against 'lower case', a look-alike letter in an upper-case reply, a forbidden word in
        capitals, one bullet too many, JSON with trailing prose, text after the end phrase, the
        end phrase alone, keywords run together, one word short of the minimum, and from the
        generated families (`junk_replies`): keyboard mash around a real clause, pseudo-word
        sentences, the rules described as met, required words named or appended. Gold also: a
        natural reply of `natural_replies` (not the solver's), at full credit."""
        def rules(env):
            return "\n".join(c.description for c in env.task["constraints"])

        def params(env, kind):
            return next(c.params for c in env.task["constraints"] if c.kind == kind)

        def subj(env):
            return subject(env.task["topic"])

        def only(kind, n=1, **extra):
            return {"kinds": [kind], "num_constraints": n, **extra}

        def junk(env, family, variant):
            made = junk_replies(env.task["topic"], env.task["constraints"], random.Random(0))
            return next(r for f, v, r in made if (f, v) == (family, variant))

        def hyphenated(env):
            banned = params(env, "forbidden_words")[0]
            head, _, rest = env.answer.partition(" ")
            return f"{head} {banned[:2]}-{banned[2:]} {rest}"

        def bullets_plus_one(env):
            n = params(env, "bullets")[0]
            return "\n".join(f"- the {subj(env)} {i}" for i in range(n + 1))

        cases = [
            ScriptedCase("solver", "gold", lambda env, ob: env.answer, 1.0, 1.0),
            ScriptedCase("solver, fraction reward", "gold", lambda env, ob: env.answer, 1.0, 1.0,
                         knobs={"reward": "fraction", "num_constraints": 3}),
            ScriptedCase("list the rules", "adversarial", lambda env, ob: rules(env), -1.0, 0.0),
            ScriptedCase("list the rules, fraction reward", "adversarial",
                         lambda env, ob: rules(env), -1.0, 0.0, knobs={"reward": "fraction"}),
            ScriptedCase("rules as bullets", "adversarial",
                         lambda env, ob: "\n".join("- " + c.description
                                                   for c in env.task["constraints"]),
                         -1.0, 0.0, knobs=only("bullets", 1)),
            ScriptedCase("echo prompt", "adversarial", lambda env, ob: env.question, -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
            ScriptedCase("punctuation only vs no commas", "adversarial",
                         lambda env, ob: "... !", -1.0, 0.0, knobs=only("no_commas")),
            ScriptedCase("digits only vs lowercase", "adversarial",
                         lambda env, ob: "12 34 56", -1.0, 0.0, knobs=only("lowercase")),
            ScriptedCase("off topic", "adversarial",
                         lambda env, ob: "Once upon a time.", -1.0, 0.0,
                         knobs=only("starts_with", reward="fraction")),
            ScriptedCase("look-alike in upper case", "adversarial",
                         lambda env, ob: env.answer.replace("E", "\u0415", 1).replace("A", "\u0410", 1),
                         -1.0, 0.0, knobs=only("uppercase")),
            ScriptedCase("forbidden word in capitals", "adversarial",
                         lambda env, ob: f"The {subj(env)} is {params(env, 'forbidden_words')[0].upper()}.",
                         -1.0, 0.0, knobs=only("forbidden_words")),
            ScriptedCase("one bullet too many", "adversarial", lambda env, ob: bullets_plus_one(env),
                         -1.0, 0.0, knobs=only("bullets")),
            ScriptedCase("JSON with trailing prose", "adversarial",
                         lambda env, ob: env.answer + "\nHope this helps!", -1.0, 0.0,
                         knobs=only("json_keys")),
            ScriptedCase("text after the end phrase", "adversarial",
                         lambda env, ob: env.answer + " Bye", -1.0, 0.0, knobs=only("ends_with")),
            ScriptedCase("end phrase alone", "adversarial",
                         lambda env, ob: params(env, "ends_with")[0], -1.0, 0.0,
                         knobs=only("ends_with")),
            ScriptedCase("keywords run together", "adversarial",
                         lambda env, ob: f"The {subj(env)} had "
                         + "".join(params(env, "include_keywords")) + "s.",
                         -1.0, 0.0, knobs=only("include_keywords")),
            ScriptedCase("one word short", "adversarial",
                         lambda env, ob: " ".join(subj(env).split() + ["word"] * (
                             params(env, "min_words")[0] - 1 - len(subj(env).split()))),
                         -1.0, 0.0, knobs=only("min_words")),
            ScriptedCase("one word vs lower case and a word limit", "adversarial",
                         lambda env, ob: subj(env).lower(), -1.0, 0.0,
                         knobs={"kinds": ["lowercase", "max_words"], "num_constraints": 2,
                                "reward": "fraction"}),
            ScriptedCase("topic word repeated vs minimum words", "adversarial",
                         lambda env, ob: " ".join([subj(env)] * params(env, "min_words")[0]),
                         -1.0, 0.0, knobs=only("min_words", reward="fraction")),
            ScriptedCase("numbered filler vs minimum words", "adversarial",
                         lambda env, ob: f"The {subj(env)} is " + " ".join(
                             str(i) for i in range(1, params(env, "min_words")[0] + 1)),
                         -1.0, 0.0, knobs=only("min_words", reward="fraction")),
            ScriptedCase("one-word bullets", "adversarial",
                         lambda env, ob: f"The {subj(env)} is here.\n" + "\n".join(
                             f"- {w}" for w in WORDS[: params(env, "bullets")[0]]),
                         -1.0, 0.0, knobs=only("bullets", reward="fraction")),
            ScriptedCase("keyword list", "adversarial",
                         lambda env, ob: " ".join([subj(env), *params(env, "include_keywords"),
                                                   *WORDS[:6]]) + ".",
                         -1.0, 0.0, knobs=only("include_keywords", reward="fraction")),
            ScriptedCase("forbidden word split by a hyphen", "adversarial", lambda env, ob: hyphenated(env),
                         -1.0, 0.0, knobs=only("forbidden_words", reward="fraction")),
            ScriptedCase("keyboard mash around one real clause", "adversarial",
                         lambda env, ob: junk(env, "keyboard mash", "mash around one real clause"),
                         -1.0, 0.0, knobs=only("min_words", reward="fraction")),
            ScriptedCase("pseudo-word sentences", "adversarial",
                         lambda env, ob: junk(env, "pseudo-words", "pseudo-word sentences"),
                         -1.0, 0.0, knobs={"reward": "fraction", "num_constraints": 3}),
            ScriptedCase("the rules described as met", "adversarial",
                         lambda env, ob: junk(env, "rule description", "the rules restated as met (unquoted)"),
                         -1.0, 0.0, knobs={"reward": "fraction", "num_constraints": 3}),
            ScriptedCase("a real clause, then the rules described", "adversarial",
                         lambda env, ob: junk(env, "rule description", "one real clause then the rules (quoted)"),
                         -1.0, 0.0, knobs={"kinds": ["include_keywords", "bullets", "postscript"],
                                           "num_constraints": 3, "reward": "fraction"}),
            ScriptedCase("required words named, not used", "adversarial",
                         lambda env, ob: junk(env, "keyword list", "keywords named"),
                         -1.0, 0.0, knobs=only("include_keywords", reward="fraction")),
            ScriptedCase("required words appended to a real clause", "adversarial",
                         lambda env, ob: junk(env, "keyword list", "keywords appended"),
                         -1.0, 0.0, knobs=only("include_keywords", reward="fraction")),
            ScriptedCase("a natural reply of its own", "gold",
                         lambda env, ob: (natural_replies(env.task["topic"], env.task["constraints"],
                                                          random.Random(0), 1) or [env.answer])[0],
                         1.0, 1.0, knobs={"num_constraints": 3}),
        ]
        return cases
