"""Block contracts: `GridAnswer`, `MappingAnswer`, `SequenceAnswer` and `JsonAnswer`.

Their answers may span lines, so the policy (`llm_gym.grading.policy`) hands them the block after
a label (or the reply's last block, or last fenced block), and `answer_block` keeps the lines of
it that are answer lines (a first line ending in ":" is a label, prose after the answer lines is
not part of it). `parse` then reads the kept text completely:

- a grid: one row per line (cells run together, or split by spaces, commas, tabs or `|`), or a
  JSON list of lists, or a markdown table; every cell in the alphabet, every row the same length,
  the shape the one asked when the contract fixes it;
- a mapping: entries `key: value`, `key = value`, `key -> value`, `key is (a) value`, `key
  (value)`, one per line or separated by `,` `;` "and", or a JSON object, or a markdown table;
  every key exactly once, every value one of the contract's;
- a sequence: items separated by commas (an "and" before the last allowed), by spaces where
  items hold none, one per line (bullets and numbering allowed), or a JSON list; quotes around
  items are allowed; the length the one asked when fixed;
- JSON: one JSON value, compared by value (1 and 1.0 are equal).

Anything else in the kept text makes it not an answer (`None`).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any, Callable, ClassVar, Mapping, Sequence

from llm_gym.grading.contracts.base import AnswerContract
from llm_gym.grading.policy import Declaration, read_statement
from llm_gym.grading.quantity import read_quantity, strip_decoration

__all__ = ["GridAnswer", "JsonAnswer", "MappingAnswer", "SequenceAnswer", "strip_block"]

_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[\w+-]*[ \t]*")
_BULLET = re.compile(r"^[ \t]*(?:[-+*\u2022][ \t]+|[0-9]{1,3}[.)][ \t]+|>[ \t]*)")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*")


def strip_block(text: str) -> str:
    """A block without its fence lines, surrounding blank lines, LaTeX/markdown wrappers on the
    whole, and trailing whitespace on each line."""
    lines = [line.rstrip() for line in text.strip("\n").split("\n")]
    while lines and (not lines[0].strip() or _FENCE_LINE.fullmatch(lines[0])):
        lines.pop(0)
    while lines and (not lines[-1].strip() or _FENCE_LINE.fullmatch(lines[-1])):
        lines.pop()
    body = "\n".join(lines)
    if "\n" not in body:
        return strip_decoration(body)
    for a, b in (("$$", "$$"), ("\\[", "\\]"), ("**", "**")):
        if body.startswith(a) and body.endswith(b) and len(body) > len(a) + len(b):
            body = body[len(a):-len(b)].strip("\n")
    return body


def _unbullet(line: str) -> str:
    s = _BULLET.sub("", line, count=1).strip()
    return re.sub(r"\*\*|__|`", "", s).strip()


def _table_rows(text: str) -> list[list[str]] | None:
    """The cells of a markdown table (rule line dropped), or None if `text` is not one."""
    lines = [line.strip() for line in text.strip().split("\n") if line.strip()]
    if len(lines) < 2 or not all(line.startswith("|") and line.endswith("|") for line in lines):
        return None
    rows = []
    for line in lines:
        if _TABLE_RULE.fullmatch(line):
            continue
        rows.append([c.strip() for c in line[1:-1].split("|")])
    return rows


class _BlockContract(AnswerContract):
    multiline: ClassVar[bool] = True

    def line_ok(self, line: str) -> bool:
        """Whether one line can be part of this contract's answer."""
        return True

    def answer_block(self, block: str) -> str:
        lines = block.strip("\n").split("\n")
        if _FENCE_LINE.fullmatch(lines[0]) and any(_FENCE_LINE.fullmatch(x) for x in lines[1:]):
            end = next(i for i in range(1, len(lines)) if _FENCE_LINE.fullmatch(lines[i]))
            return "\n".join(lines[1:end])
        if len(lines) > 1 and lines[0].rstrip().endswith(":") and not self.line_ok(lines[0]):
            lines = lines[1:]  # "Here is the grid:"
        kept = []
        for line in lines:
            if kept and not self.line_ok(line):
                break
            kept.append(line)
        return "\n".join(kept)

    def read_slot(self, slot: str) -> Any:
        body = strip_block(slot)
        value = self.parse(body)
        if value is None and "\n" not in body.strip():
            value = read_statement(body, self)  # "The sorted list is 1, 2, 3."
        return value

    def last_answer(self, visible: str) -> Declaration | None:
        # Undeclared, the block read is a run of answer lines: a paragraph that opens with prose
        # ("Let me check.", "Input:") before its answer lines would otherwise be read from the
        # prose line on, and refused; "Input:\n<grid>\nOutput:\n<grid>" reads the last run.
        out: list[str] = []
        prose = fenced = False
        for line in visible.split("\n"):
            if _FENCE_LINE.fullmatch(line):
                fenced, prose = not fenced, False
            elif not fenced:
                ok = bool(line.strip()) and self.line_ok(line)
                if ok and prose:
                    out.append("")
                prose = bool(line.strip()) and not ok
            out.append(line)
        return super().last_answer("\n".join(out))


# --- grids -------------------------------------------------------------------------------------
class GridAnswer(_BlockContract):
    """A rectangular grid of one-character cells from `alphabet`; `rows`/`cols` fix its shape
    (None: any). Values are tuples of row strings."""

    kind: ClassVar[str] = "grid"
    kind_nouns: ClassVar[frozenset[str]] = frozenset({"grid", "output", "board"})
    placeholder: ClassVar[str] = "grid"

    def __init__(self, *, alphabet: str = "0123456789", rows: int | None = None, cols: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alphabet = alphabet
        self.rows, self.cols = rows, cols
        cell = "".join(re.escape(c) for c in alphabet)
        self._row = re.compile(rf"[{cell}]+|[{cell}](?:[ \t]*[,|;\t ][ \t]*[{cell}])+")

    def _row_cells(self, line: str) -> str | None:
        s = _unbullet(line)
        s = re.sub(r"^(?:row[ \t]*[0-9]+[ \t]*[:.)-][ \t]*)", "", s, flags=re.IGNORECASE)
        s = s.strip().strip(",").strip()
        if s.startswith("|") and s.endswith("|"):
            s = s[1:-1].strip()
        if s.startswith("[") and s.endswith("]"):
            s = s[1:-1].strip()
        if not s or not self._row.fullmatch(s):
            return None
        return re.sub(r"[ \t,|;]", "", s)

    def line_ok(self, line: str) -> bool:
        return self._row_cells(line) is not None or _TABLE_RULE.fullmatch(line.strip()) is not None

    def parse(self, text: str) -> tuple[str, ...] | None:
        s = strip_block(text)
        rows: list[str] = []
        if s.startswith("[["):
            try:
                data = json.loads(s)
            except ValueError:
                return None
            if not isinstance(data, list) or not all(isinstance(r, list) for r in data):
                return None
            for r in data:
                cells = [str(c) for c in r]
                if any(len(c) != 1 or c not in self.alphabet for c in cells):
                    return None
                rows.append("".join(cells))
        else:
            table = _table_rows(s)
            lines = ["|" + "|".join(r) + "|" for r in table] if table is not None else s.split("\n")
            for line in lines:
                if not line.strip():
                    return None
                cells = self._row_cells(line)
                if cells is None:
                    return None
                rows.append(cells)
        if not rows or len({len(r) for r in rows}) != 1:
            return None
        if (self.rows is not None and len(rows) != self.rows) or (self.cols is not None and len(rows[0]) != self.cols):
            return None
        return tuple(rows)

    def mentions(self, text: str) -> bool:
        if text.lstrip().startswith("[["):
            return True
        return any(self._row_cells(line) is not None for line in text.split("\n") if line.strip())

    def format(self, value: Any) -> str:
        return "\n".join(value)

    def describe(self) -> str:
        shape = f"{self.rows}x{self.cols} " if self.rows and self.cols else ""
        return f"a {shape}grid, one row of cells ({self.alphabet}) per line"


# --- mappings ----------------------------------------------------------------------------------
_ENTRY_SEP = re.compile(r"[ \t]*(?:;|,(?:[ \t]+and)?|[ \t]and(?=[ \t])|\.(?=[ \t]|$)|\n)[ \t]*", re.IGNORECASE)


class MappingAnswer(_BlockContract):
    """Every key given exactly one value. `keys`: the keys (matched case-insensitively unless
    `key_case`); `values`: spelling -> value (matched case-insensitively; "a knight" reads as
    "knight"). Values are dicts key -> value."""

    kind: ClassVar[str] = "mapping"
    kind_nouns: ClassVar[frozenset[str]] = frozenset({"mapping", "assignment", "assignments"})
    placeholder: ClassVar[str] = "mapping"

    def __init__(self, *, keys: Sequence[str], values: Mapping[str, Any], key_case: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not keys or not values:
            raise ValueError("MappingAnswer needs keys and values")
        self.keys = tuple(keys)
        self.values = dict(values)
        self.key_case = key_case
        self._by_key = {self._fold(k): k for k in self.keys}
        self._by_value = {v.lower(): val for v, val in self.values.items()}
        key_alt = "|".join(sorted((re.escape(k) for k in self.keys), key=len, reverse=True))
        val_alt = "|".join(sorted((re.escape(v) for v in self.values), key=len, reverse=True))
        flags = 0 if key_case else re.IGNORECASE
        self._entry = re.compile(
            rf"(?P<key>{key_alt})[ \t]*"
            r"(?:(?::|=|->|→|=>|[-–][ \t])[ \t]*|[ \t]+(?:is|was|are)[ \t]+(?:an?[ \t]+)?|[ \t]*\()"
            rf"[ \t]*(?P<value>(?i:{val_alt}))[ \t]*\)?", flags)

    def _fold(self, key: str) -> str:
        return key if self.key_case else key.lower()

    def _entries(self, text: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        parts = [p for p in _ENTRY_SEP.split(text) if p is not None]
        for part in parts:
            part = _unbullet(part).strip().strip("*_`\"'").strip()
            if not part:
                continue
            m = self._entry.fullmatch(part)
            if m is None:
                return None
            key = self._by_key.get(self._fold(m.group("key")))
            if key is None or key in out:
                return None
            out[key] = self._by_value[m.group("value").lower()]
        return out

    def line_ok(self, line: str) -> bool:
        s = line.strip()
        if not s or _TABLE_RULE.fullmatch(s):
            return bool(s)
        table = _table_rows(f"{s}\n{s}") if s.startswith("|") else None
        if table is not None:
            return True
        return self._entries(s) is not None

    def parse(self, text: str) -> dict[str, Any] | None:
        s = strip_block(text)
        if s.startswith("{"):
            try:
                data = json.loads(s)
            except ValueError:
                return None
            if not isinstance(data, dict):
                return None
            pairs = [(str(k), str(v)) for k, v in data.items()]
        else:
            table = _table_rows(s)
            if table is not None:
                body = [r for r in table if len(r) == 2 and self._by_key.get(self._fold(r[0].strip("*_` ")))]
                if len(body) < len(table) - 1:
                    return None
                pairs = [(r[0].strip("*_` "), r[1].strip("*_` ")) for r in body]
            else:
                entries = self._entries(s)
                if entries is None or set(entries) != set(self.keys):
                    return None
                return entries
        out: dict[str, Any] = {}
        for k, v in pairs:
            key = self._by_key.get(self._fold(k))
            value = self._by_value.get(re.sub(r"^an?[ \t]+", "", v.strip().lower()))
            if key is None or key in out or value is None:
                return None
            out[key] = value
        return out if set(out) == set(self.keys) else None

    def mentions(self, text: str) -> bool:
        plain = re.sub(r"\*\*|__|`", "", text)
        if self._entry.search(plain) is not None:
            return True
        return any(line.lstrip().startswith(("{", "|")) for line in text.split("\n"))

    def format(self, value: Any) -> str:
        spelled = {}
        for spelling, v in self.values.items():
            spelled.setdefault(v, spelling)
        return "\n".join(f"{k}: {spelled[value[k]]}" for k in self.keys)

    def describe(self) -> str:
        names = sorted(set(self.values))
        return (f"one line 'key: value' for each of {', '.join(self.keys)}, each value one of "
                f"{', '.join(names)}")


# --- sequences ---------------------------------------------------------------------------------
_LEAD_END = re.compile(r":|(?<![^\W_])(?:is|are|=)(?![^\W_])")
_QUOTES = ("'", '"', "`", "\u2018", "\u201c")
_CLOSE = {"'": "'", '"': '"', "`": "`", "\u2018": "\u2019", "\u201c": "\u201d"}


class SequenceAnswer(_BlockContract):
    """An ordered list of items. `item(text)` reads one item (None: not one); `length` fixes how
    many; `spaces_separate`: items hold no spaces, so a space may separate them. Values are
    tuples."""

    kind: ClassVar[str] = "sequence"
    kind_nouns: ClassVar[frozenset[str]] = frozenset({"list", "sequence", "order", "items", "sorted", "deduplicated"})
    placeholder: ClassVar[str] = "list"

    def __init__(self, *, item: Callable[[str], Any] | str = "int", length: int | None = None,
                 spaces_separate: bool = True, item_name: str = "item", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        reader: Callable[[str], Any]
        if isinstance(item, str):
            if item not in ("int", "word", "number"):
                raise ValueError(f"SequenceAnswer item must be 'int', 'word', 'number' or a function, got {item!r}")
            self.item_kind = item
            reader = {"int": _int_item, "number": _number_item, "word": _word_item}[item]
        else:
            self.item_kind = "custom"
            reader = item
        self.item = reader
        self.length = length
        self.spaces_separate = spaces_separate
        self.item_name = item_name

    def _item(self, text: str) -> Any:
        s = text.strip()
        if len(s) >= 2 and s[0] in _QUOTES and s[-1] == _CLOSE[s[0]]:
            s = s[1:-1]
        s = s.strip("*_").strip()
        return self.item(s) if s else None

    def _split(self, s: str) -> list[str] | None:
        lines = [line for line in s.split("\n") if line.strip()]
        if len(lines) > 1:
            items = [_unbullet(line).rstrip(",;").strip() for line in lines]
            if all(self._item(x) is not None for x in items):
                return items
            joined = " ".join(line.strip() for line in lines)
            return self._split(joined) if all(line.rstrip().endswith(",") for line in lines[:-1]) else None
        line = _unbullet(lines[0]) if lines else ""
        if not line:
            return None
        if "," in line or ";" in line:
            parts = re.split(r"[ \t]*[,;][ \t]*", line)
            last = re.split(r"[ \t]+and[ \t]+", parts[-1], flags=re.IGNORECASE)
            if len(last) == 2 and last[0]:
                parts = parts[:-1] + last
            elif parts[-1].lower().startswith("and "):
                parts[-1] = parts[-1][4:]
            return parts
        if self.spaces_separate:
            return line.split()
        return [line]

    def parse(self, text: str) -> tuple[Any, ...] | None:
        s = strip_block(text)
        if not s:
            return None
        if s.startswith("[") and s.endswith("]"):
            try:
                data = json.loads(s)
            except ValueError:
                data = None
            if isinstance(data, list):
                out = [self.item(str(x)) for x in data]
            else:
                parts = self._split(s[1:-1])
                out = [self._item(p) for p in parts] if parts is not None else [None]
        else:
            parts = self._split(s)
            if parts is None:
                return None
            out = [self._item(p) for p in parts]
        if not out or any(x is None for x in out):
            return None
        if self.length is not None and len(out) != self.length:
            return None
        return tuple(out)

    def line_ok(self, line: str) -> bool:
        s = _unbullet(line).rstrip(",;.").strip()
        if s.startswith("[") and s.endswith("]"):
            s = s[1:-1].strip()
        parts = self._split(s) if s else None
        return bool(parts) and all(self._item(p) is not None for p in parts)  # type: ignore[union-attr]

    def mentions(self, text: str) -> bool:
        for line in text.split("\n"):
            if not line.strip():
                continue
            # the line, or what follows its lead-in ("The sorted list is 1, 2, 3.")
            tails = [line] + [line[m.end():] for m in _LEAD_END.finditer(line)]
            if any(self.line_ok(t) for t in tails if t.strip()):
                return True
        return False

    def format(self, value: Any) -> str:
        return ", ".join(str(x) for x in value)

    def describe(self) -> str:
        n = f"{self.length} " if self.length else ""
        return f"the {n}{self.item_name}s on one line, separated by commas"


def _int_item(text: str) -> int | None:
    return int(text) if re.fullmatch(r"[-+]?[0-9]+", text) else None


def _number_item(text: str) -> Fraction | None:
    q = read_quantity(text)
    return q.value if q is not None and q.unit is None else None


def _word_item(text: str) -> str | None:
    return text.lower() if re.fullmatch(r"[A-Za-z][A-Za-z'-]*", text) else None


# --- JSON --------------------------------------------------------------------------------------
def _canonical(value: Any) -> Any:
    """JSON values compared by value: numbers as exact Fractions (1 == 1.0), bools kept apart."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)  # True == Fraction(1) in Python: tagged, true is not 1
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    return value


class JsonAnswer(_BlockContract):
    """One JSON value (an object, a list, ...), compared by value. `top`: the JSON type the
    answer must have ("object", "array", or None for any)."""

    kind: ClassVar[str] = "json"
    placeholder: ClassVar[str] = "JSON"

    def __init__(self, *, top: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if top not in (None, "object", "array"):
            raise ValueError(f"JsonAnswer top must be 'object', 'array' or None, got {top!r}")
        self.top = top

    def answer_block(self, block: str) -> str:
        """The JSON value the block starts with (after a fence or a "label:" line), when only
        other lines follow it; else the block."""
        body = strip_block(block).strip()  # a label's slot starts with the space after "Answer:"
        if body[:1] not in "[{":
            first, _, rest = body.partition("\n")
            if first.rstrip().endswith(":"):
                body = rest.strip()
        try:
            _, end = json.JSONDecoder().raw_decode(body)
        except (ValueError, RecursionError):
            return block
        tail = body[end:]
        if tail.lstrip()[:1] in ("[", "{"):
            return block  # a second JSON value after the first is not prose: not one value
        return body[:end] if not tail.strip() or tail.lstrip(" \t").startswith("\n") else block

    def parse(self, text: str) -> Any:
        s = strip_block(text)
        if s[:1] not in ("[", "{") and text.strip()[:1] in ("[", "{"):
            s = text.strip()  # strip_decoration takes "[1]" for a bracketed 1
        if not s or s[0] not in "[{":
            return None
        try:
            data = json.loads(s)
        except (ValueError, RecursionError):
            return None
        if self.top is not None and not isinstance(data, dict if self.top == "object" else list):
            return None
        return data

    def read_slot(self, slot: str) -> Any:
        return self.parse(slot)

    def same(self, a: Any, b: Any) -> bool:
        return _canonical(a) == _canonical(b)

    def mentions(self, text: str) -> bool:
        return "{" in text or "[" in text

    def format(self, value: Any) -> str:
        return json.dumps(value)

    def describe(self) -> str:
        return {"object": "a JSON object", "array": "a JSON array", None: "a JSON value"}[self.top]
