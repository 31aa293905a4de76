"""Knights and Knaves: `KnightsKnavesSource` (`llm/KnightsKnaves-v0`), single-turn logic puzzles.

Each of `num_people` islanders makes one statement about the group; knights always tell the
truth and knaves always lie. Statements are drawn from the seed at the chosen `complexity`
(1: "Ben is a knave.", "Exactly 1 of us is a knight."; 2: adds and / or / same kind / different
kinds, the speaker possibly one of the two ("Ben and I are the same kind."); 3: adds if-then and
"At least k of us are knaves."), every one of the 2^n role assignments is checked by brute force,
and only puzzles with exactly one consistent assignment are kept.

The answer contract is `RolesAnswer` (`KnightsKnavesEnv.answer_contract`), a
`llm_gym.grading.MappingAnswer` from each person's name to knight or knave, read under the one
answer policy (`llm_gym.grading.POLICY`): the block after the last "Answer:" label, else the
reply's last run of role lines (`envs_catalog.puzzles._grid.answer_runs_apart`), is parsed
completely -- one `Name: knight` / `Name: knave` per line or several on one line separated by
commas, "Alice is a knight", `=`, `->`, bullets, bold, a code fence, a markdown table or a JSON
object -- and must give every person exactly one role (names case-insensitive). A person missing
or named twice, an unknown name or anything else in the block makes it no answer; a second
declared assignment that differs voids the credit; working, hypotheses and second thoughts outside
the answer are never read.

Held-out split: the puzzle's structure (statements over person indices, names left out, so a
renamed copy of a puzzle is the same task) is hashed by `llm_gym.authoring.split_of`; about one
puzzle in ten is in split="test". Tasks are rejection-sampled until one is unique and in the split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import answer_runs_apart
from llm_gym.authoring import check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import MAX_RESPONSE_CHARS, MappingAnswer, Reading
from llm_gym.grading.policy import Declaration
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


class RolesAnswer(MappingAnswer):
    """Each person's role: a `MappingAnswer` from `names` to knight (True) or knave (False), with
    the puzzle's own answer instruction."""

    def __init__(self, *, names: tuple[str, ...] | list[str], **kwargs: Any) -> None:
        super().__init__(keys=tuple(names), values={"knight": True, "knave": False}, **kwargs)

    def last_answer(self, visible: str) -> Declaration | None:
        return super().last_answer(answer_runs_apart(visible, self.line_ok))

    def instruction(self, *, brief: bool = False) -> str:
        if brief:
            return super().instruction(brief=True)
        return ("Answer with one line per person, in the form 'Name: knight' or 'Name: knave', "
                "and nothing after them.")


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
        lines.append('Who is a knight and who is a knave? ("or" means at least one.) '
                     + RolesAnswer(names=self.names).instruction())
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


# --- the environment ---------------------------------------------------------------------------
class KnightsKnavesEnv(ProblemEnv):
    """One puzzle. Metrics: `format`, `correct` (from `ProblemEnv`), `parse_error` (no assignment
    read) and `too_long`; `logs["answer_status"]` is the reading's status."""

    def __init__(self, renderer: Renderer, puzzle: Puzzle, *, format_coef: float = 0.1,
                 max_chars: int = MAX_RESPONSE_CHARS) -> None:
        super().__init__(renderer, format_coef=format_coef)
        self.puzzle = puzzle
        self.answer = dict(zip(puzzle.names, puzzle.roles))
        self.answer_contract = RolesAnswer(names=puzzle.names, context=puzzle.question(),
                                           max_chars=max_chars)
        self._read: tuple[str, Reading] | None = None

    @property
    def gold_answer(self) -> dict[str, bool]:
        return dict(self.answer)

    def reading(self, sample_str: str) -> Reading:
        if self._read is None or self._read[0] != sample_str:
            self._read = (sample_str, self.answer_contract.read(sample_str))
        return self._read[1]

    def get_question(self) -> str:
        return self.puzzle.question()

    def check_format(self, sample_str: str) -> bool:
        return self.reading(sample_str).ok

    def check_answer(self, sample_str: str) -> bool:
        reading = self.reading(sample_str)
        return reading.ok and reading.value == self.answer

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
    "format_coef": "penalty for a reply with no readable answer, 0-1",
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
            "'Name: knave' per person (one per line, or comma-separated), read under the one "
            "answer policy (llm_gym.grading.POLICY): the block after the last 'Answer:' label, "
            "else the reply's last block stating roles, parsed completely. No credit when a "
            "person is missing or named twice, a name is unknown, the block holds anything else "
            "or a second declared assignment differs; working, hypotheses and second thoughts "
            "outside the answer are never read. split='test' holds about one puzzle structure in "
            "ten (statements hashed with the names left out)."
        ),
        answer_contract="name -> knight/knave for every person (RolesAnswer, a MappingAnswer)",
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 when every person's role is right, 0 for a "
            "readable wrong assignment, -format_coef (0.1) when no single assignment can be read "
            "(empty, a person missing or twice, an unknown name, two declared assignments that "
            "differ, over 4096 characters, invalid UTF-8). A reply that does not end on the "
            "renderer's end of turn loses format_coef but is still graded (0.9 if right)."
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
        hypothesis then the block in markdown. Adversarial (no credit): one role flipped, a
        person missing, a person given both roles, an alternative inside the block, a wrong
        block after a blank line or after "Option 2:" / "Option B:" in the same paragraph (the
        last run of role lines is read), two declared assignments that differ, every person a
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
            ScriptedCase("alternative in the block", "adversarial", lambda env, ob: (
                lines(env) + f" (or maybe {ROLE[not list(env.answer.values())[-1]]})"), -1.0, 0.0),
            ScriptedCase("correction after", "adversarial", lambda env, ob: (
                lines(env) + "\n\nWait, I made a mistake:\n" + lines(env, flipped(env))), -1.0, 0.0),
            ScriptedCase("options, the wrong one last", "adversarial", lambda env, ob: (
                "Option 1:\n" + lines(env) + "\nOption 2:\n" + lines(env, flipped(env))),
                -1.0, 0.0),
            ScriptedCase("option A (if ...), then a wrong block", "adversarial", lambda env, ob: (
                "Option A (if the first one lies): " + ", ".join(
                    f"{n}: {ROLE[r]}" for n, r in env.answer.items()) + "\nOption B:\n"
                + lines(env, flipped(env))), -1.0, 0.0),
            ScriptedCase("two declared answers", "adversarial", lambda env, ob: (
                "Answer: " + ", ".join(f"{n} is a {ROLE[r]}" for n, r in flipped(env).items())
                + "\n\nFinal answer:\n" + lines(env)), -1.0, 0.0),
            ScriptedCase("every role hedged", "adversarial", lambda env, ob: "\n".join(
                f"{n}: knight or knave" for n in env.answer), -1.0, 0.0),
            ScriptedCase("empty", "adversarial", lambda env, ob: "", -1.0, 0.0),
        ]
