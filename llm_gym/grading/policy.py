"""The answer policy: which part of a reply is its answer, held the same in every environment.

POLICY (the two sentences every card and the README point to) is implemented here once, for
every answer contract (`llm_gym.grading.contract`):

1. **Limits and disguises first.** A reply over the contract's `max_chars` is `too_long`, one
   holding U+FFFD `invalid_text`, a blank one `empty`; the rest is read as it is shown
   (`llm_gym.grading.normalize.visible_text`: NFKC, zero-width and format characters dropped,
   look-alike letters mapped, bidirectional overrides refused).
2. **Declarations.** The reply declares an answer with a `\\boxed{...}` (balanced braces), an
   `<answer>...</answer>` pair of tags, or with
   one of the contract's label words ("answer"; a game's "move" or "guess") followed by `:`,
   `=`, "is", "are", "would be", ... -- "Answer: 75", "**Final answer:** 75", "The answer to
   the question is 75", "My backup answer is 76" -- whatever words stand before the label. A
   label alone on its line ("### Answer") declares what follows. The declared text (the *slot*)
   runs to the end of its sentence (a line break, or `.`/`!`/`?` followed by a capital letter);
   for an answer that spans lines (a grid, a mapping), the block after the label. A
   declaration whose slot states nothing of the contract's kind ("The answer is below") is
   prose, not a declaration.
3. **No declaration:** the reply's last line that states something of the contract's kind
   (for a block answer, its last such block or fenced block) is read as its answer.
4. **Parse completely.** The slot is parsed under the contract, all of it: markup around it
   (`**`, `$`, backticks, quotes, `\\text{}`) and, for one-line answers, a lead-in that names
   the value ("The total is", "Total:", "x =", "26 + 49 =" -- its words must come from the task,
   the contract's nouns or the few function words of such phrases) and a trailing explanation
   ("because ...", "since ...", "which ...") come off; anything else attached to the value --
   a scale, a bound, a unit the contract does not accept, a second value, a word the grammar
   does not know -- makes the slot not that value.
5. **One answer.** The last declaration is graded; any other declaration that parses to a
   different value voids the credit (`conflicting`). Text outside the declarations is never
   read: working, hedges and second thoughts there can neither earn nor cost credit.

`read_reply(reply, contract)` returns a `Reading`; the contract's `grade` compares its value
with the gold one. Cost is linear in the reply (bounded by `max_chars`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_gym.grading.normalize import GLYPH, AnswerStatus, visible_text
from llm_gym.grading.quantity import strip_decoration

if TYPE_CHECKING:
    from llm_gym.grading.contracts.base import AnswerContract

__all__ = ["POLICY", "Declaration", "Reading", "declarations", "read_reply", "read_statement"]

POLICY = (
    "A reply is graded on one declared answer: its last `Answer:` line (or `\\boxed{}`, or, when "
    "it declares none, its last line stating a value), parsed completely under the environment's answer "
    "contract, so a scale, bound, unit or second value attached to it makes it not that value. "
    "Nothing else in the reply is read -- working, hedges and second thoughts can neither earn "
    "nor cost credit -- except that a second declared answer with a different value voids it."
)


@dataclass(frozen=True)
class Reading:
    """What a reply's declared answer is under a contract. `status` is "ok" (then `value` is
    the parsed answer) or why there is none: "empty", "too_long", "invalid_text",
    "confusable", "unsupported_digits" (the reply cannot be read), "no_answer" (nothing
    declared and no last line), "malformed" (the declared answer is not one value of the
    contract's kind), "conflicting" (two declarations, two values). `text` is the slot that
    was parsed and `source` how it was declared: "boxed", "tag", "label", "last_line",
    "last_block"."""

    status: str
    value: Any = None
    text: str = ""
    source: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Declaration:
    """One declared answer: its `slot` (the text to parse) at `start` in the visible text."""

    source: str
    slot: str
    start: int


# --- finding declarations ----------------------------------------------------------------------
_BOX_OPEN = re.compile(r"\\+(?:boxed|fbox)[ \t]*\{")
# The tags many RL datasets declare an answer with (reasoning-gym, GEM): "<answer>75</answer>".
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_ANSWER_TAG_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_SEP = (r"(?::=|:|=>|->|→|=|(?:is|are|was|were)(?![^\W_])(?:[ \t*_]*:)?|equals?(?![^\W_])|"
        r"(?:would|will|should|must|shall)[ \t]+be(?![^\W_])(?:[ \t*_]*:)?)")
# Markup between a label and its separator or value.
_MARK = r"[ \t*_#`~]*"
_SENTENCE_END = re.compile(r"[.!?](?=[ \t]+[\"'(*_]*[A-Z])|\n")
_MARKUP_ONLY = re.compile(r"[\s*_#>`~|=-]*")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*$", re.MULTILINE)


def _label_pattern(labels: tuple[str, ...]) -> re.Pattern[str]:
    words = "|".join(sorted({re.escape(w) + "(?:e?s)?" for w in labels}, key=len, reverse=True))
    return re.compile(
        rf"(?<![^\W_])(?:{words})(?![^\W_])"
        # "the answer to the first question is", "answer for x:"
        r"(?:[ \t]+(?:to|for|of|in)(?![^\W_])[^\n.!?:=]{0,48}?)?"
        # "Answer (rounded):"
        r"(?:[ \t]*\([^()\n]{0,32}\))?"
        + _MARK + r"(?:" + _SEP + r"|(?=[ \t*_#`~]*$))",
        re.IGNORECASE | re.MULTILINE,
    )


_LABEL_PATTERNS: dict[tuple[str, ...], re.Pattern[str]] = {}


def _labels(contract: AnswerContract) -> re.Pattern[str]:
    key = tuple(contract.labels)
    if key not in _LABEL_PATTERNS:
        _LABEL_PATTERNS[key] = _label_pattern(key)
    return _LABEL_PATTERNS[key]


def _boxes(text: str) -> list[tuple[int, int, str]] | None:
    """(start, end, contents) of each outermost `\\boxed{...}`; None if one is unclosed."""
    found, i = [], 0
    while (m := _BOX_OPEN.search(text, i)) is not None:
        j, depth = m.end(), 1
        while j < len(text) and depth:
            depth += (text[j] == "{") - (text[j] == "}")
            j += 1
        if depth:
            return None
        found.append((m.start(), j, text[m.end(): j - 1]))
        i = j
    return found


def _next_block(text: str, pos: int, multiline: bool) -> str:
    """The first non-blank line after `pos` (the block it starts, for a block answer; the
    contents of a fenced block that starts there)."""
    lines = text[pos:].split("\n")
    k = 0
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k == len(lines):
        return ""
    fence = _FENCE.fullmatch(lines[k])
    if fence:
        marker = fence.group(1)
        body = []
        for line in lines[k + 1:]:
            if line.strip().startswith(marker[0] * 3) and not line.strip().strip(marker[0]):
                break
            body.append(line)
        return "\n".join(body)
    if not multiline:
        return lines[k]
    block = []
    for line in lines[k:]:
        if not line.strip():
            break
        block.append(line)
    return "\n".join(block)


def declarations(visible: str, contract: AnswerContract) -> list[Declaration] | None:
    """Every declaration in the visible text, in order (None: an unclosed `\\boxed{` or
    `<answer>`)."""
    boxes = _boxes(visible)
    if boxes is None:
        return None
    tags = [(m.start(), m.end(), m.group(1)) for m in _ANSWER_TAG.finditer(visible)]
    if len(tags) != len(_ANSWER_TAG_OPEN.findall(visible)):
        return None
    found = [Declaration("boxed", contents, start) for start, _, contents in boxes]
    found += [Declaration("tag", contents, start) for start, _, contents in tags]
    in_box = [(s, e) for s, e, _ in boxes + tags]
    labels = [m for m in _labels(contract).finditer(visible)
              if not any(s <= m.start() < e for s, e in in_box)]
    for k, m in enumerate(labels):
        stop = labels[k + 1].start() if k + 1 < len(labels) else len(visible)
        rest = visible[m.end():stop]
        if contract.multiline:
            line_end = rest.find("\n")
            head = rest if line_end < 0 else rest[:line_end]
            if _MARKUP_ONLY.fullmatch(head):
                slot = _next_block(visible[:stop], m.end() + len(head), True)
            else:
                block = [head]
                for line in (rest[line_end + 1:].split("\n") if line_end >= 0 else []):
                    if not line.strip():
                        break
                    block.append(line)
                slot = "\n".join(block)
            slot = contract.answer_block(slot)
        else:
            end = _SENTENCE_END.search(rest)
            head = rest if end is None else rest[:end.start() + (end.group() != "\n")]
            slot = head
            if _MARKUP_ONLY.fullmatch(head):  # "The answer is:" and the value on the next line
                slot = _next_block(visible[:stop], m.end() + len(head), False)
        found.append(Declaration("label", slot, m.start()))
    found.sort(key=lambda d: d.start)
    return found


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """(start, text) of each run of non-blank lines."""
    out: list[tuple[int, str]] = []
    pos, run_start, run = 0, 0, []
    for line in text.split("\n"):
        if line.strip():
            if not run:
                run_start = pos
            run.append(line)
        elif run:
            out.append((run_start, "\n".join(run)))
            run = []
        pos += len(line) + 1
    if run:
        out.append((run_start, "\n".join(run)))
    return out


def _fallback(visible: str, contract: AnswerContract) -> Declaration | None:
    """The reply's last line that states something of the contract's kind (for a block answer,
    its last such block: a fenced block or a paragraph)."""
    if contract.multiline:
        blocks: list[tuple[int, str]] = []
        fences = list(_FENCE.finditer(visible))
        fenced: list[tuple[int, int]] = []
        k = 0
        while k + 1 < len(fences):
            opening, closing = fences[k], fences[k + 1]
            blocks.append((opening.start(), visible[opening.end() + 1: closing.start()]))
            fenced.append((opening.start(), closing.end()))
            k += 2
        for start, para in _paragraphs(visible):
            if not any(s <= start < e for s, e in fenced) and not _FENCE.search(para):
                blocks.append((start, para))
        for start, block in sorted(blocks, reverse=True):
            if block.strip() and contract.mentions(block):
                return Declaration("last_block", contract.answer_block(block), start)
        return None
    pos = len(visible)
    for line in reversed(visible.split("\n")):
        pos -= len(line)
        if line.strip() and not _FENCE.fullmatch(line) and contract.mentions(line):
            return Declaration("last_line", line, pos)
        pos -= 1
    return None


# --- reading a one-line statement --------------------------------------------------------------
_CONNECTIVE = re.compile(
    r"(?:so|thus|therefore|hence|finally|overall|altogether|then|and|yes|ok|okay|well|great|done|"
    r"in[ \t]+total|in[ \t]+all|in[ \t]+conclusion|in[ \t]+summary|in[ \t]+the[ \t]+end|"
    r"that[ \t]+means|this[ \t]+means|which[ \t]+means|this[ \t]+gives|that[ \t]+gives)"
    r"(?![^\W_])[ \t]*[,:]?[ \t]*",
    re.IGNORECASE,
)
_COPULA = re.compile(
    r"(?<![^\W_])(?:is|are|was|were|equals?|equal[ \t]+to|makes?|gives?|comes[ \t]+to|totals?|"
    r"sums[ \t]+to|adds[ \t]+up[ \t]+to|becomes?|yields?|has|have|had|gets?|got|leaves?|remains?|"
    r"(?:will|would|should|must)[ \t]+be|works[ \t]+out[ \t]+to|is[ \t]+equal[ \t]+to)(?![^\W_])"
    r"[ \t]*:?|'s(?![^\W_])",
    re.IGNORECASE,
)
_SYMBOL_COPULA = re.compile(r"=>|->|→|:=|=|:")
_THERE = re.compile(r"there[ \t]+(?:is|are|was|were|will[ \t]+be)(?![^\W_])", re.IGNORECASE)
_EXPLANATION = re.compile(
    r"[ \t]*[,;]?[ \t]*(?<![^\W_])(?:because|since|as|given|from|using|via|by|which|after|following|"
    r"according[ \t]+to)(?![^\W_]).*$",
    re.IGNORECASE | re.DOTALL,
)
_LEAD_TOKEN = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|[0-9]+(?:\.[0-9]+)?|[-+*/×÷^()=,]|\S", re.IGNORECASE)
_FUNCTION_WORDS = frozenset(
    "the a an my our your its their his her this that these those it they we i you he she of in "
    "on at for to with and all final total grand overall result results answer answers value "
    "values solution solutions sum difference product quotient remainder count number numbers "
    "amount figure calculation computation expression equation left remaining altogether now "
    "then correct required asked needed new resulting exact".split()
)


def _stem_word(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_ACTION = re.compile(
    r"(?:(?:i|we)(?:'ll|[ \t]+(?:will|would|shall|choose[ \t]+to|want[ \t]+to|like[ \t]+to))?[ \t]+|let's[ \t]+|"
    r"let[ \t]+me[ \t]+)?(?P<verb>[a-z]+(?:[ \t]+with)?)(?![^\W_])[ \t]*:?[ \t]*",
    re.IGNORECASE,
)


def _trim_emphasis(text: str) -> str:
    """`text` without an unpaired `**`/`__`/`*`/`_` at either end: emphasis a label cut in two
    ("**Answer:** 75", "**Answer: 75**")."""
    s = text.strip()
    for mark in ("**", "__", "*", "_"):
        if s.count(mark) % 2 == 1:
            if s.startswith(mark):
                s = s[len(mark):].strip()
            elif s.endswith(mark):
                s = s[:-len(mark)].strip()
    return s


def _lead_ok(prefix: str, contract: AnswerContract) -> bool:
    """Whether `prefix` names the value: words the task, the contract or the function words of
    such phrases hold, numbers of the task, operators (a lead-in, not a second answer)."""
    allowed = contract.lead_words
    givens = contract.givens
    for tok in _LEAD_TOKEN.findall(prefix):
        if tok[0].isalpha():
            word = tok.lower().split("'")[0]
            if word not in allowed and _stem_word(word) not in allowed:
                return False
        elif tok[0].isdigit():
            if tok not in givens:
                return False
        elif tok not in "-+*/×÷^(),":
            return False
    return True


def read_statement(slot: str, contract: AnswerContract) -> Any:
    """The value a one-line slot states: the contract's parse of the whole slot, or of what
    follows a lead-in that names it, before a trailing explanation; None otherwise."""
    s = strip_decoration(_trim_emphasis(slot))
    if not s or GLYPH in s:
        return None
    value = contract.parse(s)
    if value is not None:
        return value
    candidates = [s]
    cut = _EXPLANATION.search(s)
    if cut and cut.start() > 0:
        candidates.append(strip_decoration(s[:cut.start()]))
    for text in candidates:
        if text is not s:
            value = contract.parse(text)
            if value is not None:
                return value
        body = text
        while (m := _CONNECTIVE.match(body)) is not None and m.end() > 0:
            body = body[m.end():]
        if body is not text:
            value = contract.parse(strip_decoration(body))
            if value is not None:
                return value
        action = _ACTION.match(body) if contract.verbs else None
        if action and action.group("verb").lower().split()[0] in contract.verbs:
            value = contract.parse(strip_decoration(body[action.end():]))
            if value is not None:
                return value
        there = _THERE.match(body)
        if there:
            value = contract.parse(strip_decoration(body[there.end():]))
            if value is not None:
                return value
        splits = sorted([*_COPULA.finditer(body), *_SYMBOL_COPULA.finditer(body)], key=lambda m: m.start())
        for m in splits:
            if m.start() == 0 or not _lead_ok(body[:m.start()], contract):
                continue
            value = contract.parse(strip_decoration(body[m.end():]))
            if value is not None:
                return value
    return None


# --- the policy --------------------------------------------------------------------------------
def read_reply(reply: str, contract: AnswerContract) -> Reading:
    """The reply's declared answer under `contract` (see the module docstring)."""
    if len(reply) > contract.max_chars:
        return Reading(AnswerStatus.TOO_LONG.value)
    if "\ufffd" in reply:
        return Reading(AnswerStatus.INVALID_TEXT.value)
    # A contract read literally (a program: the sandbox runs what was read) keeps its characters;
    # every other one reads the text as it is shown.
    visible = reply.replace("\r\n", "\n") if contract.literal else visible_text(reply)
    if isinstance(visible, AnswerStatus):
        return Reading(visible.value)
    if not visible.strip():
        return Reading(AnswerStatus.EMPTY.value)
    found = contract.find_declarations(visible)
    if found is None:
        return Reading(AnswerStatus.MALFORMED.value, source="boxed")
    kept = [(d, contract.read_slot(d.slot)) for d in found if contract.mentions(d.slot)]
    if not kept:
        last = contract.last_answer(visible)
        if last is None:
            return Reading("no_answer")
        kept = [(last, contract.read_slot(last.slot))]
    final, value = kept[-1]
    if value is None:
        return Reading(AnswerStatus.MALFORMED.value, text=final.slot, source=final.source)
    for d, other in kept[:-1]:
        if other is not None and not contract.same(other, value):
            return Reading(AnswerStatus.CONFLICTING.value, text=final.slot, source=final.source)
    return Reading(AnswerStatus.OK.value, value, final.slot, final.source)
