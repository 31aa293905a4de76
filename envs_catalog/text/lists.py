"""String and list manipulation: `llm/ReverseText-v0`, `llm/SortList-v0`, `llm/Dedupe-v0`.

Each task is generated from the seed (random letters, or words from the family's word pool;
numbers 0-99) and has exactly one right answer, read under the final-answer policy of
`llm_gym.grading.blocks` and compared exactly: the answer is the reply's last answer
line -- a short label ("Answer:", "The sorted list is"), markdown, one pair of quotes or
backticks and a code fence around it dropped; ASCII only (look-alike letters never pass),
case-sensitive (the tasks are lower case, so "TENALP" is not "tenalp") -- that is not the input
quoted back. Prose and working before it, the answer restated and a check after it are fine;
any other complete answer stated in the reply that differs from it (a second line, an "Option
A", one inside a sentence) or a line after it opening an alternative gets no credit. Lists are
comma-separated on one line, optionally in brackets (a JSON array of strings or numbers reads);
numbers in lists are read by `llm_gym.grading.parse_number` (so "07" is 7, but "7 or 8" is not a
number). Inputs are drawn so that echoing them never scores: a string to reverse is never a
palindrome, a list to sort is never already sorted (nor, from three items on, sorted the other
way), and a list to dedupe differs from its sorted and its keep-the-last-occurrence versions.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import unwrap
from llm_gym.grading.blocks import FENCE, cued, hedged, presented, strip_markup
from envs_catalog.text.base import WORDS, TextGrade, TextSource, TextTaskEnv, knob_docs
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading import MAX_RESPONSE_CHARS, parse_number
from llm_gym.scripted import ScriptedCase

LETTERS = "abcdefghijklmnopqrstuvwxyz"
_FORMAT_DOC = "penalty for a reply that cannot be read in the stated format, 0-1"
_LOOKALIKE = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440",
                            "c": "\u0441", "x": "\u0445", "i": "\u0456"})


def lookalike(text: str) -> str:
    """`text` with its first Cyrillic-look-alike-able letter swapped (or a fullwidth letter)."""
    for i, ch in enumerate(text):
        if ch.isdigit():  # a fullwidth digit (NFKC would fold it to ASCII)
            return text[:i] + chr(0xFF10 + int(ch)) + text[i + 1:]
        swapped = ch.translate(_LOOKALIKE)
        if swapped != ch:
            return text[:i] + swapped + text[i + 1:]
    return "\uff41" + text[1:]  # fullwidth a


# --- the final-answer reader (`llm_gym.grading.blocks`'s policy) ---------------------
_LABELS = (re.compile(r"^[^,:\n]{1,60}?:[ \t]*"),  # "Answer:", "The words in order are:"
           re.compile(r"^[^,:\n]{1,60}?[ \t](?:is|are)\b[ \t]*", re.IGNORECASE))  # "... is"
_QUOTES = "\"'"
_NUMBER_ITEM = r"-?[0-9]+(?:\.[0-9]+)?|-?\.[0-9]+"
_QUOTED = {True: rf"[\"']?(?:{_NUMBER_ITEM})[\"']?", False: r"[\"']?[A-Za-z]+[\"']?"}
_SPANS = {k: re.compile(rf"{item}(?:[ \t]*,[ \t]*{item})+") for k, item in _QUOTED.items()}
_ITEMS = {True: re.compile(rf"(?:{_NUMBER_ITEM})"), False: re.compile(r"[A-Za-z]+")}
_TOKEN = re.compile(r"[A-Za-z]+")
_POOL = frozenset(WORDS)


def _unquote(text: str) -> str:
    text = unwrap(text).rstrip(".").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    return text


def _answer_texts(line: str) -> list[tuple[str, str]]:
    """(prefix, value) readings of a line: the whole line, and what follows a short label
    ("Answer:", "The sorted list is", "Reversed:"); markup and one pair of quotes dropped."""
    line = strip_markup(line)
    out = [("", _unquote(line))]
    for label in _LABELS:
        m = label.match(line)
        if m:
            out.append((m.group(0), _unquote(line[m.end():])))
    return out


def _item(part: str, numeric: bool) -> Any:
    """One list item: a number (`parse_number`) or a word of letters, quotes around it dropped."""
    part = part.strip()
    if len(part) >= 2 and part[0] == part[-1] and part[0] in _QUOTES:
        part = part[1:-1].strip()
    return parse_number(part) if numeric else (part if _TOKEN.fullmatch(part) else None)


def _list_items(value: str, numeric: bool) -> tuple[Any, ...] | None:
    """The items of a comma-separated list ("3, 7, 19", "[3, 7, 19]", '["b", "a"]',
    "['b', 'a']"); None unless every item reads and there are two or more."""
    if len(value) >= 2 and value[0] == "[" and value[-1] == "]":
        value = value[1:-1]
    items = [_item(part, numeric) for part in value.split(",")]
    return tuple(items) if len(items) >= 2 and None not in items else None


def _final_answer(text: str, read, stated, echo: Any = None) -> tuple[Any, str]:
    """(value, "ok") of a reply's final answer line, or (None, why), under the final-answer
    policy: the answer is the last line that `read(value_text)` accepts (ASCII only, so
    look-alike letters never pass; a short label, markup, quotes and a code fence around it are
    fine) and that is not the input `echo` quoted back (unless nothing else is); a line after
    it that opens an alternative is "hedged"; any other complete answer `stated(line, final)`
    finds elsewhere in the reply that differs is "multiple_answers". Prose, working and the
    input echoed are fine."""
    if len(text) > MAX_RESPONSE_CHARS:
        return None, "too_long"
    if "\ufffd" in text:
        return None, "invalid_text"
    if not text.strip():
        return None, "empty"
    lines = ["" if FENCE.match(line) else line for line in text.splitlines()]
    values = [next((v for v in (read(value) for _, value in _answer_texts(line)) if v is not None),
                   None) if line.isascii() else None for line in lines]
    found = [i for i, v in enumerate(values) if v is not None]
    if not found:
        return None, "non_ascii" if not text.isascii() else "no_answer"
    last = next((i for i in reversed(found) if values[i] != echo), found[-1])
    if hedged(lines[last + 1:]):
        return None, "hedged"
    final = values[last]
    for i, line in enumerate(lines):
        if i != last and any(key != final for key in stated(
                strip_markup(unicodedata.normalize("NFKC", line)), final)):
            return None, "multiple_answers"
    return final, "ok"


def _grade(reference: Any, text: str, read, stated, echo: Any = None) -> TextGrade:
    value, status = _final_answer(text, read, stated, echo)
    if value is None:
        return TextGrade(0.0, False, status)
    return TextGrade(1.0, True, "ok") if value == reference else TextGrade(0.0, True, "wrong")


def _list_grader(task: dict[str, Any], numeric: bool):
    """The list tasks' grader: the final list, compared item by item (numbers by value, words
    exactly). Another complete list stated elsewhere -- the same length as the final one (alone
    on a line, or in prose with only the input's items), or presented as an answer or option
    (`final_answer.CUE`) -- that differs from it means no credit; the input echoed is fine."""
    def parse(value: str) -> tuple[Any, ...] | None:
        return _list_items(value, numeric)

    echo = parse(", ".join(map(str, task["input"])))
    given = set(echo or ())
    reference = parse(", ".join(map(str, task["answer_items"])))

    def stated(line: str, final: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        out = []
        bare = {value for _, value in _answer_texts(line)}
        for m in _SPANS[numeric].finditer(line):
            # a cue caught at the span's start ("Alternatively, b, a", "If not, b, a") is no item
            start, end = m.start(), m.end()
            parts = list(_ITEMS[numeric].finditer(m.group(0)))
            while len(parts) > 2 and not numeric and not cued(line[:start] + " ") and cued(
                    line[: m.start() + parts[0].end()] + " "):
                parts = parts[1:]
                start = m.start() + parts[0].start()
                start -= line[start - 1] in _QUOTES
            items = parse(line[start:end])
            if items is None or (items == echo and not cued(line[:start] + " ")):
                continue  # the input quoted back is not an answer, unless offered as one
            whole = line[start:end].strip() in bare or f"[{line[start:end].strip()}]" in bare
            complete = len(items) == len(final) and (whole or set(items) <= given)
            if complete or presented(line[:start]):
                out.append(items)
        return out

    return lambda text: _grade(reference, text, parse, stated, echo)


def _reverse_grader(task: dict[str, Any], words: bool):
    """ReverseText's grader: the final line of letters (unit='chars': one token of the input's
    length) or of the input's words (unit='words'), compared exactly. Another complete reversal
    stated elsewhere -- another such line, or inside a sentence an anagram of the input / the
    input's words in another order; never the input itself -- that differs from the final one
    means no credit."""
    source: str = task["input"]
    vocabulary = {w.lower() for w in source.split()}

    def parse(value: str) -> Any:
        if words:
            tokens = tuple(value.replace(",", " ").split())
            ok = len(tokens) >= 2 and all(t.lower() in vocabulary for t in tokens)
            return tokens if ok else None
        return value if _TOKEN.fullmatch(value) and len(value) == len(source) else None

    def stated(line: str, final: Any) -> list[Any]:
        # a line that is an answer of its own: the input's words in another order, or another
        # string of the input's length alone or after a colon ("Answer: ..."; not "... is below")
        texts = _answer_texts(line)
        readings = [(prefix, parse(t)) for prefix, t in texts]
        alone = next((v for prefix, v in readings if v is not None and (
            words or not prefix or prefix.rstrip().endswith(":"))), None)
        if words and alone is None:  # the pool's words, another task's answer among them
            tokens = tuple(texts[-1][1].replace(",", " ").split())
            alone = tokens if tokens and all(t.lower() in _POOL for t in tokens) else None
        if alone is not None and alone != echo and len(alone) == len(final):
            return [alone]
        # ... or one inside a sentence
        if words:
            out, run = [], []
            for token in [*_TOKEN.findall(line), ""]:
                if token.lower() in vocabulary:
                    run.append(token)
                    continue
                if len(run) == len(final) and " ".join(run) != source:
                    out.append(tuple(run))  # (the input quoted back is not an answer)
                run = []
            return out
        out = []
        for m in _TOKEN.finditer(line):
            t = m.group(0)
            if len(t) != len(source) or (t == source and not cued(line[: m.start()] + " ")):
                continue
            shared = sum((Counter(t.lower()) & Counter(source)).values())
            # an anagram of the input anywhere; one letter off when presented as an answer
            if shared == len(source) or (
                    shared >= len(source) - 1 and cued(line[: m.start()] + " ")):
                out.append(t)
        return out

    reference, echo = parse(task["answer"]), parse(source)
    return lambda text: _grade(reference, text, parse, stated, echo)


def _common_adversarial(echo, wrong, other, letters: bool = True) -> list[ScriptedCase]:
    """Cases every list/string task shares: echo the input, a hedge between the answer and a
    wrong one, another answer on a line after it (the final one), another complete answer offered as
    "Option A" before the answer or "Alternatively" after it, upper case, a look-alike letter,
    empty, the answer inside a sentence."""
    return [
        ScriptedCase("echo input", "adversarial", lambda env, ob: echo(env), -1.0, 0.0),
        ScriptedCase("hedge", "adversarial",
                     lambda env, ob: f"{env.answer} or {wrong(env)}", -1.0, 0.0),
        ScriptedCase("two answers", "adversarial",
                     lambda env, ob: f"{env.answer}\n{other(env)}", -1.0, 0.0),
        ScriptedCase("option A before", "adversarial",
                     lambda env, ob: f"Option A: {other(env)}\nOption B: {env.answer}", -1.0, 0.0),
        ScriptedCase("alternative after", "adversarial",
                     lambda env, ob: f"{env.answer}\nAlternatively: {other(env)}", -1.0, 0.0),
    ] + ([
        ScriptedCase("upper case", "adversarial", lambda env, ob: env.answer.upper(), -1.0, 0.0),
    ] if letters else []) + [
        ScriptedCase("look-alike letter", "adversarial",
                     lambda env, ob: lookalike(env.answer), -1.0, 0.0),
        ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ScriptedCase("prose around answer", "adversarial",
                     lambda env, ob: f"Sure! Here it is: {env.answer}. Hope that helps.", -1.0, 0.0),
    ]


def _rev_other(answer: str) -> str:
    """`answer` with its first two differing neighbours (letters, or words) swapped."""
    units = answer.split() if " " in answer else list(answer)
    for i in range(len(units) - 1):
        if units[i] != units[i + 1]:
            units[i], units[i + 1] = units[i + 1], units[i]
            break
    return (" " if " " in answer else "").join(units)


def _gold_cases() -> list[ScriptedCase]:
    """The answer bare, after "Answer:", restated on a second line, and in markup after a line
    of working."""
    return [
        ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
        ScriptedCase("answer line", "gold", lambda env, ob: f"Answer: {env.answer}", 1.0, 1.0),
        ScriptedCase("answer restated", "gold",
                     lambda env, ob: f"{env.answer}\n{env.answer}", 1.0, 1.0),
        ScriptedCase("working, then the answer", "gold", lambda env, ob: (
            f"Working through the input, the answer is below.\n**Answer:** `{env.answer}`"),
            1.0, 1.0),
    ]


class ReverseTextSource(TextSource):
    """Reverse a string of letters, or the order of a list of words (`llm/ReverseText-v0`)."""

    DEFAULTS: dict[str, Any] = {"unit": "chars", "length": 5, "format_coef": 0.1}
    card = EnvCard(
        id="llm/ReverseText-v0",
        family="text",
        description=(
            "Reverse a generated string: the letters of a random lower-case string "
            "(unit='chars', 'qwxbe' -> 'ebxwq') or the order of a list of words (unit='words', "
            "'apple river stone' -> 'stone river apple'). The reply's last answer line (an "
            "optional 'Answer:' label, quotes or markdown around it) is compared exactly "
            "(case-sensitive, ASCII only); prose before it and a check after it are fine, another "
            "different reversal anywhere in the reply earns nothing. Strings are never "
            "palindromes, so echoing the input never scores."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the reversed string, 0 for a readable wrong line, -format_coef (0.1) "
            "when no answer line can be read (empty, non-ASCII, over 4096 characters), another "
            "different answer is stated or hedged, or the reply does not end on the renderer's "
            "end of turn."
        ),
        difficulty_knobs=knob_docs({
            "unit": "'chars' (reverse the letters of a random string) or 'words' (reverse the "
                    "order of a list of words)",
            "length": "letters (chars) or words (words) in the input, 2-30",
            "format_coef": _FORMAT_DOC,
        }, DEFAULTS),
        data_source="generated on the fly from the seed (random letters; a built-in word pool)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Reverse the letters of this string: qwxbe\n"
                                        "Reply with just the reversed string."},
            {"role": "assistant", "content": "ebxwq"},
        ],
    )

    def configure(self, *, unit: str, length: int) -> None:
        self.unit = check_choice("unit", unit, ("chars", "words"))
        self.length = check_int("length", length, 2, 30)

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        if self.unit == "chars":
            text = "".join(LETTERS[i] for i in rng.integers(0, 26, size=self.length).tolist())
            if text == text[::-1]:
                return None, {}
            return f"chars:{text}", {"input": text, "answer": text[::-1]}
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=self.length).tolist()]
        if words == words[::-1]:
            return None, {}
        return "words:" + " ".join(words), {"input": " ".join(words),
                                            "answer": " ".join(reversed(words))}

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        if self.unit == "chars":
            question = (f"Reverse the letters of this string: {task['input']}\n"
                        "Reply with just the reversed string.")
        else:
            question = (f"Reverse the order of these words: {task['input']}\n"
                        "Reply with just the words in reverse order, separated by spaces.")
        grader = _reverse_grader(task, words=self.unit == "words")
        return self.env_for(question, task["answer"], grader, task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reversed string, bare, after 'Answer:', restated, in markup after working.
        Adversarial: the input echoed, another reversal as an option before or an
        alternative after the answer, hedges, two lines, upper case, a look-alike letter, empty,
        prose around the answer, and the answer reversed twice over (the input) with one letter
        dropped."""
        def wrong(env):
            return env.task["input"]
        def other(env):
            return _rev_other(env.answer)
        return _gold_cases() + _common_adversarial(lambda env: env.task["input"], wrong, other) + [
            ScriptedCase("one unit short", "adversarial",
                         lambda env, ob: env.answer[:-1] if self.unit == "chars"
                         else env.answer.rsplit(" ", 1)[0], -1.0, 0.0),
        ]


class SortListSource(TextSource):
    """Sort a list of words or numbers (`llm/SortList-v0`)."""

    DEFAULTS: dict[str, Any] = {"items": "numbers", "order": "ascending", "key": "natural",
                                "length": 5, "format_coef": 0.1}
    card = EnvCard(
        id="llm/SortList-v0",
        family="text",
        description=(
            "Sort a generated list: distinct integers 0-99 or distinct words from a built-in "
            "pool, ascending or descending, by value/alphabet (key='natural') or, for words, by "
            "length with alphabetical tie-break (key='length'). The reply's last list line (comma-"
            "separated, optionally bracketed or a JSON array) is its answer; numbers are read by "
            "llm_gym.grading.parse_number, words compared exactly (ASCII, case-sensitive). Prose "
            "before it and a check after it are fine, another different ordering anywhere in the "
            "reply earns nothing. The input is never already sorted."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the sorted list, 0 for a readable wrong list, -format_coef (0.1) when "
            "no comma-separated list line can be read (or a number item is not one number), "
            "another different list is stated or hedged, or the reply does not end on the "
            "renderer's end of turn."
        ),
        difficulty_knobs=knob_docs({
            "items": "'numbers' (distinct integers 0-99) or 'words'",
            "order": "'ascending' or 'descending'",
            "key": "'natural' (numeric / alphabetical) or 'length' (words only: by length, "
                   "ties alphabetical)",
            "length": "items in the list, 2-20",
            "format_coef": _FORMAT_DOC,
        }, DEFAULTS),
        data_source="generated on the fly from the seed (integers; a built-in word pool)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Sort these numbers in ascending order: 42, 7, 19, 88, 3\n"
                                        "Reply with the sorted list on one line, separated by "
                                        "commas."},
            {"role": "assistant", "content": "3, 7, 19, 42, 88"},
        ],
    )

    def configure(self, *, items: str, order: str, key: str, length: int) -> None:
        self.items = check_choice("items", items, ("numbers", "words"))
        self.order = check_choice("order", order, ("ascending", "descending"))
        self.key = check_choice("key", key, ("natural", "length"))
        if self.key == "length" and self.items != "words":
            raise ValueError("key='length' needs items='words' (numbers sort by value)")
        self.length = check_int("length", length, 2, 20)

    def _sorted(self, values: list[Any]) -> list[Any]:
        if self.key == "length":
            out = sorted(values, key=lambda w: (len(w), w))
            return out[::-1] if self.order == "descending" else out
        return sorted(values, reverse=self.order == "descending")

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        if self.items == "numbers":
            values: list[Any] = rng.choice(100, size=self.length, replace=False).tolist()
        else:
            values = [WORDS[i] for i in rng.choice(len(WORDS), size=self.length, replace=False).tolist()]
        answer = self._sorted(values)
        if values == answer or (self.length >= 3 and values == answer[::-1]):
            return None, {}
        key = f"sort:{self.items}:{self.order}:{self.key}:" + ",".join(map(str, sorted(values)))
        return key, {"input": values, "answer_items": answer,
                     "answer": ", ".join(map(str, answer))}

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        what = "numbers" if self.items == "numbers" else "words"
        if self.key == "length":
            how = ("by length, shortest first (ties in alphabetical order)" if self.order == "ascending"
                   else "by length, longest first (ties in reverse alphabetical order)")
        elif self.items == "numbers":
            how = f"in {self.order} order"
        else:
            how = "in alphabetical order" if self.order == "ascending" else "in reverse alphabetical order"
        question = (f"Sort these {what} {how}: {', '.join(map(str, task['input']))}\n"
                    "Reply with the sorted list on one line, separated by commas.")
        grader = _list_grader(task, numeric=self.items == "numbers")
        return self.env_for(question, task["answer"], grader, task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the sorted list, bare, after 'Answer:', restated, in markup after working, in
        brackets, as a JSON array of strings. Adversarial: the other order as an option before or
        an alternative after the answer, the input echoed, the list sorted the other way, hedges,
        two lines, upper case, look-alikes, empty, prose, a dropped item, a duplicated item."""
        def echo(env):
            return ", ".join(map(str, env.task["input"]))

        def other_way(env):
            return ", ".join(map(str, env.task["answer_items"][::-1]))
        return _gold_cases() + [
            ScriptedCase("bracketed", "gold", lambda env, ob: f"[{env.answer}]", 1.0, 1.0),
            ScriptedCase("JSON array", "gold", lambda env, ob: json.dumps(
                [str(x) for x in env.task["answer_items"]]), 1.0, 1.0),
        ] + _common_adversarial(echo, other_way, other_way, letters=self.items == "words") + [
            ScriptedCase("sorted the other way", "adversarial", lambda env, ob: other_way(env),
                         -1.0, 0.0),
            ScriptedCase("item dropped", "adversarial",
                         lambda env, ob: ", ".join(map(str, env.task["answer_items"][:-1])), -1.0, 0.0),
            ScriptedCase("item repeated", "adversarial",
                         lambda env, ob: env.answer + ", " + str(env.task["answer_items"][-1]),
                         -1.0, 0.0),
        ]


class DedupeSource(TextSource):
    """Remove duplicates from a list, keeping first occurrences in order (`llm/Dedupe-v0`)."""

    DEFAULTS: dict[str, Any] = {"length": 6, "distinct": 4, "format_coef": 0.1}
    card = EnvCard(
        id="llm/Dedupe-v0",
        family="text",
        description=(
            "Remove repeated words from a generated comma-separated list, keeping the first "
            "occurrence of each in its original order. The reply's last list line (comma-"
            "separated, optionally bracketed or a JSON array) is its answer, compared exactly "
            "(ASCII, case-sensitive); prose before it, the input quoted and a check after it are "
            "fine, another different list anywhere in the reply earns nothing. Inputs are drawn "
            "so that the right answer is neither the input, nor its sorted distinct words, nor "
            "the keep-the-last-occurrence order."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the de-duplicated list, 0 for a readable wrong list, -format_coef "
            "(0.1) when no comma-separated list line can be read, another different list is "
            "stated or hedged, or the reply does not end on the renderer's end of turn."
        ),
        difficulty_knobs=knob_docs({
            "length": "words in the input list, 3-30",
            "distinct": "distinct words in it, 2 to length-1",
            "format_coef": _FORMAT_DOC,
        }, DEFAULTS),
        data_source="generated on the fly from the seed (a built-in word pool)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Remove the duplicates from this list, keeping the first "
                                        "occurrence of each word in order: tiger, apple, tiger, "
                                        "lamp, apple, stone\nReply with the list on one line, "
                                        "separated by commas."},
            {"role": "assistant", "content": "tiger, apple, lamp, stone"},
        ],
    )

    def configure(self, *, length: int, distinct: int) -> None:
        self.length = check_int("length", length, 3, 30)
        self.distinct = check_int("distinct", distinct, 2, self.length - 1)

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        pool = [WORDS[i] for i in rng.choice(len(WORDS), size=self.distinct, replace=False).tolist()]
        extra = [pool[i] for i in rng.integers(0, self.distinct, size=self.length - self.distinct).tolist()]
        seq = pool + extra
        seq = [seq[i] for i in rng.permutation(len(seq)).tolist()]
        first = list(dict.fromkeys(seq))
        last = list(dict.fromkeys(reversed(seq)))[::-1]
        if first == sorted(first) or first == last:
            return None, {}
        return "dedupe:" + ",".join(seq), {"input": seq, "answer_items": first, "last": last,
                                           "answer": ", ".join(first)}

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        question = ("Remove the duplicates from this list, keeping the first occurrence of each "
                    f"word in order: {', '.join(task['input'])}\n"
                    "Reply with the list on one line, separated by commas.")
        return self.env_for(question, task["answer"], _list_grader(task, False), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the first-occurrence list, bare, after 'Answer:', restated, in markup after
        working, as a JSON array. Adversarial: the last-occurrence order as an option before or an
        alternative after the answer, the input echoed, the distinct words sorted, the
        last-occurrence order, hedges, two lines, upper case, look-alikes, empty, prose."""
        def echo(env):
            return ", ".join(env.task["input"])
        def last(env):
            return ", ".join(env.task["last"])
        return _gold_cases() + [
            ScriptedCase("JSON array", "gold",
                         lambda env, ob: json.dumps(env.task["answer_items"]), 1.0, 1.0),
        ] + _common_adversarial(echo, echo, last) + [
            ScriptedCase("sorted distinct", "adversarial",
                         lambda env, ob: ", ".join(sorted(env.task["answer_items"])), -1.0, 0.0),
            ScriptedCase("last occurrences", "adversarial",
                         lambda env, ob: ", ".join(env.task["last"]), -1.0, 0.0),
        ]
