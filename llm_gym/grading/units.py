"""Units of measure with exact sizes: what a unit word after a number means.

`UNITS` names every unit the number contracts know, by dimension, with its size in the
dimension's base unit as an exact `Fraction` (1 in = 0.0254 m and 1 lb = 0.45359237 kg by
definition; a US gallon is 231 cubic inches), and its spellings (symbol, singular, plural, US and
British). `lookup(words)` reads one unit phrase ("km", "kilometres", "sq ft", "km/h") as a
`Unit`, or None. A number contract that asks for a quantity in one unit converts a reply's
quantity in another unit of the same dimension exactly, and refuses a unit of another dimension
or a word that is no unit; the generated attack suite draws its "another unit" replies from the
same table. Temperatures are left out on purpose: their scales are affine, not multiples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["UNITS", "Unit", "lookup", "unit"]

F = Fraction
_INCH = F("0.0254")
_POUND = F("0.45359237")
_GALLON_L = F(231) * _INCH**3 * 1000


@dataclass(frozen=True)
class Unit:
    """`symbol` (canonical), `dimension`, `size` in the dimension's base unit, `names`
    (singular, plural) used when a prompt or a reply spells it out."""

    symbol: str
    dimension: str
    size: Fraction
    singular: str
    plural: str


def _table() -> dict[str, Unit]:
    rows: list[tuple[str, str, Fraction, str, str, tuple[str, ...]]] = [
        # symbol, dimension, size, singular, plural, other spellings
        ("mm", "length", F(1, 1000), "millimetre", "millimetres", ("millimeter", "millimeters")),
        ("cm", "length", F(1, 100), "centimetre", "centimetres", ("centimeter", "centimeters")),
        ("m", "length", F(1), "metre", "metres", ("meter", "meters")),
        ("km", "length", F(1000), "kilometre", "kilometres", ("kilometer", "kilometers", "kms")),
        ("in", "length", _INCH, "inch", "inches", ()),
        ("ft", "length", 12 * _INCH, "foot", "feet", ()),
        ("yd", "length", 36 * _INCH, "yard", "yards", ("yds",)),
        ("mi", "length", 63360 * _INCH, "mile", "miles", ()),
        ("mg", "mass", F(1, 10**6), "milligram", "milligrams", ("milligramme", "milligrammes")),
        ("g", "mass", F(1, 1000), "gram", "grams", ("gramme", "grammes", "gr")),
        ("kg", "mass", F(1), "kilogram", "kilograms", ("kilogramme", "kilogrammes", "kgs", "kilo", "kilos")),
        ("t", "mass", F(1000), "tonne", "tonnes", ("metric ton", "metric tons")),
        ("oz", "mass", _POUND / 16, "ounce", "ounces", ()),
        ("lb", "mass", _POUND, "pound", "pounds", ("lbs",)),
        ("s", "time", F(1), "second", "seconds", ("sec", "secs")),
        ("min", "time", F(60), "minute", "minutes", ("mins",)),
        ("h", "time", F(3600), "hour", "hours", ("hr", "hrs")),
        ("day", "time", F(86400), "day", "days", ()),
        ("week", "time", F(604800), "week", "weeks", ("wk", "wks")),
        ("mL", "volume", F(1, 1000), "millilitre", "millilitres", ("milliliter", "milliliters", "ml")),
        ("L", "volume", F(1), "litre", "litres", ("liter", "liters", "l")),
        ("fl oz", "volume", _GALLON_L / 128, "US fluid ounce", "US fluid ounces",
         ("fluid ounce", "fluid ounces", "floz")),
        ("cup", "volume", _GALLON_L / 16, "US cup", "US cups", ("cup", "cups")),
        ("pt", "volume", _GALLON_L / 8, "US pint", "US pints", ("pint", "pints")),
        ("qt", "volume", _GALLON_L / 4, "US quart", "US quarts", ("quart", "quarts")),
        ("gal", "volume", _GALLON_L, "US gallon", "US gallons", ("gallon", "gallons")),
        ("m^2", "area", F(1), "square metre", "square metres",
         ("square meter", "square meters", "sq m", "m2", "sqm")),
        ("cm^2", "area", F(1, 10**4), "square centimetre", "square centimetres",
         ("square centimeter", "square centimeters", "sq cm", "cm2")),
        ("km^2", "area", F(10**6), "square kilometre", "square kilometres",
         ("square kilometer", "square kilometers", "sq km", "km2")),
        ("ft^2", "area", (12 * _INCH) ** 2, "square foot", "square feet", ("sq ft", "ft2")),
        ("m^3", "volume", F(1000), "cubic metre", "cubic metres", ("cubic meter", "cubic meters", "m3")),
        ("cm^3", "volume", F(1, 1000), "cubic centimetre", "cubic centimetres",
         ("cubic centimeter", "cubic centimeters", "cc", "cm3")),
        ("km/h", "speed", F(1000, 3600), "kilometre per hour", "kilometres per hour",
         ("kilometer per hour", "kilometers per hour", "kph", "kmh", "km/hr")),
        ("m/s", "speed", F(1), "metre per second", "metres per second",
         ("meter per second", "meters per second", "mps")),
        ("mph", "speed", 63360 * _INCH / 3600, "mile per hour", "miles per hour", ("mi/h",)),
        ("USD", "money", F(1), "dollar", "dollars", ("$", "usd", "bucks")),
        ("EUR", "money_eur", F(1), "euro", "euros", ("€", "eur")),
        ("GBP", "money_gbp", F(1), "pound sterling", "pounds sterling", ("£", "gbp", "quid")),
        ("cent", "money", F(1, 100), "cent", "cents", ("¢",)),
    ]
    table: dict[str, Unit] = {}
    for symbol, dim, size, singular, plural, others in rows:
        u = Unit(symbol, dim, size, singular, plural)
        for spelling in (symbol, singular, plural, *others):
            key = _key(spelling)
            # "pound" is mass; "pound sterling" is money: the first row to claim a spelling keeps it
            table.setdefault(key, u)
    return table


_SPACES = re.compile(r"[ \t]+")


def _key(spelling: str) -> str:
    s = _SPACES.sub(" ", spelling.strip()).replace("²", "^2").replace("³", "^3")
    s = s.replace(" per ", "/")
    return s if s in ("mL", "L") else s.lower()


UNITS: dict[str, Unit] = _table()


def lookup(words: str) -> Unit | None:
    """The unit a phrase names ("km", "Kilometres", "square metres", "km/h", "m^2"), or None.
    Case matters only where it tells units apart elsewhere; a trailing period ("ft.") is
    allowed."""
    s = words.strip().rstrip(".")
    if not s or len(s) > 40:
        return None
    return UNITS.get(_key(s)) or UNITS.get(_key(s).lower())


def unit(symbol: str) -> Unit:
    """The unit with this canonical symbol (a `KeyError` names it when there is none)."""
    u = lookup(symbol)
    if u is None or u.symbol != symbol:
        raise KeyError(f"no unit with symbol {symbol!r}; known: {sorted({u.symbol for u in UNITS.values()})}")
    return u
