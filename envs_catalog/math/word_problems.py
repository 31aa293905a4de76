"""Arithmetic word problems from templates: `WordProblemSource` (`llm/WordProblem-v0`).

Four templates (knob `templates`): `inventory` (someone has some items, then gains, gives away,
buys packs of them; maybe shares them out at the end), `shopping` (items at a price each, maybe
change from a note), `travel` (legs at a speed for a time) and `groups` (rows or boxes of things,
more added or removed). Names, items and quantities are drawn from the seed; `steps` (1-4) is the
number of arithmetic operations the answer needs. Every answer is a non-negative integer, computed
alongside the text, and graded by the task's `NumberAnswer` contract (answer policy:
`llm_gym.grading`). Split key: the problem text.
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
    knob_docs,
)
from llm_gym.authoring import check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading.contracts import counted

TEMPLATES = ("inventory", "shopping", "travel", "groups")
NAMES = ("Ava", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jamal",
         "Kira", "Liam", "Maya", "Noah", "Olga", "Priya", "Quinn", "Ravi", "Sara", "Tom")
ITEMS = ("apples", "marbles", "stickers", "pencils", "cookies", "stamps", "shells", "cards",
         "books", "balloons")
PLANTS = ("tulips", "carrots", "roses", "cabbages", "sunflowers", "tomato plants")
VEHICLES = ("train", "bus", "car", "truck", "cyclist")

_DOCS = {
    "templates": f"which story templates to draw, a non-empty list from {list(TEMPLATES)}",
    "steps": "arithmetic operations needed for the answer, 1-4",
    "max_value": "largest quantity in a story, 5-1000",
    "format_coef": FORMAT_COEF_DOC,
}


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


class WordProblemSource(NumericSource):
    """Templated word problems; knobs in `DEFAULTS` (see the card)."""

    DEFAULTS: dict[str, Any] = {
        "templates": list(TEMPLATES), "steps": 1, "max_value": 20, "format_coef": 0.1,
    }
    SPLIT_PREFIX = "word_problem"
    card = EnvCard(
        id="llm/WordProblem-v0",
        family="math",
        description=(
            "Arithmetic word problems generated offline from four templates (an inventory that "
            "grows and shrinks, shopping with change, travel at given speeds, rows and boxes of "
            "things) with drawn names, items and quantities; steps (1 by default, up to 4) sets "
            "how many operations the answer takes, e.g. 'Maya has 7 stickers. Maya finds 5 "
            "more stickers. How many stickers does Maya have now?' -> '12'. The answer is one "
            "non-negative integer ('12', '12 stickers', '$36' when dollars are asked), graded "
            "exactly, read under the one answer policy (llm_gym.grading.POLICY)."
        ),
        answer_contract="an integer (NumberAnswer) with the noun or unit the question asks for",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for the right number, 0 for a wrong one, "
            "-format_coef (0.1) when no single number can be read (empty, malformed, conflicting, "
            "over 4096 characters, invalid UTF-8); a reply not ended by the renderer's end of "
            "turn loses format_coef but is still graded."
        ),
        difficulty_knobs=knob_docs(_DOCS, DEFAULTS),
        data_source="generated on the fly from the seed with built-in templates and name lists "
        "(no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": "Maya has 7 stickers. Maya finds 5 more stickers. How many "
             "stickers does Maya have now? Reply with just the number."},
            {"role": "assistant", "content": "12"},
        ],
    )

    def configure(self, knobs: dict[str, Any]) -> None:
        self.templates = check_kinds("templates", knobs["templates"], TEMPLATES)
        self.steps = check_int("steps", knobs["steps"], 1, 4)
        self.max_value = check_int("max_value", knobs["max_value"], 5, 1000)

    def _q(self, rng: np.random.Generator, low: int = 1, high: int | None = None) -> int:
        return int(rng.integers(low, (high or self.max_value) + 1))

    def draw_task(self, rng: np.random.Generator) -> NumericTask:
        template = self.templates[int(rng.integers(len(self.templates)))]
        text, answer = getattr(self, f"_{template}")(rng)
        text += " " + instruction()
        unit, nouns = counted(text)
        return NumericTask(text, Fraction(answer), f"{template}:{text}", str(answer), unit=unit, nouns=nouns)

    def _inventory(self, rng: np.random.Generator) -> tuple[str, int]:
        name, item = _pick(rng, NAMES), _pick(rng, ITEMS)
        have = self._q(rng, 2)
        parts = [f"{name} has {have} {item}."]
        ops = self.steps
        share = ops >= 2 and rng.random() < 0.4  # the last operation shares them out
        for _ in range(ops - share):
            event = int(rng.integers(3))
            if event == 1 and have >= 2:
                k = self._q(rng, 1, have - 1)
                friend = _pick(rng, tuple(n for n in NAMES if n != name))
                parts.append(f"{name} gives {k} {item} to {friend}.")
                have -= k
            elif event == 2 and self.steps >= 2:
                packs, each = self._q(rng, 2, 5), self._q(rng, 2, 10)
                parts.append(f"{name} buys {packs} packs with {each} {item} in each pack.")
                have += packs * each  # two operations: a product and a sum
            else:
                k = self._q(rng)
                parts.append(f"{name} finds {k} more {item}.")
                have += k
        if share:
            divisors = [k for k in range(2, 7) if have % k == 0]
            if not divisors:
                k = self._q(rng)
                parts.append(f"{name} finds {k} more {item}.")
                have += k
                return " ".join(parts + [f"How many {item} does {name} have now?"]), have
            k = divisors[int(rng.integers(len(divisors)))]
            parts.append(f"{name} shares all of them equally among {k} friends. How many {item} "
                         "does each friend get?")
            return " ".join(parts), have // k
        return " ".join(parts + [f"How many {item} does {name} have now?"]), have

    def _shopping(self, rng: np.random.Generator) -> tuple[str, int]:
        name = _pick(rng, NAMES)
        items = list(ITEMS)
        lines, total = [], 0
        change = self.steps >= 2 and self.steps % 2 == 0
        purchases = max(1, (self.steps + 1 - change) // 2)
        for _ in range(purchases):
            item = items.pop(int(rng.integers(len(items))))
            count, price = self._q(rng, 2, 12), self._q(rng, 2, 9)
            lines.append(f"{count} {item} at {price} dollars each")
            total += count * price
        if self.steps == 1 and not change and purchases == 1:
            text = f"{name} buys {lines[0]}. How many dollars does {name} spend?"
            return text, total
        bought = ", ".join(lines[:-1]) + (" and " if len(lines) > 1 else "") + lines[-1]
        if change:
            note = next(n for n in (5, 10, 20, 50, 100, 200, 500, 1000, 10**6) if n >= total)
            return (f"{name} buys {bought}, and pays with a {note}-dollar note. How many dollars "
                    f"of change does {name} get?"), note - total
        return f"{name} buys {bought}. How many dollars does {name} spend in total?", total

    def _travel(self, rng: np.random.Generator) -> tuple[str, int]:
        vehicle = _pick(rng, VEHICLES)
        legs = (self.steps + 1) // 2
        back = self.steps % 2 == 0 and self.steps >= 2  # one subtraction: how much farther
        parts, total = [], 0
        for i in range(legs):
            speed, hours = self._q(rng, 2, 9) * 10, self._q(rng, 2, 5)
            parts.append(f"{'then ' if i else ''}at {speed} km per hour for {hours} hours")
            total += speed * hours
        route = ", ".join(parts)
        if back:
            k = self._q(rng, 1, total)
            return (f"A {vehicle} travels {route}. Its route is {total + k} km long. How many "
                    f"more kilometres must it travel to finish?"), k
        if legs == 1:
            return f"A {vehicle} travels {route}. How many kilometres does it travel?", total
        return f"A {vehicle} travels {route}. How many kilometres does it travel in total?", total

    def _groups(self, rng: np.random.Generator) -> tuple[str, int]:
        plant = _pick(rng, PLANTS)
        rows, per = self._q(rng, 2, 12), self._q(rng, 2, 12)
        parts = [f"A garden has {rows} rows of {plant} with {per} in each row."]
        count = rows * per
        for _ in range(self.steps - 1):
            event = int(rng.integers(3))
            if event == 0:
                k = self._q(rng, 2, 5)
                parts.append(f"The gardener plants {k} more rows of {per}.")
                count += k * per
            elif event == 1 and count >= 2:
                k = self._q(rng, 1, min(count - 1, self.max_value))
                parts.append(f"Then {k} of the {plant} are picked.")
                count -= k
            else:
                k = self._q(rng)
                parts.append(f"Then {k} more {plant} are planted.")
                count += k
        return " ".join(parts + [f"How many {plant} are in the garden now?"]), count
