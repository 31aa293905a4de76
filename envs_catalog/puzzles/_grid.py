"""Shared machinery of the puzzles family (part A): the final-answer reader and `PuzzleEnv`.

Every puzzle here (Countdown, Sudoku, N-Queens, graph colouring) has many valid answers, so a
reply is never compared with a reference string: the env reads the one answer the reply commits
to and a verifier checks it against the puzzle's rules. The reading rule is the same for all:

1. **Limits.** Over `max_chars` (4096) characters is `too_long`; U+FFFD (invalid UTF-8) is
   `invalid_text`; a blank reply is `empty`. The text is NFKC-normalised; zero-width and other
   format characters and marks on letters are dropped (so "Ans\u200bwer" is still a marker);
   bidirectional overrides or a mark on a digit make it `confusable`; super- and subscripts
   stay apart from digits ("3²" is not "32"); special-token text (`<|pad|>`, `</s>`, ...) and
   control characters are line breaks, so they can never glue two numbers into one.
2. **The final answer.** The answer follows the marker `Answer:` at the start of a line (any
   case; "Final answer:", markdown `**`/`#`/`-` around it allowed; a word that reads as
   "answer" -- with any non-ASCII letter standing for any letter, so Cyrillic or accented
   look-alikes count -- is that word). The *last* such line is the final answer: one line for
   Countdown, N-Queens and graph colouring (on the marker's line or the next; bold, backticks
   or a code fence around it dropped), a grid block for Sudoku (`SudokuEnv.answer_block`). No
   marker is `no_answer`; "the answer is ..." only in prose is `malformed`.
3. **No other answer** (the final-answer policy of `llm_gym.grading.blocks`). Any
   other complete answer stated anywhere in the reply -- an earlier `Answer:` line, an "Option
   A", a tentative or backup answer, a second block before or after -- that differs from the
   final one is `multiple_answers`; a line after the final answer that opens an alternative
   ("or ...", "If not, ...", "Alternatively ...") is `hedged`. Each puzzle says what a
   complete answer is (`stated_answers`) and when two are the same (`answer_key`: "3*7+8" and
   "8+7*3" are one expression). Working, partial steps, the same answer restated, a
   verification after the answer and the puzzle echoed back are fine. The payload must be
   ASCII (after NFKC); `Countdown` maps the signs x and / written as "×", "÷" and "−" first.

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
from typing import Hashable

from llm_gym.grading.blocks import FENCE, cued, hedged, presented, strip_markup
from llm_gym.grading import MAX_RESPONSE_CHARS
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra

# The status of a reply every puzzle's reader accepts (verifiers add their own rule statuses).
OK = "ok"

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
_ANSWER_WORD = re.compile(r"\banswers?\b", re.IGNORECASE)
_AFTER_MARKER = re.compile(r"[ \t*_]*(?::|=|is(?![^\W_]))", re.IGNORECASE)
# The one accepted marker form, at the start of a line.
_OFFICIAL = re.compile(
    r"(?m)^[ \t#>*_-]*(?:final[ \t]+)?answer[ \t*_]*:[ \t*_]*", re.IGNORECASE
)


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


@dataclass(frozen=True)
class Reply:
    """A readable reply split at its final "Answer:" marker: `before` it (working, earlier
    answers) and the `rest` (the answer block, then whatever follows it)."""

    before: str
    rest: str


def read_reply(text: str, *, max_chars: int = MAX_RESPONSE_CHARS) -> tuple[Reply | None, str]:
    """(Reply, "ok") split at the last `Answer:` line, or (None, reason)."""
    if len(text) > max_chars:
        return None, "too_long"
    if "\ufffd" in text:
        return None, "invalid_text"
    visible = visible_text(text)
    if visible is None:
        return None, "confusable"
    if not visible.strip():
        return None, "empty"
    # a look-alike of the word ("\u0410nswer" with a Cyrillic A) is the word: a marker, a label
    visible = _WORD.sub(
        lambda m: "answer" if _looks_like_answer(m.group(0)) else m.group(0), visible)
    official = list(_OFFICIAL.finditer(visible))
    if not official:
        prose = any(_AFTER_MARKER.match(visible, m.end()) for m in _ANSWER_WORD.finditer(visible))
        return None, "malformed" if prose else "no_answer"  # "the answer is ..." only in prose
    last = official[-1]
    return Reply(visible[: last.start()], visible[last.end():]), OK


_WRAP = re.compile(r"^(?:\*\*|__|`)+|(?:\*\*|__|`)+$")


def unwrap(value: str) -> str:
    """`value` stripped of surrounding spaces, bold and backticks ("**3*7+8**", "`2 4 1 3`")."""
    return _WRAP.sub("", value.strip()).strip()


def answer_line(rest: str) -> tuple[str | None, list[str]]:
    """The one-line answer after a marker -- on the marker's line, else the next non-blank line
    (an opening code fence skipped) -- and the lines after it (a closing fence dropped)."""
    lines = rest.split("\n")
    i = 0
    if not unwrap(lines[0]):
        i = 1
        while i < len(lines) and (not lines[i].strip() or FENCE.match(lines[i])):
            i += 1
        if i == len(lines):
            return None, []
    payload = unwrap(lines[i])
    after = lines[i + 1:]
    if after and FENCE.match(after[0]):
        after = after[1:]
    return (payload or None), after


def read_answer(text: str, *, max_chars: int = MAX_RESPONSE_CHARS) -> tuple[str | None, str]:
    """(payload, "ok") for the one-line answer of the final `Answer:` marker, else (None, why).
    Only the reader: alternatives elsewhere in the reply are `PuzzleEnv.judge`'s business."""
    reply, status = read_reply(text, max_chars=max_chars)
    if reply is None:
        return None, status
    payload, _ = answer_line(reply.rest)
    return (payload, OK) if payload is not None else (None, "malformed")


_INT = re.compile(r"[0-9]{1,4}")
_FLAT = re.compile(r"[ \t]*[0-9]{1,4}(?:[ \t]*[,;][ \t]*[0-9]{1,4}|[ \t]+[0-9]{1,4})*[ \t]*")
_PAIR = re.compile(
    r"[ \t]*(?:[(\[][ \t]*([0-9]{1,4})[ \t]*[,;]?[ \t]*([0-9]{1,4})[ \t]*[)\]]"
    r"|([0-9]{1,4})[ \t]*:[ \t]*([0-9]{1,4}))[ \t]*[,;]?"
)
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _strip_brackets(text: str) -> str:
    """`text` without one pair of brackets around all of it ("[2, 4]", "(2 4)"; not
    "(1,2), (2,4)")."""
    if len(text) < 2 or _CLOSE.get(text[0]) != text[-1]:
        return text
    depth = 0
    for i, c in enumerate(text):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0 and i < len(text) - 1:
            return text  # the first bracket closes before the end
    return text[1:-1]


def parse_int_list(payload: str, length: int) -> tuple[list[int] | None, str]:
    """Exactly `length` integers on one line: separated by spaces, commas or semicolons,
    optionally in brackets ("2 4 1 3", "2, 4, 1, 3", "[2,4,1,3]", "(2, 4, 1, 3)"), or as
    (index, value) pairs covering 1..length once each, in any order ("(1, 2), (2, 4), ...",
    "[(1,2), (2,4)]", "1:2 2:4"); a final full stop is allowed; anything else is malformed."""
    text = payload.strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    if "\n" in text or not text.isascii():
        return None, "malformed"
    inner = _strip_brackets(text).strip()
    if _FLAT.fullmatch(inner):
        values = [int(x) for x in _INT.findall(inner)]
        return (values, OK) if len(values) == length else (None, "malformed")
    pairs, pos = [], 0
    while pos < len(inner):
        m = _PAIR.match(inner, pos)
        if m is None or m.end() == pos:
            return None, "malformed"
        a, b = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        pairs.append((int(a), int(b)))
        pos = m.end()
    if sorted(i for i, _ in pairs) != list(range(1, length + 1)):
        return None, "malformed"
    return [v for _, v in sorted(pairs)], OK


def _trim_run(run: str) -> str:
    """A run of list characters cut out of prose, without separators and unmatched brackets
    at its ends ("): 2 4 1 3" from "Answer (alternative): 2 4 1 3")."""
    opens = {v: k for k, v in _CLOSE.items()}
    while True:
        run = run.strip(" \t,;:")
        if run and (run[0] in opens or run[-1] in _CLOSE):
            run = run[1:] if run[0] in opens else run[:-1]
        elif run and run[0] in _CLOSE and run.count(run[0]) > run.count(_CLOSE[run[0]]):
            run = run[1:]
        elif run and run[-1] in opens and run.count(run[-1]) > run.count(opens[run[-1]]):
            run = run[:-1]
        else:
            return run


_INT_RUN = re.compile(r"[0-9 \t,;:()\[\]{}]+")
_GROUP = re.compile(r"[(\[{][^()\[\]{}]*[)\]}]")


def stated_int_lists(text: str, length: int, high: int) -> list[tuple[int, ...]]:
    """Every complete list of `length` integers stated in `text` (any format `parse_int_list`
    reads, alone on a line or inside a sentence, several bracketed lists in a row too). An
    unlabelled list in prose counts when its values are in 1..high and it is not just the
    enumeration 1, 2, ..., length (rows or nodes counted off); one presented as an answer or
    option (`final_answer.CUE`) always counts."""
    found = []
    enumeration = list(range(1, length + 1))
    for line in text.split("\n"):
        line = strip_markup(line)  # "1) 2 4 1 3": the enumerator is no value
        for m in _INT_RUN.finditer(line):
            run = _trim_run(m.group(0))
            if len(_INT.findall(run)) < length:
                continue
            values, _ = parse_int_list(run, length)
            if values is None and ":" in run:  # a label's number first ("Candidate 2: 2 4 1 3")
                values, _ = parse_int_list(_trim_run(run.partition(":")[2]), length)
            if values is None and cued(line[: m.start()] + " x "):  # "Option 1 2 4 1 3"
                values, _ = parse_int_list(run.split(None, 1)[-1], length)
            lists = [values] if values is not None else [
                v for v, _ in (parse_int_list(g.group(0), length) for g in _GROUP.finditer(run))
                if v is not None]
            labelled = presented(line[: m.start()])
            for v in lists:
                if labelled or (all(1 <= x <= high for x in v) and v != enumeration):
                    found.append(tuple(v))
    return found


@dataclass(frozen=True)
class Verdict:
    """What the verifier made of a reply: `format_ok` (the payload parsed), `correct` (it
    obeys every rule) and the reason (`"ok"`, a reader status or a rule status)."""

    format_ok: bool
    correct: bool
    status: str


def verdict_for(text: str, env: PuzzleEnv) -> Verdict:
    """The final-answer policy on one reply: read the final `Answer:` block, parse and verify it
    (`env.verify`), then refuse credit when a line after it opens an alternative ("hedged") or
    any other complete answer stated anywhere in the reply (`env.stated_answers`) differs from
    it ("multiple_answers"); the same answer restated, working and verification are fine."""
    reply, status = read_reply(text, max_chars=env.max_chars)
    if reply is None:
        return Verdict(False, False, status)
    payload, after = env.answer_block(reply.rest)
    if payload is None:
        return Verdict(False, False, "malformed")
    parsed, status = env.verify(payload)
    if not parsed:
        return Verdict(False, False, status)
    if hedged(after):
        return Verdict(False, False, "hedged")
    final = env.answer_key(payload)
    others = env.stated_answers(reply.before) + env.stated_answers("\n".join(after))
    if any(key != final for key in others):
        return Verdict(False, False, "multiple_answers")
    return Verdict(True, status == OK, status)


class PuzzleEnv(ProblemEnv):
    """One puzzle, one reply, one verdict (`verdict_for`). Subclasses implement
    `verify(payload)`, `answer_key(payload)`, `stated_answers(text)` and `reference_payload()`,
    and `answer_block(rest)` when the answer spans lines; metrics are `format`, `correct`,
    `parse_error`, `too_long`, `rule_violation`, and `logs["answer_status"]` says why."""

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

    def answer_key(self, payload: str) -> Hashable:  # pragma: no cover - abstract
        """What two answers are compared by (equal keys: the same answer written two ways)."""
        raise NotImplementedError

    def stated_answers(self, text: str) -> list[Hashable]:  # pragma: no cover - abstract
        """The keys of the complete answers stated in `text` (a part of the reply outside its
        final answer block); partial working and the task's input echoed are not answers."""
        raise NotImplementedError

    def answer_block(self, rest: str) -> tuple[str | None, list[str]]:
        """The final answer's payload in `rest` (the reply after its last marker) and the lines
        after it; one line by default (`answer_line`)."""
        return answer_line(rest)

    # -- ProblemEnv API --
    def judge(self, sample_str: str) -> Verdict:
        # ProblemEnv.step asks check_format and check_answer about one string: verify it once.
        if self._verdict is None or self._verdict[0] != sample_str:
            self._verdict = (sample_str, verdict_for(sample_str, self))
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
