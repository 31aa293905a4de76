"""Knights and Knaves: `KnightsKnavesSource` (`llm/KnightsKnaves-v0`), single-turn logic puzzles.

Each of `num_people` islanders makes one statement about the group; knights always tell the
truth and knaves always lie. Statements are drawn from the seed at the chosen `complexity`
(1: "Ben is a knave.", "Exactly 1 of us is a knight."; 2: adds and / or / same kind / different
kinds, the speaker possibly one of the two ("Ben and I are the same kind."); 3: adds if-then and
"At least k of us are knaves."), every one of the 2^n role assignments is checked by brute force,
and only puzzles with exactly one consistent assignment are kept. The reply names each person's
role, one `Name: knight` / `Name: knave` per line (or comma-separated on one line; "Alice is a
knight", bullets, bold and a code fence also read), and `read_roles` reads it under the
final-answer policy (`llm_gym.grading.blocks`): the last block of assignment lines is
the final answer and must name every person exactly once; any other complete assignment stated
in the reply -- another block, or a prose line giving everyone a role -- that differs from it
gets no credit, unless that line is working under a hypothesis whose premise assigns a role ("If
Ben is a knight, then ...", "Suppose ...", "Case 2: Ben is a knave. Then ..."); a line after the
final block that opens an alternative ("or maybe ...", "If not, ...") is a hedge. So two
answers, an "Option A ... Option B" pair, a person missing or named twice get no credit, while
working, the answer restated and a check after it are fine. `visible_lines` is shared with the
cryptarithm and ARC readers of this family.

Held-out split: the puzzle's structure (statements over person indices, names left out, so a
renamed copy of a puzzle is the same task) is hashed by `llm_gym.authoring.split_of`; about one
puzzle in ten is in split="test". Tasks are rejection-sampled until one is unique and in the split.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from llm_gym.grading.blocks import (
    blocks,
    final_block,
    hypothesis_has,
    split_at_repeats,
)
from llm_gym.authoring import check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS
from llm_gym.renderers import Renderer
from llm_gym.rl import ProblemEnv, StepResult
from llm_gym.rl.types import Action, ActionExtra
from llm_gym.scripted import ScriptedCase

NAMES = (
    "Alice", "Ben", "Cora", "Dan", "Eva", "Finn", "Gus", "Hana", "Ivy", "Jack", "Kai", "Lena",
    "Max", "Nora", "Otto", "Pia", "Quinn", "Rosa", "Sam", "Tara",
)
ROLE = {True: "knight", False: "knave"}
_MAX_DRAWS = 20_000

# A statement is a tuple: ("lit", j, r) "j is a r"; ("and"|"or"|"imp", (j, r), (k, s));
# ("same"|"diff", j, k); ("count", k) "exactly k of us are knights"; ("atleast", k)
# "at least k of us are knaves". r=True means knight. The speaker may be j or k ("I am ...").
_KINDS_BY_COMPLEXITY = {
    1: ("lit", "count"),
    2: ("lit", "count", "and", "or", "same", "diff"),
    3: ("lit", "count", "and", "or", "same", "diff", "imp", "atleast"),
}


def truth(stmt: tuple, roles: tuple[bool, ...]) -> bool:
    """Whether `stmt` holds when person i is a knight iff `roles[i]`."""
    kind = stmt[0]
    if kind == "lit":
        return roles[stmt[1]] == stmt[2]
    if kind == "count":
        return sum(roles) == stmt[1]
    if kind == "atleast":
        return len(roles) - sum(roles) >= stmt[1]
    if kind in ("same", "diff"):
        same = roles[stmt[1]] == roles[stmt[2]]
        return same if kind == "same" else not same
    (j, r), (k, s) = stmt[1], stmt[2]
    a, b = roles[j] == r, roles[k] == s
    if kind == "and":
        return a and b
    if kind == "or":
        return a or b
    if kind == "imp":
        return (not a) or b
    raise ValueError(f"unknown statement kind {kind!r}")


def solutions(statements: list[tuple]) -> list[tuple[bool, ...]]:
    """Every consistent assignment (speaker i is a knight iff statement i is true), by brute force."""
    n = len(statements)
    out = []
    for mask in range(2**n):
        roles = tuple(bool(mask >> i & 1) for i in range(n))
        if all(truth(s, roles) == roles[i] for i, s in enumerate(statements)):
            out.append(roles)
    return out


def render_statement(stmt: tuple, names: list[str], speaker: int) -> str:
    kind = stmt[0]

    def lit(j: int, r: bool) -> str:
        return f"I am a {ROLE[r]}" if j == speaker else f"{names[j]} is a {ROLE[r]}"

    def pair(j: int, k: int) -> str:
        if speaker in (j, k):
            return f"{names[k if j == speaker else j]} and I"
        return f"{names[j]} and {names[k]}"

    if kind == "lit":
        return lit(stmt[1], stmt[2]) + "."
    if kind == "count":
        k = stmt[1]
        return f"Exactly {k} of us {'is a knight' if k == 1 else 'are knights'}."
    if kind == "atleast":
        k = stmt[1]
        return f"At least {k} of us {'is a knave' if k == 1 else 'are knaves'}."
    if kind == "same":
        return f"{pair(stmt[1], stmt[2])} are the same kind."
    if kind == "diff":
        return f"{pair(stmt[1], stmt[2])} are different kinds."
    (j, r), (k, s) = stmt[1], stmt[2]
    if kind == "and":
        return f"{lit(j, r)} and {lit(k, s)}."
    if kind == "or":
        return f"{lit(j, r)} or {lit(k, s)}."
    return f"If {lit(j, r)}, then {lit(k, s)}."


def _draw_statement(rng: np.random.Generator, speaker: int, n: int,
                    kinds: tuple[str, ...]) -> tuple:
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "lit":  # mostly about someone else ("I am a knight" says nothing)
        others = [i for i in range(n) if i != speaker]
        return ("lit", others[int(rng.integers(len(others)))], bool(rng.integers(2)))
    if kind == "count":
        return ("count", int(rng.integers(0, n + 1)))
    if kind == "atleast":
        return ("atleast", int(rng.integers(1, n + 1)))
    j, k = sorted(int(i) for i in rng.choice(n, size=2, replace=False))  # "A and B" is "B and A"
    if kind in ("same", "diff"):
        return (kind, j, k)
    return (kind, (j, bool(rng.integers(2))), (k, bool(rng.integers(2))))


@dataclass(frozen=True)
class Puzzle:
    names: tuple[str, ...]
    statements: tuple[tuple, ...]
    roles: tuple[bool, ...]  # the unique solution

    def key(self) -> str:
        return repr(self.statements)

    def question(self) -> str:
        n = len(self.names)
        listed = ", ".join(self.names[:-1]) + " and " + self.names[-1]
        lines = [
            "On an island, knights always tell the truth and knaves always lie. "
            f"You meet {n} people: {listed}.",
        ]
        lines += [f'{name} says: "{render_statement(s, list(self.names), i)}"'
                  for i, (name, s) in enumerate(zip(self.names, self.statements))]
        lines.append(
            "Who is a knight and who is a knave? (\"or\" means at least one.) Answer with one "
            "line per person, in the form 'Name: knight' or 'Name: knave', and nothing after them."
        )
        return "\n".join(lines)

    def answer_text(self) -> str:
        return "\n".join(f"{name}: {ROLE[r]}" for name, r in zip(self.names, self.roles))


def generate(rng: np.random.Generator, num_people: int, complexity: int, split: str) -> Puzzle:
    kinds = _KINDS_BY_COMPLEXITY[complexity]
    for _ in range(_MAX_DRAWS):
        statements = [_draw_statement(rng, i, num_people, kinds) for i in range(num_people)]
        sols = solutions(statements)
        if len(sols) != 1:
            continue
        if split_of(repr(tuple(statements))) != split:
            continue
        picked = rng.choice(len(NAMES), size=num_people, replace=False)
        names = tuple(NAMES[int(i)] for i in sorted(picked))
        return Puzzle(names, tuple(statements), sols[0])
    raise RuntimeError(  # pragma: no cover - every knob setting finds one in a few hundred draws
        f"no unique {split!r} puzzle found in {_MAX_DRAWS} draws with num_people={num_people}, "
        f"complexity={complexity}"
    )


# --- the strict reader ------------------------------------------------------------------------
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_MARKUP = re.compile(r"[*_`]")
_BULLET = re.compile(r"^\s*[#>]*\s*(?:(?:[-+•]|\d+[.)])\s+)?")  # headings, quotes, bullets
_ITEM = r"([A-Za-z]+)\s*(?::|=|-|\bis\b)\s*(?:an?\s+)?(knight|knave)"
_ITEM_RE = re.compile(_ITEM, re.IGNORECASE)
_LABEL = r"[A-Za-z][A-Za-z0-9 ]{0,24}:\s*"  # "Answer: ", "Final answer: ", "Option 2: "
# Outside the final block, a garbled role ("Rosa: knava") still makes a line an assignment.
_LOOSE = r"([A-Za-z]+)\s*(?::|=|-|\bis\b)\s*(?:an?\s+)?(kn[a-z]*)"
_LOOSE_RE = re.compile(_LOOSE, re.IGNORECASE)
_LOOSE_LINE = re.compile(
    rf"(?:{_LABEL})?{_LOOSE}(?:\s*(?:[,;]\s*(?:and\s+)?|\s+and\s+){_LOOSE})*\s*\.?",
    re.IGNORECASE,
)
_ANSWER_LINE = re.compile(
    rf"(?:{_LABEL})?{_ITEM}(?:\s*(?:[,;]\s*(?:and\s+)?|\s+and\s+){_ITEM})*\s*\.?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Reading:
    status: str  # "ok" or why there is no answer
    roles: dict[str, bool] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def visible_lines(text: str, max_chars: int) -> list[str] | str:
    """The response's lines, NFKC-normalised, invisible format characters dropped, markdown
    emphasis and bullets stripped — or the reason it cannot be read."""
    if len(text) > max_chars:
        return "too_long"
    if "\ufffd" in text:
        return "invalid_text"
    if not text.strip():
        return "empty"
    text = unicodedata.normalize("NFKC", text)
    if any(c in _BIDI for c in text):
        return "confusable"
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return [_BULLET.sub("", _MARKUP.sub("", line)).strip() for line in text.splitlines()]


def _words_in(line: str, by_lower: dict[str, str], item: re.Pattern[str]) -> dict[str, str] | None:
    """Name -> role word of the items of a line (unknown names lower-cased), or None when it
    gives someone two roles ("either A: knight, ... or A: knave, ...": two answers in one line)."""
    items = {(by_lower.get(m.group(1).lower(), m.group(1).lower()), m.group(2).lower())
             for m in item.finditer(line)}
    words = dict(items)
    return words if len(words) == len(items) else None


def stated_assignments(lines: list[str], names: tuple[str, ...] | list[str],
                       final: list[int]) -> list[dict[str, str]]:
    """The complete assignments (name -> role word) stated outside the `final` block: each other
    block of assignment lines -- cut where a person comes back -- that names as many people as
    the puzzle has (a garbled role such as "knava" or another puzzle's names make it differ),
    and each prose line that gives every person a role, unless it is working under a hypothesis
    whose premise assigns a role ("If Alice is a knight, then ...", "Suppose ...", "Case 2:
    ..."). Partial working (one or two people) is not an answer."""
    by_lower = {name.lower(): name for name in names}
    skip = set(final)
    loose = [i not in skip and _LOOSE_LINE.fullmatch(line) is not None
             for i, line in enumerate(lines)]
    found = []
    for run in blocks(loose, [not line for line in lines], allow_gaps=True):
        for part in split_at_repeats(run, lambda i: [
                m.group(1).lower() for m in _LOOSE_RE.finditer(lines[i])]):
            words: dict[str, str] = {}
            for i in part:
                words.update(_words_in(lines[i], by_lower, _LOOSE_RE) or {"": ""})
            if len(words) >= len(names):
                found.append(words)
    for i, line in enumerate(lines):
        if i in skip or loose[i] or not line:
            continue
        named = {by_lower.get(m.group(1).lower()) for m in _ITEM_RE.finditer(line)}
        if named >= set(names) and not hypothesis_has(line, lambda p: bool(_ITEM_RE.search(p))):
            found.append(_words_in(line, by_lower, _ITEM_RE) or {"": ""})
    return found


def read_roles(text: str, names: list[str] | tuple[str, ...],
               max_chars: int = MAX_RESPONSE_CHARS) -> Reading:
    """Each person's role from a reply's final block (see the module docstring); names match
    case-insensitively."""
    lines = visible_lines(text, max_chars)
    if isinstance(lines, str):
        return Reading(lines)
    by_lower = {name.lower(): name for name in names}
    final, _, status = final_block(
        lines, lambda line: _ANSWER_LINE.fullmatch(line) is not None,
        keys=lambda line: [m.group(1).lower() for m in _ITEM_RE.finditer(line)])
    if status != "ok":
        return Reading(status)
    roles: dict[str, bool] = {}
    for i in final:
        for m in _ITEM_RE.finditer(lines[i]):
            name = by_lower.get(m.group(1).lower())
            if name is None:
                return Reading("unknown_person")
            if name in roles:
                return Reading("person_twice")
            roles[name] = m.group(2).lower() == "knight"
    if len(roles) != len(names):
        return Reading("person_missing")
    words = {name: ROLE[role] for name, role in roles.items()}
    if any(other != words for other in stated_assignments(lines, names, final)):
        return Reading("several_answers")
    return Reading("ok", roles)


# --- the environment ---------------------------------------------------------------------------
class KnightsKnavesEnv(ProblemEnv):
    """One puzzle. Metrics: `format`, `correct` (from `ProblemEnv`), `parse_error` (no strict
    reading) and `too_long`."""

    def __init__(self, renderer: Renderer, puzzle: Puzzle, *, format_coef: float = 0.1) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.puzzle = puzzle
        self.answer = dict(zip(puzzle.names, puzzle.roles))
        self._read: tuple[str, Reading] | None = None

    def reading(self, sample_str: str) -> Reading:
        if self._read is None or self._read[0] != sample_str:
            self._read = (sample_str, read_roles(sample_str, self.puzzle.names))
        return self._read[1]

    def get_question(self) -> str:
        return self.puzzle.question()

    def check_format(self, sample_str: str) -> bool:
        return self.reading(sample_str).ok

    def check_answer(self, sample_str: str) -> bool:
        reading = self.reading(sample_str)
        return reading.ok and reading.roles == self.answer

    def get_reference_answer(self) -> str:
        return self.puzzle.answer_text()

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        result = await super().step(action, extra=extra)
        reading = self.reading(result.logs["response"])  # cached (unless graded in a worker)
        result.metrics["parse_error"] = float(not reading.ok)
        result.metrics["too_long"] = float(reading.status == "too_long")
        result.logs["answer_status"] = reading.status
        return result


_KNOB_DOCS = {
    "num_people": "islanders in the puzzle, 2-6 (each makes one statement; 2 needs complexity "
    ">= 2)",
    "complexity": "statement forms, 1-3: 1 'X is a knight/knave' and 'exactly k of us are "
    "knights'; 2 adds and, or, same kind, different kinds; 3 adds if-then and 'at least k of us "
    "are knaves'",
    "format_coef": "penalty for a reply the strict reader cannot read, 0-1",
}

_DEFAULTS: dict[str, Any] = {"num_people": 3, "complexity": 2, "format_coef": 0.1}


class KnightsKnavesSource(EnvSource):
    """Knights & Knaves puzzles with a unique solution; knobs in `DEFAULTS`."""

    DEFAULTS: dict[str, Any] = _DEFAULTS
    card = EnvCard(
        id="llm/KnightsKnaves-v0",
        family="puzzles",
        description=(
            "Generated Knights & Knaves puzzles: knights always tell the truth, knaves always lie, "
            "and each islander makes one statement about the group. Statements are drawn at the "
            "chosen complexity, all 2^n role assignments are brute-forced, and only puzzles with "
            "exactly one consistent assignment are kept. The reply gives one 'Name: knight' or "
            "'Name: knave' per person (one per line, or comma-separated); its last such block is "
            "the final answer. No credit when a person is missing or named twice, a name is "
            "unknown, another complete assignment that differs is stated anywhere in the reply "
            "(an earlier block, 'Option A', a tentative answer, 'If not, ...'; hypotheses being "
            "tested are working) or a hedge follows the block. Working before the block and a "
            "check after it are allowed. split='test' holds about one puzzle structure in ten "
            "(statements hashed with the names left out)."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 when every person's role is right, 0 for a "
            "readable wrong assignment, -format_coef (0.1) when the reader finds no single final "
            "assignment (empty, hedged, two different answers, person missing or twice, over 4096 "
            "characters, invalid UTF-8). A reply that does not end on the renderer's end of turn "
            "loses format_coef but is still graded (0.9 if right)."
        ),
        difficulty_knobs={k: f"{v} (default {_DEFAULTS[k]!r})" for k, v in _KNOB_DOCS.items()},
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "On an island, knights always tell the truth and knaves always lie. You meet 3 "
                "people: Alice, Hana and Rosa.\n"
                'Alice says: "Hana and Rosa are the same kind."\n'
                'Hana says: "I am a knight or Rosa is a knight."\n'
                'Rosa says: "Alice and I are different kinds."\n'
                "Who is a knight and who is a knave? (\"or\" means at least one.) Answer with one "
                "line per person, in the form 'Name: knight' or 'Name: knave', and nothing after "
                "them."
            )},
            {"role": "assistant", "content": "Alice: knave\nHana: knight\nRosa: knave"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.num_people = check_int("num_people", own["num_people"], 2, 6)
        self.complexity = check_int("complexity", own["complexity"], 1, 3)
        if self.num_people == 2 and self.complexity == 1:
            raise ValueError(
                "num_people=2 needs complexity >= 2: complexity 1 has only 11 two-person puzzles "
                "with a unique solution, too few to hold out a test split"
            )
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> KnightsKnavesEnv:
        puzzle = generate(rng, self.num_people, self.complexity, self.split)
        return KnightsKnavesEnv(self.renderer, puzzle, format_coef=self.format_coef)

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the reference lines, one comma-separated line, working then the block, a tested
        hypothesis then the block in markdown. Adversarial (no credit): one role
        flipped, a person missing, a person given both roles, a hedge, a second block after a
        correction, a wrong block before the right one, "Option A (if ...)" before it, "If
        not, ..." after it, every person a knight-or-knave, an empty reply."""

        def lines(env, roles=None):
            roles = env.answer if roles is None else roles
            return "\n".join(f"{n}: {ROLE[r]}" for n, r in roles.items())

        def flipped(env):
            first = next(iter(env.answer))
            return {n: (not r if n == first else r) for n, r in env.answer.items()}

        return [
            ScriptedCase("reference lines", "gold", lambda env, ob: lines(env), 1.0, 1.0),
            ScriptedCase("one line", "gold", lambda env, ob: "Answer: " + ", ".join(
                f"{n} is a {ROLE[r]}" for n, r in env.answer.items()), 1.0, 1.0),
            ScriptedCase("working then block", "gold", lambda env, ob: (
                "Suppose the first speaker is a knight and check each statement in turn.\n\n"
                + lines(env)), 1.0, 1.0),
            ScriptedCase("hypothesis then markdown block", "gold", lambda env, ob: (
                "If " + ", ".join(f"{n} is a {ROLE[r]}" for n, r in flipped(env).items())
                + ", then some statement fails.\n**Answer:**\n"
                + "\n".join(f"- **{n}**: {ROLE[r]}" for n, r in env.answer.items())), 1.0, 1.0),
            ScriptedCase("one role flipped", "adversarial",
                         lambda env, ob: lines(env, flipped(env)), -1.0, 0.0),
            ScriptedCase("person missing", "adversarial",
                         lambda env, ob: "\n".join(lines(env).splitlines()[1:]), -1.0, 0.0),
            ScriptedCase("person twice", "adversarial", lambda env, ob: (
                lines(env) + f"\n{next(iter(env.answer))}: "
                f"{ROLE[not next(iter(env.answer.values()))]}"), -1.0, 0.0),
            ScriptedCase("hedge", "adversarial", lambda env, ob: (
                lines(env) + f"\nor maybe {next(iter(env.answer))} is a "
                f"{ROLE[not next(iter(env.answer.values()))]}"), -1.0, 0.0),
            ScriptedCase("correction after", "adversarial", lambda env, ob: (
                lines(env) + "\nWait, I made a mistake:\n" + lines(env, flipped(env))), -1.0, 0.0),
            ScriptedCase("right block buried", "adversarial", lambda env, ob: (
                "Option 1:\n" + lines(env, flipped(env)) + "\nOption 2:\n" + lines(env)),
                -1.0, 0.0),
            ScriptedCase("option A (if ...) before", "adversarial", lambda env, ob: (
                "Option A (if the first one lies): " + ", ".join(
                    f"{n}: {ROLE[r]}" for n, r in flipped(env).items()) + "\nOption B:\n"
                + lines(env)), -1.0, 0.0),
            ScriptedCase("if not, after", "adversarial", lambda env, ob: (
                lines(env) + "\nIf not, " + ", ".join(
                    f"{n} is a {ROLE[r]}" for n, r in flipped(env).items())), -1.0, 0.0),
            ScriptedCase("every role hedged", "adversarial", lambda env, ob: "\n".join(
                f"{n}: knight or knave" for n in env.answer), -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
