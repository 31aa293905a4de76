"""Shared machinery of the puzzles family (part A): the strict "Answer:" reader and `PuzzleEnv`.

Every puzzle here (Countdown, Sudoku, N-Queens, graph colouring) has many valid answers, so a
reply is never compared with a reference string: the env reads the one answer the reply commits
to and a verifier checks it against the puzzle's rules. The reading rule is the same for all:

1. **Limits.** Over `max_chars` (4096) characters is `too_long`; U+FFFD (invalid UTF-8) is
   `invalid_text`; a blank reply is `empty`. The text is NFKC-normalised; zero-width and other
   format characters and marks on letters are dropped (so "Ans\u200bwer" is still a marker);
   bidirectional overrides or a mark on a digit make it `confusable`; super- and subscripts
   stay apart from digits ("3²" is not "32"); special-token text (`<|pad|>`, `</s>`, ...) and
   control characters are line breaks, so they can never glue two numbers into one.
2. **Exactly one marker.** The answer follows the marker `Answer:` at the start of a line
   (any case; "Final answer:", markdown `**`/`#` around it allowed). Every word that reads as
   "answer" -- with any non-ASCII letter standing for any letter, so Cyrillic or accented
   look-alikes count -- followed by `:`, `=` or "is" is a marker; no marker is `no_answer`, two
   or more are `multiple_answers` (even when they agree: the prompt asks for one).
3. **The answer is the rest of the reply.** Everything after the marker is the payload and each
   puzzle's parser must consume all of it (a trailing "or ...", a second grid, a remark: no
   credit). Text before the marker is working and is ignored. The payload must be ASCII
   (after NFKC); `Countdown` maps the signs x and / written as "×", "÷" and "−" first.

Rewards are `ProblemEnv`'s: `format_coef * (format_ok - 1) + correct`, where format_ok means
the payload parsed (and the reply ended on the renderer's end of turn) and correct means the
verifier accepted it. No partial credit: a near-solution scores the same 0 as any other wrong
one. Metrics (all episodes, always present): `parse_error`, `too_long`, `rule_violation` (parsed
but breaks a rule); `logs["answer_status"]` names the exact reason.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

from llm_gym.grading import MAX_RESPONSE_CHARS
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra

# Statuses shared by every puzzle's reader (puzzle verifiers add their own rule statuses).
OK = "ok"
PARSE_STATUSES = frozenset({
    "empty", "too_long", "invalid_text", "confusable", "no_answer", "multiple_answers",
    "malformed",
})

_CONTROLS = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_SPECIAL_TOKEN_TEXT = re.compile(
    r"<\|[^<>|\n]{0,64}\|>|</?s>|<(?:pad|unk|eos|bos|eot|mask|sep|cls)>", re.IGNORECASE
)
# Before NFKC, which would turn "3²" into "32": keep super/subscripts visibly apart.
_SUPER_SUB = str.maketrans(
    {c: "^" + d for c, d in zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")}
    | {c: "_" + d for c, d in zip("₀₁₂₃₄₅₆₇₈₉₊₋", "0123456789+-")}
)
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# A word that may be "answer(s)": six or seven letters, any non-ASCII letter a wildcard.
_WORD = re.compile(r"[^\W\d_]+")
_AFTER_MARKER = re.compile(r"[ \t*_]*(?::|=|is(?![^\W_]))", re.IGNORECASE)
# The one accepted marker form, at the start of a line.
_OFFICIAL = re.compile(r"(?m)^[ \t#>*_]*(?:final[ \t]+)?answer[ \t*_]*:[ \t*_]*", re.IGNORECASE)


def _looks_like_answer(word: str) -> bool:
    w = word.lower()
    if w.endswith("s") and len(w) == 7:
        w = w[:6]
    return len(w) == 6 and all(c == t or not c.isascii() for c, t in zip(w, "answer"))


def visible_text(text: str) -> str | None:
    """`text` as the reader sees it (see the module docstring), or None when bidirectional
    overrides or a mark on a digit make what is shown differ from what is read."""
    text = _CONTROLS.sub("\n", text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text.translate(_SUPER_SUB))
        out = []
        for c in text:
            if c.isascii():
                out.append(c)
            elif c in _BIDI:
                return None
            elif unicodedata.category(c)[0] == "M":
                # on a digit a mark changes what it says ("7" + U+0338 is "not 7"); on a letter
                # it is dropped, so accents cannot disguise a marker word
                if out and "0" <= out[-1] <= "9":
                    return None
            elif unicodedata.category(c) == "Cf":
                continue  # zero-width joiners, soft hyphens, BOM: invisible
            elif unicodedata.category(c) == "Zs":
                out.append(" ")
            else:
                out.append(c)
        text = "".join(out)
    return _SPECIAL_TOKEN_TEXT.sub("\n", text)


def read_answer(text: str, *, max_chars: int = MAX_RESPONSE_CHARS) -> tuple[str | None, str]:
    """(payload, "ok") for a reply with exactly one `Answer:` marker, else (None, reason).
    The payload is everything after the marker, stripped; it may span several lines."""
    if len(text) > max_chars:
        return None, "too_long"
    if "\ufffd" in text:
        return None, "invalid_text"
    visible = visible_text(text)
    if visible is None:
        return None, "confusable"
    if not visible.strip():
        return None, "empty"
    markers = 0
    for m in _WORD.finditer(visible):
        if _looks_like_answer(m.group(0)) and _AFTER_MARKER.match(visible, m.end()):
            markers += 1
    official = list(_OFFICIAL.finditer(visible))
    if markers == 0 and not official:
        return None, "no_answer"
    if markers > 1 or len(official) > 1:
        return None, "multiple_answers"
    if not official:
        return None, "malformed"  # "the answer is ..." in prose, not an "Answer:" line
    payload = visible[official[0].end():].strip()
    payload = "\n".join(line.strip() for line in payload.split("\n") if line.strip())
    if payload.startswith("```") and payload.endswith("```") and len(payload) >= 6:
        payload = payload[3:-3].strip()  # a fenced code block around the answer
    if len(payload) > 4 and payload.startswith("**") and payload.endswith("**"):
        payload = payload[2:-2]  # markdown bold around the whole answer
    payload = payload.strip("` \t\n")
    if not payload:
        return None, "malformed"
    return payload, OK


_INT = re.compile(r"[0-9]{1,4}")
_INT_LIST = re.compile(r"\[?[ \t]*[0-9]{1,4}(?:[ \t]*,[ \t]*[0-9]{1,4}|[ \t]+[0-9]{1,4})*[ \t]*\]?")


def parse_int_list(payload: str, length: int) -> tuple[list[int] | None, str]:
    """Exactly `length` integers on one line, separated by spaces or commas, optionally in
    brackets ("2 4 1 3", "2, 4, 1, 3", "[2,4,1,3]"; a final full stop is allowed); anything
    else is malformed."""
    if payload.endswith("."):
        payload = payload[:-1]
    if "\n" in payload or not payload.isascii() or not _INT_LIST.fullmatch(payload):
        return None, "malformed"
    values = [int(x) for x in _INT.findall(payload)]
    if len(values) != length:
        return None, "malformed"
    return values, OK


@dataclass(frozen=True)
class Verdict:
    """What the verifier made of a reply: `format_ok` (the payload parsed), `correct` (it
    obeys every rule) and the reason (`"ok"`, a reader status or a rule status)."""

    format_ok: bool
    correct: bool
    status: str


def verdict_for(text: str, verify: Callable[[str], tuple[bool, str]], max_chars: int) -> Verdict:
    """Read `text`, then run `verify(payload) -> (parsed, status)` (status "ok" = correct)."""
    payload, status = read_answer(text, max_chars=max_chars)
    if payload is None:
        return Verdict(False, False, status)
    parsed, status = verify(payload)
    return Verdict(parsed, parsed and status == OK, status)


class PuzzleEnv(ProblemEnv):
    """One puzzle, one reply, one verdict. Subclasses implement `verify(payload)` and
    `reference_payload()`; metrics are `format`, `correct`, `parse_error`, `too_long`,
    `rule_violation`, and `logs["answer_status"]` says why."""

    def __init__(
        self, renderer: Renderer, question: str, *, format_coef: float = 0.1,
        max_chars: int = MAX_RESPONSE_CHARS,
    ) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.question = question
        self.max_chars = max_chars
        self._verdict: tuple[str, Verdict] | None = None

    # -- subclass API --
    def verify(self, payload: str) -> tuple[bool, str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def reference_payload(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- ProblemEnv API --
    def judge(self, sample_str: str) -> Verdict:
        # ProblemEnv.step asks check_format and check_answer about one string: verify it once.
        if self._verdict is None or self._verdict[0] != sample_str:
            self._verdict = (sample_str, verdict_for(sample_str, self.verify, self.max_chars))
        return self._verdict[1]

    def get_question(self) -> str:
        return self.question

    def check_format(self, sample_str: str) -> bool:
        return self.judge(sample_str).format_ok

    def check_answer(self, sample_str: str) -> bool:
        return self.judge(sample_str).correct

    def get_reference_answer(self) -> str:
        return self.reference_payload()

    def get_reference_response(self) -> str:
        payload = self.reference_payload()
        return f"Answer:\n{payload}" if "\n" in payload else f"Answer: {payload}"

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        # The verdict is cached when grading ran in this process; a worker process (the bounded
        # grader's fallback) leaves none here, so recompute it (verifiers are cheap and bounded).
        if "grader_timeout" in result.metrics:
            verdict = Verdict(False, False, "grader_timeout")
        else:
            verdict = self.judge(result.logs["response"])
        result.metrics["parse_error"] = float(not verdict.format_ok)
        result.metrics["too_long"] = float(verdict.status == "too_long")
        result.metrics["rule_violation"] = float(verdict.format_ok and not verdict.correct)
        result.logs["answer_status"] = verdict.status
        return result
