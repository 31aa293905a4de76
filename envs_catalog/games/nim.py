"""Nim (`llm/Nim-v0`) against a scripted opponent, in normal or misère play.

Heaps of stones are shown one a line ("Heap 2: 5"); on a turn a player takes one or more stones
from a single heap. Normal play: whoever takes the last stone wins; misère: whoever takes the
last stone loses. The model always moves first.

The reply is "heap count" — "2 3" takes 3 stones from heap 2 — read through the answer contract
`NIM_MOVE` (`NimMoveAnswer`, a `llm_gym.grading.TokenAnswer` whose grammar is a Nim move: "2 3",
"2, 3", "2: 3", "heap 2 take 3", "heap 2, take 3", "take 3 from heap 2", "3 stones from heap 2")
under the one answer policy (`llm_gym.grading.POLICY`): the last declaration ("Move: 2 3", "My
move is heap 2, take 3"), else the reply's last line stating a move ("2 3", "I take 3 from heap
2"), parsed completely. "Heap 2: 5" is the board's notation for a heap's size, not a move: with
"heap" before the heap number, the move needs "take". `parse_nim_move` then applies the rules.
Illegal moves: no move read ("no_answer", "malformed": "1 1 or 2 1", "2 3 4"), two declared
moves that differ ("conflicting"), taking 0 ("zero"), a heap outside 1..num_heaps
("out_of_range"), an empty heap ("empty_heap"), more stones than the heap holds ("too_many").
Text outside the declaration is not read; look-alike letters, fullwidth digits and zero-width
characters are read as shown, other scripts' digits refused (`llm_gym.grading.normalize`).

Rewards (`envs_catalog.games.two_player.VersusEnv`), on the last step: win +1, loss -1 (Nim
has no draws); an illegal move (as above, or a truncated, over-long or out-of-vocabulary reply)
scores `illegal_reward` (-1) and ends the game; reaching `max_turns` unfinished scores 0.
Opponents: "random" (a uniform legal move) and "optimal" (a uniformly drawn winning move — the
nim-sum rule, with the misère endgame exception — or a random move from a lost position).

Start positions: `num_heaps` heaps of 1..`max_heap` stones. `start="winning"` (default) keeps
only positions the first player (the model) wins with perfect play, so optimal play always wins;
`start="any"` keeps all. Held-out split: a position's heap multiset is hashed
(`llm_gym.authoring.split_of`), so the two splits never share a position (in any order).
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from envs_catalog.games.moves import GAME_VERBS
from envs_catalog.games.two_player import GameSource
from llm_gym.authoring import check_choice, check_int, split_of
from llm_gym.env_source import EnvCard
from llm_gym.grading import TokenAnswer
from llm_gym.grading.quantity import strip_decoration

OPPONENTS = ("random", "optimal")
STARTS = ("winning", "any")


class NimMove(NamedTuple):
    """A move: take `count` stones from heap `heap` (1-based); written "heap count"."""

    heap: int
    count: int

    def __str__(self) -> str:
        return f"{self.heap} {self.count}"


_N = r"[0-9]{1,3}"
_STONES = r"(?:[ \t]+stones?)?"
# The grammar of a move, heap first ("2 3", "2, 3", "2: 3", "2 take 3", "heap 2, take 3") or
# count first ("take 3 from heap 2", "3 stones from heap 2"). After the word "heap" the count needs
# "take": "Heap 2: 5" is how the board shows a heap's size.
_MOVE_GRAMMAR = (
    rf"(?P<h1>{_N})(?:[ \t]*[,:][ \t]*|[ \t]+)(?:take[ \t]+)?(?P<c1>{_N}){_STONES}"
    rf"|heap[ \t]*(?P<h2>{_N})(?:[ \t]*[,:])?[ \t]*take[ \t]+(?P<c2>{_N}){_STONES}"
    rf"|(?:take[ \t]+)?(?P<c3>{_N}){_STONES}[ \t]+from[ \t]+heap[ \t]*(?P<h3>{_N})"
)


class NimMoveAnswer(TokenAnswer):
    """The answer contract of a Nim move (see the module docstring): a `TokenAnswer` whose
    pattern is the move grammar and whose value is a `NimMove`. Legality (the heap exists and
    holds the stones) is `parse_nim_move`'s."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(pattern=_MOVE_GRAMMAR, name="your move: heap number and stones to take",
                         labels=("answer", "move"), verbs=GAME_VERBS, **kwargs)
        self.normalize = self._move
        self.example = NimMove(2, 3)
        self.context = f"{self.context} {self.instruction()}".strip()

    def _move(self, text: str) -> NimMove | None:
        m = self.pattern.fullmatch(text)
        if m is None:
            return None
        heap = m.group("h1") or m.group("h2") or m.group("h3")
        count = m.group("c1") or m.group("c2") or m.group("c3")
        return NimMove(int(heap), int(count))

    def parse(self, text: str) -> NimMove | None:
        return self._move(strip_decoration(text))

    def instruction(self, *, brief: bool = False) -> str:
        ex = self.example
        return (f"Reply with the heap number and how many stones to take, e.g. '{ex}' takes "
                f"{ex.count} stones from heap {ex.heap}.")

    def describe(self) -> str:
        ex = self.example
        return (f"a move 'heap count' ('{ex}' takes {ex.count} stones from heap {ex.heap}; also "
                f"'heap {ex.heap} take {ex.count}', 'take {ex.count} from heap {ex.heap}')")


# What a move is, in every Nim id.
NIM_MOVE = NimMoveAnswer(context="Nim. On your turn take one or more stones from a single heap.")


def parse_nim_move(text: str, heaps: tuple[int, ...]) -> tuple[NimMove | None, str]:
    """(move with a 1-based heap, "ok") for a reply whose move (read through `NIM_MOVE`) is legal
    on `heaps`, else (None, reason): the reading's status or the broken rule (see the module
    docstring). Never raises on any str."""
    reading = NIM_MOVE.read(text)
    if not reading.ok:
        return None, reading.status
    heap, count = reading.value
    if not 1 <= heap <= len(heaps):
        return None, "out_of_range"
    if count == 0:
        return None, "zero"
    if heaps[heap - 1] == 0:
        return None, "empty_heap"
    if count > heaps[heap - 1]:
        return None, "too_many"
    return reading.value, "ok"


def mover_wins(heaps: tuple[int, ...], misere: bool) -> bool:
    """Whether the player to move wins with perfect play (Bouton; misère: when every heap has
    at most one stone, the mover wins iff the number of non-empty heaps is even)."""
    if misere and max(heaps, default=0) <= 1:
        return sum(heaps) % 2 == 0
    x = 0
    for h in heaps:
        x ^= h
    return x != 0


def take(heaps: tuple[int, ...], move: tuple[int, int]) -> tuple[int, ...]:
    heap, count = move
    return heaps[: heap - 1] + (heaps[heap - 1] - count,) + heaps[heap:]


def legal_nim_moves(heaps: tuple[int, ...]) -> list[tuple[int, int]]:
    return [(i + 1, k) for i, h in enumerate(heaps) for k in range(1, h + 1)]


def winning_moves(heaps: tuple[int, ...], misere: bool) -> list[tuple[int, int]]:
    """The moves that leave the other player lost (empty from a lost position)."""
    return [m for m in legal_nim_moves(heaps) if not mover_wins(take(heaps, m), misere)]


@dataclass(frozen=True)
class NimState:
    heaps: tuple[int, ...]
    moves: int = 0
    last: tuple[int, int] | None = None


class NimRules:
    """The `TwoPlayerRules` of Nim (normal play, or misère when `misere`)."""

    opponents = OPPONENTS

    def __init__(self, misere: bool = False) -> None:
        self.misere = misere

    def to_move(self, state: NimState) -> int:
        return state.moves % 2

    def legal_moves(self, state: NimState) -> list[tuple[int, int]]:
        return legal_nim_moves(state.heaps)

    def apply(self, state: NimState, move: tuple[int, int]) -> NimState:
        heap, count = move
        if not (1 <= heap <= len(state.heaps) and 1 <= count <= state.heaps[heap - 1]):
            raise ValueError(f"{move} is not a legal move on {state.heaps}")
        return NimState(take(state.heaps, move), state.moves + 1, move)

    def result(self, state: NimState) -> int | None:
        if any(state.heaps):
            return None
        last_mover = (state.moves - 1) % 2
        return 1 - last_mover if self.misere else last_mover

    def max_moves(self, state: NimState) -> int:
        return sum(state.heaps)

    def answer_contract(self, state: NimState) -> NimMoveAnswer:
        return NIM_MOVE

    def render(self, state: NimState) -> str:
        return "\n".join(f"Heap {i + 1}: {h}" for i, h in enumerate(state.heaps))

    def parse_move(self, text: str, state: NimState) -> tuple[tuple[int, int] | None, str]:
        return parse_nim_move(text, state.heaps)

    def _rule_text(self) -> str:
        return ("Misere play: whoever takes the last stone loses." if self.misere
                else "Normal play: whoever takes the last stone wins.")

    def intro(self, state: NimState, seat: int, last_move: tuple[int, int] | None) -> str:
        lead = f"Opponent took {last_move[1]} from heap {last_move[0]}.\n" if last_move else ""
        return (
            f"Nim. On your turn take one or more stones from a single heap. {self._rule_text()}\n"
            f"{lead}{self.render(state)}\n{NIM_MOVE.instruction()}"
        )

    def update(self, state: NimState, seat: int, last_move: tuple[int, int]) -> str:
        return (f"Opponent took {last_move[1]} from heap {last_move[0]}.\n{self.render(state)}\n"
                "Your move.")

    def opponent_move(self, state: NimState, rng: random.Random, opponent: str) -> tuple[int, int]:
        moves = winning_moves(state.heaps, self.misere) if opponent == "optimal" else []
        moves = moves or legal_nim_moves(state.heaps)
        return moves[rng.randrange(len(moves))]


@functools.cache
def start_positions(num_heaps: int, max_heap: int, misere: bool, start: str, split: str) -> tuple:
    """The start multisets (sorted heap tuples) of a split: hashed by `split_of`, and, for
    start="winning", won by the first player."""
    out = []
    for heaps in itertools.combinations_with_replacement(range(1, max_heap + 1), num_heaps):
        if start == "winning" and not mover_wins(heaps, misere):
            continue
        if split_of(f"nim:{int(misere)}:{','.join(map(str, heaps))}") == split:
            out.append(heaps)
    return tuple(out)


def optimal_reply(env: Any, _ob: str = "") -> str:
    """The gold player: the first winning move (any move when the position is lost)."""
    heaps = env.state.heaps
    moves = winning_moves(heaps, env.rules.misere) or legal_nim_moves(heaps)
    heap, count = moves[0]
    return f"{heap} {count}"


class NimSource(GameSource):
    """Games for `llm/Nim-v0`; knobs in the card."""

    OPPONENTS = OPPONENTS
    HAS_AGENT_FIRST = False
    GAME_DEFAULTS: dict[str, Any] = {"num_heaps": 3, "max_heap": 5, "misere": False, "start": "winning"}
    card = EnvCard(
        id="llm/Nim-v0",
        family="games",
        description=(
            "Nim against a scripted opponent (random, or optimal by the nim-sum rule): heaps of "
            "stones, one a line ('Heap 2: 5'); each turn take stones from one heap; normal play "
            "(last stone wins) or misere (last stone loses). The model moves first and replies "
            "'heap count' ('2 3' takes 3 from heap 2; also 'heap 2 take 3', 'take 3 from heap 2'), "
            "read under the one answer policy (llm_gym.grading.POLICY): the last 'Move:'/'Answer:' "
            "declaration, else the last line stating a move, parsed completely. No move read "
            "('1 1 or 2 1'), a second declared move with another value, taking 0, an empty or "
            "missing heap, too many stones or a reply over 256 characters is an illegal move. "
            "By default start positions are first-player "
            "wins, so perfect play always wins. Multi-turn with the prefix property; the self-play version is "
            "llm/SelfPlayNim-v0."
        ),
        multi_turn=True,
        reward_range=(-1.0, 1.0),
        reward_meaning=(
            "On the last step: win +1, loss -1 (no draws in Nim); an illegal or unreadable move "
            "scores illegal_reward (-1) and ends the game; a game cut by max_turns scores 0."
        ),
        difficulty_knobs={
            "opponent": "'random' (a uniform legal move) or 'optimal' (a winning move whenever "
            "one exists) (default 'random')",
            "num_heaps": "number of heaps, 1-6 (default 3)",
            "max_heap": "most stones in a start heap, 1-15 (default 5)",
            "misere": "False (taking the last stone wins) or True (it loses) (default False)",
            "start": "'winning' (only positions the model, moving first, wins with perfect play) "
            "or 'any' (default 'winning')",
            "illegal_reward": "reward of an illegal move, -1..0 (default -1.0)",
            "max_turns": "model moves before the game is cut (scored 0), 1 to "
            "ceil(num_heaps*max_heap/2) (default the whole game)",
        },
        answer_contract="Nim move 'heap count' (NimMoveAnswer, a TokenAnswer with the move grammar, "
        "labels 'answer'/'move'); the prompt asks for '2 3' (takes 3 stones from heap 2)",
        data_source="generated on the fly from the seed (no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": NimRules().intro(NimState((3, 4, 5)), 0, None)},
            {"role": "assistant", "content": "1 2"},
            {"role": "user", "content": NimRules().update(NimState((1, 4, 3), 2, (3, 2)), 0, (3, 2))},
            {"role": "assistant", "content": "2 2"},
        ],
    )

    def _set_game_knobs(self, own: dict[str, Any]) -> None:
        self.num_heaps = check_int("num_heaps", own["num_heaps"], 1, 6)
        self.max_heap = check_int("max_heap", own["max_heap"], 1, 15)
        self.misere = check_choice("misere", own["misere"], (False, True))
        self.start = check_choice("start", own["start"], STARTS)
        self._starts = start_positions(self.num_heaps, self.max_heap, self.misere, self.start, self.split)
        if not self._starts:
            raise ValueError(
                f"no {self.split!r} start position with num_heaps={self.num_heaps}, max_heap="
                f"{self.max_heap}, misere={self.misere}, start={self.start!r}; widen the knobs"
            )

    def make_rules(self) -> NimRules:
        return NimRules(self.misere)

    def initial_state(self, rng: np.random.Generator) -> NimState:
        heaps = list(self._starts[int(rng.integers(len(self._starts)))])
        order = rng.permutation(len(heaps)).tolist()
        return NimState(tuple(heaps[i] for i in order))

    def max_agent_turns(self) -> int:
        return (self.num_heaps * self.max_heap + 1) // 2

    def wide_state(self) -> tuple[NimState, tuple[int, int]]:
        return NimState((self.max_heap,) * self.num_heaps), (self.num_heaps, self.max_heap)

    def scripted_cases(self) -> list:
        from llm_gym.scripted import ScriptedCase

        bad = self.illegal_reward
        n = self.num_heaps

        def empty_then_take(env: Any, _ob: str) -> str:
            heaps = env.state.heaps
            if 0 in heaps:
                return f"{heaps.index(0) + 1} 1"
            i = min(range(len(heaps)), key=lambda k: heaps[k])
            return f"{i + 1} {heaps[i]}"  # empties a heap; two others remain, so the game goes on

        def too_many(env: Any, _ob: str) -> str:
            return f"1 {env.state.heaps[0] + 1}"

        gold_note = "start='winning' positions are first-player wins; optimal play keeps them won"
        return [
            ScriptedCase("optimal play vs random", "gold", optimal_reply, 1.0, 1.0, note=gold_note,
                         knobs={"start": "winning"}),
            ScriptedCase("optimal play vs optimal", "gold", optimal_reply, 1.0, 1.0, note=gold_note,
                         knobs={"opponent": "optimal", "start": "winning"}),
            ScriptedCase("optimal misere play vs optimal", "gold", optimal_reply, 1.0, 1.0,
                         note=gold_note, knobs={"opponent": "optimal", "start": "winning", "misere": True}),
            ScriptedCase("take zero", "adversarial", lambda env, ob: "1 0", -1.0, bad),
            ScriptedCase("heap 0", "adversarial", lambda env, ob: "0 1", -1.0, bad),
            ScriptedCase("heap past the last", "adversarial", lambda env, ob: f"{n + 1} 1", -1.0, bad),
            ScriptedCase("too many stones", "adversarial", too_many, -1.0, bad),
            ScriptedCase("take from an empty heap", "adversarial", empty_then_take, -1.0, bad,
                         knobs={"num_heaps": 3}, note="empties the smallest heap, then takes from it"),
            ScriptedCase("two declared moves", "adversarial", lambda env, ob: "Move: 1 1\nMove: 2 1",
                         -1.0, bad),
            ScriptedCase("hedge", "adversarial", lambda env, ob: "1 1 or 2 1", -1.0, bad),
            ScriptedCase("three numbers", "adversarial", lambda env, ob: "1 1 1", -1.0, bad),
            ScriptedCase("a heap's size echoed", "adversarial",
                         lambda env, ob: f"Heap 1: {env.state.heaps[0]}", -1.0, bad),
            ScriptedCase("format only", "adversarial", lambda env, ob: "heap count", -1.0, bad),
            ScriptedCase("one number", "adversarial", lambda env, ob: "1", -1.0, bad),
            ScriptedCase("empty reply", "adversarial", lambda env, ob: "", -1.0, bad),
        ]
