"""Writers: how a value of each contract kind can be written, built from the value itself.

`forms(contract, gold, rng)` returns ways to write the gold value that *denote* it (digits,
words, a scale word that keeps it -- "5 billion" for 5000000000 --, a unit it converts from
exactly, a calculation that holds, a grid as a JSON list, a mapping as a table, quoted list
items, ...); `changed(contract, gold, rng)` returns texts built from the gold value that denote
something else or no single value (a scale that changes it, a unit of another dimension, a word
the contract has no use for), each with its verdict computed from how it was built;
`others(contract, gold, rng)` returns different values of the same kind, and `one_line(contract,
value)` a value written on one line (for prose). Nothing here calls a contract's reader: the
writers know the kinds from their attributes (the unit asked, the keys and value spellings of a
mapping, a grid's alphabet), so that a reader that misreads a form is caught by the form. A
contract of its own kind (an algebraic expression, a game's move) supplies its writers as methods
`attack_forms(gold, rng)`, `attack_changed(gold, rng)` (lists of `Form`) and
`attack_others(gold, rng)` (values), written from the value's structure, not from its parser.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llm_gym.grading.contracts import (
    AnswerContract,
    ArithmeticExpressionAnswer,
    ExactTextAnswer,
    Expression,
    GridAnswer,
    JsonAnswer,
    MappingAnswer,
    NumberAnswer,
    ProgramAnswer,
    SequenceAnswer,
    TokenAnswer,
)
from llm_gym.grading.units import UNITS

__all__ = ["Form", "changed", "forms", "number_words", "one_line", "others"]


@dataclass(frozen=True)
class Form:
    """A way to write a value: `text`, the `name` of the form, whether it denotes the gold value
    (`credit`), and whether a false credit on it is one a policy could learn (`exploitable`)."""

    name: str
    text: str
    credit: bool
    exploitable: bool = False


# --- numbers -----------------------------------------------------------------------------------
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str | None:
    """English words for an integer below 10**12 in absolute value ("minus seventy-five")."""
    if abs(n) >= 10**12:
        return None
    if n < 0:
        inner = number_words(-n)
        return None if inner is None else "minus " + inner
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10 - 2] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + (" and " + (number_words(rest) or "") if rest else "")
    for scale, word in ((10**9, "billion"), (10**6, "million"), (10**3, "thousand")):
        if n >= scale:
            head, rest = divmod(n, scale)
            text = f"{number_words(head)} {word}"
            if rest:
                text += (" and " if rest < 100 else " ") + (number_words(rest) or "")
            return text
    return None  # pragma: no cover


def _decimal(value: Fraction) -> str | None:
    """`value` as a terminating decimal of at most 12 places, or None."""
    for places in range(13):
        scaled = value * 10**places
        if scaled.denominator == 1:
            n = scaled.numerator
            sign = "-" if n < 0 else ""
            digits = str(abs(n)).rjust(places + 1, "0")
            return sign + (digits[:-places] + "." + digits[-places:] if places else digits)
    return None


def _plain(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return _decimal(value) or f"{value.numerator}/{value.denominator}"


def _number_forms(c: NumberAnswer, g: Fraction, rng: random.Random) -> list[Form]:
    out = [Form("digits", _plain(g), True)]
    if g.denominator == 1:
        n = g.numerator
        out.append(Form("decimal zero", f"{n}.0", True))
        words = number_words(n)
        if words:
            out.append(Form("words", words, True))
            if abs(n) >= 20:
                out.append(Form("digits with words", f"{n} ({words})", True))
        if abs(n) >= 1000:
            out.append(Form("thousands separators", f"{n:,}", True))
            out.append(Form("latex separators", f"{n:,}".replace(",", "{,}"), True))
        for scale, word in ((10**9, "billion"), (10**6, "million"), (10**3, "thousand")):
            if n and n % scale == 0:
                out.append(Form(f"scale word {word}", f"{n // scale} {word}", True))
                break
        if n > 0:
            out.append(Form("plus sign", f"+{n}", True))
        b = rng.randint(1, 9)
        out.append(Form("holding sum", f"{n - b} + {b} = {n}", True))
        out.append(Form("restated calculation", f"{n} (= {n - b} + {b})", True))
        if abs(n) >= 100 and n % 10 == 0:
            k = len(str(abs(n))) - len(str(abs(n)).rstrip("0"))
            mant = n // 10**k
            out.append(Form("scientific", f"{mant}e{k}", True))
    else:
        out.append(Form("fraction", f"{g.numerator}/{g.denominator}", True))
        out.append(Form("latex fraction", f"\\frac{{{g.numerator}}}{{{g.denominator}}}", True)
                   if g > 0 else Form("latex fraction", f"-\\frac{{{-g.numerator}}}{{{g.denominator}}}", True))
        dec = _decimal(g)
        if dec:
            out.append(Form("decimal", dec, True))
        if abs(g) > 1 and g.denominator != 1:
            whole = int(abs(g))
            rest = abs(g) - whole
            sign = "-" if g < 0 else ""
            out.append(Form("mixed number", f"{sign}{whole} {rest.numerator}/{rest.denominator}", True))
    out.append(Form("latex inline", f"${_plain(g)}$", True))
    out.append(Form("bold", f"**{_plain(g)}**", True))
    out.append(Form("in total", f"{_plain(g)} in total", True))
    if c.nouns:
        noun = sorted(c.nouns)[0]
        out.append(Form("with the task's noun", f"{_plain(g)} {noun}", True))
    if c.variable:
        out.append(Form("variable", f"{c.variable} = {_plain(g)}", True))
    if c.unit is not None:
        out.append(Form("unit symbol", f"{_plain(g)} {c.unit.symbol}", True))
        out.append(Form("unit name", f"{_plain(g)} {c.unit.plural}", True))
        if c.convert_units:
            for u in _same_dimension(c):
                converted = g * c.unit.size / u.size
                text = _decimal(converted)
                if text is not None and len(text) <= 14:
                    out.append(Form(f"converted to {u.symbol}", f"{text} {u.plural}", True))
                    break
    return out


def _same_dimension(c: NumberAnswer) -> list[Any]:
    assert c.unit is not None
    seen, out = set(), []
    for u in UNITS.values():
        if u.dimension == c.unit.dimension and u.symbol != c.unit.symbol and u.symbol not in seen:
            seen.add(u.symbol)
            out.append(u)
    return out


_SCALES = (("thousand", 1000), ("million", 10**6), ("billion", 10**9), ("%", Fraction(1, 100)),
           ("percent", Fraction(1, 100)), ("dozen", 12), ("k", 1000), ("hundred", 100))
_STRANGERS = ("widgets", "points", "units", "things", "maybe", "or thereabouts", "plus one", "minus one",
              "squared", "times two", "to the power of two", "percentile", "and a half", "point five")


def _number_changed(c: NumberAnswer, g: Fraction, rng: random.Random) -> list[Form]:
    p = _plain(g)
    out = []
    for word, factor in _SCALES:
        scaled = g * Fraction(factor)
        sep = "" if word in ("%", "k") else " "
        out.append(Form(f"scale {word}", f"{p}{sep}{word}", scaled == g))
    for word in _STRANGERS:
        out.append(Form(f"unknown word {word}", f"{p} {word}", False, exploitable=word == "maybe"))
    seen_dims = set()
    for u in UNITS.values():
        if c.unit is not None and u.dimension == c.unit.dimension:
            if u.symbol == c.unit.symbol:
                continue
            # the gold number in another unit of the asked dimension, unconverted: another amount
            out.append(Form(f"unconverted {u.symbol}", f"{p} {u.plural}", u.size == c.unit.size or g == 0))
        elif u.dimension not in seen_dims:
            seen_dims.add(u.dimension)
            if u.symbol in ("USD", "EUR", "GBP"):
                continue
            out.append(Form(f"unit of {u.dimension}", f"{p} {u.plural}", False))
    if c.nouns:
        out.append(Form("another noun", f"{p} {'pebbles' if 'pebbles' not in c.nouns else 'marbles'}", False))
    return out


def _number_others(c: NumberAnswer, g: Fraction, rng: random.Random) -> list[Fraction]:
    cands = [g + 1, g - 1, g * 10 if g else Fraction(7), g + 10, -g if g else Fraction(-1), g + Fraction(1, 2)]
    if g.denominator == 1 and abs(g) >= 10:
        s = str(abs(g.numerator))
        swapped = s[::-1].lstrip("0") or "0"
        cands.append(Fraction(int(swapped)) * (1 if g > 0 else -1))
    if c.tolerance:
        cands = [v for v in cands if abs(v - g) > 4 * c.tolerance * abs(g)]
        cands.append(g + 3 * c.tolerance * abs(g) + 1)
    out = []
    for v in cands:
        if v != g and v not in out:
            out.append(v)
    return out


# --- blocks ------------------------------------------------------------------------------------
def _grid_forms(c: GridAnswer, g: tuple[str, ...], rng: random.Random) -> list[Form]:
    rows = list(g)
    out = [Form("rows", "\n".join(rows), True),
           Form("spaced cells", "\n".join(" ".join(r) for r in rows), True),
           Form("comma cells", "\n".join(", ".join(r) for r in rows), True),
           Form("fenced", "```\n" + "\n".join(rows) + "\n```", True),
           Form("markdown table", "\n".join("| " + " | ".join(r) + " |" for r in rows), True)]
    if all(ch.isdigit() for r in rows for ch in r):
        out.append(Form("json list", json.dumps([[int(ch) for ch in r] for r in rows]), True))
    return out


def _grid_changed(c: GridAnswer, g: tuple[str, ...], rng: random.Random) -> list[Form]:
    rows = list(g)
    out = [Form("row missing", "\n".join(rows[:-1]), len(rows) == 0, exploitable=False)] if len(rows) > 1 else []
    out.append(Form("two options in a cell", "\n".join(rows[:-1] + [rows[-1] + " (or " + rows[-1][::-1] + ")"]),
                    False, exploitable=True))
    if len(rows) > 1:
        out.append(Form("ellipsis", "\n".join(rows[:1] + ["..."]), False))
    return out


def _grid_others(c: GridAnswer, g: tuple[str, ...], rng: random.Random) -> list[tuple[str, ...]]:
    rows = list(g)
    out = []
    i, j = len(rows) - 1, len(rows[-1]) - 1
    other = next((ch for ch in c.alphabet if ch != rows[i][j]), None)
    if other is not None:
        changed = rows[:i] + [rows[i][:j] + other + rows[i][j + 1:]]
        out.append(tuple(changed))
    if len(rows) > 1 and rows[0] != rows[-1]:
        out.append(tuple([rows[-1]] + rows[1:-1] + [rows[0]]))
    return out


def _spelling(c: MappingAnswer) -> dict[Any, str]:
    spelled: dict[Any, str] = {}
    for spelling, v in c.values.items():
        spelled.setdefault(v, spelling)
    return spelled


def _mapping_forms(c: MappingAnswer, g: dict[str, Any], rng: random.Random) -> list[Form]:
    sp = _spelling(c)
    keys = list(c.keys)
    shuffled = keys[:]
    rng.shuffle(shuffled)
    word_values = all(re.fullmatch(r"[A-Za-z]+", sp[g[k]]) for k in keys)
    out = [Form("lines", "\n".join(f"{k}: {sp[g[k]]}" for k in keys), True),
           Form("reordered lines", "\n".join(f"{k}: {sp[g[k]]}" for k in shuffled), True),
           Form("equals comma", ", ".join(f"{k}={sp[g[k]]}" for k in keys), True),
           Form("arrows", "\n".join(f"{k} -> {sp[g[k]]}" for k in keys), True),
           Form("bullets bold", "\n".join(f"- **{k}**: {sp[g[k]]}" for k in keys), True),
           Form("json", json.dumps({k: sp[g[k]] for k in keys}), True),
           Form("table", "| name | value |\n|---|---|\n" + "\n".join(f"| {k} | {sp[g[k]]} |" for k in keys), True),
           Form("capitalised values", "\n".join(f"{k}: {sp[g[k]].capitalize()}" for k in keys), True)]
    if word_values:
        out.append(Form("sentences", " ".join(f"{k} is a {sp[g[k]]}." for k in keys), True))
        out.append(Form("one sentence", ", ".join(f"{k} is a {sp[g[k]]}" for k in keys[:-1])
                        + f" and {keys[-1]} is a {sp[g[keys[-1]]]}." if len(keys) > 1 else
                        f"{keys[0]} is a {sp[g[keys[0]]]}.", True))
    return out


def _mapping_changed(c: MappingAnswer, g: dict[str, Any], rng: random.Random) -> list[Form]:
    sp = _spelling(c)
    keys = list(c.keys)
    values = list(dict.fromkeys(sp.values()))
    last = keys[-1]
    alt = next((v for v in values if v != sp[g[last]]), sp[g[last]])
    lines = [f"{k}: {sp[g[k]]}" for k in keys]
    out = [Form("two values for one key", "\n".join(lines[:-1] + [f"{last}: {sp[g[last]]} or {alt}"]), False, True),
           Form("hedged value", "\n".join(lines[:-1] + [f"{last}: {sp[g[last]]} (maybe {alt})"]), False, True),
           Form("key repeated", "\n".join(lines + [f"{last}: {alt}"]), False, True)]
    if len(keys) > 1:
        out.append(Form("key missing", "\n".join(lines[:-1]), False))
    return out


def _mapping_others(c: MappingAnswer, g: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    domain = list(dict.fromkeys(c.values.values()))
    out = []
    for k in reversed(c.keys):
        alt = next((v for v in domain if v != g[k]), None)
        if alt is not None:
            out.append({**g, k: alt})
        if len(out) >= 2:
            break
    return out


def _item_text(c: SequenceAnswer, x: Any) -> str:
    return _plain(x) if isinstance(x, Fraction) else str(x)


def _sequence_forms(c: SequenceAnswer, g: tuple[Any, ...], rng: random.Random) -> list[Form]:
    items = [_item_text(c, x) for x in g]
    out = [Form("commas", ", ".join(items), True),
           Form("bullets", "\n".join(f"- {x}" for x in items), True),
           Form("numbered", "\n".join(f"{i}. {x}" for i, x in enumerate(items, 1)), True)]
    if len(items) > 1:
        out.append(Form("commas and", ", ".join(items[:-1]) + ", and " + items[-1], True))
    if c.item_kind in ("int", "number") or all(re.fullmatch(r"-?[0-9]+", x) for x in items):
        out.append(Form("json list", "[" + ", ".join(items) + "]", True))
    else:
        out.append(Form("json list", json.dumps(items), True))
        out.append(Form("single-quoted items", ", ".join(f"'{x}'" for x in items), True))
        out.append(Form("double-quoted items", ", ".join(f'"{x}"' for x in items), True))
    if c.spaces_separate and all(" " not in x for x in items):
        out.append(Form("spaces", " ".join(items), True))
    return out


def _sequence_changed(c: SequenceAnswer, g: tuple[Any, ...], rng: random.Random) -> list[Form]:
    items = [_item_text(c, x) for x in g]
    out = [Form("item with an alternative", ", ".join(items[:-1] + [f"{items[-1]} (or {items[0]})"]), False, True),
           Form("ellipsis", ", ".join(items[:1] + ["..."]), False)]
    if len(items) > 1:
        out.append(Form("item missing", ", ".join(items[:-1]), False))
        out.append(Form("item repeated", ", ".join(items + items[:1]), False))
    return out


def _sequence_others(c: SequenceAnswer, g: tuple[Any, ...], rng: random.Random) -> list[tuple[Any, ...]]:
    items = list(g)
    out = []
    for i in range(len(items) - 1):
        if items[i] != items[i + 1]:
            swapped = items[:]
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            out.append(tuple(swapped))
            break
    if len(items) > 1 and c.length is None:  # with a fixed length a shorter list is no value
        out.append(tuple(items[:-1]))
    return out


def _json_forms(c: JsonAnswer, g: Any, rng: random.Random) -> list[Form]:
    out = [Form("compact", json.dumps(g, separators=(",", ":")), True),
           Form("spaced", json.dumps(g), True),
           Form("indented", json.dumps(g, indent=2), True),
           Form("fenced json", "```json\n" + json.dumps(g, indent=2) + "\n```", True)]

    def floats(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, list, dict)):
            return v
        if isinstance(v, int):
            return float(v)
        if isinstance(v, list):
            return [floats(x) for x in v]
        return {k: floats(x) for k, x in v.items()}

    def reorder(v: Any) -> Any:
        if isinstance(v, list):
            return [reorder(x) for x in v]
        if isinstance(v, dict):
            return {k: reorder(v[k]) for k in reversed(list(v))}
        return v

    out.append(Form("keys reordered", json.dumps(reorder(g)), True))
    if json.dumps(floats(g)) != json.dumps(g):
        out.append(Form("integers as decimals", json.dumps(floats(g)), True))
    return out


def _json_changed(c: JsonAnswer, g: Any, rng: random.Random) -> list[Form]:
    text = json.dumps(g)
    return [Form("trailing comma", text[:-1] + ",]" if text.endswith("]") else text[:-1] + ",}", False),
            Form("two values", text + " " + text, False, True),
            Form("python literal", repr(g), repr(g) == text)]


def _json_others(c: JsonAnswer, g: Any, rng: random.Random) -> list[Any]:
    def bump(v: Any) -> tuple[Any, bool]:
        if isinstance(v, bool):
            return (not v), True
        if isinstance(v, (int, float)):
            return v + 1, True
        if isinstance(v, str):
            return v + "x", True
        if isinstance(v, list):
            for i in range(len(v) - 1, -1, -1):
                new, ok = bump(v[i])
                if ok:
                    return v[:i] + [new] + v[i + 1:], True
            return v + [0], True
        if isinstance(v, dict):
            for k in reversed(list(v)):
                new, ok = bump(v[k])
                if ok:
                    return {**v, k: new}, True
            return {**v, "extra": 1}, True
        return v, False

    changed, ok = bump(g)
    return [changed] if ok else []


def _token_forms(c: TokenAnswer, g: Any, rng: random.Random) -> list[Form]:
    t = str(g)
    out = [Form("plain", t, True), Form("quoted", f'"{t}"', True), Form("bold", f"**{t}**", True),
           Form("code", f"`{t}`", True)]
    if c.pattern.flags & re.IGNORECASE:
        out.append(Form("upper case", t.upper(), True))
        out.append(Form("title case", t.title(), True))
    return out


def _token_others(c: TokenAnswer, g: Any, rng: random.Random) -> list[Any]:
    t = str(g)
    out = []
    for i in range(len(t) - 1, -1, -1):
        ch = t[i]
        pool = "0123456789" if ch.isdigit() else "abcdefghijklmnopqrstuvwxyz" if ch.isalpha() else ""
        for alt in pool:
            cand = t[:i] + (alt.upper() if ch.isupper() else alt) + t[i + 1:]
            if alt != ch.lower() and c.pattern.fullmatch(cand) and cand.lower() != t.lower():
                out.append(c.normalize(cand))
                break
        if len(out) >= 2:
            break
    return out


def _text_forms(c: ExactTextAnswer, g: tuple[str, ...], rng: random.Random) -> list[Form]:
    body = "\n".join(g)
    return [Form("verbatim", body, True), Form("fenced", "```\n" + body + "\n```", True),
            Form("trailing spaces", "\n".join(line + "  " for line in g), True)]


def _text_others(c: ExactTextAnswer, g: tuple[str, ...], rng: random.Random) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    if not g:
        return [("extra",)]
    if len(g) > 1:
        out.append(g[:-1])
    last = g[len(g) - 1]
    out.append(g[:-1] + ((last[:-1] + ("x" if last[-1:] != "x" else "y")) if last else "x",))
    out.append(g + ("extra",))
    return out


def _expression_forms(c: ArithmeticExpressionAnswer, g: Expression, rng: random.Random) -> list[Form]:
    t = g.text
    spaced = re.sub(r"\s*([-+*/])\s*", r" \1 ", t).strip()
    out = [Form("expression", t, True), Form("spaced", spaced, True),
           Form("with its value", f"{t} = {_plain(g.value)}", True),
           Form("latex times", "$" + spaced.replace("*", "\\times") + "$", True),
           Form("unicode operators", spaced.replace("*", "×").replace("/", "÷"), True)]
    return out


def _expression_changed(c: ArithmeticExpressionAnswer, g: Expression, rng: random.Random) -> list[Form]:
    return [Form("wrong value stated", f"{g.text} = {_plain(g.value + 1)}", False),
            Form("unbalanced", f"({g.text}", False)]


def _expression_others(c: ArithmeticExpressionAnswer, g: Expression, rng: random.Random) -> list[Expression]:
    out = []
    text = f"({g.text})+1"
    out.append(Expression(text, g.value + 1, tuple(sorted(g.numbers + (1,)))))
    if g.numbers:
        n = g.numbers[0]
        out.append(Expression(f"({g.text})*{n}/{n}", g.value, tuple(sorted(g.numbers + (n, n)))))
    return out


def _program_forms(c: ProgramAnswer, g: str, rng: random.Random) -> list[Form]:
    src = str(g).strip("\n")
    return [Form("fenced", f"```python\n{src}\n```", True),
            Form("future import", f"```python\nfrom __future__ import annotations\n\n{src}\n```", True),
            Form("module docstring", f'```python\n"""Solution."""\n\n{src}\n```', True),
            Form("shebang", f"```python\n#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n{src}\n```", True),
            Form("py fence", f"```py\n{src}\n```", True)]


def _program_others(c: ProgramAnswer, g: str, rng: random.Random) -> list[str]:
    return [f"def {c.entry_point}(*args, **kwargs):\n    raise NotImplementedError\n",
            f"def {c.entry_point}(*args, **kwargs):\n    return None\n"]


# --- dispatch ----------------------------------------------------------------------------------
def forms(c: AnswerContract, gold: Any, rng: random.Random) -> list[Form]:
    """Ways to write `gold` that denote it (a contract's own `attack_forms(gold, rng)` first)."""
    own = getattr(c, "attack_forms", None)
    if own is not None:
        return list(own(gold, rng))
    if isinstance(c, NumberAnswer):
        return _number_forms(c, Fraction(gold), rng)
    if isinstance(c, GridAnswer):
        return _grid_forms(c, tuple(gold), rng)
    if isinstance(c, MappingAnswer):
        return _mapping_forms(c, dict(gold), rng)
    if isinstance(c, SequenceAnswer):
        return _sequence_forms(c, tuple(gold), rng)
    if isinstance(c, JsonAnswer):
        return _json_forms(c, gold, rng)
    if isinstance(c, TokenAnswer):
        return _token_forms(c, gold, rng)
    if isinstance(c, ExactTextAnswer):
        return _text_forms(c, tuple(gold), rng)
    if isinstance(c, ArithmeticExpressionAnswer):
        return _expression_forms(c, gold, rng)
    if isinstance(c, ProgramAnswer):
        return _program_forms(c, gold, rng)
    return [Form("canonical", c.format(gold), True)]


def changed(c: AnswerContract, gold: Any, rng: random.Random) -> list[Form]:
    """Texts built from `gold` whose verdict the building decided (mostly: not `gold`); a
    contract's own `attack_changed(gold, rng)` first."""
    own = getattr(c, "attack_changed", None)
    if own is not None:
        return list(own(gold, rng))
    if isinstance(c, NumberAnswer):
        return _number_changed(c, Fraction(gold), rng)
    if isinstance(c, GridAnswer):
        return _grid_changed(c, tuple(gold), rng)
    if isinstance(c, MappingAnswer):
        return _mapping_changed(c, dict(gold), rng)
    if isinstance(c, SequenceAnswer):
        return _sequence_changed(c, tuple(gold), rng)
    if isinstance(c, JsonAnswer):
        return _json_changed(c, gold, rng)
    if isinstance(c, ArithmeticExpressionAnswer):
        return _expression_changed(c, gold, rng)
    return []


def others(c: AnswerContract, gold: Any, rng: random.Random) -> list[Any]:
    """Values of the same kind that are not `gold` (a contract's own `attack_others(gold, rng)`
    first)."""
    own = getattr(c, "attack_others", None)
    if own is not None:
        return list(own(gold, rng))
    if isinstance(c, NumberAnswer):
        return _number_others(c, Fraction(gold), rng)
    if isinstance(c, GridAnswer):
        return _grid_others(c, tuple(gold), rng)
    if isinstance(c, MappingAnswer):
        return _mapping_others(c, dict(gold), rng)
    if isinstance(c, SequenceAnswer):
        return _sequence_others(c, tuple(gold), rng)
    if isinstance(c, JsonAnswer):
        return _json_others(c, gold, rng)
    if isinstance(c, TokenAnswer):
        return _token_others(c, gold, rng)
    if isinstance(c, ExactTextAnswer):
        return _text_others(c, tuple(gold), rng)
    if isinstance(c, ArithmeticExpressionAnswer):
        return _expression_others(c, gold, rng)
    if isinstance(c, ProgramAnswer):
        return _program_others(c, gold, rng)
    return []


def one_line(c: AnswerContract, value: Any) -> str:
    """`value` written on one line, for prose ("Maybe 76?", "Maybe Cora: knight, Ivy: knave?")."""
    if isinstance(c, NumberAnswer):
        return _plain(Fraction(value))
    if isinstance(c, MappingAnswer):
        sp = _spelling(c)
        return ", ".join(f"{k}: {sp[value[k]]}" for k in c.keys)
    if isinstance(c, GridAnswer):
        return " / ".join(value)
    if isinstance(c, SequenceAnswer):
        return ", ".join(_item_text(c, x) for x in value)
    if isinstance(c, ExactTextAnswer):
        return " / ".join(value)
    if isinstance(c, JsonAnswer):
        return json.dumps(value)
    if isinstance(c, ProgramAnswer):
        return "a different function"
    return c.format(value).replace("\n", " ")
