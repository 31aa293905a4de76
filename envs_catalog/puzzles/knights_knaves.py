"""Knights and Knaves: `KnightsKnavesSource` (`llm/KnightsKnaves-v0`), single-turn logic puzzles.

Each of `num_people` islanders makes one statement about the group; knights always tell the
truth and knaves always lie. Statements are drawn from the seed at the chosen `complexity`
(1: "Ben is a knave.", "Exactly 1 of us is a knight."; 2: adds and / or / same kind / different
kinds, the speaker possibly one of the two ("Ben and I are the same kind."); 3: adds if-then and
"At least k of us are knaves."), every one of the 2^n role assignments is checked by brute force,
and only puzzles with exactly one consistent assignment are kept. The reply names each person's
role, one `Name: knight` / `Name: knave` per line (or comma-separated on one line), and `read_roles`
is the strict reader: the answer block must end the response, every person appears in it exactly
once, no other line may be an assignment line, no prose line before it may state a complete
assignment (hypotheticals — "If Ben is a knight, then ..." — are working and allowed), and a hedge
("knight or knave") is not an assignment — so two answers, a buried right answer, a person named
twice (even with the same role) or a missing person get no credit. `visible_lines` and
`answer_block` are shared with the cryptarithm and ARC readers of this family.

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


_HYPOTHETICAL = re.compile(r"\b(?:if|suppose|supposing|assume|assuming|then|would|case|try)\b",
                           re.IGNORECASE)


def answer_block(lines: list[str], is_answer_line, is_candidate=None, allow_gaps: bool = True
                 ) -> tuple[list[str], str]:
    """The answer lines of a response whose answer must be one block at its end: ([], why) when
    no line is an answer line, an answer line sits apart from the final block (a second or
    buried answer), a non-answer line follows the block (a hedge, a correction), or a prose line
    before it states a complete candidate (`is_candidate`; hypotheticals — "if", "suppose",
    "then", ... — are working and exempt). `allow_gaps=False`: a blank line inside the block also
    splits it (two grids), so the lines before it count as a second answer."""
    flags = [bool(line) and is_answer_line(line) for line in lines]
    if not any(flags):
        return [], "no_answer"
    last = max(i for i, f in enumerate(flags) if f)
    if any(lines[i] for i in range(last + 1, len(lines))):
        return [], "text_after_answer"
    first = last
    while first > 0 and (flags[first - 1] or (allow_gaps and not lines[first - 1])):
        first -= 1
    if any(flags[:first]):
        return [], "several_answers"
    if is_candidate is not None and any(
        is_candidate(line) and not _HYPOTHETICAL.search(line) for line in lines[:first]
    ):
        return [], "several_answers"
    return [lines[i] for i in range(first, last + 1) if flags[i]], "ok"


def read_roles(text: str, names: list[str] | tuple[str, ...],
               max_chars: int = MAX_RESPONSE_CHARS) -> Reading:
    """Each person's role from a reply (see the module docstring); names match case-insensitively."""
    lines = visible_lines(text, max_chars)
    if isinstance(lines, str):
        return Reading(lines)
    by_lower = {name.lower(): name for name in names}

    def complete(line: str) -> bool:
        return {m.group(1).lower() for m in _ITEM_RE.finditer(line)} >= set(by_lower)

    block, status = answer_block(
        lines, lambda line: _ANSWER_LINE.fullmatch(line) is not None, complete)
    if status != "ok":
        return Reading(status)
    roles: dict[str, bool] = {}
    for line in block:
        for m in _ITEM_RE.finditer(line):
            name = by_lower.get(m.group(1).lower())
            if name is None:
                return Reading("unknown_person")
            if name in roles:
                return Reading("person_twice")
            roles[name] = m.group(2).lower() == "knight"
    if len(roles) != len(names):
        return Reading("person_missing")
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
            "'Name: knave' per person (one per line, or comma-separated) and must end with that "
            "block; the strict reader gives no credit when a person is missing or named twice, a "
            "name is unknown, an assignment-like line appears outside the final block (a second "
            "or buried answer), or anything follows the block (a hedge, a correction). Working "
            "before the block is allowed. split='test' holds about one puzzle structure in ten "
            "(statements hashed with the names left out)."
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 when every person's role is right, 0 for a "
            "readable wrong assignment, -format_coef (0.1) when the strict reader finds no single "
            "complete assignment (empty, hedged, two answers, person missing or twice, over 4096 "
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
        """Gold: the reference lines, one comma-separated line, working then the block. Adversarial
        (no credit): one role flipped, a person missing, a person given both roles, a hedge, a
        second block after a correction, a wrong block before the right one, every person a
        knight-or-knave, an empty reply."""

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
            ScriptedCase("every role hedged", "adversarial", lambda env, ob: "\n".join(
                f"{n}: knight or knave" for n in env.answer), -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
