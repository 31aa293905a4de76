"""The final answer of a reply whose answer is not a number: a word, a move, a code, a JSON value.

The policy is `llm_gym.grading`'s, for answers an env's own strict reader recognises:
`final_answer(text, read)` tries `read` on the reply's *segments* — each line, each fenced
block's contents, and (with `blocks=True`) each paragraph — with markdown (bullets, quotes,
headings, `**`, backticks, a final period) and a leading answer label ("Answer:", "Final
answer:", "My guess is", "Move:", "Code:", "Word:", "Output:", ...) taken off. A segment `read`
accepts is a *candidate* (so is what follows the first colon of a line, a label in any wording:
"Here is the JSON: [...]"); one inside a larger candidate belongs to it. The **final answer** is the
last candidate. Credit needs:

- every other candidate to read the same (`read`'s values compare equal), else `conflicting`;
- no hedge once an answer is stated — "or", "maybe", "actually", "alternatively", "if not",
  "backup", "option", "otherwise", ... outside the candidates, from the first candidate on
  (`hedged`); before it they are working ("either CRANE or SLATE could work; let me think").

Prose that `read` refuses is working wherever it stands: reasoning before the answer, "the answer
is below", a check after it. An env keeps only what is task-specific — its `read`, which must be
strict (the whole segment is one answer, or None). Limits first, as for numbers: over `max_chars`
is `too_long`, U+FFFD `invalid_text`, a blank reply `empty`; no candidate is `no_answer`.

Deprecated since 0.2: readers now declare an answer contract (`llm_gym.grading.contracts`,
`AnswerContract`) read under the one answer policy (`llm_gym.grading.policy`); this module keeps
its behaviour until 0.3 and warns on import.
"""

from __future__ import annotations

import bisect
import itertools
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from llm_gym.grading.answers import MAX_RESPONSE_CHARS


warnings.warn(
    "llm_gym.grading.final is deprecated and will be removed in 0.3: declare an answer contract "
    "(llm_gym.grading.contracts.AnswerContract) and read replies with contract.read / contract.grade "
    "(the one answer policy, llm_gym.grading.policy)",
    DeprecationWarning, stacklevel=2,
)

__all__ = ["HEDGE", "FinalAnswer", "final_answer", "strict_or_final"]

_FENCE_LINE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[^\n`]*")
_MARKUP_LEAD = re.compile(r"[ \t]*(?:[#>]+[ \t]*)*(?:[-+*\u2022][ \t]+)?")
_LABEL = re.compile(
    r"(?:(?:my|the|our)[ \t]+)?(?:final[ \t]+|next[ \t]+|first[ \t]+)?"
    r"(?:answer|guess|move|code|word|output|result|reply|solution|question)"
    r"(?:[ \t]+(?:is|would[ \t]+be|will[ \t]+be))?[ \t]*[:=]?[ \t]*",
    re.IGNORECASE,
)
# "The answer is below." points at the answer; it does not state one.
_POINTER = re.compile(r"below|above|next|the following|as follows|simple|clear|easy|obvious|"
                      r"here|there|this|that", re.IGNORECASE)
_WRAPS = ("**", "__", "`", '"', "'", "*", "_")
# Words that offer another answer: after the first candidate they deny credit.
HEDGE = re.compile(
    r"(?<![^\W_])(?:or|maybe|perhaps|possibly|probably|actually|alternatively|alternative|"
    r"otherwise|instead|rather|either|backup|fallback|option|if not|no wait|wait|"
    r"on second thought|scratch that|i mean|could also be|might be|second guess)(?![^\W_])",
    re.IGNORECASE,
)
_STRONG = re.compile(r"alternatively|if not|backup|fallback|second guess", re.IGNORECASE)


@dataclass(frozen=True)
class FinalAnswer:
    """`value` (what `read` returned for the final answer) when `status` is "ok"; `text` is the
    segment it was read from."""

    status: str
    value: Any = None
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _unwrap(segment: str) -> str:
    s = segment.strip()
    for _ in range(4):
        before = s
        s = _MARKUP_LEAD.sub("", s, count=1).strip() if s[:1] in "#>-+*\u2022" else s
        m = _LABEL.match(s)
        if m and m.end() < len(s) and (m.group().rstrip().endswith((":", "=")) or (
                " is" in m.group() and not _POINTER.fullmatch(s[m.end():].strip(" .!")))):
            s = s[m.end():].strip()
        for w in _WRAPS:
            if len(s) > 2 * len(w) and s.startswith(w) and s.endswith(w):
                s = s[len(w):-len(w)].strip()
        if s.endswith(".") and not s.endswith(".."):
            s = s[:-1].rstrip()
        if s == before:
            break
    return s


def _segments(text: str, blocks: bool) -> list[tuple[int, int, str]]:
    """(start, end, text) of each line, fenced block body and (with `blocks`) paragraph."""
    out: list[tuple[int, int, str]] = []
    lines = text.split("\n")
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    fence: tuple[int, str] | None = None
    for i, line in enumerate(lines):
        out.append((starts[i], starts[i] + len(line), line))
        m = _FENCE_LINE.fullmatch(line)
        if m and fence is None:
            fence = (i, m.group(1)[0] * 3)
        elif fence is not None and line.strip().startswith(fence[1]) and not line.strip().strip(fence[1][0]):
            first = fence[0] + 1
            if first < i:
                out.append((starts[first], starts[i] - 1, "\n".join(lines[first:i])))
            fence = None
    if blocks:
        i = 0
        while i < len(lines):
            if not lines[i].strip():
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            if j - i > 1:
                out.append((starts[i], starts[j - 1] + len(lines[j - 1]), "\n".join(lines[i:j])))
            i = j
    return out


def final_answer(
    text: str, read: Callable[[str], Any], *, blocks: bool = False,
    max_chars: int = MAX_RESPONSE_CHARS,
) -> FinalAnswer:
    """The reply's final answer as `read` reads it, or why there is none (see the module
    docstring). `read(segment)` returns the answer's value, or None when the segment is not
    exactly one answer. Never raises on any `str` (if `read` does not); linear in the text for
    a linear `read`."""
    if len(text) > max_chars:
        return FinalAnswer("too_long")
    if "\ufffd" in text:
        return FinalAnswer("invalid_text")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return FinalAnswer("empty")
    found: list[tuple[int, int, Any, str]] = []
    for start, end, segment in _segments(text, blocks):
        body = _unwrap(segment)
        if not body:
            continue
        value = read(body)
        if value is None and ":" in body:  # a label in any wording: "Here is the JSON: [...]"
            body = body.split(":", 1)[1].strip()
            value = read(body) if body else None
        if value is not None:
            found.append((start, end, value, body))
    # A candidate inside a larger one (a line of a JSON block) belongs to it: sorted by start,
    # longest first, a candidate is inside when an earlier one reaches past it.
    found.sort(key=lambda c: (c[0], -c[1]))
    kept: list[tuple[int, int, Any, str]] = []
    reach, reach_start = -1, -1
    for c in found:
        if not (reach > c[1] or (reach == c[1] and reach_start < c[0])):
            kept.append(c)
        if c[1] > reach:
            reach, reach_start = c[1], c[0]
    if not kept:
        return FinalAnswer("no_answer")
    final = kept[-1]
    if any(c[2] != final[2] for c in kept[:-1]):
        return FinalAnswer("conflicting")
    starts = [c[0] for c in kept]
    ends = list(itertools.accumulate((c[1] for c in kept), max))
    first = kept[0][0]
    for m in HEDGE.finditer(text):
        j = bisect.bisect_right(starts, m.start()) - 1
        inside = j >= 0 and ends[j] > m.start()
        if not inside and (m.start() >= first or _STRONG.fullmatch(m.group())):
            return FinalAnswer("hedged")
    return FinalAnswer("ok", final[2], final[3])


def strict_or_final(
    text: str, strict: Callable[[str], tuple[Any, str]], prose_status: str,
) -> tuple[Any, str]:
    """`strict(text)` -> (value or None, status), an env's reader of a reply that is one answer;
    when it refuses the reply with `prose_status` (prose around the answer), the reply's final
    answer as `strict` reads its segments: (value, "ok"), (None, "conflicting" / "hedged"), or
    the strict reader's own refusal when no segment is an answer."""
    value, status = strict(text)
    if value is not None or status != prose_status:
        return value, status
    final = final_answer(text, lambda segment: strict(segment)[0])
    if final.ok:
        return final.value, "ok"
    return None, status if final.status == "no_answer" else final.status
