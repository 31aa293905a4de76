"""Reading numbers exactly: what number a short string denotes, and the numbers in a text.

`parse_number` accepts one numeral and nothing else, normalising:

- surrounding whitespace, `$...$`, markdown `*`, and one trailing period ("68." is 68);
- a leading `+` or `-` (also the Unicode minus U+2212);
- thousands separators only in the strict form `1,234,567` (first group 1-3 digits not starting
  with 0, then groups of exactly three), so `0,075`, `1,23` and `75,0` are not numbers;
- decimals (`5.0` equals 5, `0.50` and `.5` equal 1/2) and simple fractions (`3/4`, `-3/4`,
  `1 / 2`);

and returns an exact `fractions.Fraction`, so integers compare exactly and there is no float
tolerance. Digits are ASCII `0-9` only (the answer reader in `llm_gym.grading.answers` folds
fullwidth and other compatibility digits to ASCII first, and refuses other scripts' digits).
Anything else — two numbers ("5 or 6", "5, 6, 7"), words, scientific notation, more than 64
characters — is not a number (`None`).

The private helpers below are the answer reader's: `_parse_number_words` reads English cardinals
("seven", "sixty-eight", "one hundred and five"), and `_number_tokens` finds every number written
in digits or in words in a text, so that `answers.py` can tell one number from several.
"""

from __future__ import annotations

import re
from fractions import Fraction

_MAX_NUMBER_CHARS = 64
_DECIMAL = re.compile(
    r"[+-]?(?:(?:[1-9][0-9]{0,2}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
)
_FRACTION = re.compile(r"([+-]?[0-9]+)[ \t]*/[ \t]*([0-9]+)")
_PLAIN_INT = re.compile(r"-?[0-9]{1,18}")


def parse_number(text: str) -> Fraction | None:
    """The single number `text` denotes (exactly), or None if it is not exactly one number."""
    s = text.strip()
    if len(s) > _MAX_NUMBER_CHARS or not s:
        return None
    if _PLAIN_INT.fullmatch(s):  # fast path: the common case
        return Fraction(int(s))
    s = s.strip("*").strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s.strip("$").strip()
    if s.endswith("."):
        s = s[:-1]
    s = s.replace("\u2212", "-")
    if _DECIMAL.fullmatch(s):
        return Fraction(s.replace(",", ""))
    m = _FRACTION.fullmatch(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


# --- number words ------------------------------------------------------------------------------
_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_TENS["fourty"] = 40  # a common misspelling; unambiguous
_SCALES = {"billion": 10**9, "million": 10**6, "thousand": 10**3}
_SIGNS = ("minus", "negative")
_NUMBER_WORDS = sorted([*_UNITS, *_TENS, "hundred", *_SCALES], key=len, reverse=True)
_WORD = r"(?:%s)(?![^\W_])" % "|".join(_NUMBER_WORDS)
# A run of number words: "sixty-eight", "one hundred and five", "minus seven", "five five".
_WORD_RUN = r"(?:(?:minus|negative)\s+)?%s(?:(?:\s+and\s+|[\s-]+)%s)*" % (_WORD, _WORD)


def _below_100(words: list[str]) -> int | None:
    if len(words) == 1:
        w = words[0]
        return _UNITS.get(w, _TENS.get(w)) if w != "zero" else None
    if len(words) == 2 and words[0] in _TENS and words[1] in _UNITS and 1 <= _UNITS[words[1]] <= 9:
        return _TENS[words[0]] + _UNITS[words[1]]
    return None


def _below_1000(words: list[str]) -> int | None:
    if "hundred" not in words:
        return _below_100(words)
    i = words.index("hundred")
    head = words[:i]
    if len(head) != 1 or not 1 <= _UNITS.get(head[0], 0) <= 9:
        return None
    rest = words[i + 1:]
    if rest[:1] == ["and"]:
        rest = rest[1:]
        if not rest:
            return None
    tail = _below_100(rest) if rest else 0
    return None if tail is None else 100 * _UNITS[head[0]] + tail


def _cardinal(words: list[str]) -> int | None:
    for scale_word, scale in _SCALES.items():  # largest scale first
        if scale_word in words:
            i = words.index(scale_word)
            head = _cardinal(words[:i]) if words[:i] else None
            if head is None or not 1 <= head < 1000:
                return None
            rest = words[i + 1:]
            if rest[:1] == ["and"]:
                rest = rest[1:]
                if not rest:
                    return None
            tail = _cardinal(rest) if rest else 0
            if tail is None or tail >= scale:
                return None
            return head * scale + tail
    if "and" in words and words.index("and") == 0:
        return None
    return _below_1000(words)


def _parse_number_words(text: str) -> int | None:
    """The integer an English cardinal denotes ("seven", "sixty-eight", "minus five", "one
    thousand and five"), or None; one number only ("five five" and "five or six" are None)."""
    words = re.split(r"[\s-]+", text.strip().lower())
    if not words or len(words) > 40:
        return None
    sign = 1
    if words[0] in _SIGNS:
        sign, words = -1, words[1:]
    if words == ["zero"]:
        return 0
    if not words or "zero" in words:
        return None
    value = _cardinal(words)
    return None if value is None else sign * value


# --- numbers in running text -------------------------------------------------------------------
# A number in digits, taken as the whole run of digits, dots, commas and slashes so that "0,075",
# "1,23" and "2.0.1" are read as one unreadable token rather than as smaller valid ones. A sign
# counts only where it cannot be a binary minus ("3-4" is 3 and 4). Letters glued to either side
# ("5th", "x7") make it not a number; an underscore does not ("_7_" is markdown emphasis).
_DIGITS_TOKEN = r"(?<![^\W_])(?<![.,/])(?:(?<![)\]])[+-])?[0-9](?:[0-9.,/]*[0-9])?(?![^\W_])"
_NUMBER_TOKEN = re.compile(
    r"(?P<digits>%s)|(?<![^\W_])(?P<words>%s)" % (_DIGITS_TOKEN, _WORD_RUN), re.IGNORECASE
)
_UNREADABLE = object()  # a token that looks like a number but is not one ("0,075", "five five")


def _read_number(text: str) -> Fraction | None:
    """`parse_number`, or else an English cardinal."""
    value = parse_number(text)
    if value is None and len(text) <= 200:
        words = _parse_number_words(text)
        value = None if words is None else Fraction(words)
    return value


def _number_tokens(text: str) -> list[tuple[int, int, object]]:
    """(start, end, Fraction or `_UNREADABLE`) for every number in `text`, in order."""
    tokens = []
    for m in _NUMBER_TOKEN.finditer(text):
        if m.group("digits") is not None:
            value = parse_number(m.group("digits"))
        else:
            words = _parse_number_words(m.group("words"))
            value = None if words is None else Fraction(words)
        tokens.append((m.start(), m.end(), _UNREADABLE if value is None else value))
    return tokens
