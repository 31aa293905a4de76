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

No reward without the task done (`grade_reply`): a reply that restates any rule (listing the
constraints instead of following them) passes nothing (metric `echo`), nor does one that never
uses the topic's subject words ("harbor" for "a quiet harbor"; metric `on_topic`), nor one below
the content floor of `envs_catalog.text.genuine.degeneracy`, read on the reply's own words (JSON
values; no end phrase or "P.S." marks) with the topic, required words and start word not
counted as its own (metric `degenerate`, and one per reason: `thin`, `word_list`, `repetitive`,
`filler`): one word, the topic word repeated, numbered filler, one-word bullets or a keyword
list meet no rule, however many they would meet by the letter. A forbidden word found only in
disguise is reported too (metric `disguised_forbidden`).
Reward: all-of (1 only when every constraint holds) or the fraction of constraints held
(`reward="fraction"`), minus `format_coef` for an unreadable reply.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable

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
from envs_catalog.text.genuine import FUNCTION_WORDS, MIN_ITEM_WORDS, REASONS, degeneracy, tokens
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.scripted import ScriptedCase

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


def grade_reply(reply: str, constraints: list[Constraint], mode: str,
                topic: str | None = None) -> TextGrade:
    """Score one reply: unreadable -> not well formed; restating a rule, (with `topic`) not
    using the topic's subject words, or below the content floor (`genuine.degeneracy`: one
    word, repetition, numbered filler, a word list) -> 0; else all-of or the fraction of rules
    met. Details: `constraints_met`, `echo`, `on_topic`, `degenerate` and one flag per floor
    reason, `disguised_forbidden` (a forbidden word found only in disguise)."""
    text, status = visible_reply(reply)
    zero = {"constraints_met": 0.0, "echo": 0.0, "on_topic": 0.0, "degenerate": 0.0,
            **{r: 0.0 for r in REASONS}, "disguised_forbidden": 0.0}
    if text is None:
        return TextGrade(0.0, False, status, zero)
    if echoes_rules(text, constraints):
        return TextGrade(0.0, True, "echo", {**zero, "echo": 1.0})
    if topic is not None and not on_topic(text, topic):
        return TextGrade(0.0, True, "off_topic", zero)
    value, _ = strict_json(text)
    reasons = degeneracy(_prose(text, constraints), _supplied_words(topic, constraints),
                         prose=not isinstance(value, dict))
    if reasons:
        return TextGrade(0.0, True, reasons[0], {**zero, "on_topic": 1.0, "degenerate": 1.0,
                                                 **{r: 1.0 for r in reasons}})
    met = sum(c.check(text) for c in constraints)
    disguised = any(c.kind == "forbidden_words" and not c.check(text)
                    and not any(_has_word(text, b) for b in c.params) for c in constraints)
    fraction = met / len(constraints)
    score = fraction if mode == "fraction" else float(met == len(constraints))
    return TextGrade(score, True, "ok" if met == len(constraints) else "unmet",
                     {**zero, "constraints_met": fraction, "on_topic": 1.0,
                      "disguised_forbidden": float(disguised)})


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
            "contradict. Each rule has an exact checker; none can be met by an empty or "
            "punctuation-only reply, a required word must stand in a sentence, bullets need two "
            "words each and must differ, and a forbidden word is found in disguise (split by "
            "hyphens or spaces, digit look-alikes, elongated, inflected, joined to a neighbour). "
            "No rule pays unless the reply is a genuine response (the content floor): it uses the "
            "topic's words, does not restate the rules, has four words or more with two content "
            "words of its own (and one in five of the words the prompt did not supply) beyond the "
            "topic, required words, start word and end phrase, reads "
            "as prose rather than a word list (function words), and is not repetitive (one word "
            "or phrase over and over, lines alike but for a counter) or filler (runs of numbers, "
            "one-word list items). Non-ASCII replies (look-alike letters) pass nothing."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "reward='all' (default): 1 when every constraint holds, else 0; reward='fraction': "
            "the fraction of constraints that hold (0 for a reply restating the rules, off the "
            "topic or below the content floor). An unreadable reply (blank, non-ASCII, over "
            "4096 characters, invalid UTF-8) or one not ending on the renderer's end of turn "
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
        noun = subject(task["topic"])
        word_s = "word" if " " not in noun else "words"
        question = (f"Write a short text about {task['topic']} (use the {word_s} "
                    f"'{noun}'). Follow every rule:\n{rules}\n"
                    "Write in plain ASCII English.")
        constraints, mode, topic = task["constraints"], self.reward, task["topic"]
        return self.env_for(question, task["answer"],
                            lambda r: grade_reply(r, constraints, mode, topic), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the solver's reply (all-of and fraction). Adversarial: the rules listed back,
        the whole prompt echoed, empty, punctuation only against 'no commas', digits only
        against 'lower case', a look-alike letter in an upper-case reply, a forbidden word in
        capitals, one bullet too many, JSON with trailing prose, text after the end phrase, the
        end phrase alone, keywords run together, one word short of the minimum."""
        def rules(env):
            return "\n".join(c.description for c in env.task["constraints"])

        def params(env, kind):
            return next(c.params for c in env.task["constraints"] if c.kind == kind)

        def subj(env):
            return subject(env.task["topic"])

        def only(kind, n=1, **extra):
            return {"kinds": [kind], "num_constraints": n, **extra}

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
        ]
        return cases
