"""String and list manipulation: `llm/ReverseText-v0`, `llm/SortList-v0`, `llm/Dedupe-v0`.

Each task is generated from the seed (random letters, or words from the family's word pool;
numbers 0-99) and has exactly one right answer. The answer contract is built per task and read
under the one answer policy (`llm_gym.grading.POLICY`: the reply's last declared answer --
`Answer:` line, `\\boxed{}`, "the answer is ..." -- else its last line (block) stating a value,
parsed completely; a second declared value voids the credit; nothing else is read):

- a reversed string is a `TokenAnswer`: one run of exactly the input's length over the input's
  letters, compared case-sensitively (the tasks are lower case, so "TENALP" is not "tenalp");
- a list of words (reversed, sorted or de-duplicated) or of integers (sorted) is a
  `SequenceAnswer` whose items are the input's words (any case) or integers: comma-separated
  on one line (an "and" before the last item allowed), one per line, or a JSON list, quotes
  around items allowed; word lists to reverse may also be separated by spaces.

Anything else in the read slot -- a second list, a word that is not an item, "or" -- makes it
not an answer. Inputs are drawn so that echoing them never scores: a string to reverse is never
a palindrome, a list to sort is never already sorted (nor, from three items on, sorted the
other way), and a list to dedupe differs from its sorted and its keep-the-last-occurrence
versions.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import numpy as np

from envs_catalog.text.base import WORDS, TextSource, TextTaskEnv, knob_docs
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading import SequenceAnswer, TokenAnswer
from llm_gym.scripted import ScriptedCase

LETTERS = "abcdefghijklmnopqrstuvwxyz"
_FORMAT_DOC = "penalty for a reply that cannot be read in the stated format, 0-1"


class ListAnswer(SequenceAnswer):
    """A `SequenceAnswer` whose prompt asks for the list on one line, separated by commas
    ("Reply with the sorted list on one line, separated by commas.")."""

    def instruction(self, *, brief: bool = False) -> str:
        return f"Reply with {self.name} on one line, separated by commas."


def word_item(words: Iterable[str]) -> Callable[[str], str | None]:
    """A list item reader: one of `words` (any case), returned in lower case; else None."""
    vocabulary = frozenset(w.lower() for w in words)

    def item(text: str) -> str | None:
        word = text.lower()
        return word if word in vocabulary else None

    return item


def reversed_string_contract(source: str, context: str = "") -> TokenAnswer:
    """The reversal of `source`: one token of its length over its letters (either case, so an
    upper-case reply reads and is wrong), compared case-sensitively."""
    letters = "".join(sorted(set(source.lower() + source.upper())))
    return TokenAnswer(pattern=f"[{letters}]{{{len(source)}}}", case=True, name="the reversed string",
                       context=context)


def reversed_words_contract(words: list[str], context: str = "") -> SequenceAnswer:
    """The input's words in another order, separated by spaces or commas."""
    return SequenceAnswer(item=word_item(words), item_name="word", context=context,
                          name="the words in reverse order, separated by spaces")


def list_contract(items: list[Any], name: str, context: str = "") -> ListAnswer:
    """A comma-separated list of integers (when `items` are) or of the words of `items`."""
    if all(isinstance(x, int) for x in items):
        return ListAnswer(item="int", item_name="number", name=name, context=context)
    return ListAnswer(item=word_item(items), spaces_separate=False, item_name="word", name=name,
                      context=context)


def _common_adversarial(echo, other, letters: bool = True) -> list[ScriptedCase]:
    """Cases every list/string task shares: the input echoed, the answer and another joined by
    "or", another answer on a line after it (the line read), another answer offered as
    "Option A" before it, a second declared answer after it, upper case (strings only), empty,
    the answer inside a sentence that is not a statement of it."""
    return [
        ScriptedCase("echo input", "adversarial", lambda env, ob: echo(env), -1.0, 0.0),
        ScriptedCase("hedge", "adversarial",
                     lambda env, ob: f"{env.answer} or {other(env)}", -1.0, 0.0),
        ScriptedCase("two answers", "adversarial",
                     lambda env, ob: f"{env.answer}\n{other(env)}", -1.0, 0.0),
        ScriptedCase("option A before", "adversarial",
                     lambda env, ob: f"Option A: {other(env)}\nOption B: {env.answer}", -1.0, 0.0),
        ScriptedCase("second declared answer", "adversarial",
                     lambda env, ob: f"Answer: {env.answer}\nAlternatively, the answer is {other(env)}.",
                     -1.0, 0.0),
    ] + ([
        ScriptedCase("upper case", "adversarial", lambda env, ob: env.answer.upper(), -1.0, 0.0),
    ] if letters else []) + [
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
    """The answer bare, after "Answer:", declared twice, and in markup after a line of working
    and a note after it."""
    return [
        ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
        ScriptedCase("answer line", "gold", lambda env, ob: f"Answer: {env.answer}", 1.0, 1.0),
        ScriptedCase("answer restated", "gold",
                     lambda env, ob: f"Answer: {env.answer}\n\nSo the answer is {env.answer}.", 1.0, 1.0),
        ScriptedCase("working, then the answer", "gold", lambda env, ob: (
            f"Working through the input, the answer is below.\n**Answer:** `{env.answer}`\n\n"
            "I checked it twice."), 1.0, 1.0),
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
            "'apple river stone' -> 'stone river apple'). The answer is read under the one answer "
            "policy (llm_gym.grading.POLICY): the last declared answer ('Answer:', \\boxed{}, 'the "
            "answer is'), else the last line stating one, parsed completely -- a string of the "
            "input's length over its letters, compared case-sensitively, or the input's words "
            "separated by spaces or commas; a second declared answer that differs voids the "
            "credit. Strings are never palindromes, so echoing the input never scores."
        ),
        answer_contract=(
            "unit='chars': TokenAnswer (one string of the input's length over its letters, "
            "case-sensitive); unit='words': SequenceAnswer (the input's words, in order)"
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the reversed string, 0 for a readable wrong one, -format_coef (0.1) "
            "when no answer can be read (empty, malformed -- a second value or a word that is "
            "not the answer's kind in the slot --, conflicting declarations, over 4096 "
            "characters), or the reply does not end on the renderer's end of turn."
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
            text = f"Reverse the letters of this string: {task['input']}\n"
            instruction = reversed_string_contract(task["input"]).instruction(brief=True)
            contract: TokenAnswer | SequenceAnswer = reversed_string_contract(
                task["input"], text + instruction)
            gold: Any = task["answer"]
        else:
            words = task["input"].split()
            text = f"Reverse the order of these words: {task['input']}\n"
            instruction = reversed_words_contract(words).instruction(brief=True)
            contract = reversed_words_contract(words, text + instruction)
            gold = tuple(task["answer"].split())
        return self.contract_env(text + instruction, task["answer"], contract, gold, task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reversed string, bare, after 'Answer:', declared twice, in markup after
        working. Adversarial: the input echoed, another reversal as an option before the answer,
        joined to it by "or", on the line after it or declared after it, upper case (letters:
        a string's case is part of it, a word's is not), empty, prose around the answer, the
        answer one unit short."""
        def other(env):
            return _rev_other(env.answer)
        return _gold_cases() + _common_adversarial(lambda env: env.task["input"], other,
                                                   letters=self.unit == "chars") + [
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
            "length with alphabetical tie-break (key='length'). The list is read under the one "
            "answer policy (llm_gym.grading.POLICY): the last declared answer, else the last line "
            "(block) stating a list, parsed completely -- items separated by commas, one per line "
            "or a JSON list, each an integer or one of the input's words (any case); a second "
            "declared list that differs voids the credit. The input is never already sorted."
        ),
        answer_contract="SequenceAnswer (integers, or the input's words): the sorted list, comma-separated",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the sorted list, 0 for a readable wrong list, -format_coef (0.1) when "
            "no list can be read (empty, an item that is not an integer or an input word, a "
            "second value in the slot, conflicting declarations), or the reply does not end on "
            "the renderer's end of turn."
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
        text = f"Sort these {what} {how}: {', '.join(map(str, task['input']))}\n"
        question = text + list_contract(task["input"], "the sorted list").instruction()
        contract = list_contract(task["input"], "the sorted list", question)
        return self.contract_env(question, task["answer"], contract, tuple(task["answer_items"]), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the sorted list, bare, after 'Answer:', declared twice, in markup after working,
        in brackets, as a JSON array of strings, one per line. Adversarial: the other order as an
        option before the answer, joined to it by "or", on the line after it or declared after
        it, the input echoed, the list sorted the other way, empty, prose around it, a dropped
        item, a duplicated item."""
        def echo(env):
            return ", ".join(map(str, env.task["input"]))

        def other_way(env):
            return ", ".join(map(str, env.task["answer_items"][::-1]))
        return _gold_cases() + [
            ScriptedCase("bracketed", "gold", lambda env, ob: f"[{env.answer}]", 1.0, 1.0),
            ScriptedCase("JSON array", "gold", lambda env, ob: json.dumps(
                [str(x) for x in env.task["answer_items"]]), 1.0, 1.0),
            ScriptedCase("one per line", "gold", lambda env, ob: "Sorted:\n" + "\n".join(
                f"- {x}" for x in env.task["answer_items"]), 1.0, 1.0),
        ] + _common_adversarial(echo, other_way, letters=False) + [
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
            "occurrence of each in its original order. The list is read under the one answer "
            "policy (llm_gym.grading.POLICY): the last declared answer, else the last line (block) "
            "stating a list, parsed completely -- items separated by commas, one per line or a "
            "JSON list, each one of the input's words (any case, quotes allowed); a second "
            "declared list that differs voids the credit. Inputs are drawn so that the right "
            "answer is neither the input, nor its sorted distinct words, nor the "
            "keep-the-last-occurrence order."
        ),
        answer_contract="SequenceAnswer (the input's words): the de-duplicated list, comma-separated",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for exactly the de-duplicated list, 0 for a readable wrong list, -format_coef "
            "(0.1) when no list can be read (empty, an item that is not an input word, a second "
            "value in the slot, conflicting declarations), or the reply does not end on the "
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
        text = ("Remove the duplicates from this list, keeping the first occurrence of each "
                f"word in order: {', '.join(task['input'])}\n")
        question = text + list_contract(task["input"], "the list").instruction()
        contract = list_contract(task["input"], "the list", question)
        return self.contract_env(question, task["answer"], contract, tuple(task["answer_items"]), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the first-occurrence list, bare, after 'Answer:', declared twice, in markup
        after working, as a JSON array, single-quoted items, upper case. Adversarial: the
        last-occurrence order as an option before the answer, joined to it by "or", on the line
        after it or declared after it, the input echoed, the distinct words sorted, the
        last-occurrence order, empty, prose around it."""
        def echo(env):
            return ", ".join(env.task["input"])
        def last(env):
            return ", ".join(env.task["last"])
        return _gold_cases() + [
            ScriptedCase("JSON array", "gold",
                         lambda env, ob: json.dumps(env.task["answer_items"]), 1.0, 1.0),
            ScriptedCase("single-quoted items", "gold",
                         lambda env, ob: ", ".join(f"'{w}'" for w in env.task["answer_items"]), 1.0, 1.0),
            ScriptedCase("upper case", "gold", lambda env, ob: env.answer.upper(), 1.0, 1.0),
        ] + _common_adversarial(echo, last, letters=False) + [
            ScriptedCase("sorted distinct", "adversarial",
                         lambda env, ob: ", ".join(sorted(env.task["answer_items"])), -1.0, 0.0),
            ScriptedCase("last occurrences", "adversarial",
                         lambda env, ob: ", ".join(env.task["last"]), -1.0, 0.0),
        ]
