"""`llm/Extraction-v0`: read fields out of a generated document full of look-alike distractors.

A task is one document — an invoice, a personnel record or a site-inspection report, generated
from the seed — and a question asking for `num_fields` of its fields. Each field has a
distractor in the same document when `distractors` is on (the subtotal next to the total, the
issue date next to the due date, the seller next to the customer, the manager next to the
employee, the previous salary next to the salary, ...).

The prompt asks for one line per field, `field: value`. Each field's value has a contract
(`value_contract`): an amount of money (total, salary) is a `NumberAnswer` in dollars ("85.25",
"$85.25", "52,300"), a count (issues_found) an `IntegerAnswer` ("7", "7 issues"), a date a
`TokenAnswer` of the form YYYY-MM-DD, a text (names, ids, departments, places) a `TokenAnswer`
over the document generators' vocabulary of such values (a person's name, a company, a
department, a site, an id such as INV-48213), compared case-insensitively with whitespace
collapsed. With one field asked, the answer contract is that value's contract, declared by the
field's own key as the prompt writes it ("total: 85.25", "the total is 85.25") or by "Answer:";
with several, it is `FieldsAnswer`: a block of `field: value` lines, every asked field exactly
once and nothing else (markdown, bullets, any key case, spaces for underscores allowed). Both
are read under the one answer policy (`llm_gym.grading.POLICY`): the last declaration, else the
last line (block) stating a value, parsed completely; a second declaration with a different
value voids the credit; nothing else is read. The document's own lines quoted back are not the
reply's answer: its labels ("Name:", "Annual salary:") are not the field's key as the prompt
writes it, so they declare nothing, and a reply quoting two or more document lines verbatim is
read from its own lines only (echoing the document never scores). Reward is all-of: 1 only when
every asked field is right; `fields_correct` reports the fraction right.
"""

from __future__ import annotations

import datetime
import re
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from envs_catalog.text.base import TextGrade, TextSource, TextTaskEnv, knob_docs
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading import AnswerContract, IntegerAnswer, NumberAnswer, TokenAnswer
from llm_gym.grading.contracts.structured import strip_block
from llm_gym.grading.policy import Declaration, declarations
from llm_gym.scripted import ScriptedCase

FIRST = ("Anna", "Bruno", "Carla", "Dana", "Elias", "Fatima", "Georg", "Hana", "Ivan", "Julia",
         "Kenji", "Lena", "Marco", "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Tomas", "Vera")
LAST = ("Smith", "Novak", "Garcia", "Kim", "Olsen", "Rossi", "Weber", "Silva", "Brown", "Lee",
        "Tanaka", "Moreau", "Costa", "Nagy", "Park", "Fischer")
COMPANIES = ("Acme Supplies", "Blue Harbor Ltd", "Northwind Goods", "Redwood Traders",
             "Summit Office Co", "Greenleaf Market")
DEPARTMENTS = ("Finance", "Sales", "Research", "Legal", "Marketing", "Logistics", "Support")
SITES = ("North Depot", "East Warehouse", "River Plant", "Hill Station", "Old Mill", "Port Yard")
PRODUCTS = ("cable", "lamp", "chair", "paper pack", "printer ink", "desk", "keyboard", "mug")
DOC_TYPES = ("invoice", "personnel", "report")

NUMBER, DATE, TEXT = "number", "date", "text"


def _date(rng: np.random.Generator, start_year: int = 2019, end_year: int = 2025) -> datetime.date:
    return datetime.date(int(rng.integers(start_year, end_year + 1)), int(rng.integers(1, 13)),
                         int(rng.integers(1, 29)))


def _name(rng: np.random.Generator) -> str:
    return f"{FIRST[int(rng.integers(len(FIRST)))]} {LAST[int(rng.integers(len(LAST)))]}"


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _two_names(rng: np.random.Generator) -> tuple[str, str]:
    a = _name(rng)
    b = _name(rng)
    while b.split()[0] == a.split()[0] or b.split()[1] == a.split()[1]:
        b = _name(rng)
    return a, b


def _invoice(rng: np.random.Generator, distractors: bool) -> tuple[list[str], dict]:
    number = f"INV-{int(rng.integers(10000, 100000))}"
    po = f"PO-{int(rng.integers(1000, 10000))}"
    issued = _date(rng)
    due = issued + datetime.timedelta(days=int(rng.choice([14, 30, 45, 60])))
    customer = _name(rng)
    seller = COMPANIES[int(rng.integers(len(COMPANIES)))]
    picks = rng.choice(len(PRODUCTS), size=int(rng.integers(2, 4)), replace=False).tolist()
    lines, subtotal = [], 0
    for i in picks:
        qty, unit = int(rng.integers(1, 6)), int(rng.integers(200, 5000))
        subtotal += qty * unit
        lines.append(f"- {qty} x {PRODUCTS[i]} @ {_money(unit)} = {_money(qty * unit)}")
    tax = subtotal // 10
    total = subtotal + tax
    previous = int(rng.integers(500, 20000))
    doc = [f"INVOICE {number}", f"Issued: {issued}", f"Due: {due}", f"Bill to: {customer}"]
    if distractors:
        doc += [f"Sold by: {seller}", f"Order reference: {po}"]
    doc += ["Items:", *lines]
    if distractors:
        doc += [f"Subtotal: {_money(subtotal)}", f"Tax (10%): {_money(tax)}"]
    doc += [f"Total due: {_money(total)}"]
    if distractors:
        doc += [f"Previous invoice (paid): {_money(previous)}"]
    fields = {
        "invoice_number": (TEXT, number, po, "the invoice number"),
        "due_date": (DATE, str(due), str(issued), "the due date"),
        "customer": (TEXT, customer, seller, "the customer (bill to)"),
        "total": (NUMBER, _money(total), _money(subtotal), "the total due"),
    }
    return doc, fields


def _personnel(rng: np.random.Generator, distractors: bool) -> tuple[list[str], dict]:
    name, manager = _two_names(rng)
    dept, prev_dept = (DEPARTMENTS[i] for i in rng.choice(len(DEPARTMENTS), 2, replace=False).tolist())
    start = _date(rng, 2010, 2024)
    born = _date(rng, 1960, 2000)
    salary = int(rng.integers(300, 1200)) * 100
    previous = salary - int(rng.integers(10, 80)) * 100
    emp_id = f"E-{int(rng.integers(1000, 10000))}"
    room = f"Room {int(rng.integers(100, 600))}"
    doc = ["PERSONNEL RECORD", f"Employee ID: {emp_id}", f"Name: {name}", f"Department: {dept}"]
    if distractors:
        doc += [f"Previous department: {prev_dept}", f"Date of birth: {born}"]
    doc += [f"Start date: {start}", f"Manager: {manager}", f"Annual salary: {salary:,}"]
    if distractors:
        doc += [f"Salary before last review: {previous:,}", f"Office: {room}"]
    fields = {
        "name": (TEXT, name, manager, "the employee's name"),
        "department": (TEXT, dept, prev_dept, "the current department"),
        "start_date": (DATE, str(start), str(born), "the start date"),
        "salary": (NUMBER, str(salary), str(previous), "the current annual salary"),
    }
    return doc, fields


def _report(rng: np.random.Generator, distractors: bool) -> tuple[list[str], dict]:
    site, other = (SITES[i] for i in rng.choice(len(SITES), 2, replace=False).tolist())
    inspector, host = _two_names(rng)
    when = _date(rng)
    nxt = when + datetime.timedelta(days=int(rng.choice([90, 180, 365])))
    found = int(rng.integers(1, 15))
    resolved = int(rng.integers(0, found))
    doc = ["SITE INSPECTION REPORT", f"Site: {site}", f"Inspector: {inspector}",
           f"Inspection date: {when}"]
    if distractors:
        doc += [f"Next inspection: {nxt}"]
    doc += [f"Issues found: {found}"]
    if distractors:
        doc += [f"Issues resolved on the day: {resolved}",
                f"Notes: {inspector} was shown around by the site manager {host}. The previous "
                f"visit was to {other}, where no issues were found."]
    fields = {
        "site": (TEXT, site, other, "the inspected site"),
        "inspector": (TEXT, inspector, host, "the inspector"),
        "inspection_date": (DATE, str(when), str(nxt), "the inspection date"),
        "issues_found": (NUMBER, str(found), str(resolved), "the number of issues found"),
    }
    return doc, fields


_BUILDERS = {"invoice": _invoice, "personnel": _personnel, "report": _report}

# --- what a value is ---------------------------------------------------------------------------
_MONEY = frozenset({"total", "salary"})  # amounts in dollars; the other number field is a count
_NOUNS = {"issues_found": ("issues", "issue")}
_DATE_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"


def _words(phrase: str) -> str:
    return r"[ \t]+".join(re.escape(w) for w in phrase.split())


def _alternatives(phrases: tuple[str, ...]) -> str:
    return "|".join(_words(p) for p in sorted(phrases, key=len, reverse=True))


# A text value is one the document generators write: a person's name, a company, a department,
# a site or an id ("INV-48213", "PO-2291", "E-1234").
TEXT_PATTERN = (rf"(?:{_alternatives(FIRST)})[ \t]+(?:{_alternatives(LAST)})"
                rf"|{_alternatives(COMPANIES)}|{_alternatives(DEPARTMENTS)}|{_alternatives(SITES)}"
                r"|[A-Za-z]{1,3}-[0-9]{3,6}")


def _collapse(text: str) -> str:
    return " ".join(text.lower().split())


def field_instruction(keys: list[str]) -> str:
    """The prompt's answer instruction: the field lines to reply with."""
    template = "\n".join(f"{k}: <value>" for k in keys)
    return f"Reply with exactly {'this line' if len(keys) == 1 else 'these lines'}:\n{template}"


_LINE_START = re.compile(r"[ \t*_#>`-]*")


def _keyed(contract: AnswerContract, key: str, visible: str) -> list[Declaration] | None:
    """The declarations of a one-field contract: "Answer" (any case, anywhere: "The answer is
    85.25"), and the field's line as the prompt asks for it -- the key written as the prompt
    writes it ("total", "due_date") at the start of its line ("total: 85.25", "- **total:**
    85.25") -- so that the document's own lines quoted back ("Total due:", "Name:", "Annual
    salary:") declare nothing."""
    found = declarations(visible, contract)
    if found is None:
        return None

    def declares(d: Declaration) -> bool:
        if d.source != "label" or visible[d.start:d.start + 6].lower() == "answer":
            return True
        line_start = visible.rfind("\n", 0, d.start) + 1
        return visible.startswith(key, d.start) and _LINE_START.fullmatch(visible[line_start:d.start]) is not None

    return [d for d in found if declares(d)]


def _last_own_line(contract: AnswerContract, visible: str, quoted: frozenset[str]) -> Declaration | None:
    """The policy's last line stating a value, where a reply that quotes the document (two or
    more of its lines verbatim) is read from its own lines only: quoting "Issued: ..." and
    "Due: ..." back states which lines the document has, not which one is the answer."""
    lines = visible.split("\n")
    skip = quoted if sum(line.strip() in quoted for line in lines) >= 2 else frozenset()
    pos = len(visible)
    for line in reversed(lines):
        pos -= len(line)
        if line.strip() and line.strip() not in skip and contract.mentions(line):
            return Declaration("last_line", line, pos)
        pos -= 1
    return None


class _OneField:
    """What the contract of a task asking for one field adds to its value's contract: the
    prompt's field line as the instruction, the field's key as a label (`_keyed`), and the
    document's lines not read as the reply's statements (`_last_own_line`)."""

    def _init_field(self, key: str, document: str) -> None:
        self.key = key
        self.quoted = frozenset(line.strip() for line in document.split("\n") if line.strip())

    def instruction(self, *, brief: bool = False) -> str:
        return field_instruction([self.key])


class FieldNumber(_OneField, NumberAnswer):
    """One asked field's amount of money (see `_OneField`)."""

    def __init__(self, *, key: str, document: str = "", **kwargs: Any) -> None:
        NumberAnswer.__init__(self, labels=("answer", key), **kwargs)
        self._init_field(key, document)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        return _keyed(self, self.key, visible)

    def last_answer(self, visible: str) -> Declaration | None:
        return _last_own_line(self, visible, self.quoted)


class FieldInteger(_OneField, IntegerAnswer):
    """One asked field's count (see `_OneField`)."""

    def __init__(self, *, key: str, document: str = "", **kwargs: Any) -> None:
        IntegerAnswer.__init__(self, labels=("answer", key), **kwargs)
        self._init_field(key, document)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        return _keyed(self, self.key, visible)

    def last_answer(self, visible: str) -> Declaration | None:
        return _last_own_line(self, visible, self.quoted)


class FieldToken(_OneField, TokenAnswer):
    """One asked field's date or text (see `_OneField`)."""

    def __init__(self, *, key: str, document: str = "", **kwargs: Any) -> None:
        TokenAnswer.__init__(self, labels=("answer", key), **kwargs)
        self._init_field(key, document)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        return _keyed(self, self.key, visible)

    def last_answer(self, visible: str) -> Declaration | None:
        return _last_own_line(self, visible, self.quoted)


def value_contract(key: str, kind: str, *, one_field: bool = False, context: str = "",
                   document: str = "") -> AnswerContract:
    """The contract of field `key`'s value (see the module docstring); `one_field`: the answer
    contract of a task asking for this field alone (`_OneField`: declared by its key, the
    `document`'s lines quoted back not read as statements)."""
    extra: dict[str, Any] = {"key": key, "context": context, "document": document} if one_field else {
        "context": context}
    if kind == NUMBER and key in _MONEY:
        return (FieldNumber if one_field else NumberAnswer)(unit="USD", name=f"the {key}", **extra)
    if kind == NUMBER:
        return (FieldInteger if one_field else IntegerAnswer)(nouns=_NOUNS.get(key, ()), name=f"the {key}", **extra)
    if kind == DATE:
        return (FieldToken if one_field else TokenAnswer)(pattern=_DATE_PATTERN, name="the date", **extra)
    return (FieldToken if one_field else TokenAnswer)(pattern=TEXT_PATTERN, normalize=_collapse,
                                                      name=f"the {key}", **extra)


def parse_value(key: str, kind: str, text: str) -> Any:
    """Field `key`'s value as its contract reads `text` in full, or None."""
    return value_contract(key, kind).parse(text)


# --- several fields ----------------------------------------------------------------------------
_BULLET = re.compile(r"^[ \t]*(?:[-+*\u2022][ \t]+|[0-9]{1,3}[.)][ \t]+|>[ \t]*)")
_FENCE_LINE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[\w+-]*[ \t]*")


class FieldsAnswer(AnswerContract):
    """Several fields: a block of `field: value` lines (`=` also separates; a bullet, bold or
    backticks around a line or key allowed; keys in any case, with spaces or hyphens for
    underscores), each field of `fields` exactly once, each value read completely by its
    contract, no other line. Values are dicts key -> value."""

    kind: ClassVar[str] = "fields"
    multiline: ClassVar[bool] = True
    placeholder: ClassVar[str] = "fields"

    def __init__(self, *, fields: dict[str, AnswerContract], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not fields:
            raise ValueError("FieldsAnswer needs at least one field")
        self.fields = dict(fields)
        keys = "|".join(re.escape(k).replace("_", "[ _-]") for k in sorted(self.fields, key=len, reverse=True))
        self._line = re.compile(rf"(?P<key>{keys})[ \t]*(?::|=)[ \t]*(?P<value>.*)", re.IGNORECASE)

    def _key_value(self, line: str) -> tuple[str, str] | None:
        s = re.sub(r"\*\*|__|`", "", _BULLET.sub("", line, count=1)).strip()
        m = self._line.fullmatch(s)
        if m is None:
            return None
        key = re.sub(r"[ -]", "_", m.group("key").lower())
        return key, m.group("value")

    def _entry(self, line: str) -> tuple[str, Any] | None:
        found = self._key_value(line)
        if found is None:
            return None
        key, text = found
        value = self.fields[key].parse(text)
        return None if value is None else (key, value)

    def parse(self, text: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        for line in strip_block(text).split("\n"):
            if not line.strip():
                continue
            entry = self._entry(line)
            if entry is None or entry[0] in out:
                return None
            out[entry[0]] = entry[1]
        return out if set(out) == set(self.fields) else None

    def answer_block(self, block: str) -> str:
        """The field lines of a block: a fenced block's contents, without a first line that
        is a label ("Here are the fields:"), up to the first line after them that is not one."""
        lines = block.strip("\n").split("\n")
        if _FENCE_LINE.fullmatch(lines[0]) and any(_FENCE_LINE.fullmatch(x) for x in lines[1:]):
            end = next(i for i in range(1, len(lines)) if _FENCE_LINE.fullmatch(lines[i]))
            return "\n".join(lines[1:end])
        if len(lines) > 1 and lines[0].rstrip().endswith(":") and self._key_value(lines[0]) is None:
            lines = lines[1:]
        kept = [lines[0]]
        for line in lines[1:]:
            if self._key_value(line) is None:
                break
            kept.append(line)
        return "\n".join(kept)

    def read_slot(self, slot: str) -> Any:
        return self.parse(slot)

    def mentions(self, text: str) -> bool:
        return any(self._key_value(line) is not None for line in text.split("\n"))

    def same(self, a: Any, b: Any) -> bool:
        return all(c.same(a[k], b[k]) for k, c in self.fields.items())

    def matches(self, value: Any, gold: Any) -> bool:
        return all(c.matches(value[k], gold[k]) for k, c in self.fields.items())

    def format(self, value: Any) -> str:
        return "\n".join(f"{k}: {c.format(value[k])}" for k, c in self.fields.items())

    def describe(self) -> str:
        return "one line 'field: value' for each of " + ", ".join(self.fields)

    def instruction(self, *, brief: bool = False) -> str:
        return field_instruction(list(self.fields))


# --- the task's contract and grade -------------------------------------------------------------
def extraction_contract(asked: list[str], fields: dict[str, tuple], context: str = "",
                        document: str = "") -> AnswerContract:
    """The answer contract of a task asking for `asked` about `document` (a field's value
    contract when one field is asked, else `FieldsAnswer`)."""
    if len(asked) == 1:
        return value_contract(asked[0], fields[asked[0]][0], one_field=True, context=context, document=document)
    return FieldsAnswer(fields={k: value_contract(k, fields[k][0]) for k in asked}, context=context)


def gold_value(asked: list[str], fields: dict[str, tuple]) -> Any:
    """The gold answer in the contract's type (one field's value, or a dict of them)."""
    values = {k: parse_value(k, fields[k][0], fields[k][1]) for k in asked}
    return values[asked[0]] if len(asked) == 1 else values


def grade_fields(reply: str, asked: list[str], fields: dict[str, tuple],
                 contract: AnswerContract | None = None) -> TextGrade:
    """The reply's fields under the task's contract, every asked field compared: score 1 only
    when all are right, `fields_correct` the fraction right."""
    contract = contract or extraction_contract(asked, fields)
    gold = gold_value(asked, fields)
    reading = contract.read(reply)
    if not reading.ok:
        return TextGrade(0.0, False, reading.status, {"fields_correct": 0.0})
    if isinstance(contract, FieldsAnswer):
        right = sum(bool(c.matches(reading.value[k], gold[k])) for k, c in contract.fields.items())
    else:
        right = int(bool(contract.matches(reading.value, gold)))
    score = float(right == len(asked))
    return TextGrade(score, True, "ok" if score else "wrong", {"fields_correct": right / len(asked)})


class ExtractionSource(TextSource):
    """Field extraction from generated documents (`llm/Extraction-v0`)."""

    DEFAULTS: dict[str, Any] = {"doc_type": "any", "num_fields": 1, "distractors": True,
                                "format_coef": 0.1}
    card = EnvCard(
        id="llm/Extraction-v0",
        family="text",
        description=(
            "Read one or more fields out of a generated document (an invoice, a personnel record "
            "or a site-inspection report) that holds a distractor for every field (subtotal vs "
            "total, issue vs due date, seller vs customer, manager vs employee, ...). The prompt "
            "asks for one 'field: value' line per asked field; the answer is read under the one "
            "answer policy (llm_gym.grading.POLICY): one field is declared by its key as the "
            "prompt writes it ('total: 85.25') or by 'Answer:', else read from the last line "
            "stating a value; several fields are the last block of 'field: value' lines, every "
            "asked field exactly once. Values are parsed completely: amounts of money as numbers "
            "in dollars ('$85.25', '52,300'), counts as integers, dates as YYYY-MM-DD, text as "
            "one name, company, department, site or id, compared case-insensitively; a second "
            "declared value that differs voids the credit, and the document's own lines quoted "
            "back are not read as the answer."
        ),
        answer_contract=(
            "one field: its value's contract (NumberAnswer in dollars, IntegerAnswer, or TokenAnswer "
            "for a date or a text value) declared by the field's key; several: FieldsAnswer ('field: "
            "value' lines)"
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 when every asked field is right, 0 for a readable answer with a wrong value, "
            "-format_coef (0.1) when no answer can be read (a missing or repeated field, a line "
            "that is not an asked field, a value that is not one value of its kind, conflicting "
            "declarations) or the reply does not end on the renderer's end of turn."
        ),
        difficulty_knobs=knob_docs({
            "doc_type": "'any', 'invoice', 'personnel' or 'report'",
            "num_fields": "fields asked for, 1-4",
            "distractors": "whether each field's look-alike distractor lines are in the document",
            "format_coef": "penalty for a reply not in the stated format, 0-1",
        }, DEFAULTS),
        data_source="generated on the fly from the seed (built-in name, company and place pools)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Read this document.\n\nINVOICE INV-48213\nIssued: 2024-03-05\nDue: 2024-04-04\n"
                "Bill to: Dana Smith\nSold by: Acme Supplies\nOrder reference: PO-2291\nItems:\n"
                "- 3 x cable @ 12.50 = 37.50\n- 1 x lamp @ 40.00 = 40.00\nSubtotal: 77.50\n"
                "Tax (10%): 7.75\nTotal due: 85.25\nPrevious invoice (paid): 19.99\n\n"
                "Give the total due as a number.\nReply with exactly this line:\ntotal: <value>")},
            {"role": "assistant", "content": "total: 85.25"},
        ],
    )

    def configure(self, *, doc_type: str, num_fields: int, distractors: bool) -> None:
        self.doc_type = check_choice("doc_type", doc_type, ("any",) + DOC_TYPES)
        self.num_fields = check_int("num_fields", num_fields, 1, 4)
        self.distractors = check_choice("distractors", distractors, (True, False))

    def draw(self, rng: np.random.Generator) -> tuple[str | None, dict[str, Any]]:
        doc_type = (DOC_TYPES[int(rng.integers(len(DOC_TYPES)))] if self.doc_type == "any"
                    else self.doc_type)
        doc, fields = _BUILDERS[doc_type](rng, self.distractors)
        names = list(fields)
        asked = [names[i] for i in sorted(rng.choice(len(names), self.num_fields, replace=False).tolist())]
        if any(parse_value(k, fields[k][0], fields[k][1]) == parse_value(k, fields[k][0], fields[k][2])
               for k in asked):
            return None, {}
        document = "\n".join(doc)
        answer = "\n".join(f"{k}: {fields[k][1]}" for k in asked)
        return f"extract:{document}:{','.join(asked)}", {
            "doc_type": doc_type, "document": document, "fields": fields, "asked": asked,
            "answer": answer,
        }

    def episode(self, task: dict[str, Any]) -> TextTaskEnv:
        fields, asked = task["fields"], task["asked"]
        how = {NUMBER: "as a number", DATE: "as YYYY-MM-DD", TEXT: "as written"}
        wants = "\n".join(f"Give {fields[k][3]} {how[fields[k][0]]}." for k in asked)
        question = (f"Read this document.\n\n{task['document']}\n\n{wants}\n"
                    f"{extraction_contract(asked, fields).instruction()}")
        contract = extraction_contract(asked, fields, question, task["document"])
        return self.env_for(question, task["answer"], lambda r: grade_fields(r, asked, fields, contract), task,
                            contract=contract, gold=gold_value(asked, fields))

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the `field: value` lines; the lines reordered with values in other forms ($ and
        thousands separators for money, a noun after a count, lower case) and bullets; a bare
        value, a sentence declaring it and working before it for one field; fullwidth digits
        (read as digits). Adversarial: each field's distractor value, a value joined to its
        distractor by "or", a field given twice, the answer and the distractor both declared,
        the document echoed, keys with no values, a line that is not an asked field inside the
        block, empty."""
        def lines(env, pick):
            return "\n".join(f"{k}: {pick(env.task['fields'][k], k)}" for k in env.task["asked"])

        def alt_form(spec, key):
            kind, value = spec[0], spec[1]
            if kind == NUMBER and key in _MONEY:
                number = Fraction(value)
                return f"${int(number):,}" if number.denominator == 1 else "$" + value
            if kind == NUMBER:
                return f"{value} {_NOUNS[key][0]}"
            return value.lower() if kind == TEXT else value

        def hedge(env):
            return lines(env, lambda spec, k: f"{spec[1]} or {spec[2]}")

        def fullwidth(env):
            return "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in env.answer)

        def twice(env):
            k = env.task["asked"][0]
            spec = env.task["fields"][k]
            return f"{k}: {spec[2]}\n{env.answer}"

        def value(env):
            return env.task["fields"][env.task["asked"][0]][1]

        def distractor(env):
            return env.task["fields"][env.task["asked"][0]][2]

        def unasked(env):
            other = next(k for k in env.task["fields"] if k not in env.task["asked"])
            return f"{other}: {env.task['fields'][other][1]}\n{env.answer}"

        return [
            ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
            ScriptedCase("reordered, other forms", "gold",
                         lambda env, ob: "\n".join("- " + line for line in reversed(lines(env, alt_form).split("\n"))),
                         1.0, 1.0, knobs={"num_fields": 3}),
            ScriptedCase("bare value", "gold", lambda env, ob: value(env), 1.0, 1.0, knobs={"num_fields": 1}),
            ScriptedCase("answer sentence", "gold", lambda env, ob: f"The answer is {value(env)}.", 1.0, 1.0,
                         knobs={"num_fields": 1}),
            ScriptedCase("working, then the field", "gold", lambda env, ob: (
                f"The document lists {distractor(env)} too, but that is the distractor.\n\n{env.answer}"),
                1.0, 1.0, knobs={"num_fields": 1}),
            ScriptedCase("fullwidth digits", "gold", lambda env, ob: fullwidth(env), 1.0, 1.0,
                         knobs={"doc_type": "invoice", "num_fields": 4}),
            ScriptedCase("distractor values", "adversarial",
                         lambda env, ob: lines(env, lambda spec, k: spec[2]), -1.0, 0.0),
            ScriptedCase("hedge", "adversarial", lambda env, ob: hedge(env), -1.0, 0.0),
            ScriptedCase("field twice", "adversarial", lambda env, ob: twice(env), -1.0, 0.0),
            ScriptedCase("answer and distractor declared", "adversarial",
                         lambda env, ob: f"{env.answer}\nAnswer: {distractor(env)}", -1.0, 0.0,
                         knobs={"num_fields": 1}),
            ScriptedCase("echo document", "adversarial", lambda env, ob: env.task["document"],
                         -1.0, 0.0),
            ScriptedCase("keys only", "adversarial",
                         lambda env, ob: "\n".join(f"{k}:" for k in env.task["asked"]), -1.0, 0.0),
            ScriptedCase("a field not asked in the block", "adversarial", lambda env, ob: unasked(env),
                         -1.0, 0.0, knobs={"num_fields": 2}),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
