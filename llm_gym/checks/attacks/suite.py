"""Composing attack replies with their verdicts: `generate(contract, gold, ...)`.

Every reply is built from parts (`llm_gym.checks.attacks.parts`) and written values
(`llm_gym.checks.attacks.writers`), and its expected verdict -- full credit or not -- follows
from how it was built under the answer policy (`llm_gym.grading.policy.POLICY`): the last
declaration is graded; a slot that denotes the gold value earns credit unless another
declaration states a different value; text outside declarations is not read; a reply with no
declaration is read from its last line (block) that states a value. The reader under test is
never asked. Families (the `family` of each `Attack`):

- "natural form": the gold value written a natural way, declared or stated -- credit;
- "prose around": working before and prose after a declared answer, with other values and
  hedges in it -- credit (prose is not read); "prose after a statement": a value-bearing line
  after an undeclared answer becomes the read line -- no credit;
- "wrong value": another value, declared or stated -- no credit;
- "second declaration": another declared value before or after the gold one -- no credit; the
  gold value declared twice -- credit;
- "second value in slot": the gold value and another joined by a connective -- no credit;
- "bound": the gold value made a range ("at least 75") -- no credit;
- "changed value": scale words, units, strange words attached (verdict from the arithmetic);
- "doubted": the value denied or questioned ("It is not 75.") -- no credit;
- "disguise: ...": any reply above rewritten with zero-width characters, look-alike letters,
  fullwidth digits or no-break spaces -- the undisguised verdict; "breaker: ..." (bidi
  override, a special token inside the value) -- no credit;
- "degenerate": replies made from the prompt alone (empty, echoed, a word, every value) -- no
  credit.

`exploitable` marks the families in which a false credit pays a policy that does not know the
answer (two values offered, a range, junk): the classes a policy under RL would learn.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from llm_gym.checks.attacks import parts, writers
from llm_gym.grading.contracts import (
    AnswerContract,
    ExactTextAnswer,
    FreeTextAnswer,
    IntegerAnswer,
    NumberAnswer,
    ProgramAnswer,
)

__all__ = ["Attack", "generate"]

_EXPLOITABLE = frozenset({"second declaration", "second value in slot", "bound", "degenerate", "doubted"})


@dataclass(frozen=True)
class Attack:
    """One reply and its verdict by construction: `credit` (it must earn the gold's reward) or
    not. `family`/`variant` name how it was built."""

    reply: str
    credit: bool
    family: str
    variant: str
    exploitable: bool = False


def _lead_words(c: AnswerContract) -> list[str]:
    words = [n for n in sorted(c.nouns) if n.isalpha()]
    words += [w for w in ("total", "result", "value") if w in c.lead_words]
    return words or ["result"]


def _attack(out: list[Attack], reply: str, credit: bool, family: str, variant: str,
            exploitable: bool | None = None) -> None:
    ex = (family in _EXPLOITABLE) if exploitable is None else exploitable
    out.append(Attack(reply, credit, family, variant, ex and not credit))


def _single_line(c: AnswerContract, gold: Any, rng: random.Random, task: str) -> list[Attack]:
    out: list[Attack] = []
    forms = writers.forms(c, gold, rng)
    others = writers.others(c, gold, rng)
    changed = writers.changed(c, gold, rng)
    canon = forms[0].text
    leads = _lead_words(c)
    other_lines = [writers.one_line(c, o) for o in others] or ["something else"]
    decls = list(parts.DECLARATIONS.items())
    statements = list(parts.STATEMENTS.items())

    def declare(slot: str, k: int) -> tuple[str, str]:
        name, template = decls[k % len(decls)]
        if "\\boxed" in template and ("\n" in slot or "{" in slot or "}" in slot):
            name, template = decls[0]
        return name, template.format(x=slot)

    def state(slot: str, k: int) -> tuple[str, str]:
        name, template = statements[k % len(statements)]
        lead = leads[k % len(leads)]
        return name, template.format(x=slot, lead=lead, Lead=lead.capitalize())

    # natural forms, declared and stated
    for k, form in enumerate(forms):
        for j in range(2):
            dname, reply = declare(form.text, k * 3 + j)
            _attack(out, reply, True, "natural form", f"{form.name} / {dname}")
        if "\n" not in form.text and not form.text.startswith(("$", "**")):
            sname, reply = state(form.text, k)
            _attack(out, reply, True, "natural form", f"{form.name} / statement {sname}")
    # prose around a declared answer: never read
    for k, (wname, working) in enumerate(parts.WORKING.items()):
        other = other_lines[k % len(other_lines)]
        aname, after = list(parts.AFTERWORD.items())[k % len(parts.AFTERWORD)]
        dname, decl = declare(canon, k)
        reply = f"{working.format(x=canon, y=other)}\n\n{decl}\n\n{after.format(y=other)}"
        _attack(out, reply, True, "prose around", f"{wname} + {dname} + {aname}")
    for k, (aname, after) in enumerate(parts.AFTERWORD.items()):
        other = other_lines[k % len(other_lines)]
        dname, decl = declare(canon, k + 1)
        _attack(out, f"{decl}\n{after.format(y=other)}", True, "prose around", f"{dname} + {aname}")
        # the same prose after an undeclared answer: it holds a value, so it is the line read
        # (only when the writers gave another value: the placeholder "something else" is none)
        if "{y}" in after and others:
            sname, stated = state(canon, k)
            _attack(out, f"{stated}\n{after.format(y=other)}", False, "prose after a statement",
                    f"{sname} + {aname}")
    for quiet in parts.QUIET_AFTERWORD:
        if c.mentions(quiet):  # a 5-letter word in it is a Wordle guess: not quiet for that contract
            continue
        sname, stated = state(canon, len(quiet))
        _attack(out, f"{stated}\n\n{quiet}", True, "prose around", f"{sname} + quiet line")
    # wrong values
    for k, other in enumerate(others):
        text = c.format(other)
        dname, reply = declare(text, k)
        _attack(out, reply, False, "wrong value", f"declared / {dname}")
        sname, reply = state(text, k)
        _attack(out, reply, False, "wrong value", f"stated / {sname}")
    # second declarations
    for k, other in enumerate(others[:3]):
        text = c.format(other)
        d1, first = declare(canon, k)
        d2, second = declare(text, k + 4)
        _attack(out, f"{first}\n\n{second}", False, "second declaration", f"gold then other / {d2}")
        _attack(out, f"{second}\n\n{first}", False, "second declaration", f"other then gold / {d1}")
        _attack(out, f"{first}\nMy backup answer is {text}.", False, "second declaration", "backup answer sentence")
        _attack(out, f"{first}\n\n{parts.DISGUISES['look-alike letters']('Answer', rng)}: {text}", False,
                "second declaration", "disguised second label")
    d1, first = declare(canon, 0)
    d2, again = declare(forms[min(1, len(forms) - 1)].text, 5)
    _attack(out, f"{first}\n\n{again}", True, "second declaration", "the same value twice")
    # a second value inside the slot
    for k, (cname, template) in enumerate(parts.CONNECTIVES.items()):
        other = other_lines[k % len(other_lines)]
        x, y = (canon, other) if k % 2 == 0 else (other, canon)
        slot = template.format(x=x, y=y)
        if cname == "slash" and isinstance(c, NumberAnswer):
            continue  # "a/b" is a fraction: one value, written among the natural forms
        dname, reply = declare(slot, k)
        _attack(out, reply, False, "second value in slot", f"{cname} / {dname}")
        if "\n" not in slot:
            sname, reply = state(slot, k)
            _attack(out, reply, False, "second value in slot", f"{cname} / statement {sname}")
    if isinstance(c, IntegerAnswer) or (hasattr(c, "unit") and getattr(c, "unit") is None and c.kind == "number"):
        g = int(gold) if isinstance(c, IntegerAnswer) else None
        if g is not None and (words := writers.number_words(g + 1)):
            _attack(out, f"Answer: {canon} (or {words})", False, "second value in slot", "other value in words")
    # bounds
    for k, prefix in enumerate(parts.BOUND_PREFIXES):
        dname, reply = declare(f"{prefix} {canon}" if prefix[0].isalpha() else f"{prefix}{canon}", k)
        _attack(out, reply, False, "bound", f"{prefix} / {dname}")
    for k, suffix in enumerate(parts.BOUND_SUFFIXES):
        sep = "" if suffix == "+" else " "
        dname, reply = declare(f"{canon}{sep}{suffix}", k)
        _attack(out, reply, False, "bound", f"{suffix} / {dname}")
    # approximation marks: a range for an exact answer, the value itself within a tolerance
    approx_ok = bool(getattr(c, "tolerance", 0))
    for k, prefix in enumerate(parts.APPROX_PREFIXES):
        dname, reply = declare(f"{prefix} {canon}" if prefix[0].isalpha() else f"{prefix}{canon}", k)
        _attack(out, reply, approx_ok, "approximation", f"{prefix} / {dname}", exploitable=True)
    for k, suffix in enumerate(parts.APPROX_SUFFIXES):
        sep = "" if suffix == "-ish" else " "
        dname, reply = declare(f"{canon}{sep}{suffix}", k)
        _attack(out, reply, approx_ok, "approximation", f"{suffix} / {dname}", exploitable=True)
    # changed values: verdict from how the change was built
    for k, form in enumerate(changed):
        dname, reply = declare(form.text, k)
        _attack(out, reply, form.credit, "changed value", f"{form.name} / {dname}", form.exploitable)
    # doubted statements (the last line is what is read)
    for k, (dname, template) in enumerate(parts.DOUBTED.items()):
        lead = leads[k % len(leads)]
        _attack(out, template.format(x=canon, lead=lead), False, "doubted", dname)
    for neg in parts.NEGATIONS:
        _attack(out, f"Answer: {neg} {canon}", False, "doubted", f"negated slot {neg}")
    return out


def _block(c: AnswerContract, gold: Any, rng: random.Random, task: str) -> list[Attack]:
    out: list[Attack] = []
    forms = writers.forms(c, gold, rng)
    others = writers.others(c, gold, rng)
    changed = writers.changed(c, gold, rng)
    canon = forms[0].text
    decls = list(parts.BLOCK_DECLARATIONS.items())
    exact = isinstance(c, ExactTextAnswer) or c.whole_reply  # undeclared: the whole reply is read

    def declare(slot: str, k: int) -> tuple[str, str]:
        name, template = decls[k % len(decls)]
        if "```" in slot and "```" in template:
            name, template = decls[0]
        return name, template.format(x=slot)

    for k, form in enumerate(forms):
        dname, reply = declare(form.text, k)
        _attack(out, reply, True, "natural form", f"{form.name} / {dname}")
        _attack(out, form.text, True, "natural form", f"{form.name} / alone")
        if not exact:
            intro = "Here is my answer:" if k % 2 else "Let me lay it out.\n\nResult:"
            _attack(out, f"{intro}\n{form.text}", True, "natural form", f"{form.name} / after a label line")
    other_lines = [writers.one_line(c, o) for o in others] or ["something else"]
    for k, (wname, working) in enumerate(parts.WORKING.items()):
        other = other_lines[k % len(other_lines)]
        dname, decl = declare(canon, k)
        _attack(out, f"{working.format(x=writers.one_line(c, gold), y=other)}\n\n{decl}\n\nI am confident in this.",
                True, "prose around", f"{wname} + {dname}")
    for k, other in enumerate(others):
        text = c.format(other)
        dname, reply = declare(text, k)
        _attack(out, reply, False, "wrong value", f"declared / {dname}")
        _attack(out, text, False, "wrong value", "alone")
        # an undeclared answer is read from the last block: another one after it is the answer
        if not exact:
            _attack(out, f"{canon}\n\nAlternatively:\n{text}", False, "second value in slot",
                    "another block after an undeclared answer")
        d1, first = declare(canon, 0)
        d2, second = declare(text, 1)
        _attack(out, f"{first}\n\n{second}", False, "second declaration", f"gold then other / {d2}")
        _attack(out, f"{second}\n\n{first}", False, "second declaration", f"other then gold / {d1}")
        # a declared answer is its block: another block after a blank line is prose
        if not exact:
            _attack(out, f"{first}\n\nSome might prefer:\n{text}", True, "prose around",
                    "another block after a declared answer")
    for k, form in enumerate(changed):
        dname, reply = declare(form.text, k)
        _attack(out, reply, form.credit, "changed value", f"{form.name} / {dname}", form.exploitable)
    return out


def _program(c: ProgramAnswer, gold: Any, rng: random.Random, task: str) -> list[Attack]:
    out: list[Attack] = []
    for form in writers.forms(c, gold, rng):
        _attack(out, form.text, True, "natural form", form.name)
        _attack(out, f"Here is the solution.\n\n{form.text}\n\nIt handles the examples.", True, "prose around",
                f"{form.name} with prose")
    for k, other in enumerate(writers.others(c, gold, rng)):
        _attack(out, c.format(other), False, "wrong value", f"broken program {k}")
        src = str(gold).strip("\n")
        _attack(out, f"```python\n{src}\n```\n\nOr, another version:\n\n```python\n{other}\n```", False,
                "second declaration", f"two programs, the broken one last {k}")
    _attack(out, "```python\n" + str(gold).strip("\n") + "\n", False, "changed value", "unclosed fence")
    return out


def _degenerate(c: AnswerContract, task: str, rng: random.Random) -> list[Attack]:
    words = [w for w in re.findall(r"[A-Za-z]{4,}", task)]
    top = max(set(words), key=words.count) if words else "okay"
    replies = {
        "empty": "",
        "blank lines": "\n\n  \n",
        "label only": "Answer:",
        "empty box": "\\boxed{}",
        "one word": top,
        "word repeated": " ".join([top] * 40),
        "prompt echoed": " ".join(task.split())[:1500],
        "refusal": "I don't know.",
        "question back": "What do you mean?",
    }
    if isinstance(c, IntegerAnswer):
        replies["every value"] = "Answer: " + ", ".join(str(i) for i in range(0, 101))
        replies["every value, one per line"] = "\n".join(f"Answer: {i}" for i in range(0, 40))
    out: list[Attack] = []
    for name, reply in replies.items():
        _attack(out, reply, False, "degenerate", name)
    return out


def _disguised(base: list[Attack], rng: random.Random, per_disguise: int) -> list[Attack]:
    """Replies of `base` rewritten by each disguise (same verdict) and each breaker (none)."""
    out: list[Attack] = []
    pool = [a for a in base if a.family in ("natural form", "second declaration", "second value in slot",
                                            "wrong value", "bound")]
    if not pool:
        return out
    for name, fn in parts.DISGUISES.items():
        for a in rng.sample(pool, min(per_disguise, len(pool))):
            out.append(Attack(fn(a.reply, rng), a.credit, f"disguise: {name}", f"{a.family} / {a.variant}",
                              a.exploitable))
    for name, fn in parts.BREAKERS.items():
        for a in rng.sample(pool, min(per_disguise, len(pool))):
            out.append(Attack(fn(a.reply, rng), False, f"breaker: {name}", f"{a.family} / {a.variant}",
                              a.exploitable))
    return out


def _special_token(c: AnswerContract, gold: Any, rng: random.Random) -> list[Attack]:
    canon = writers.forms(c, gold, rng)[0].text
    if "\n" in canon or len(canon) < 2:
        return []
    cut = len(canon) // 2
    tolerance = getattr(c, "tolerance", 0)
    if tolerance:  # within a tolerance the part before the token may be close enough: cut earlier
        cut = 1 if canon[0].isdigit() else 2
        try:
            head = Fraction(canon[:cut])
        except ValueError:
            head = None
        if head is not None and abs(head - Fraction(gold)) <= tolerance * abs(Fraction(gold)):
            return []
    return [Attack(f"Answer: {canon[:cut]}{tok}{canon[cut:]}", False, "breaker: special token", tok)
            for tok in parts.SPECIAL_TOKENS]


def generate(contract: AnswerContract, gold: Any, *, seed: int = 0, task: str = "",
             limit: int | None = None, disguised: int = 12) -> list[Attack]:
    """Attack replies for one task whose contract is `contract` and whose gold value is `gold`
    (see the module docstring). `task`: the prompt's text (for the degenerate replies);
    `limit`: sample at most this many (seeded); `disguised`: replies rewritten per disguise."""
    rng = random.Random(seed)
    if isinstance(contract, FreeTextAnswer):
        return _degenerate(contract, task, rng)
    if isinstance(contract, ProgramAnswer):
        attacks = _program(contract, gold, rng, task)
    elif contract.multiline:
        attacks = _block(contract, gold, rng, task)
    else:
        attacks = _single_line(contract, gold, rng, task)
        attacks += _special_token(contract, gold, rng)
    if not isinstance(contract, ProgramAnswer):  # code is read literally: a disguise changes it
        attacks += _disguised(attacks, rng, disguised)
    attacks += _degenerate(contract, task, rng)
    if limit is not None and len(attacks) > limit:
        attacks = rng.sample(attacks, limit)
    return attacks
