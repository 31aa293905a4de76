"""Unit conversions with exact factors: `UnitConversionSource` (`llm/UnitConversion-v0`).

A task converts a quantity between two units of one dimension (length, mass, time, volume):
"Convert 3 kilometres to metres." Every factor is an exact rational number taken from the unit
definitions of `llm_gym.grading.units` (1 in = 0.0254 m exactly, 1 lb = 0.45359237 kg, 1 US gal =
231 in^3 = 3.785411784 L, ...), so the true answer is an exact `Fraction`. The answer contract is
a `NumberAnswer` in the asked unit within a relative `tolerance` (knob, default 0.001 = 0.1%,
stated in the prompt and on the card): a rounded decimal close enough earns credit, and a value
written in another unit of the dimension is converted exactly ("85 m" for 0.085 km); a unit of
another dimension, or the number in another unit unconverted, is not the answer. `systems` picks
metric-only pairs (default: powers of ten, exact short decimals), imperial/US-only pairs, or any
pair (metric <-> imperial). Split key: the quantity and the two units.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.math._numeric import (
    instruction,
    FORMAT_COEF_DOC,
    NumericSource,
    NumericTask,
    check_kinds,
    format_fraction,
    knob_docs,
)
from llm_gym.authoring import check_choice, check_float, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading.units import unit as grading_unit

_SYSTEMS = {  # dimension -> unit symbol -> (system, plural name as the prompt writes it)
    "length": {"mm": ("metric", "millimetres"), "cm": ("metric", "centimetres"), "m": ("metric", "metres"),
               "km": ("metric", "kilometres"), "in": ("imperial", "inches"), "ft": ("imperial", "feet"),
               "yd": ("imperial", "yards"), "mi": ("imperial", "miles")},
    "mass": {"mg": ("metric", "milligrams"), "g": ("metric", "grams"), "kg": ("metric", "kilograms"),
             "t": ("metric", "tonnes"), "oz": ("imperial", "ounces"), "lb": ("imperial", "pounds")},
    "time": {"s": ("both", "seconds"), "min": ("both", "minutes"), "h": ("both", "hours"),
             "day": ("both", "days"), "week": ("both", "weeks")},  # the same in both systems
    "volume": {"mL": ("metric", "millilitres"), "L": ("metric", "litres"),
               "fl oz": ("imperial", "US fluid ounces"), "cup": ("imperial", "US cups"),
               "pt": ("imperial", "US pints"), "qt": ("imperial", "US quarts"), "gal": ("imperial", "US gallons")},
}
# dimension -> unit -> (size in the dimension's base unit, system, plural name). The sizes are
# llm_gym.grading.units' (one definition: the contract that grades converts with the same ones).
UNITS: dict[str, dict[str, tuple[Fraction, str, str]]] = {
    dim: {sym: (grading_unit(sym).size, system, plural) for sym, (system, plural) in units.items()}
    for dim, units in _SYSTEMS.items()
}
_SINGULAR = {"inches": "inch", "feet": "foot", "US fluid ounces": "US fluid ounce"}
SYSTEMS = ("metric", "imperial", "mixed")

_DOCS = {
    "dimensions": "which dimensions to draw from, a non-empty list of 'length', 'mass', "
    "'time', 'volume'",
    "systems": "'metric' (both units metric, or time), 'imperial' (both imperial/US, or time) "
    "or 'mixed' (any two units of the dimension, usually metric <-> imperial)",
    "max_value": "largest quantity to convert (a whole number from 1), 1-10000",
    "tolerance": "relative error accepted, 0 (exact only) to 0.05",
    "format_coef": FORMAT_COEF_DOC,
}


def pairs(dimensions: tuple[str, ...], systems: str) -> list[tuple[str, str, str]]:
    """(dimension, from-unit, to-unit) pairs the knobs allow, in a fixed order."""
    out = []
    for dim in dimensions:
        units = UNITS[dim]
        for a, (_, sa, _) in units.items():
            for b, (_, sb, _) in units.items():
                if a == b:
                    continue
                if systems == "mixed" and "both" not in (sa, sb) and sa == sb:
                    continue  # mixed: cross-system pairs (time, which is in both, stays)
                if systems != "mixed" and not ({sa, sb} <= {systems, "both"}):
                    continue
                out.append((dim, a, b))
    return out


class UnitConversionSource(NumericSource):
    """Unit conversions; knobs in `DEFAULTS` (see the card)."""

    DEFAULTS: dict[str, Any] = {
        "dimensions": ["length", "mass", "time", "volume"], "systems": "metric",
        "max_value": 100, "tolerance": 0.001, "format_coef": 0.1,
    }
    SPLIT_PREFIX = "units"
    card = EnvCard(
        id="llm/UnitConversion-v0",
        family="math",
        description=(
            "Convert a quantity between units of length, mass, time or volume, generated "
            "offline with exact conversion factors (1 in = 2.54 cm, 1 lb = 0.45359237 kg, 1 US "
            "gallon = 3.785411784 L, by definition). By default both units are metric (or units "
            "of time), e.g. 'Convert 3 kilometres to metres.' -> '3000'; systems='mixed' asks metric <-> "
            "imperial. The answer is one number (integer, decimal or a/b), accepted within a "
            "relative tolerance of 0.1% (knob tolerance; stated in the prompt), read under the one "
            "answer policy (llm_gym.grading.POLICY); a value in another unit of the dimension is "
            "converted exactly ('85 m' is 0.085 km), a unit of another dimension is not the answer."
        ),
        answer_contract="a number in the asked unit (NumberAnswer, unit converted exactly, relative tolerance)",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a number within the relative tolerance "
            "(0.1%) of the exact conversion, 0 for another number, -format_coef (0.1) when no "
            "single number can be read (empty, hedged, conflicting, over 4096 characters, "
            "invalid UTF-8); a reply not ended by the renderer's end of turn loses format_coef "
            "but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed; factors from the SI and the 1959 "
        "international yard and pound agreement (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Convert 3 kilometres to metres. Reply with just the number (within "
             "0.1%)."},
            {"role": "assistant", "content": "3000"},
        ],
    )

    def configure(self, knobs: dict[str, Any]) -> None:
        self.dimensions = check_kinds("dimensions", knobs["dimensions"], tuple(UNITS))
        self.systems = check_choice("systems", knobs["systems"], SYSTEMS)
        self.max_value = check_int("max_value", knobs["max_value"], 1, 10_000)
        self.tolerance = check_float("tolerance", knobs["tolerance"], 0.0, 0.05)
        self._pairs = pairs(self.dimensions, self.systems)
        if not self._pairs:
            raise ValueError(f"no unit pair exists for dimensions={list(self.dimensions)} and "
                             f"systems={self.systems!r}; widen the knobs")

    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        dim, a, b = self._pairs[int(rng.integers(len(self._pairs)))]
        qty = int(rng.integers(1, self.max_value + 1))
        answer = qty * UNITS[dim][a][0] / UNITS[dim][b][0]
        name = "the number" if self.tolerance else "the number (exactly: a decimal or a fraction a/b)"
        name_a, name_b = UNITS[dim][a][2], UNITS[dim][b][2]
        if qty == 1:
            name_a = _SINGULAR.get(name_a, name_a[:-1])
        question = f"Convert {qty} {name_a} to {name_b}. {instruction(name, self.tolerance)}"
        return NumericTask(question, answer, f"{qty} {a}->{b}", self.reference(answer), unit=b)

    def reference(self, answer: Fraction) -> str:
        """The answer exactly (a terminating decimal or a/b) when tolerance is 0; else the
        shortest decimal within a tenth of the tolerance (e.g. 8.047 for 5 mi in km)."""
        if not self.tolerance:
            return format_fraction(answer)
        bound = Fraction(repr(self.tolerance)) * abs(answer) / 10
        for places in range(40):
            rounded = round(answer, places)
            if abs(rounded - answer) <= bound:
                return format_fraction(rounded)
        return format_fraction(answer)  # pragma: no cover - 40 places always suffice here
