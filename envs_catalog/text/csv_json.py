"""`llm/CsvToJson-v0`: convert a generated CSV table into a JSON list of typed objects.

The table has a header row and `rows` data rows over `columns` columns drawn from a fixed pool
(`name`, `city`, `color`: strings; `age`, `id`, `stock`: integers; `score`, `price`: decimals;
`active`, `member`: booleans written `true`/`false`). The reply's final JSON value is graded
(`final_json`: the whole reply as one value, optionally inside one ```json fence, through
`envs_catalog.text.base.strict_json`; else, with prose around it, the last line, fenced block or
paragraph that is exactly one JSON value, under `llm_gym.grading.final`'s policy: another JSON
value that differs, or a hedge once one is given, is refused; no NaN/Infinity, no duplicate keys,
ASCII only) and must equal the table: a list with one object per row
in order, each with exactly the header's keys (any key order), strings as JSON strings
(case-sensitive), integer columns as JSON integers (not 34.0, not "34", not true), decimal columns
as JSON numbers equal to the cell's value (72.5; 72.50 is the same number), boolean columns as
JSON true/false. The split hashes the CSV text.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from envs_catalog.text.base import TextGrade, TextSource, TextTaskEnv, knob_docs, strict_json
from llm_gym.grading.final import final_answer
from llm_gym.authoring import check_choice, check_int
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


def _value_matches(kind: str, got: Any, want: Any) -> bool:
    if kind == _STR:
        return type(got) is str and got == want
    if kind == _INT:
        return type(got) is int and got == want
    if kind == _FLOAT:
        return type(got) in (int, float) and float(got) == want
    return type(got) is bool and got is want


def final_json(reply: str) -> tuple[Any, str]:
    """(the reply's final JSON value, "ok") or (None, why); see the module docstring."""
    value, status = strict_json(reply)
    if status != "not_json":
        return value, status

    def read(segment: str) -> Any:
        value, status = strict_json(segment)
        return _Json(value) if status == "ok" and isinstance(value, (list, dict)) else None

    final = final_answer(reply, read, blocks=True)
    if final.ok:
        return final.value.value, "ok"
    return None, "not_json" if final.status == "no_answer" else final.status


class _Json:
    """A JSON value compared by its canonical text (1 and 1.0, or True and 1, differ)."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.key = json.dumps(value, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Json) and self.key == other.key

    __hash__ = None  # type: ignore[assignment]


def grade_table(reply: str, header: list[str], rows: list[dict[str, Any]]) -> TextGrade:
    """Strict JSON, then the exact typed table (see the module docstring)."""
    value, status = final_json(reply)
    if status != "ok":
        return TextGrade(0.0, False, status)
    if not isinstance(value, list) or len(value) != len(rows):
        return TextGrade(0.0, True, "wrong_shape")
    for got, want in zip(value, rows):
        if not isinstance(got, dict) or set(got) != set(header):
            return TextGrade(0.0, True, "wrong_keys")
        if not all(_value_matches(COLUMN_TYPES[k], got[k], want[k]) for k in header):
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
            "keys, typed values. The reply must be exactly one JSON value (optionally in one "
            "```json fence), parsed strictly (no prose around it, no second JSON value, no "
            "NaN, no duplicate keys) and compared with the table: row order, exact key set, "
            "integers as integers, decimals as equal numbers, true/false as booleans."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 for the exact typed table, 0 for valid JSON that is not it (wrong shape, keys, "
            "values or types), -format_coef (0.1) when the reply is not exactly one JSON value "
            "or does not end on the renderer's end of turn."
        ),
        difficulty_knobs=knob_docs({
            "rows": "data rows in the table, 1-20",
            "columns": "columns, 1-10 (the first is always 'name')",
            "types": "column types drawn from: 'strings' (str only), 'numbers' (str, int, "
                     "decimal) or 'mixed' (str, int, decimal, bool)",
            "format_coef": "penalty for a reply that is not exactly one JSON value, 0-1",
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
            "booleans and everything else as strings. Reply with only the JSON.\n\n" + task["csv"]
        )
        header, rows = task["header"], task["rows"]
        return self.env_for(question, task["answer"], lambda r: grade_table(r, header, rows), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the compact reference, pretty-printed JSON in a ```json fence, keys reordered,
        prose before the JSON. Adversarial: trailing prose holding a second JSON, two different
        JSON values, every value a string, the CSV echoed, rows reversed (with 2+ rows) or a row
        dropped, a duplicate key hiding a wrong value, curly quotes, NaN, the table wrapped in
        an object, empty."""
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
            ScriptedCase("trailing prose with a second JSON", "adversarial",
                         lambda env, ob: env.answer + "\nOr, if you prefer: " + wrong_rows(env),
                         -1.0, 0.0),
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
