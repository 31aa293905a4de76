"""The final-answer policy for answers made of blocks of lines: grids, assignments, lists.

The policy is `llm_gym.grading`'s (numbers: `answers`; one-line answers read by an env's own
reader: `final`). A reply's answer is its *final* answer block -- what a human reads as the
conclusion, the last answer block. Any *other* complete answer stated anywhere in the reply
(under any label or wording: "Option A ... Option B", a tentative or earlier grid or mapping,
"backup", "if not", "alternatively", a second block) that differs from the final one means no
credit. Reasoning prose, partial working, the same answer restated, a true verification after
the answer and the task's input echoed back are allowed. Each reader (`envs_catalog.puzzles._grid`
for the "Answer:"-line puzzles, `knights_knaves`/`cryptarithm`/`arc` for block answers,
`envs_catalog.text.lists` for lists) decides what a complete answer of its task looks like and
how it is compared; this module holds what they share: markup stripping (`strip_markup`,
`FENCE`), the words that present a value as an answer or option (`CUE`, `cued`, `presented`),
a hedge after the final answer (`opens_alternative`, `hedged`), the premise of a hypothetical
line (`hypothesis_has`), and grouping answer lines into blocks (`blocks`, `final_block`,
`split_at_repeats`).

Deprecated since 0.2: readers now declare an answer contract (`llm_gym.grading.contracts`,
`AnswerContract`) read under the one answer policy (`llm_gym.grading.policy`); this module keeps
its behaviour until 0.3 and warns on import.
"""

from __future__ import annotations

import re
import warnings
from typing import Callable, Sequence

# Markdown around a line or a value: bullets, headings, quotes, emphasis, inline code.

warnings.warn(
    "llm_gym.grading.blocks is deprecated and will be removed in 0.3: declare an answer contract "
    "(llm_gym.grading.contracts.AnswerContract) and read replies with contract.read / contract.grade "
    "(the one answer policy, llm_gym.grading.policy)",
    DeprecationWarning, stacklevel=2,
)

_LEAD = re.compile(r"^[ \t]*(?:[#>]+[ \t]*)*(?:(?:[-+*\u2022]|\d{1,2}[.)])[ \t]+)?")
_EMPHASIS = re.compile(r"\*\*|__|`")
FENCE = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*$")

# Words that present a value as an answer or an option, up to three words before it ("Option
# B:", "Alternatively,", "If not,", "Backup answer:", "my earlier answer was", "Plan B:"), or an
# "or" right before it ("... or 3 1 4 2", "Or maybe").
_CUE_WORDS = (
    r"answers?|option|alternatives?|alternatively|alternate|otherwise|else|instead|backup|"
    r"fallback|plan|if\s+not|another|second|candidate|tentative(?:ly)?|earlier|previous(?:ly)?|"
    r"maybe|perhaps|possibly|attempt|try|guess|either"
)
CUE = re.compile(
    rf"(?:\b(?:{_CUE_WORDS})\b[\W_]*(?:[\w-]+[\W_]+){{0,3}}"
    r"|\bor[\W_]+(?:(?:maybe|perhaps|possibly|else|rather)[\W_]+)?)$",
    re.IGNORECASE,
)
# A line after the final answer that opens an alternative to it (a hedge), at its start:
# "or ...", "Alternatively ...", "Option B: ...", "If not, ...", "Backup: ...", "Otherwise ...",
# "Another answer ...", or "could also be" anywhere. Doubt without an alternative ("but I am not
# sure") and verification ("Check: ...") are not hedges.
_HEDGE_START = re.compile(
    r"^[\W_]*(?:(?:but|and|though|although|so)[ \t,]+)?"
    r"(?:or\b|alternative|alternatively\b|alternate\b|"
    r"otherwise\b|else\b|instead\b|backup\b|fallback\b|option\b|plan[ \t]+b\b|if[ \t]+not\b|"
    r"if[ \t]+(?:that|this|it)(?:[ \t]+(?:is|was)|'s)[ \t]+(?:wrong|incorrect|not[ \t]+right)|"
    r"(?:another|second|other|different)[ \t]+(?:possible[ \t]+)?"
    r"(?:answer|option|possibility|solution|candidate|guess|grid|mapping|assignment)s?\b)",
    re.IGNORECASE,
)
_HEDGE_ANYWHERE = re.compile(
    r"\b(?:could|might|may|can)[ \t]+(?:also|instead)[ \t]+be\b"
    r"|\bor[ \t]+(?:maybe|perhaps|possibly)\b",
    re.IGNORECASE,
)
# The premise of a hypothetical line: from "if"/"suppose"/"assume" to the end of its clause, or
# what a numbered case states ("Case 2: Alice is a knave. Then ...").
_CLAUSE_ENDS = r",|;|\)|\bthen\b|->|\u2192|=>|\.(?:\s|$)|$"
_PREMISE = re.compile(
    rf"\bif\b(?P<premise>.*?)(?=:|{_CLAUSE_ENDS})"  # "If not: ..." ends at its colon
    r"|\b(?:suppose|supposing|assume|assuming|assumption|hypothesis|hypothetically)\b"
    rf"(?P<assumed>.*?)(?={_CLAUSE_ENDS})"
    rf"|\bcase[ \t]*[0-9A-Za-z]?[ \t]*[:.)-][ \t]*(?P<case>.*?)(?={_CLAUSE_ENDS})",
    re.IGNORECASE,
)


def strip_markup(line: str) -> str:
    """`line` without a leading bullet, heading or quote mark and without emphasis/backticks."""
    return _EMPHASIS.sub("", _LEAD.sub("", line)).strip()


def opens_alternative(line: str) -> bool:
    """Whether a line after the final answer offers another answer (a hedge)."""
    return bool(_HEDGE_START.match(line) or _HEDGE_ANYWHERE.search(line))


def hedged(lines: Sequence[str]) -> bool:
    """Whether any of `lines` (the text after the final answer) is a hedge."""
    return any(opens_alternative(line) for line in lines if line.strip())


def cued(prefix: str) -> bool:
    """Whether `prefix` (the line before a value) presents the value as an answer or option."""
    return CUE.search(prefix[-80:]) is not None


_CUE_WORD = re.compile(rf"\b(?:{_CUE_WORDS})\b", re.IGNORECASE)
_SHORT_LABEL = re.compile(r"[^:\n]{1,60}:[ \t]*")


def presented(prefix: str) -> bool:
    """`cued(prefix)`, or `prefix` is a short label with a cue word anywhere in it ("Option A
    (if the first clue is a lie): ")."""
    return cued(prefix) or bool(_SHORT_LABEL.fullmatch(prefix) and _CUE_WORD.search(prefix))


def hypothesis_has(line: str, is_item: Callable[[str], bool]) -> bool:
    """Whether `line` is working under a hypothesis: it has an "if"/"suppose"/"assume" premise
    that itself holds an answer item ("If Alice is a knight, then ...", "Suppose S=9, ...",
    "Case 2: Alice is a knave. Then ..."). A premise without an item ("If not, ...", "(if the
    first one is wrong)") is no hypothesis: what follows it is a stated answer."""
    return any(is_item(m.group("premise") or m.group("assumed") or m.group("case") or "")
               for m in _PREMISE.finditer(line))


def blocks(flags: Sequence[bool], blank: Sequence[bool], allow_gaps: bool) -> list[list[int]]:
    """Maximal runs of flagged line indices; blank lines inside a run are skipped when
    `allow_gaps`, else they end it."""
    out: list[list[int]] = []
    run: list[int] = []
    gap = False
    for i, (flag, empty) in enumerate(zip(flags, blank)):
        if flag:
            if run and gap and not allow_gaps:
                out.append(run)
                run = []
            run.append(i)
            gap = False
        elif empty and run:
            gap = True
        elif run:
            out.append(run)
            run, gap = [], False
    if run:
        out.append(run)
    return out


def final_block(lines: Sequence[str], is_answer_line: Callable[[str], bool],
                allow_gaps: bool = True, keys: Callable[[str], list[str]] | None = None,
                ) -> tuple[list[int], list[list[int]], str]:
    """For a reply whose answer is a block of answer lines: (the final block's line indices,
    the other blocks' indices, "ok"), or ([], [], why): "no_answer" when no line is an answer
    line, "hedged" when a line after the final block opens an alternative. Blank lines inside a
    block are skipped with `allow_gaps`, else they split it (two grids); with `keys` (the names a
    line assigns), a block whose parts apart by blank lines name someone twice is split there,
    so a restated answer or an earlier attempt is another block, not a repeat inside the final
    one. What the other blocks and the prose lines state is the reader's to compare."""
    flags = [bool(line.strip()) and is_answer_line(line) for line in lines]
    blank = [not line.strip() for line in lines]
    runs = blocks(flags, blank, allow_gaps)
    if keys is not None:
        runs = [part for run in runs for part in _split_gaps_at_repeats(run, blank, keys, lines)]
    if not runs:
        return [], [], "no_answer"
    final = runs[-1]
    if hedged(lines[final[-1] + 1:]):
        return [], [], "hedged"
    return final, runs[:-1], "ok"


def _split_gaps_at_repeats(run: list[int], blank: Sequence[bool],
                           keys: Callable[[str], list[str]],
                           lines: Sequence[str]) -> list[list[int]]:
    """`run` cut at its blank gaps, from the end, wherever the part after a gap and the part
    before it name someone in common (a repeat inside one line group is left to the reader)."""
    parts: list[list[int]] = [[run[0]]]
    for prev, i in zip(run, run[1:]):
        if any(blank[prev + 1:i]):
            parts.append([i])
        else:
            parts[-1].append(i)
    out: list[list[int]] = []
    current: list[int] = []
    seen: set[str] = set()
    for part in reversed(parts):
        names = {k for i in part for k in keys(lines[i])}
        if current and names & seen:
            out.append(current)
            current, seen = [], set()
        current = part + current
        seen |= names
    out.append(current)
    return out[::-1]


def split_at_repeats(block: Sequence[int], keys: Callable[[int], list[str]]) -> list[list[int]]:
    """A block of answer lines outside the final one cut where a line names a key already named
    in the current part ("1) A: knight, B: knave / 2) A: knave, B: knight": two answers)."""
    parts: list[list[int]] = []
    seen: set[str] = set()
    for i in block:
        names = set(keys(i))
        if not parts or names & seen:
            parts.append([])
            seen = set()
        parts[-1].append(i)
        seen |= names
    return parts
