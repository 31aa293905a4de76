"""Is a reply genuine writing, or filler shaped to meet a rule's letter? The content floor.

A policy trained with RL is paid for whatever a checker passes, so a check of form ("at most
30 words", "three bullet points", "mentions 'bright'") pays for one word, a repeated word or a
keyword list unless the reply must first be a response at all. This module holds what such a
floor needs: closed word classes (`FUNCTION_WORDS`, `NUMBER_WORDS`, `VERBS`; lower case) and
`degeneracy(text, given)`, the reasons a free-text reply is not genuine, each a metric name:

- "thin": under `MIN_WORDS` words, or fewer distinct content words of its own than
  `MIN_OWN_CONTENT` or than `OWN_CONTENT_SHARE` of the words the prompt did not supply (the
  content words the prompt supplied, `given`: the topic, required words, are not its own);
- "word_list": function words under `MIN_FUNCTION_SHARE` of the words, or (for prose) no verb
  at all (`has_verb`): a list of words or noun phrases ("the harbor and the boats and the
  light"), not writing; or (for prose) a list run on after the writing (`_run_on_list`: a unit of
  four words with neither a function word nor a verb, of six with no function word, of eight
  with no verb, or verbless units over a third of the words, headings and list items aside);
- "repetitive": a low distinct-word ratio, one content word over and over, a word trigram three
  times or a 5-gram twice (unless it holds only function words and the prompt's words: "the
  quiet harbor"), or two lines alike once digits and list markers are dropped;
- "filler": three numbers in a row, numbers over a quarter of the words, or a list item (a
  bullet or numbered line) under `MIN_ITEM_WORDS` words.

An empty list means the text passes. `envs_catalog.text.instructions` gates every constraint on
it; `envs_catalog.multiagent.pairwise`'s rule judge uses the word classes to tell a sentence
from a keyword list. These are shallow signals, not a parser: the thresholds are set so that
the generated and hand-written genuine replies of tests/envs_catalog/text/test_instructions_adversarial.py are
never denied, and a list dressed as a sentence ("Imagine the village and the oyster.") passes.

Real words (`is_word`, `unknown_words`): a word is English when it, or a stem its inflection
leaves ("gulls" -> "gull", "drifted" -> "drift", "nicer" -> "nice", "happily" -> "happy"), is in
the web2 word list of the optional `english_words` package (Webster's Second, public domain;
`dictionary()`), is a function, number or verb word here, or is in the caller's own vocabulary.
Words of one or two letters count only from the closed classes (web2 lists "aa", "qi", every
single letter). Without the package the check degrades to spelling shape (`plausible_spelling`:
a vowel, no five consonants in a row, no letter three times running): keyboard mash is still
refused, syllable-built pseudo-words ("balo tenu") are not; `dictionary_available()` says which.
`TEXT_WORDS` is the closed class of words that talk about a text or its grading ("word",
"sentence", "bullet", "postscript", "requirement"): a reply whose words are about its own rules
instead of its topic is not a response (`envs_catalog.text.instructions` reads it so).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Iterable

FUNCTION_WORDS = frozenset("""
a an the this that these those my your his her its our their some any no every each either
neither all both few many much more most other another such what which whose own
i me we us you he him she it they them myself yourself himself herself itself ourselves
themselves who whom someone somebody anyone anybody everyone everybody nobody nothing something
anything everything one ones there here
about above across after against along among around as at before behind below beneath beside
besides between beyond by down during except for from in inside into near of off on onto out
outside over past per since through throughout till to toward towards under until up upon with
within without via like
and but or nor so yet because although though while whereas if unless than whether when where
why how once
am is are was were be been being have has had having do does did doing can could will would
shall should may might must
not never also very just really too quite only even still then now again always often
sometimes soon already ever perhaps maybe rather almost away back else instead
""".split()) | frozenset(  # the pieces contractions leave ("it's" -> "it", "s")
    "s t d ll re ve m isn aren wasn weren don doesn didn won wouldn couldn shouldn hasn haven hadn".split())
NUMBER_WORDS = frozenset("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
hundred thousand million first second third fourth fifth sixth seventh eighth ninth tenth
""".split())

_AUXILIARIES = frozenset(("am is are was were be been being have has had having do does did can "
                          "could will would shall should may might must").split())
# Irregular verbs: base, past, past participle (third person and -ing follow the rules).
_IRREGULAR = """
arise arose arisen; awake awoke awoken; bear bore borne; beat beat beaten; become became become;
begin began begun; bend bent bent; bite bit bitten; bleed bled bled; blow blew blown;
break broke broken; breed bred bred; bring brought brought; build built built; burn burnt burnt;
burst burst burst; buy bought bought; catch caught caught; choose chose chosen; cling clung clung;
come came come; cost cost cost; creep crept crept; cut cut cut; deal dealt dealt; dig dug dug;
draw drew drawn; dream dreamt dreamt; drink drank drunk; drive drove driven; eat ate eaten;
fall fell fallen; feed fed fed; feel felt felt; fight fought fought; find found found;
flee fled fled; fling flung flung; fly flew flown; forget forgot forgotten; forgive forgave forgiven;
freeze froze frozen; get got gotten; give gave given; go went gone; grind ground ground;
grow grew grown; hang hung hung; hear heard heard; hide hid hidden; hit hit hit; hold held held;
hurt hurt hurt; keep kept kept; kneel knelt knelt; know knew known; lay laid laid; lead led led;
leap leapt leapt; leave left left; lend lent lent; let let let; lie lay lain; lose lost lost;
make made made; mean meant meant; meet met met; pay paid paid; put put put; quit quit quit;
read read read; ride rode ridden; ring rang rung; rise rose risen; run ran run; say said said;
see saw seen; seek sought sought; sell sold sold; send sent sent; set set set; shake shook shaken;
shine shone shone; shoot shot shot; shrink shrank shrunk; shut shut shut; sing sang sung;
sink sank sunk; sit sat sat; sleep slept slept; slide slid slid; speak spoke spoken;
spend spent spent; spin spun spun; split split split; spread spread spread; spring sprang sprung;
stand stood stood; steal stole stolen; stick stuck stuck; sting stung stung; strike struck struck;
swear swore sworn; sweep swept swept; swim swam swum; swing swung swung; take took taken;
teach taught taught; tear tore torn; tell told told; think thought thought; throw threw thrown;
understand understood understood; wake woke woken; wear wore worn; weave wove woven;
weep wept wept; win won won; wind wound wound; withstand withstood withstood; write wrote written
"""
_REGULAR = """
adapt add admire adore allow appear appreciate arrive ask bake bloom blossom bob boast borrow
brew brighten bubble buzz call camp cancel care carry change charge chase chat chill chirp
circle clean climb close collect combine commute connect cook cool cover crash crawl creak cross
crowd cry dance decide deliver deserve design dim discover display dress drift drop dry earn
echo elevate empty end endure enjoy ensure enter explore face fade feature fill finish fish
flicker float flow fold follow gather glance glisten glitter glow graze greet guarantee guard
handle happen hate heat help hike hope hover hum hurry illuminate imagine include insulate
invite join jump kiss knock land last laugh lean learn lift like line linger listen live look
love mark measure melt mend miss mount move murmur need nod note notice offer open order
organize pack paint pair pass pause perform pick plan plant play point pour power practice
praise pray prefer prepare press protect provide pull push rain reach relax remain remember
remind repeat repel resist rest retain return ripen ripple rock roll row rush sail save seal
seem serve settle sharpen shield shout show sigh sip skip slice slip smell smile sound sparkle
splash spot stare start stay step stop store stream stretch stroll study suit support surround
survive sway taste thank tick tire touch track transform travel trust try tuck turn unfold
upgrade use visit wait walk wander want warm wash watch wave weigh whisper wish wonder work
worry wrap yawn zip
""".split()


def _forms(base: str) -> tuple[str, ...]:
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        third = base + "es"
    elif base.endswith("y") and base[-2] not in "aeiou":
        third = base[:-1] + "ies"
    else:
        third = base + "s"
    if re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwxy]", base):  # one syllable, CVC: "stop" -> "stopped"
        past, ing = base + base[-1] + "ed", base + base[-1] + "ing"
    elif base.endswith("e"):
        past, ing = base + "d", base[:-1] + "ing"
    elif base.endswith("y") and base[-2] not in "aeiou":
        past, ing = base[:-1] + "ied", base + "ing"
    else:
        past, ing = base + "ed", base + "ing"
    return base, third, past, ing


# Verbs a short description or text uses (finite forms, participles, -ing). A closed list, so a
# keyword list cannot pass for a sentence; a caller may add structural cues of its own.
_IRREGULAR_FORMS = [entry.split() for entry in _IRREGULAR.split(";")]
VERBS = frozenset(
    [*_AUXILIARIES]
    + [form for base in _REGULAR for form in _forms(base)]
    + [form for base, past, participle in _IRREGULAR_FORMS
       for form in (*_forms(base)[:2], past, participle, _forms(base)[3])]
)

REASONS = ("thin", "word_list", "repetitive", "filler")
MIN_WORDS = 4
MIN_OWN_CONTENT = 2  # distinct content words beyond the prompt's
OWN_CONTENT_SHARE = 0.2  # ... and this share of the words the prompt did not supply
MIN_FUNCTION_SHARE = 0.15
MIN_DISTINCT_RATIO = 0.45  # distinct words / words, for replies of 12 words or more
MAX_CONTENT_REPEATS = 3  # one content word at most max(3, words / 8) times
MIN_ITEM_WORDS = 2
SALAD_WORDS = 4  # a unit this long needs a function word or a verb
BARE_UNIT = 6  # ... and this long, a function word ("rest plant enjoy piano looked taken")
LONG_UNIT = 8  # ... and this long, a verb
MAX_FRAGMENT_SHARE = 1 / 3  # of a reply's words (list items aside), in units with no verb
_UNIT = re.compile(r"[^.!?;:]+")

_TOKEN = re.compile(r"[a-z0-9]+")
_MARKS = str.maketrans("", "", "-*+.)(")
_ARTICLES = frozenset("a an the my your his her its our their every each".split())
_NOUN_MARKERS = frozenset("""
a an the this that these those my your his her its our their every each some any no many few
of in on at to for from with by into onto over under near through across around about
""".split())
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|[0-9]+[.)]|[a-z][.)])[ \t]+(.*)$")


def tokens(text: str) -> list[str]:
    """The lower-case words (runs of ASCII letters and digits) of `text`."""
    return _TOKEN.findall(text.lower())


def _is_number(token: str) -> bool:
    return token.isdigit() or token in NUMBER_WORDS


def _line_shape(line: str) -> str:
    """A line without list marker, digits, case and punctuation: two lines alike in shape are
    one line repeated with a counter."""
    bare = re.sub(r"[0-9]+", " ", line.lower()).translate(_MARKS)
    return " ".join(bare.split())


def _repetitive(words: list[str], lines: list[str], supplied: set[str]) -> bool:
    n = len(words)
    if n >= 12 and len(set(words)) / n < MIN_DISTINCT_RATIO:
        return True
    content = Counter(w for w in words if w not in FUNCTION_WORDS)
    if content and max(content.values()) > max(MAX_CONTENT_REPEATS, n / 8):
        return True
    for size, most in ((3, 2), (5, 1)):  # the prompt's own phrase ("the quiet harbor") aside
        grams = Counter(gram for gram in (tuple(words[i:i + size]) for i in range(n - size + 1))
                        if not all(w in FUNCTION_WORDS or w in supplied for w in gram))
        if grams and max(grams.values()) > most:
            return True
    shapes = [s for s in map(_line_shape, lines) if tokens(s)]
    return len(set(shapes)) < len(shapes)


def _filler(words: list[str], lines: list[str]) -> bool:
    numbers = [_is_number(w) for w in words]
    if sum(numbers) > max(3, len(words) / 4):
        return True
    if any(all(numbers[i:i + 3]) for i in range(len(words) - 2)):
        return True
    items = [m.group(1) for m in map(_LIST_ITEM.match, lines) if m]
    return any(len(tokens(item)) < MIN_ITEM_WORDS for item in items)


def _run_on_list(lines: list[str]) -> bool:
    """Words run on after the writing: a unit (a sentence, or a list item) of `SALAD_WORDS` words
    or more with neither a function word nor a word of `VERBS` ("tintless unimpeded gaintwist
    moorpan"), a sentence of `BARE_UNIT` words with no function word ("rest plant enjoy piano looked
    taken"), a
    unit of `LONG_UNIT` words with no verb ("the enocyte of overman the slopmaker of tyste"), or
    verbless units (list items aside) holding more than `MAX_FRAGMENT_SHARE` of the words, six or
    more (a clause padded with short noun phrases; headings -- a line opened by "#" or "**" or
    closed by ":" -- aside). Titles, salutations and short items pass."""
    fragments = prose_words = 0
    for line in lines:
        item = _LIST_ITEM.match(line)
        bare = line.strip().strip("*_ ")
        heading = line.lstrip().startswith("#") or bare.endswith(":") or line.strip().startswith("**")
        for unit in ([item.group(1)] if item else _UNIT.findall(line)):
            found = tokens(unit)
            n, verb = len(found), has_verb(found)
            function = any(w in FUNCTION_WORDS for w in found)
            if n >= SALAD_WORDS and not function and not any(w in VERBS for w in found):
                return True  # the closed lists here: a suffix alone ("porched", "glans") is no verb
            if n >= BARE_UNIT and not function and not item:  # an item may be terse: "Shops sell warm bread"
                return True
            if n >= LONG_UNIT and not verb:
                return True
            if not item and not heading:
                prose_words += n
                fragments += 0 if verb else n
    return fragments >= 6 and fragments > MAX_FRAGMENT_SHARE * prose_words


def has_verb(words: list[str]) -> bool:
    """Whether lower-case `words` hold a verb: a word of `VERBS` after no article or possessive
    ("the smile" is a noun); a word in -s or -ed that no article, determiner, preposition or
    number comes right before ("rain drums", "it rained"; not "the drums"); or a word between
    a plural noun and a function word ("gulls wheel above")."""
    for i, w in enumerate(words):
        before = words[i - 1] if i else ""
        if w in _AUXILIARIES or (w in VERBS and before not in _ARTICLES):  # not "the smile"
            return True
        if i == 0 or len(w) < 3 or w in FUNCTION_WORDS or _is_number(w):
            continue
        if (len(w) >= 4 and w.endswith(("s", "ed")) and before not in _NOUN_MARKERS
                and not _is_number(before)):
            return True
        if (before.endswith("s") and before not in FUNCTION_WORDS and i + 1 < len(words)
                and words[i + 1] in FUNCTION_WORDS):
            return True
    return False


def degeneracy(text: str, given: Iterable[str] = (), *, prose: bool = True) -> list[str]:
    """The reasons `text` is not genuine writing ("thin", "word_list", "repetitive", "filler";
    see the module docstring), empty when it is. `given`: text the prompt supplied (topic,
    required words), whose content words are not the reply's own. A fixed phrase the prompt
    requires (an ending) is best cut off before the call: its function words would pass for
    the reply's own. `prose=False` (short field values, as in JSON) asks for no verb."""
    words = tokens(text)
    lines = [line for line in text.splitlines() if line.strip()]
    supplied = {w for g in given for w in tokens(g) if w not in FUNCTION_WORDS}
    own = {w for w in words if w.isalpha() and len(w) > 1 and w not in FUNCTION_WORDS
           and w not in NUMBER_WORDS and w not in supplied}
    reasons = []
    unsupplied = sum(w not in supplied for w in words)
    if len(words) < MIN_WORDS or len(own) < max(MIN_OWN_CONTENT, OWN_CONTENT_SHARE * unsupplied):
        reasons.append("thin")
    if (not words or sum(w in FUNCTION_WORDS for w in words) < MIN_FUNCTION_SHARE * len(words)
            or (prose and not has_verb(words)) or (prose and _run_on_list(lines))):
        reasons.append("word_list")
    if _repetitive(words, lines, supplied):
        reasons.append("repetitive")
    if _filler(words, lines):
        reasons.append("filler")
    return reasons


# --- real words ----------------------------------------------------------------------------------
# Words about a text, a task or its grading rather than about a topic (lemmas, lower case): what
# a reply that describes its rules is made of. Ambiguous everyday nouns ("letter", "line",
# "point", "key", "value", "capital") are left out: they are the prompt's vocabulary only where a
# caller derives it from its own prompt.
TEXT_WORDS = frozenset("""
word text sentence paragraph reply response answer rule instruction constraint requirement
prompt keyword phrase comma punctuation bullet bulleted postscript json lowercase uppercase ascii
capitalization capitalisation capitalize capitalized lowercased uppercased wordcount checklist
criterion criteria guideline specification format formatting mention wording spelling grammar
markdown hyphen semicolon apostrophe quotation
""".split())
# Short words of everyday English beyond the closed classes above (web2's two-letter entries are
# mostly abbreviations and letter names, so a word this short counts only from here).
SHORT_WORDS = frozenset("ok oh ah hi ox ax pi go tv ago".split())
_IRREGULAR_PLURALS: dict[str, str] = {
    plural: single for plural, _, single in (pair.partition(":") for pair in """
feet:foot teeth:tooth geese:goose mice:mouse men:man women:woman children:child people:person
oxen:ox lice:louse dice:die
""".split())}
MAX_CONSONANT_RUN = 4  # "strengths" has five: the fallback errs towards English
_CLOSED = FUNCTION_WORDS | NUMBER_WORDS | VERBS | SHORT_WORDS


@functools.lru_cache(maxsize=1)
def dictionary() -> frozenset[str] | None:
    """The lower-case alphabetic web2 words of `english_words` (cached per process), or None
    when the package is not importable (then `is_word` reads spelling shape only)."""
    try:
        from english_words import get_english_words_set
    except ImportError:
        return None
    return frozenset(w for w in get_english_words_set(["web2"], lower=True, alpha=True) if w.isascii())


def dictionary_available() -> bool:
    return dictionary() is not None


def plausible_spelling(word: str) -> bool:
    """The fallback without a dictionary: a vowel (or y), no run of five consonants, no letter
    three times in a row. Keyboard mash ("qwrtz", "sdfgh", "aaargh") fails; pseudo-words pass."""
    w = word.lower()
    return (bool(re.search(r"[aeiouy]", w)) and not re.search(rf"[^aeiouy]{{{MAX_CONSONANT_RUN + 1},}}", w)
            and not re.search(r"(.)\1\1", w))


def stems(word: str) -> list[str]:
    """`word` and the stems an English inflection may have left: plurals and third persons
    ("-s", "-es", "-ies", "-ves"), pasts ("-ed", "-d", "-ied", a doubled consonant), "-ing",
    comparatives ("-er", "-est", "-ier"), adverbs ("-ly", "-ily"), a possessive "-s" and the
    irregular plurals ("feet", "children")."""
    w = word.lower()
    out = [w]
    if w in _IRREGULAR_PLURALS:
        out.append(_IRREGULAR_PLURALS[w])

    def add(stem: str, *ends: str) -> None:
        if len(stem) >= 3:  # "air" is not "ai" + "-r"
            out.extend(stem + e for e in ends)

    for suffix, back in (("ies", "y"), ("ied", "y"), ("ier", "y"), ("iest", "y"), ("ily", "y"),
                         ("ves", "f"), ("ves", "fe")):
        if w.endswith(suffix):
            add(w[: -len(suffix)], back)
    for suffix in ("s", "es", "ed", "d", "ing", "er", "est", "ly", "r", "st"):
        if w.endswith(suffix) and len(w) > len(suffix) + 1:
            stem = w[: -len(suffix)]
            add(stem, "", "e")
            if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                add(stem[:-1], "")  # "stopped" -> "stop", "bigger" -> "big"
    return out


def is_word(word: str, vocabulary: Iterable[str] = ()) -> bool:
    """Whether `word` (letters or digits) is English: digits, a word of the closed classes or of
    `vocabulary` (the caller's own, lower case: its topics, required words, product names), or
    one whose stem (`stems`) is in `dictionary()` -- or, without the package,
    `plausible_spelling`. One- and two-letter words count only from the closed classes and
    `SHORT_WORDS`."""
    w = word.lower()
    if not w or w.isdigit():
        return bool(w)
    vocab = vocabulary if isinstance(vocabulary, (set, frozenset)) else frozenset(vocabulary)
    if w in _CLOSED or w in vocab:
        return True
    if not w.isalpha() or len(w) <= 2:
        return False
    words = dictionary()
    if words is None:
        return plausible_spelling(w)
    return any(s in words or s in vocab or s in VERBS for s in stems(w))


def unknown_words(text: str, vocabulary: Iterable[str] = ()) -> list[str]:
    """The words of `text` (`tokens`) that `is_word` does not know, in order, repeats kept."""
    vocab = frozenset(v.lower() for v in vocabulary)
    return [w for w in tokens(text) if not is_word(w, vocab)]
