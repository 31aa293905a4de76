"""Is a word used, even in disguise? The matcher behind "Do not use the word 'very'".

A whole-word check is evaded by writing the word so that it no longer tokenises as itself:
"ve-ry", "ve ry", "v e r y", "v3ry", "verrry", "verycalm". `uses_word(text, word, joinable)`
compares words by a skeleton in which digits and signs that pass for letters, and letters that
pass for each other ("I"/"l", "rn"/"m"), are one, and finds the word split across separators
or spaces, elongated, inflected ("things", "liked", "nicer"), or run together with other words
("soverynice", "greatI"): as a prefix followed by three letters or more or by a function word,
or in a word that splits wholly into function words, words of the text and words of `joinable`
(the caller's vocabulary). Real words that merely contain a short word ("every", "nothing",
"breathing", "likely", "discovery") are other words: they neither split into known words nor
start with the word, or they are listed in `OTHER_WORDS`; after a content word, "-like" is a
suffix ("cloudlike"). Non-ASCII disguises (look-alike letters, zero-width characters) never get
here: the text family's `visible_reply` refuses non-ASCII replies first.
`envs_catalog.text.instructions` uses it for its forbidden-word rule.
"""

from __future__ import annotations

import re
from typing import Iterable

from envs_catalog.text.genuine import FUNCTION_WORDS

# Digits and signs that pass for letters, then letters that pass for each other.
_LOOKALIKE = str.maketrans("013456789@$|!i", "oleasgtbgaslll")
_INFLECTIONS = ("s", "es", "d", "ed", "ing", "r", "er", "st", "est")
_PIECE = re.compile(r"[a-z0-9@$|]+(?:!+[a-z0-9@$|]+)*")  # "!" only inside a word ("n!ce")
# Real words that contain a forbidden-looking word and are other words ("nothing", "alike").
OTHER_WORDS = frozenset("""
nothing something anything everything plaything alike goodbye goodness goodnight goodwill goodies
greatness greatcoat justice justify justified justifies justifying justification justly justness
likely likeness likewise likelihood likeliness likeable likable likened niceness niceties
thingamajig venice sheathing suchlike
""".split())
_CONTRACTION_PIECES = frozenset("s t d ll re ve m".split())  # "it's": never a part of a join
_SUFFIXES = ("like",)  # after a content word a suffix, not the word: "cloudlike", "dreamlike"


def skeleton(text: str) -> str:
    """`text` lower-cased with look-alikes made one ("G00d" -> "good", "1ike" -> "llke")."""
    return text.lower().replace("rn", "m").translate(_LOOKALIKE)


_FUNCTION_SKELETONS = {skeleton(w) for w in FUNCTION_WORDS}


def _squeeze(text: str) -> str:
    return re.sub(r"(.)\1+", r"\1", text)


def _same_word(piece: str, target: str) -> bool:
    """`piece` is `target` (both skeletons), or `target` elongated ("verrry", "goood")."""
    return piece == target or (re.search(r"(.)\1\1", piece) is not None
                               and _squeeze(piece) == _squeeze(target))


def _joined(piece: str, target: str, vocabulary: set[str], function_words: set[str]) -> bool:
    """Whether `piece` is `target` run together with other words: it starts with `target` and
    goes on for three letters or more or a function word ("verycalm", "greatI"), or it splits
    wholly into words of
    `vocabulary`, one of them `target` ("soverynice"). A suffix of `_SUFFIXES` after a content
    word is no join ("cloudlike")."""
    rest = piece[len(target):]
    if piece.startswith(target) and (len(rest) >= 3 or rest in function_words):
        return True
    n = len(piece)
    if any(target == skeleton(end) for end in _SUFFIXES) and piece.endswith(target):
        head = piece[: n - len(target)]
        if len(head) >= 3 and head not in function_words:
            return False
    reach: list[set[bool]] = [set() for _ in range(n + 1)]  # per prefix: has `target` been used
    reach[0].add(False)
    for i in range(n):
        for used in tuple(reach[i]):
            for j in range(i + 1, n + 1):
                part = piece[i:j]
                if part == target:
                    reach[j].add(True)
                elif part in vocabulary and j - i < n:  # never the whole piece as one word
                    reach[j].add(used)
    return True in reach[n]


def uses_word(text: str, word: str, joinable: Iterable[str] = ()) -> bool:
    """Whether `text` uses `word` (one word), also in disguise (see the module docstring).
    `joinable`: words, beyond function words and the text's own, that a join may be made of."""
    target = skeleton(word)
    raw = _PIECE.findall(text.lower())
    pieces = [skeleton(p) for p in raw]
    stems = {target + skeleton(end) for end in _INFLECTIONS}
    if target.endswith("e"):
        stems |= {target[:-1] + skeleton(end) for end in ("ing", "ed", "er", "est")}
    vocabulary: set[str] | None = None
    for original, piece in zip(raw, pieces):
        if original in OTHER_WORDS:
            continue
        if _same_word(piece, target) or piece in stems:
            return True
        if target in piece:
            if vocabulary is None:
                known = {*FUNCTION_WORDS, *joinable, *(p for p in raw if len(p) >= 3)}
                vocabulary = {skeleton(w) for w in known - _CONTRACTION_PIECES
                              if len(w) >= 2 or w == "a"}
            if _joined(piece, target, vocabulary, _FUNCTION_SKELETONS):
                return True
    for i in range(len(pieces)):  # split across separators or spaces: "ve-ry", "v e r y"
        joined = pieces[i]
        for j in range(i + 1, min(len(pieces), i + len(target) + 1)):
            joined += pieces[j]
            if len(_squeeze(joined)) > len(target):
                break
            if _same_word(joined, target):
                return True
    return False
