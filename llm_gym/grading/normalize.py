"""What a reply says once its disguises are taken off: the text every answer reader parses.

`visible_text` folds a reply the way it is *shown* to a reader, so that two replies that look the
same are read the same: NFKC (fullwidth and mathematical digits and letters become ASCII);
format characters (zero-width space/joiners, soft hyphen, BOM, tag characters) dropped, while
bidirectional overrides, which reorder what is shown, make the reply `confusable`; letters of
Cyrillic, Greek, Armenian and Cherokee that pass for Latin ones read as Latin in words made of
such look-alikes or mixing them with Latin (a mixed word keeping an unmapped one is
`confusable`); accents on letters dropped, a mark on a digit unreadable; super/subscripts kept
apart from the digits before them ("7⁵" is not 75); decimal digits of other scripts refused
(`unsupported_digits`); special-token text (`<|pad|>`, `</s>`, ...) and control characters made
line breaks, so "7<|pad|>5" is two numbers, never 75. `llm_gym.grading.policy` reads declared
answers from this text; `llm_gym.grading.answers` (the numeric reader) does too.
"""

from __future__ import annotations

import enum
import re
import unicodedata

__all__ = ["AnswerStatus", "GLYPH", "visible_text"]


class AnswerStatus(str, enum.Enum):
    """Why an extraction did (OK) or did not produce a candidate."""

    OK = "ok"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    INVALID_TEXT = "invalid_text"
    CONFLICTING = "conflicting"
    NO_ANSWER = "no_answer"  # nothing declared, and no line states an answer
    MALFORMED = "malformed"
    CONFUSABLE = "confusable"  # a word mixing Latin with unmapped look-alikes, or bidi overrides
    UNSUPPORTED_DIGITS = "unsupported_digits"  # decimal digits of a script other than ASCII



GLYPH = "\x01"  # an unreadable glyph: private-use, unassigned, or a mark on a digit
_CONTROLS = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_SPECIAL_TOKEN_TEXT = re.compile(
    r"<\|[^<>|\n]{0,64}\|>|</?s>|<(?:pad|unk|eos|bos|eot|mask|sep|cls)>", re.IGNORECASE
)
# Before NFKC, which would turn "7⁵" into "75": keep super/subscripts visibly apart.
_SUPER_SUB = str.maketrans(
    {c: "^" + d for c, d in zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")}
    | {c: "_" + d for c, d in zip("₀₁₂₃₄₅₆₇₈₉₊₋", "0123456789+-")}
)
# Default-ignorable marks (Unicode's Default_Ignorable_Code_Point among the combining marks): the
# grapheme joiner and variation selectors render as nothing, on a digit as much as on a letter.
_IGNORABLE_MARKS = frozenset("\u034f\u180b\u180c\u180d" + "".join(map(chr, range(0xFE00, 0xFE10)))
                             + "".join(map(chr, range(0xE0100, 0xE01F0))))
_BIDI_OVERRIDES = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u1680")
_PUNCT_LOOKALIKES = {
    **dict.fromkeys("\ua789\u2236\u02d0\u05c3\u0589\u1361", ":"),
    **dict.fromkeys("\u1400\u2e40\ua4ff\u30a0", "="),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212\ufe63\u2043", "-"),
    # typographic apostrophes and single quotes: "It\u2019s 5" is "It's 5" ("'s", "I'll", "let's")
    **dict.fromkeys("\u2018\u2019\u02bc", "'"),
    "\u2215": "/",
}
_LATIN_LOOKALIKES = dict(zip(
    "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢıȷɑɡɩʋ", "abcdefghijklmnoprstuvwyzijagiv"
))
# Letters of other scripts that pass for Latin ones. A word made only of them, or mixing them
# with Latin letters, is mapped ("Аnswer" with a Cyrillic А is "Answer"); a mixed word with a
# letter not in this table is refused (CONFUSABLE), so a disguised marker never goes unread.
_SCRIPT_LOOKALIKES = dict(zip(
    "АВЕКМНОРСТХУЅІЈԚԜҮӀԀаеёорсухѕіїјԁԛԝһӏгпткмнш"
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχωγης"
    "ՕՍօոսհգց"
    "ᎪᏴᏟᎬᎻᎫᏦᎷᏢᏚᎢᏔᏃᏙᎠᏀᏞᏒ",
    "ABEKMHOPCTXYSIJQWYlDaeeopcyxsiijdqwhlrntkmhw"
    "ABEZHIKMNOPTYXaeikvoptuxwyns"
    "OUonuhqg"
    "ABCEHJKMPSTWZVDGLR",
))
_LOOKALIKE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC")
_LETTERS = re.compile(r"[^\W\d_]+")


def _fold_char(c: str) -> str | AnswerStatus:
    """One non-ASCII character of NFKC text as it is read (possibly "", or a refusal)."""
    cat = unicodedata.category(c)
    if cat == "Cf":  # zero-width space/joiners, soft hyphen, BOM, tag characters, bidi marks
        return AnswerStatus.CONFUSABLE if c in _BIDI_OVERRIDES else ""
    if c in _BLANKS or cat == "Zs":
        return " "
    if cat in ("Co", "Cn", "Cs"):
        return GLYPH
    if cat[0] == "N":  # NFKC already made fullwidth, mathematical and circled digits ASCII
        return AnswerStatus.UNSUPPORTED_DIGITS
    if c in _PUNCT_LOOKALIKES:
        return _PUNCT_LOOKALIKES[c]
    if cat[0] == "L":
        if c in _LATIN_LOOKALIKES:
            return _LATIN_LOOKALIKES[c]
        base = unicodedata.normalize("NFD", c)[0]  # "Á" -> "A"
        if base.isascii() and base.isalpha():
            return base
    return c


def _fold_words(text: str) -> str | AnswerStatus:
    """Map look-alike letters of other scripts in words that are made only of look-alikes or
    that mix them with Latin letters; refuse a mixed word that keeps an unmapped one."""

    def fold(m: re.Match) -> str:
        word = m.group(0)
        if word.isascii():
            return word
        mapped = word.translate(_SCRIPT_TABLE)
        if mapped.isascii():
            return mapped
        if any(c.isascii() for c in word) and any(
            not c.isascii() and unicodedata.name(c, "").startswith(_LOOKALIKE_SCRIPTS)
            for c in mapped
        ):
            raise _Confusable
        return word

    try:
        return _LETTERS.sub(fold, text)
    except _Confusable:
        return AnswerStatus.CONFUSABLE


class _Confusable(Exception):
    pass


_SCRIPT_TABLE = str.maketrans(_SCRIPT_LOOKALIKES)


def visible_text(text: str) -> str | AnswerStatus:
    """The text the answer is read from, or the reason it cannot be read (see the module doc)."""
    text = _CONTROLS.sub("\n", text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text.translate(_SUPER_SUB))
        out: list[str] = []
        for c in text:
            if c.isascii():
                out.append(c)
                continue
            if c in _IGNORABLE_MARKS:  # invisible: shown as nothing, read as nothing
                continue
            if unicodedata.category(c)[0] == "M":  # a combining mark
                # on a digit it changes what the digit says ("7" + U+0338 is "not 7"): unreadable;
                # on a letter it is dropped, so accents cannot disguise a marker word
                if out and "0" <= out[-1] <= "9":
                    out.append(GLYPH)
                continue
            folded = _fold_char(c)
            if isinstance(folded, AnswerStatus):
                return folded
            out.append(folded)
        text = _fold_words("".join(out))
        if isinstance(text, AnswerStatus):
            return text
    return _SPECIAL_TOKEN_TEXT.sub("\n", text)
