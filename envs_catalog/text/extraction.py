"""`llm/Extraction-v0`: read fields out of a generated document full of look-alike distractors.

A task is one document — an invoice, a personnel record or a site-inspection report, generated
from the seed — and a question asking for `num_fields` of its fields. Each field has a
distractor in the same document when `distractors` is on (the subtotal next to the total, the
issue date next to the due date, the seller next to the customer, the manager next to the
employee, the previous salary next to the salary, ...).

Reply format (stated in the prompt): one line per field, `field: value`, in any order, with
markdown (bold, backticks, a bullet) allowed; with one field a bare one-line reply (or `Answer:
value`) is accepted too. Under the answer policy of `llm_gym.grading`, lines that are not field
lines are working (reasoning before, a check after) and cost nothing; a field given twice with
different values is `conflicting`, a field of any document type not asked for is
`unexpected_line` (a distractor's value offered too), a hedge ("or", "maybe", "backup", ...) once
a field is given is `hedged`. With one field asked, a bare value amid reasoning is read too: the
lines shaped like a value (at most six words, no function word, no sentence inside) are the
answers stated, and they must all read as the field's value and agree. Values are compared after
normalisation by kind: numbers are read by `llm_gym.grading.parse_number` (exact; thousands
separators, a leading `$` and trailing `.` are fine, "85.25 or 77.50" is not a number); dates
must be `YYYY-MM-DD`; text (names, ids, places) is compared case-insensitively with whitespace
collapsed and one pair of surrounding quotes and a trailing period dropped. Replies are ASCII
only (look-alike digits or letters are unreadable). Reward is all-of: 1 only when every asked
field is right.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import numpy as np

from envs_catalog.text.base import TextGrade, TextSource, TextTaskEnv, knob_docs, visible_reply
from envs_catalog.text.genuine import FUNCTION_WORDS
from llm_gym.authoring import check_choice, check_int
from llm_gym.env_source import EnvCard
from llm_gym.grading.final import HEDGE
from llm_gym.grading import parse_number
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
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def normalise_value(kind: str, value: str) -> Any:
    """The comparable form of a value, or None when it cannot be read as its kind."""
    v = value.strip()
    if kind != NUMBER and v.endswith("."):  # parse_number drops a trailing period itself
        v = v[:-1].rstrip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"`":
        v = v[1:-1].strip()
    if kind == NUMBER:
        if v.startswith("$"):
            v = v[1:].strip()
        return parse_number(v)
    if kind == DATE:
        return v if _DATE.fullmatch(v) else None
    return " ".join(v.lower().split()) or None


_KEY_LINE = re.compile(r"([A-Za-z][A-Za-z _-]{0,40}?)\s*:\s*(.*)")


def _value_shaped(line: str) -> bool:
    """A line that could only be a value: at most six words, none a function word, no
    sentence end inside it."""
    words = re.findall(r"[A-Za-z']+", line)
    return (len(line.split()) <= 6 and not re.search(r"[.!?;,]\s", line)
            and not any(w.lower() in FUNCTION_WORDS for w in words))


def _unmark(text: str) -> str:
    """`text` without markdown emphasis or backticks around it, or a bullet before it."""
    s = re.sub(r"^[-*+]\s+", "", text.strip())
    for w in ("**", "__", "`"):
        s = s.replace(w, "")
    return s.strip()


def _key(text: str) -> str:
    return "_".join(text.lower().replace("-", " ").split())


def grade_fields(reply: str, asked: list[str], fields: dict[str, tuple]) -> TextGrade:
    """Read `field: value` lines (see the module docstring) and compare every asked field."""
    text, status = visible_reply(reply)
    if text is None:
        return TextGrade(0.0, False, status, {"fields_correct": 0.0})
    lines = [_unmark(line) for line in text.splitlines() if line.strip()]
    values: dict[str, str] = {}
    first = None  # index of the first field line: hedges from there on deny credit
    for i, line in enumerate(lines):
        m = _KEY_LINE.fullmatch(line)
        key = _key(m.group(1)) if m else None
        if len(asked) == 1 and (m is None or key == "answer") and len(lines) == 1:
            key, value = asked[0], (m.group(2) if m else line)
        elif (key in fields or key in _FIELD_NAMES) and key not in asked:  # a field not asked for
            return TextGrade(0.0, False, "unexpected_line", {"fields_correct": 0.0})
        elif m is None or key not in asked:
            if first is not None and HEDGE.search(line):
                return TextGrade(0.0, False, "hedged", {"fields_correct": 0.0})
            continue  # working: reasoning before the fields, a check after them
        else:
            value = _unmark(m.group(2))
        first = i if first is None else first
        if key in values and normalise_value(fields[key][0], values[key]) != normalise_value(
                fields[key][0], value):
            return TextGrade(0.0, False, "conflicting", {"fields_correct": 0.0})
        values[key] = value
    if not values and len(asked) == 1 and len(lines) > 1:
        # One field, its bare value amid reasoning: the lines shaped like a value (a few words,
        # no function word, no sentence) are the answers stated; they must all be this field's
        # value, and agree. Prose lines are working.
        shaped = [i for i, line in enumerate(lines) if _value_shaped(line)]
        kind = fields[asked[0]][0]
        read = {normalise_value(kind, lines[i]) for i in shaped}
        if shaped and (None in read or len(read) > 1):
            return TextGrade(0.0, False, "conflicting", {"fields_correct": 0.0})
        if shaped and any(HEDGE.search(line) for line in lines[shaped[0]:] if not _value_shaped(line)):
            return TextGrade(0.0, False, "hedged", {"fields_correct": 0.0})
        if shaped:
            values[asked[0]] = lines[shaped[-1]]
    if set(values) != set(asked):
        return TextGrade(0.0, False, "missing_field", {"fields_correct": 0.0})
    right = 0
    for key in asked:
        kind, want = fields[key][0], fields[key][1]
        got = normalise_value(kind, values[key])
        if got is None:
            return TextGrade(0.0, False, "bad_value", {"fields_correct": right / len(asked)})
        right += got == normalise_value(kind, want)
    score = float(right == len(asked))
    return TextGrade(score, True, "ok" if score else "wrong", {"fields_correct": right / len(asked)})


# Every field name of every document type: a line naming one is an answer, not working.
_FIELD_NAMES = frozenset(
    k for build in (_invoice, _personnel, _report) for k in build(np.random.default_rng(0), True)[1]
)


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
            "total, issue vs due date, seller vs customer, manager vs employee, ...). The reply "
            "is one 'field: value' line per asked field (a bare one-line value for a single "
            "field); reasoning around the field lines is fine, a field given twice differently, "
            "a field not asked for or a hedge once a field is given is refused; "
            "numbers are read exactly by llm_gym.grading.parse_number, dates must be YYYY-MM-DD, "
            "text is compared case-insensitively with whitespace collapsed."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "1 when every asked field is right, 0 for readable lines with a wrong value, "
            "-format_coef (0.1) when the reply is not readable in the stated format (a missing "
            "field, one given twice differently, a field not asked for, a hedge, a value that is not "
            "one number or date, non-ASCII "
            "text) or does not end on the renderer's end of turn."
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
        if any(normalise_value(fields[k][0], fields[k][1]) == normalise_value(fields[k][0], fields[k][2])
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
        template = "\n".join(f"{k}: <value>" for k in asked)
        line_s = "this line" if len(asked) == 1 else "these lines"
        question = (f"Read this document.\n\n{task['document']}\n\n{wants}\n"
                    f"Reply with exactly {line_s}:\n{template}")
        return self.env_for(question, task["answer"], lambda r: grade_fields(r, asked, fields), task)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the `field: value` lines; the lines reordered with values in other normal forms
        ($, thousands separators, lower case); a bare value for one field. Adversarial: each
        field's distractor value, a hedge between value and distractor, a field given twice, a
        listing of every field of the document, the document echoed, keys with no values,
        fullwidth look-alike digits, an answer in prose, empty."""
        def lines(env, pick):
            return "\n".join(f"{k}: {pick(env.task['fields'][k], k)}" for k in env.task["asked"])

        def alt_form(spec, key):
            kind, value = spec[0], spec[1]
            if kind == NUMBER:
                number = parse_number(value)
                assert number is not None  # the document's own values read
                return f"${int(number):,}" if number.denominator == 1 else "$" + value
            return value.lower() if kind == TEXT else value

        def every_field(env):
            return "\n".join(f"{k}: {spec[1]}" for k, spec in env.task["fields"].items())

        def hedge(env):
            return lines(env, lambda spec, k: f"{spec[1]} or {spec[2]}")

        def fullwidth(env):
            return "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in env.answer)

        def twice(env):
            k = env.task["asked"][0]
            spec = env.task["fields"][k]
            return f"{k}: {spec[2]}\n{env.answer}"

        return [
            ScriptedCase("reference", "gold", lambda env, ob: env.answer, 1.0, 1.0),
            ScriptedCase("reordered, other forms", "gold",
                         lambda env, ob: "\n".join(reversed(lines(env, alt_form).split("\n"))),
                         1.0, 1.0, knobs={"num_fields": 3}),
            ScriptedCase("bare value", "gold",
                         lambda env, ob: env.task["fields"][env.task["asked"][0]][1], 1.0, 1.0,
                         knobs={"num_fields": 1}),
            ScriptedCase("distractor values", "adversarial",
                         lambda env, ob: lines(env, lambda spec, k: spec[2]), -1.0, 0.0),
            ScriptedCase("hedge", "adversarial", lambda env, ob: hedge(env), -1.0, 0.0),
            ScriptedCase("field twice", "adversarial", lambda env, ob: twice(env), -1.0, 0.0),
            ScriptedCase("every field listed", "adversarial", lambda env, ob: every_field(env),
                         -1.0, 0.0, knobs={"num_fields": 1}),
            ScriptedCase("echo document", "adversarial", lambda env, ob: env.task["document"],
                         -1.0, 0.0),
            ScriptedCase("keys only", "adversarial",
                         lambda env, ob: "\n".join(f"{k}:" for k in env.task["asked"]), -1.0, 0.0),
            ScriptedCase("fullwidth digits", "adversarial", lambda env, ob: fullwidth(env),
                         -1.0, 0.0, knobs={"doc_type": "invoice", "num_fields": 4}),
            ScriptedCase("prose answer", "adversarial",
                         lambda env, ob: "The answer is " + env.answer.replace("\n", " and ") + ".",
                         -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
