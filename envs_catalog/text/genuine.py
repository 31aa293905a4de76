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
  light"), not writing;
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
"""

from __future__ import annotations

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
            or (prose and not has_verb(words))):
        reasons.append("word_list")
    if _repetitive(words, lines, supplied):
        reasons.append("repetitive")
    if _filler(words, lines):
        reasons.append("filler")
    return reasons
