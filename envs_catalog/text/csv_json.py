"""`llm/CsvToJson-v0`: convert a generated CSV table into a JSON list of typed objects.

The table has a header row and `rows` data rows over `columns` columns drawn from a fixed pool
(`name`, `city`, `color`: strings; `age`, `id`, `stock`: integers; `score`, `price`: decimals;
`active`, `member`: booleans written `true`/`false`). The answer contract is `TableJsonAnswer`
(a `JsonAnswer` of top type array), read under the one answer policy (`llm_gym.grading.POLICY`):
the JSON declared after "Answer:" or "JSON:" (a ```json fence declares it too), else the reply's
last block holding JSON -- the whole reply, a fenced block or a paragraph -- parsed completely
and strictly (one JSON value and nothing else attached; no NaN/Infinity, no duplicate keys); a
second declared JSON value that differs voids the credit. The value must equal the table: a
list with one object per row in order, each with exactly the header's keys (any key order),
strings as JSON strings (case-sensitive), integer and decimal columns as JSON numbers equal to
the cell's value (34 and 34.0, 72.5 and 72.50 are the same number; "34" and true are not),
boolean columns as JSON true/false. The split hashes the CSV text.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy as np

from envs_catalog.text.base import STRICT_JSON, StrictJSONError, TextGrade, TextSource, TextTaskEnv, knob_docs
from llm_gym.authoring import check_choice, check_int
from llm_gym.grading import JsonAnswer
from llm_gym.grading.contracts.structured import strip_block
from llm_gym.env_source import EnvCard
from llm_gym.scripted import ScriptedCase

NAMES = ("Anna", "Bo", "Carl", "Dana", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kai", "Lea",
         "Max", "Nia", "Omar", "Pia", "Rex", "Sara", "Tom", "Uma", "Vic", "Wes", "Yan", "Zoe")
CITIES = ("Oslo", "Rome", "Lima", "Cairo", "Paris", "Tokyo", "Delhi", "Quito", "Accra", "Bern",
          "Dakar", "Hanoi", "Kyiv", "Lagos", "Minsk", "Riga", "Seoul", "Sofia", "Tunis", "Vaduz")
COLORS = ("red", "blue", "green", "black", "white", "pink", "gray", "gold", "teal", "navy")

# column -> (type, generator of the cell text)
_STR, _INT, _FLOAT, _BOOL = "str", "int", "float", "bool"
COLUMN_TYPES = {"name": _STR, "city": _STR, "color": _STR, "age": _INT, "id": _INT,
                "stock": _INT, "score": _FLOAT, "price": _FLOAT, "active": _BOOL, "member": _BOOL}
TYPE_SETS = {"strings": (_STR,), "numbers": (_STR, _INT, _FLOAT), "mixed": (_STR, _INT, _FLOAT, _BOOL)}


def _cell(column: str, rng: np.random.Generator) -> str:
    if column == "name":
        return NAMES[int(rng.integers(len(NAMES)))]
    if column == "city":
        return CITIES[int(rng.integers(len(CITIES)))]
    if column == "color":
        return COLORS[int(rng.integers(len(COLORS)))]
    if column == "age":
        return str(int(rng.integers(18, 81)))
    if column == "id":
        return str(int(rng.integers(100, 1000)))
    if column == "stock":
        return str(int(rng.integers(0, 500)))
    if column == "score":
        return f"{int(rng.integers(0, 1000)) / 10:.1f}"
    if column == "price":
        return f"{int(rng.integers(100, 10000)) / 100:.2f}"
    return "true" if rng.integers(2) else "false"


def typed_value(column: str, cell: str) -> Any:
    kind = COLUMN_TYPES[column]
    if kind == _INT:
        return int(cell)
    if kind == _FLOAT:
        return float(cell)
    if kind == _BOOL:
        return cell == "true"
    return cell


def typed(value: Any) -> Any:
    """A JSON value compared by value with its type kept: numbers as exact Fractions (34 and
    34.0 are one number), booleans, strings and null apart from numbers and from each other."""
    if value is None or isinstance(value, bool):
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", Fraction(repr(value)) if isinstance(value, float) else Fraction(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, typed(v)) for k, v in value.items())))
    return ("other", repr(value))


class TableJsonAnswer(JsonAnswer):
    """A JSON array read strictly: one JSON value (no NaN/Infinity, no duplicate object keys),
    compared by `typed` value. Declared by "Answer:" or by the name the prompt gives it, "the
    JSON" ("JSON:", a ```json fence); the prompt asks for it alone ("Reply with only the JSON.")."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(top="array", labels=("answer", "json"), name="the JSON", **kwargs)

    def instruction(self, *, brief: bool = False) -> str:
        return f"Reply with only {self.name}."

    def describe(self) -> str:
        return "a JSON array of objects (one per row, the header's keys, typed values)"

    def parse(self, text: str) -> list[Any] | None:
        s = strip_block(text)
        if s[:1] != "[":
            return None
        try:
            value = STRICT_JSON.decode(s)
        except (StrictJSONError, ValueError, RecursionError):
            return None
        return value if isinstance(value, list) else None

    def same(self, a: Any, b: Any) -> bool:
        return typed(a) == typed(b)


def grade_table(reply: str, header: list[str], rows: list[dict[str, Any]],
                contract: TableJsonAnswer | None = None) -> TextGrade:
    """The reply's JSON under `contract` (see the module docstring) against the typed table:
    "ok", a readable wrong table ("wrong_shape", "wrong_keys", "wrong_value") or the policy's
    status ("malformed", "conflicting", "no_answer", ...)."""
    reading = (contract or TableJsonAnswer()).read(reply)
    if not reading.ok:
        return TextGrade(0.0, False, reading.status)
    value = reading.value
    if len(value) != len(rows):
        return TextGrade(0.0, True, "wrong_shape")
    for got, want in zip(value, rows):
        if not isinstance(got, dict) or set(got) != set(header):
            return TextGrade(0.0, True, "wrong_keys")
        if typed(got) != typed(want):
            return TextGrade(0.0, True, "wrong_value")
    return TextGrade(1.0, True, "ok")


class CsvToJsonSource(TextSource):
    """CSV → JSON conversion (`llm/CsvToJson-v0`); knobs in `DEFAULTS`."""

    DEFAULTS: dict[str, Any] = {"rows": 2, "columns": 3, "types": "mixed", "format_coef": 0.1}
    card = EnvCard(
        id="llm/CsvToJson-v0",
        family="text",
        description=(
            "Convert a small generated CSV table (header + rows; string, integer, decimal and "
            "boolean columns) into JSON: a list with one object per row, the header names as "
            "keys, typed values. The JSON is read under the one answer policy "
            "(llm_gym.grading.POLICY): the value declared after 'Answer:' or 'JSON:' (or in a "
            "```json fence), else the reply's last block holding JSON, parsed completely and "
            "strictly (one value, no NaN, no duplicate keys); a second declared value that "
            "differs voids the credit. It is compared with the table: row order, exact key set, "
            "numbers by value (34 and 34.0 alike), strings exactly, true/false as booleans."
        ),
        answer_contract="TableJsonAnswer (a JsonAnswer, top type array, parsed strictly): the typed table",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for the exact typed table, 0 for valid JSON that is not it (wrong shape, keys, "
            "values or types), -format_coef (0.1) when no single JSON array can be read "
            "(malformed, NaN, duplicate keys, conflicting declarations) or the reply does not "
            "end on the renderer's end of turn."
        ),
        difficulty_knobs=knob_docs({
            "rows": "data rows in the table, 1-20",
            "columns": "columns, 1-10 (the first is always 'name')",
            "types": "column types drawn from: 'strings' (str only), 'numbers' (str, int, "
                     "decimal) or 'mixed' (str, int, decimal, bool)",
            "format_coef": "penalty for a reply in which no single JSON array can be read, 0-1",
        }, DEFAULTS),
        data_source="generated on the fly from the seed (built-in name, city and color pools)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Convert this CSV table to JSON: a list with one object per row, using the "
                "header names as keys. Write integers and decimals as JSON numbers, true/false "
                "as JSON booleans and everything else as strings. Reply with only the JSON.\n\n"
                "name,age,active\nAnna,34,true\nBo,27,false")},
            {"role": "assistant", "content": (
                '[{"name":"Anna","age":34,"active":true},{"name":"Bo","age":27,"active":false}]')},
        ],
    )

    def configure(self, *, rows: int, columns: int, types: str) -> None:
        self.rows = check_int("rows", rows, 1, 20)
        self.types = check_choice("types", types, tuple(TYPE_SETS))
        allowed = [c for c, t in COLUMN_TYPES.items() if t in TYPE_SETS[self.types]]
        self.columns = check_int("columns", columns, 1, len(allowed))
        self._pool = [c for c in allowed if c != "name"]

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        picked = rng.choice(len(self._pool), size=self.columns - 1, replace=False).tolist()
        header = ["name"] + [self._pool[i] for i in picked]
        cells = [[_cell(c, rng) for c in header] for _ in range(self.rows)]
        csv_text = "\n".join([",".join(header)] + [",".join(r) for r in cells])
        rows = [{c: typed_value(c, v) for c, v in zip(header, r)} for r in cells]
        reference = json.dumps(rows, separators=(",", ":"))
        return f"csv:{csv_text}", {"header": header, "rows": rows, "csv": csv_text,
                                   "answer": reference}

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        question = (
            "Convert this CSV table to JSON: a list with one object per row, using the header "
            "names as keys. Write integers and decimals as JSON numbers, true/false as JSON "
            f"booleans and everything else as strings. {TableJsonAnswer().instruction()}\n\n"
            + task["csv"]
        )
        header, rows = task["header"], task["rows"]
        contract = TableJsonAnswer(context=question)
        return self.env_for(question, task["answer"], lambda r: grade_table(r, header, rows, contract), task,
                            contract=contract, gold=rows)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the compact reference, pretty-printed JSON in a ```json fence, keys reordered,
        "Here is the JSON:" before it, integers written as decimals, prose after it.
        Adversarial: a second declared JSON that differs, two different JSON values in one
        block, every value a string, the CSV echoed, rows reversed (with 2+ rows) or repeated, a
        duplicate key hiding a wrong value, curly quotes, NaN, the table wrapped in an object,
        empty."""
        def rows(env):
            return env.task["rows"]

        def stringly(env):
            return json.dumps([{k: (json.dumps(v) if not isinstance(v, str) else v)
                                for k, v in r.items()} for r in rows(env)])

        def wrong_rows(env):
            rs = rows(env)
            return json.dumps(rs[::-1] if len(rs) > 1 and rs[0] != rs[-1] else rs + rs)

        def dup_key(env):
            first = rows(env)[0]
            k = env.task["header"][0]
            body = json.dumps(first)[1:]
            return "[{" + json.dumps(k) + ': "WRONG", ' + body + "".join(
                ", " + json.dumps(r) for r in rows(env)[1:]) + "]"

        return [
            ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
            ScriptedCase("fenced pretty JSON", "gold",
                         lambda env, ob: "```json\n" + json.dumps(rows(env), indent=2) + "\n```",
                         1.0, 1.0),
            ScriptedCase("keys reordered", "gold",
                         lambda env, ob: json.dumps([dict(reversed(list(r.items())))
                                                     for r in rows(env)]), 1.0, 1.0),
            ScriptedCase("integers as decimals", "gold", lambda env, ob: json.dumps(
                [{k: float(v) if type(v) is int else v for k, v in r.items()} for r in rows(env)]), 1.0, 1.0),
            ScriptedCase("prose after the JSON", "gold", lambda env, ob: (
                "Answer: " + env.answer + "\nIt has one object per row, typed as the header says."), 1.0, 1.0),
            ScriptedCase("second declared JSON", "adversarial",
                         lambda env, ob: "Answer: " + env.answer + "\n\nIf you prefer another, the answer is "
                         + wrong_rows(env), -1.0, 0.0),
            ScriptedCase("two different JSON values", "adversarial",
                         lambda env, ob: env.answer + "\n" + wrong_rows(env), -1.0, 0.0),
            ScriptedCase("prose before JSON", "gold",
                         lambda env, ob: "Here is the JSON: " + env.answer, 1.0, 1.0),
            ScriptedCase("all strings", "adversarial", lambda env, ob: stringly(env), -1.0, 0.0,
                         knobs={"types": "mixed", "columns": 10}),
            ScriptedCase("echo CSV", "adversarial", lambda env, ob: env.task["csv"], -1.0, 0.0),
            ScriptedCase("rows reordered or repeated", "adversarial",
                         lambda env, ob: wrong_rows(env), -1.0, 0.0),
            ScriptedCase("duplicate key", "adversarial", lambda env, ob: dup_key(env), -1.0, 0.0),
            ScriptedCase("curly quotes", "adversarial",
                         lambda env, ob: env.answer.replace('"', "\u201c"), -1.0, 0.0),
            ScriptedCase("NaN value", "adversarial",
                         lambda env, ob: env.answer.replace("]", ',{"name":NaN}]'), -1.0, 0.0),
            ScriptedCase("wrapped in an object", "adversarial",
                         lambda env, ob: '{"rows":' + env.answer + "}", -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
