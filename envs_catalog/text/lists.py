"""String and list manipulation: `llm/ReverseText-v0`, `llm/SortList-v0`, `llm/Dedupe-v0`.

Each task is generated from the seed (random letters, or words from the family's word pool;
numbers 0-99) and has exactly one right reply, compared exactly after the strict reading in
`envs_catalog.text.base`: one line, an optional "Answer:" prefix and one pair of surrounding
quotes or backticks dropped, ASCII only (look-alike letters never pass), case-sensitive (the
tasks are lower case, so "TENALP" is not "tenalp"). Lists are comma-separated on one line;
numbers in lists are read by `llm_gym.grading.parse_number` (so "07" is 7, but "7 or 8" is not a
number). Inputs are drawn so that echoing them never scores: a string to reverse is never a
palindrome, a list to sort is never already sorted (nor, from three items on, sorted the other
way), and a list to dedupe differs from its sorted and its keep-the-last-occurrence versions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs_catalog.text.base import (
    WORDS,
    TextGrade,
    TextSource,
    TextTaskEnv,
    knob_docs,
    read_list,
    single_line,
)
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading import parse_number
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


def _exact_line(reference: str, tokens: bool = False):
    def grade(reply: str) -> TextGrade:
        line, status = single_line(reply)
        if line is None:
            return TextGrade(0.0, False, status)
        got = line.split() if tokens else line
        want = reference.split() if tokens else reference
        return TextGrade(1.0, True, "ok") if got == want else TextGrade(0.0, True, "wrong")
    return grade


def _list_grader(reference: list[Any], numeric: bool):
    def grade(reply: str) -> TextGrade:
        items, status = read_list(reply)
        if items is None:
            return TextGrade(0.0, False, status)
        if numeric:
            values = [parse_number(item) for item in items]
            if any(v is None for v in values):
                return TextGrade(0.0, False, "not_a_number")
            got: list[Any] = values
        else:
            got = items
        return TextGrade(1.0, True, "ok") if got == list(reference) else TextGrade(0.0, True, "wrong")
    return grade


_COMMON_CASES_NOTE = "any reply that is not the one right line scores at most 0"


def _common_adversarial(echo, wrong, letters: bool = True) -> list[ScriptedCase]:
    """Cases every list/string task shares: echo the input, a hedge between the answer and a
    wrong one, the answer twice on two lines, upper case, a look-alike letter, empty, prose."""
    return [
        ScriptedCase("echo input", "adversarial", lambda env, ob: echo(env), -1.0, 0.0),
        ScriptedCase("hedge", "adversarial",
                     lambda env, ob: f"{env.answer} or {wrong(env)}", -1.0, 0.0),
        ScriptedCase("two answers", "adversarial",
                     lambda env, ob: f"{env.answer}\n{wrong(env)}", -1.0, 0.0),
        ScriptedCase("same answer twice", "adversarial",
                     lambda env, ob: f"{env.answer}\n{env.answer}", -1.0, 0.0),
    ] + ([
        ScriptedCase("upper case", "adversarial", lambda env, ob: env.answer.upper(), -1.0, 0.0),
    ] if letters else []) + [
        ScriptedCase("look-alike letter", "adversarial",
                     lambda env, ob: lookalike(env.answer), -1.0, 0.0),
        ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ScriptedCase("prose around answer", "adversarial",
                     lambda env, ob: f"Sure! Here it is: {env.answer}. Hope that helps.", -1.0, 0.0),
    ]


def _gold_cases() -> list[ScriptedCase]:
    return [
        ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
        ScriptedCase("answer line", "gold", lambda env, ob: f"Answer: {env.answer}", 1.0, 1.0),
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
            "'apple river stone' -> 'stone river apple'). The reply is one line, compared "
            "exactly (case-sensitive, ASCII only, an optional 'Answer:' prefix); strings are "
            "never palindromes, so echoing the input never scores."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the reversed string, 0 for a readable wrong line, -format_coef (0.1) "
            "when the reply is not one readable line (empty, several lines, non-ASCII, over 4096 "
            "characters) or does not end on the renderer's end of turn."
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
        grader = _exact_line(task["answer"], tokens=self.unit == "words")
        return self.env_for(question, task["answer"], grader, task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reversed string, bare and after 'Answer:'. Adversarial: the input echoed,
        hedges, two lines, upper case, a look-alike letter, empty, prose around the answer, and
        the answer reversed twice over (the input) with one letter dropped."""
        def wrong(env):
            return env.task["input"]
        return _gold_cases() + _common_adversarial(lambda env: env.task["input"], wrong) + [
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
            "length with alphabetical tie-break (key='length'). The reply is the sorted list on "
            "one line, comma-separated; numbers are read by llm_gym.grading.parse_number, words "
            "compared exactly (ASCII, case-sensitive). The input is never already sorted."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the sorted list, 0 for a readable wrong list, -format_coef (0.1) when "
            "the reply is not one comma-separated line (or a number item is not one number), or "
            "does not end on the renderer's end of turn."
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
        grader = _list_grader(task["answer_items"], numeric=self.items == "numbers")
        return self.env_for(question, task["answer"], grader, task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the sorted list, bare, after 'Answer:' and in brackets. Adversarial: the input
        echoed, the list sorted the other way, hedges, two lines, upper case, look-alikes,
        empty, prose, a dropped item, a duplicated item."""
        def echo(env):
            return ", ".join(map(str, env.task["input"]))

        def other_way(env):
            return ", ".join(map(str, env.task["answer_items"][::-1]))
        return _gold_cases() + [
            ScriptedCase("bracketed", "gold", lambda env, ob: f"[{env.answer}]", 1.0, 1.0),
        ] + _common_adversarial(echo, other_way, letters=self.items == "words") + [
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
            "occurrence of each in its original order. The reply is the de-duplicated list on "
            "one line, comma-separated, compared exactly (ASCII, case-sensitive). Inputs are drawn "
            "so that the right answer is neither the input, nor its sorted distinct words, nor "
            "the keep-the-last-occurrence order."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the de-duplicated list, 0 for a readable wrong list, -format_coef "
            "(0.1) when the reply is not one comma-separated line or does not end on the "
            "renderer's end of turn."
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
        return self.env_for(question, task["answer"], _list_grader(task["answer_items"], False), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the first-occurrence list, bare and after 'Answer:'. Adversarial: the input
        echoed, the distinct words sorted, the last-occurrence order, hedges, two lines, upper
        case, look-alikes, empty, prose."""
        def echo(env):
            return ", ".join(env.task["input"])
        return _gold_cases() + _common_adversarial(echo, echo) + [
            ScriptedCase("sorted distinct", "adversarial",
                         lambda env, ob: ", ".join(sorted(env.task["answer_items"])), -1.0, 0.0),
            ScriptedCase("last occurrences", "adversarial",
                         lambda env, ob: ", ".join(env.task["last"]), -1.0, 0.0),
        ]
