"""Reading one quantity completely: a number, its scale word and its unit, or nothing.

`read_quantity(text)` is the number contracts' parser of an answer's value (after the policy in
`llm_gym.grading.policy` has found the declared answer and taken its lead-in off). It accepts
exactly one quantity and nothing else:

- a number: digits with an optional sign (`-`, `+`, "minus", "negative"), decimals (`.5`),
  thousands separators in the strict `1,234,567` form (also LaTeX's `1{,}234`), fractions `a/b`
  and `\\frac{a}{b}`, mixed numbers (`1 1/2`), scientific notation (`7.5e3`, `7.5 x 10^3`,
  `7.5 \\times 10^{3}`), or English cardinals ("seventy-five", "one hundred and five");
- then scale words, which multiply it exactly: "thousand", "million", "billion", "trillion",
  "hundred", "dozen", a `k` glued to digits, and "%" / "percent" (one hundredth) -- so "5
  billion" is 5000000000 and "75 thousand" is not 75;
- then at most one unit (`llm_gym.grading.units`: "km", "kilometres", "m/s", "$" before the
  number) or one of the caller's nouns ("apples"), and neutral words that change nothing ("in
  total", "exactly", "altogether").

Anything else -- a bound ("at least", "~", "<", "or more"), a second number ("5 or 6", "5, 6"),
another word -- makes the text not a quantity: `None`. No list of forbidden words decides
this; what is not in the grammar is refused. Values are exact `Fraction`s; cost is linear in the
text (at most 200 characters are read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from llm_gym.grading.numeric import _parse_number_words
from llm_gym.grading.units import Unit, lookup

__all__ = ["Quantity", "read_quantity", "strip_decoration"]

_MAX_CHARS = 200
_MAX_EXPONENT = 400


@dataclass(frozen=True)
class Quantity:
    """`value` exactly, in `unit` (None: no unit written); `noun` is the caller's noun when one
    followed the number ("apples")."""

    value: Fraction
    unit: Unit | None = None
    noun: str | None = None


# --- decoration --------------------------------------------------------------------------------
_WRAPPERS = (("**", "**"), ("__", "__"), ("*", "*"), ("_", "_"), ("`", "`"), ("$$", "$$"), ("$", "$"),
             ("\\(", "\\)"), ("\\[", "\\]"), ('"', '"'), ("'", "'"), ("\u201c", "\u201d"),
             ("\u2018", "\u2019"), ("(", ")"), ("[", "]"))
_LATEX_WRAP = re.compile(
    r"\\+(?:boxed|fbox|text|textbf|textrm|textit|mathrm|mathbf|mathit|bm|displaystyle|underline)"
    r"[ \t]*\{(.*)\}", re.DOTALL)


_HEADING = re.compile(r"^#{1,6}[ \t]+")


def strip_decoration(text: str) -> str:
    """`text` without the markup around a value: a markdown heading mark, whitespace, markdown
    emphasis and code,
    `$...$`, `\\(...\\)`, quotes, one pair of brackets around the whole, LaTeX wrappers
    (`\\boxed{}`, `\\text{}`, `\\mathbf{}`, ...) and one final `.` or `!`."""
    s = _HEADING.sub("", text.strip(), count=1)
    for _ in range(8):
        before = s
        if s[-1:] in (".", "!") and not s.endswith(".."):
            s = s[:-1].rstrip()
        for a, b in _WRAPPERS:
            if len(s) >= len(a) + len(b) + 1 and s.startswith(a) and s.endswith(b):
                inner = s[len(a):len(s) - len(b)]
                if a in ("(", "["):
                    # "(75)" is 75; "[1, 2]" and "(a)(b)" are not one wrapped value
                    if not _balanced(inner, a, b) or any(c in inner for c in ",;()[]{}"):
                        continue
                elif a in inner or (b != a and b in inner):
                    continue  # "'a', 'b'" and "**a** or **b**" are not one wrapped value
                s = inner.strip()
                break
        m = _LATEX_WRAP.fullmatch(s)
        if m and _balanced(m.group(1), "{", "}"):
            s = m.group(1).strip()
        if s == before:
            break
    return s


def _balanced(s: str, open_: str, close: str) -> bool:
    depth = 0
    for c in s:
        depth += (c == open_) - (c == close)
        if depth < 0:
            return False
    return depth == 0


# --- the number --------------------------------------------------------------------------------
_SIGN = r"(?P<sign>[-+]|minus[ \t]+|negative[ \t]+)?"
_DIGITS = r"(?:[1-9][0-9]{0,2}(?:,[0-9]{3})+|[0-9]+)"
_DEC = rf"(?:{_DIGITS}(?:\.[0-9]+)?|\.[0-9]+)"
_NUMBER = re.compile(
    _SIGN + r"[ \t]*(?:"
    rf"(?P<mixed_w>[0-9]+)[ \t]+(?P<mixed_n>[0-9]+)[ \t]*/[ \t]*(?P<mixed_d>[0-9]+)"
    rf"|(?P<frac_n>[0-9]+)[ \t]*/[ \t]*(?P<frac_d>[0-9]+)"
    r"|\\[dt]?frac[ \t]*\{[ \t]*(?P<tex_n>[0-9]+)[ \t]*\}[ \t]*\{[ \t]*(?P<tex_d>[0-9]+)[ \t]*\}"
    rf"|(?P<sci_m>{_DEC})[ \t]*(?:[eE](?P<sci_e>[-+]?[0-9]{{1,3}})"
    r"|(?:[xX×*·]|\\times|\\cdot)[ \t]*10[ \t]*\^[ \t]*\{?[ \t]*(?P<sci_p>[-+]?[0-9]{1,3})[ \t]*\}?)"
    rf"|(?P<dec>{_DEC})"
    r")",
    re.IGNORECASE,
)
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12,
           "hundred": 100, "dozen": 12, "%": Fraction(1, 100), "percent": Fraction(1, 100)}
_SCALE = re.compile(r"(?:thousand|million|billion|trillion|hundred|dozen|per[ \t]*cent|percent)s?(?![^\W_])|%",
                    re.IGNORECASE)
_GLUED_K = re.compile(r"[kK](?![^\W_])")
_NEUTRAL_TAIL = re.compile(r"(?:[ \t,]*(?:in[ \t]+total|in[ \t]+all|altogether|total|overall|exactly|"
                           r"precisely|in[ \t]+number))+[ \t]*$", re.IGNORECASE)
_CURRENCY_PREFIX = re.compile(r"(?P<sign>[-+]?)[ \t]*(?P<symbol>[$€£])[ \t]*")
_TEX_TEXT = re.compile(r"\\(?:text|mathrm|textrm)[ \t]*\{([^{}]*)\}")
_WORDS = re.compile(r"[a-z]+(?:[ \t-]+[a-z]+)*", re.IGNORECASE)


def _number_at(text: str) -> tuple[Fraction, int] | None:
    """(value, end) of the number starting `text` (digits or words), else None."""
    m = _NUMBER.match(text)
    if m:
        sign = -1 if (m.group("sign") or "").strip().lower() in ("-", "minus", "negative") else 1
        if m.group("mixed_w") is not None:
            d = int(m.group("mixed_d"))
            if d == 0 or int(m.group("mixed_n")) >= d:
                return None
            value = int(m.group("mixed_w")) + Fraction(int(m.group("mixed_n")), d)
        elif m.group("frac_n") is not None or m.group("tex_n") is not None:
            n = int(m.group("frac_n") or m.group("tex_n"))
            d = int(m.group("frac_d") or m.group("tex_d"))
            if d == 0:
                return None
            value = Fraction(n, d)
        elif m.group("sci_m") is not None:
            exponent = int(m.group("sci_e") or m.group("sci_p"))
            if abs(exponent) > _MAX_EXPONENT:
                return None
            value = Fraction(m.group("sci_m").replace(",", "")) * Fraction(10) ** exponent
        else:
            value = Fraction(m.group("dec").replace(",", ""))
        return sign * value, m.end()
    # English cardinals: the longest run of words that reads as one
    m = _WORDS.match(text)
    if not m:
        return None
    words = re.split(r"([ \t-]+)", m.group())
    for k in range(len(words), 0, -2):
        phrase = "".join(words[:k])
        value = _parse_number_words(phrase)
        if value is not None:
            return Fraction(value), len(phrase)
    return None


def read_quantity(text: str, *, nouns: frozenset[str] = frozenset()) -> Quantity | None:
    """The one quantity `text` states in full (see the module docstring), or None. `nouns`:
    lower-case words allowed where a unit may stand ("apples", "apple")."""
    s = text.strip()
    if not s or len(s) > _MAX_CHARS:
        return None
    s = s.replace("{,}", ",").replace("\\,", "").replace("\\!", "").replace("\\%", "%")
    currency: Unit | None = None
    m = _CURRENCY_PREFIX.match(s)
    if m:  # "$75", "-$5", "$ 5"
        currency = lookup(m.group("symbol"))
        s = m.group("sign") + s[m.end():]
    number = _number_at(s)
    if number is None:
        return None
    value, i = number
    rest = s[i:]
    if _GLUED_K.match(rest):  # "5k"
        value, rest = value * 1000, rest[1:]
    while (sm := _SCALE.match(rest.lstrip(" \t"))) is not None:  # "5 billion", "75%"
        word = re.sub(r"[ \t]+", "", sm.group().lower())
        value *= _SCALES[word if word in _SCALES else word[:-1]]
        rest = rest.lstrip(" \t")[sm.end():]
    rest = _NEUTRAL_TAIL.sub("", rest).strip()
    if not rest:
        return Quantity(value, currency)
    if currency is not None:
        return None  # "$5 km"
    tail = _TEX_TEXT.sub(r"\1", rest).strip()
    if tail.lower() in nouns:  # the task's own noun first: "12 dollars" in a sum of dollars
        return Quantity(value, None, tail.lower())
    found = lookup(tail)
    return Quantity(value, found) if found is not None else None
